package changefeed

import (
	"context"
	"fmt"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/leases"
)

// Estimator reports how far a processor's leases lag behind their change feed. It only reads:
// it never takes, renews or writes a lease, so it runs anywhere, next to .NET and Java hosts or
// none at all. It is safe for concurrent use.
type Estimator struct {
	e *engine
}

// NewEstimator checks cfg and returns an estimator for its processor's leases. Instance,
// StartFrom and the processor's timings other than Expiration are not used. It does no I/O.
func NewEstimator(cfg Config) (*Estimator, error) {
	e, err := newEngine(cfg)
	if err != nil {
		return nil, err
	}
	return &Estimator{e: e}, nil
}

// LeaseState says whether a lease has a live owner.
type LeaseState string

// Lease states.
const (
	LeaseOwned   LeaseState = leases.StateOwned   // an owner renewed it within Expiration
	LeaseExpired LeaseState = leases.StateExpired // its owner stopped renewing it
	LeaseUnowned LeaseState = leases.StateUnowned // no owner
)

// Estimate is the lag of a processor's leases.
type Estimate struct {
	// TotalLag is the sum of the leases' Lag, in changes; 1 when there are no leases (the .NET
	// estimator's rule: work may be waiting for a processor that never started).
	TotalLag int64
	// Leases are the leases, in the order of the lease container.
	Leases []LeaseEstimate
}

// LeaseEstimate is the lag of one lease.
type LeaseEstimate struct {
	// Lease is the lease token, Range its range of effective partition keys.
	Lease string
	Range Range
	// Owner is the instance that holds (or last held) it, "" for none; State says whether that
	// owner is live.
	Owner string
	State LeaseState
	// Lag is the number of changes waiting, the .NET estimator's number: the partition's latest
	// logical sequence number minus the first one not yet processed, plus one (0 when caught
	// up). A lease without a continuation, or whose partition split since its last checkpoint,
	// reports 1 (Estimated is false), as .NET does.
	Lag int64
	// Estimated is false when Lag is that placeholder 1.
	Estimated bool
	// TimeLag is the age of the oldest change waiting (0 when none).
	TimeLag time.Duration
	// Continuation is the lease's checkpoint ("" when it has none).
	Continuation string
	// LastWrite is when the lease was last written (renewed, checkpointed or taken; zero when
	// unknown).
	LastWrite time.Time
}

// Estimate reads every lease once (at most one change each, in parallel) and returns their lag.
// Errors: ErrNotFound when a container is missing, ErrThrottled when the service kept throttling
// the reads.
func (e *Estimator) Estimate(ctx context.Context) (Estimate, error) {
	store, err := e.e.store(ctx)
	if err != nil {
		return Estimate{}, err
	}
	ls, err := store.List(ctx)
	if err != nil {
		return Estimate{}, fmt.Errorf("changefeed: list leases: %w", err)
	}
	lags, sum, err := feed.Estimate(ctx, e.e.monitored, ls, feed.EstimateOptions{
		Expiration: e.e.cfg.Expiration, Logger: e.e.log,
	})
	if err != nil {
		return Estimate{}, fmt.Errorf("changefeed: %w", err)
	}
	out := Estimate{TotalLag: sum.TotalLag, Leases: make([]LeaseEstimate, len(lags))}
	for i, l := range lags {
		out.Leases[i] = LeaseEstimate{
			Lease: l.Token, Range: l.Range, Owner: l.Owner, State: LeaseState(l.State),
			Lag: l.Lag, Estimated: l.Sentinel == "", TimeLag: l.TimeLag,
			Continuation: l.Lease.Continuation, LastWrite: l.Lease.Timestamp,
		}
	}
	return out, nil
}
