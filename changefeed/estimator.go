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
	ls, err := e.Leases(ctx)
	if err != nil {
		return Estimate{}, err
	}
	lags, sum, err := e.EstimateLeases(ctx, ls, EstimateOptions{})
	if err != nil {
		return Estimate{}, err
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

// Leases lists the processor's leases, in the order of the lease container: what
// EstimateLeases takes, whole or in part.
func (e *Estimator) Leases(ctx context.Context) ([]*Lease, error) {
	store, err := e.e.store(ctx)
	if err != nil {
		return nil, err
	}
	ls, err := store.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("changefeed: list leases: %w", err)
	}
	return ls, nil
}

// EstimateLeases estimates the leases ls (from Leases) as `cfp estimate` does: opts chooses the
// formula, the verdicts' thresholds and the reads in flight; a zero Expiration or Logger is
// the Config's. The leases keep the order of ls; to judge a lease of .NET or Java hosts stuck
// over successive estimates, give each result to one ProgressTracker.
func (e *Estimator) EstimateLeases(ctx context.Context, ls []*Lease, opts EstimateOptions) ([]LeaseLag, EstimateSummary, error) {
	if opts.Expiration == 0 {
		opts.Expiration = e.e.cfg.Expiration
	}
	if opts.Logger == nil {
		opts.Logger = e.e.log
	}
	lags, sum, err := EstimateLeases(ctx, e.e.monitored, ls, opts)
	if err != nil {
		return nil, EstimateSummary{}, fmt.Errorf("changefeed: %w", err)
	}
	return lags, sum, nil
}

// The lease-level estimate: what Estimator.Estimate is built on, and what `cfp estimate` and
// the live view of `cfp process` use (a subset of the leases, repeated estimates with a
// ProgressTracker, the verdicts). The types are the engine's.
type (
	// EstimateOptions configures EstimateLeases; zero fields take the defaults.
	EstimateOptions = feed.EstimateOptions
	// LeaseLag is the estimate of one lease: its lag, the age of its oldest pending change and
	// its verdict.
	LeaseLag = feed.LeaseLag
	// EstimateSummary totals the leases of an estimate (Summarize).
	EstimateSummary = feed.EstimateSummary
	// Thresholds are the times the verdicts compare with; zero fields take
	// DefaultStuckThreshold and DefaultLagThreshold.
	Thresholds = feed.Thresholds
	// ProgressTracker completes the verdicts of successive estimates of one lease set: a lease
	// of .NET or Java hosts, which record no progress, is stuck once StuckAfter estimates found
	// its continuation unmoved with changes pending. One estimate loop owns it.
	ProgressTracker = feed.ProgressTracker
	// Formula selects whose lag number EstimateLeases computes: FormulaDotNet (the default)
	// or FormulaJava.
	Formula = feed.Formula
	// Source is the monitored container as the engine reads it.
	Source = feed.Source
)

// Lag formulas.
const (
	FormulaDotNet = feed.FormulaDotNet // .NET's estimator and KEDA: latest LSN - first pending LSN + 1
	FormulaJava   = feed.FormulaJava   // Java's getCurrentState: the LSN read from now minus the lease's
)

// Estimator defaults.
const (
	DefaultLagThreshold        = feed.DefaultLagThreshold        // 30s: the oldest pending change waited longer: lagging
	DefaultStuckAfter          = feed.DefaultStuckAfter          // 3: ProgressTracker's estimates without movement
	DefaultEstimateConcurrency = feed.DefaultEstimateConcurrency // 16 reads in flight
)

// Verdicts of LeaseLag.Verdict (docs/user-guide.md, "When something is stuck").
const (
	VerdictOK      = feed.VerdictOK      // changes pending, a live owner, the oldest younger than the lagging threshold
	VerdictLagging = feed.VerdictLagging // the oldest pending change waited longer than the lagging threshold
	VerdictStuck   = feed.VerdictStuck   // a live owner renews the lease but its continuation does not move
	VerdictStalled = feed.VerdictStalled // changes pending and no live owner
	VerdictRewound = feed.VerdictRewound // the continuation went backwards and has not advanced since
	VerdictIdle    = feed.VerdictIdle    // nothing to read
	VerdictFailing = feed.VerdictFailing // the owner recorded that the lease's reads or batches fail
)

// Verdicts lists every verdict, in the order documentation and metrics use.
var Verdicts = feed.Verdicts

// Progress values of LeaseLag.Progress, the older, coarser form of the verdict.
const (
	ProgressIdle    = feed.ProgressIdle
	ProgressActive  = feed.ProgressActive
	ProgressStuck   = feed.ProgressStuck
	ProgressWaiting = feed.ProgressWaiting
	ProgressFailing = feed.ProgressFailing
)

// Progresses lists every progress value, in the order documentation and metrics use.
var Progresses = feed.Progresses

// ParseFormula reads "dotnet" or "java".
func ParseFormula(s string) (Formula, error) { return feed.ParseFormula(s) }

// EstimateLeases estimates the lag of the leases ls of the monitored container src: one read
// of at most one change per lease, in parallel up to Concurrency, in the order of ls, each
// lease judged (LeaseLag.Verdict). A lease without a continuation, a gone partition and a range
// spanning several partitions give the placeholder lag 1; any other read error fails it.
func EstimateLeases(ctx context.Context, src Source, ls []*Lease, opts EstimateOptions) ([]LeaseLag, EstimateSummary, error) {
	return feed.Estimate(ctx, src, ls, opts)
}

// Summarize totals the leases of an estimate, after a ProgressTracker observed them.
func Summarize(lags []LeaseLag) EstimateSummary { return feed.Summarize(lags) }
