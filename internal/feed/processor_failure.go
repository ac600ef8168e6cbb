package feed

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/cfp-dev/cfp/internal/leases"
)

// Handler failures on the lease: the owner of a lease whose batch fails, or stays in the
// handler for longer than ProcessorOptions.StuckThreshold, writes a leases.Failure into the
// lease (leases.PropFailure), where `cfp estimate`, `cfp leases list` and `cfp leases show`
// read it: the error, the --exec command's exit status and the end of its stderr, the attempts
// and since when. Writes are bounded: the first failure of a batch, then at most one per
// StuckThreshold, and one when a batch stops the host or has been in flight that long; a
// success writes nothing (the record stops being current once the continuation moves, see
// leases.CurrentFailure).

// DefaultStuckThreshold is the default of ProcessorOptions.StuckThreshold and of `cfp estimate
// --stuck-threshold`: a lease whose continuation has not moved for longer while it has
// changes pending and a live owner is stuck.
const DefaultStuckThreshold = time.Minute

// InFlightError is the error event of a batch that has been in the handler for longer than
// ProcessorOptions.StuckThreshold: the handler has not returned (a hung delegate).
type InFlightError struct {
	Since time.Time
	For   time.Duration
	Items int
}

func (e *InFlightError) Error() string {
	return fmt.Sprintf("batch of %d change(s) in the handler since %s (%s), not returned",
		e.Items, e.Since.UTC().Format(time.RFC3339), e.For.Round(time.Second))
}

// failureState is what a worker remembers about the failures of its next batch.
type failureState struct {
	checkpoint string    // the lease's continuation the failing batch follows
	attempts   int       // failed deliveries of that batch
	since      time.Time // the first of them
	written    time.Time // the last write of the record (zero: none by this worker)
	inFlight   bool      // the last record written says the batch is in flight
}

// batchFailed records the handler's failure err of batch b on the lease; stop says the host
// stops on it (always written).
func (w *worker) batchFailed(ctx context.Context, b Batch, err error, stop bool) {
	p := w.p
	now := p.opts.Now()
	cp := w.ol.current().Continuation
	fs := &w.fail
	if fs.checkpoint != cp || fs.since.IsZero() {
		*fs = failureState{checkpoint: cp, since: now}
		// A record of an earlier owner (or run) about the same batch: count on from it.
		if prev := leases.CurrentFailure(w.ol.current()); prev != nil && !prev.Since.IsZero() {
			fs.since, fs.attempts = prev.Since, prev.Attempts
		}
	}
	n := 1
	var a interface{ FailedAttempts() int }
	if errors.As(err, &a) && a.FailedAttempts() > 0 {
		n = a.FailedAttempts()
	}
	fs.attempts += n
	if !stop && !fs.inFlight && !fs.written.IsZero() && now.Sub(fs.written) < p.opts.StuckThreshold {
		return
	}
	// The delegate's own error says most ("command exited with status 3"); the wrappers of the
	// error policy (stopped the processor, failed n times) are in Attempts.
	cause := err
	var se *StopError
	if errors.As(err, &se) && se.Err != nil {
		cause = se.Err
	}
	var st interface {
		error
		ExitStatus() int
	}
	if errors.As(err, &st) {
		cause = st
	}
	f := &leases.Failure{Error: p.opts.Redact(cause.Error()), Attempts: fs.attempts, Since: fs.since.UTC(), At: now.UTC(),
		Owner: p.opts.Instance, Items: len(b.Items)}
	if st != nil {
		f.ExitStatus = new(st.ExitStatus())
	}
	var tail interface{ StderrTail() []string }
	if errors.As(err, &tail) {
		for _, l := range tail.StderrTail() {
			f.Stderr = append(f.Stderr, p.opts.Redact(l))
		}
	}
	if w.writeFailure(ctx, f) {
		fs.written, fs.inFlight = now, false
	}
}

// watchInFlight records on the lease, and reports as an error event, a batch b that is still
// in the handler StuckThreshold after start. The returned function ends the watch and waits
// for a record being written.
func (w *worker) watchInFlight(ctx context.Context, b Batch, start time.Time) (stop func()) {
	p := w.p
	var wg sync.WaitGroup
	wg.Add(1)
	t := time.AfterFunc(p.opts.StuckThreshold, func() {
		defer wg.Done()
		now := p.opts.Now()
		err := &InFlightError{Since: start, For: now.Sub(start), Items: len(b.Items)}
		p.notify(Event{Type: EventError, Lease: b.LeaseToken, Range: b.Range, Err: err, Cause: CauseUser, Items: len(b.Items)})
		p.log.Warn("a batch has been in the handler for longer than the stuck threshold", "lease", b.LeaseToken, "since", start, "items", len(b.Items))
		cp := w.ol.current().Continuation
		fs := &w.fail
		if fs.checkpoint != cp || fs.since.IsZero() {
			*fs = failureState{checkpoint: cp, since: start}
			if prev := leases.CurrentFailure(w.ol.current()); prev != nil && !prev.Since.IsZero() {
				fs.since, fs.attempts = prev.Since, prev.Attempts
			}
		}
		f := &leases.Failure{Error: err.Error(), Attempts: fs.attempts, Since: fs.since.UTC(), At: now.UTC(),
			InFlightSince: new(start.UTC()), Owner: p.opts.Instance, Items: len(b.Items)}
		if w.writeFailure(ctx, f) {
			fs.written, fs.inFlight = now, true
		}
	})
	return func() {
		if t.Stop() {
			wg.Done()
		}
		wg.Wait()
	}
}

// writeFailure writes f as the lease's failure record, about the lease's continuation as
// stored; it reports whether it was written. A lease found lost is lost; another failure is
// logged (rate-limited).
func (w *worker) writeFailure(ctx context.Context, f *leases.Failure) bool {
	p, ol := w.p, w.ol
	start := p.opts.Now()
	l, err := p.store.Update(leases.WithCharge(ctx, leases.ChargeRenew, ol.token), ol.current(), func(n *leases.Lease) error {
		if !strings.EqualFold(n.Owner, p.opts.Instance) {
			return &leases.LeaseLostError{Token: n.Token, Owner: n.Owner}
		}
		f.Checkpoint = n.Continuation
		leases.SetFailure(n, f)
		return nil
	})
	switch {
	case err == nil:
		ol.update(l, start)
		return true
	case errors.Is(err, leases.ErrLeaseLost):
		ol.lose(err)
	case ctx.Err() == nil:
		p.warnLimited(ctx, "record failure", ol.token, err)
	}
	return false
}
