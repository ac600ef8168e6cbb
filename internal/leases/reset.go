package leases

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// ErrLeaseHeld is matched (errors.Is) by every *LeaseHeldError.
var ErrLeaseHeld = errors.New("lease held by a live owner")

// LeaseHeldError refuses to change a lease that a live processor owns: its next checkpoint would
// overwrite the change (docs/protocol-leases.md, "Writing a lease").
type LeaseHeldError struct {
	Token string
	Owner string
	// Until is when the owner's claim expires if it stops renewing (zero when unknown).
	Until time.Time
}

func (e *LeaseHeldError) Error() string {
	if e.Until.IsZero() {
		return fmt.Sprintf("lease %s is owned by %s", e.Token, e.Owner)
	}
	return fmt.Sprintf("lease %s is owned by %s until at least %s", e.Token, e.Owner, e.Until.Format(time.RFC3339))
}

// Is makes errors.Is(err, ErrLeaseHeld) true.
func (e *LeaseHeldError) Is(target error) bool { return target == ErrLeaseHeld }

// ErrPlanStale reports that a lease changed between planning and applying a reset.
var ErrPlanStale = errors.New("lease changed since the plan was made")

// ResetStep is the plan for one lease: its continuation From -> To (raw ETags, "" for none).
type ResetStep struct {
	Lease *Lease
	Token string
	From  string
	To    string
	// Owner is the lease's owner; Live is true when that owner still counts as alive.
	Owner string
	Live  bool
	// Err is why the step cannot run: the target failed, or a live owner without force
	// (*LeaseHeldError).
	Err error
}

// Changed reports whether applying the step changes the continuation.
func (s ResetStep) Changed() bool { return s.From != s.To }

// FromLSN is the LSN of From, when it is one.
func (s ResetStep) FromLSN() (int64, bool) { return ParseLSN(s.From) }

// ToLSN is the LSN of To, when it is one.
func (s ResetStep) ToLSN() (int64, bool) { return ParseLSN(s.To) }

type resetConfig struct {
	now        time.Time
	expiration time.Duration
	force      bool
}

// ResetOption configures PlanReset.
type ResetOption func(*resetConfig)

// ResetClock judges owners alive by the expiry rule at now; without it every owner counts as
// alive.
func ResetClock(now time.Time, expiration time.Duration) ResetOption {
	return func(c *resetConfig) { c.now, c.expiration = now, expiration }
}

// ResetForce plans steps for leases with live owners too (their owner is cleared in the same
// replace, so the owner loses the lease instead of overwriting the reset).
func ResetForce() ResetOption { return func(c *resetConfig) { c.force = true } }

// PlanReset computes the new continuation of every lease with target. A lease whose owner is
// alive gets a *LeaseHeldError step unless forced. It does no I/O.
func PlanReset(ls []*Lease, target func(*Lease) (string, error), opts ...ResetOption) []ResetStep {
	var cfg resetConfig
	for _, o := range opts {
		o(&cfg)
	}
	steps := make([]ResetStep, 0, len(ls))
	for _, l := range ls {
		s := ResetStep{Lease: l, Token: l.Token, From: l.Continuation, To: l.Continuation, Owner: l.Owner}
		s.Live = l.Owner != "" && (cfg.now.IsZero() || !l.Expired(cfg.now, cfg.expiration))
		to, err := target(l)
		switch {
		case err != nil:
			s.Err = fmt.Errorf("lease %s: %w", l.Token, err)
		case s.Live && !cfg.force:
			s.To = to
			held := &LeaseHeldError{Token: l.Token, Owner: l.Owner}
			if !cfg.now.IsZero() {
				held.Until = l.Timestamp.Add(cfg.expiration)
			}
			s.Err = held
		default:
			s.To = to
		}
		steps = append(steps, s)
	}
	return steps
}

// ResetToLSN is a reset target: resume after lsn (`"<lsn>"`).
func ResetToLSN(lsn int64) func(*Lease) (string, error) {
	return func(*Lease) (string, error) { return FormatLSN(lsn), nil }
}

// FormatLSN writes an LSN as a raw change-feed ETag: the number in double quotes.
func FormatLSN(lsn int64) string { return `"` + strconv.FormatInt(lsn, 10) + `"` }

// ApplyReset writes one planned step as a single If-Match replace that sets the continuation
// and clears the owner. It refuses a step with Err, and, unless forced, a lease whose owner or
// continuation changed since the plan (ErrPlanStale).
func (s *Store) ApplyReset(ctx context.Context, step ResetStep, force bool) (*Lease, error) {
	if step.Err != nil {
		var held *LeaseHeldError
		if !force || !errors.As(step.Err, &held) {
			return nil, step.Err
		}
	}
	return s.Update(ctx, step.Lease, func(n *Lease) error {
		if !force && (n.Owner != step.Owner || n.Continuation != step.From) {
			return fmt.Errorf("reset lease %s: %w", n.Token, ErrPlanStale)
		}
		n.Continuation = step.To
		n.Owner = ""
		return nil
	})
}
