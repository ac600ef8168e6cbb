package sink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
)

// OnError is what Retry does with a batch that still fails after its retries.
type OnError string

// Error policies, the values of `cfp process --on-error`.
const (
	// OnErrorStop stops the processor (Run returns the error); the batch stays unprocessed.
	OnErrorStop OnError = "stop"
	// OnErrorSkip logs the failure and treats the batch as processed: it is checkpointed past.
	OnErrorSkip OnError = "skip"
	// OnErrorDeadLetter writes the batch and the error to DeadLetter, then treats it as processed.
	OnErrorDeadLetter OnError = "dead-letter"
)

// ParseOnError validates an --on-error value.
func ParseOnError(s string) (OnError, error) {
	switch p := OnError(s); p {
	case OnErrorStop, OnErrorSkip, OnErrorDeadLetter:
		return p, nil
	}
	return "", fmt.Errorf("unknown error policy %q (want stop, skip or dead-letter)", s)
}

// Default backoff bounds of Retry.
const (
	DefaultBackoff    = time.Second
	DefaultMaxBackoff = 30 * time.Second
)

// Retry wraps a handler with an error policy: a failed batch is retried in place up to
// MaxRetries times, waiting Backoff, then twice as long each time up to MaxBackoff; when it
// still fails, OnError decides. feed.ErrNoCheckpoint and feed.Stop errors from the inner
// handler are passed through untouched, as is the end of ctx. Retry forwards OpenLease and
// CloseLease when the inner handler is a feed.LeaseHandler.
type Retry struct {
	Handler    feed.Handler
	MaxRetries int
	Backoff    time.Duration // DefaultBackoff when 0
	MaxBackoff time.Duration // DefaultMaxBackoff when 0
	OnError    OnError       // OnErrorStop when empty
	// DeadLetter receives one JSON line per dead-lettered batch (required with
	// OnErrorDeadLetter); writes are serialised and flushed when it has a Flush method.
	DeadLetter io.Writer
	// Logger records failed attempts and skipped batches (nothing is logged when nil).
	Logger *slog.Logger
	// AttemptsReported says the caller reports every failed attempt itself (an observer inside
	// the policy, such as cfp process's error events): Logger then records them at debug level
	// only, so each failure is printed once. Skipped and dead-lettered batches are logged as
	// errors either way.
	AttemptsReported bool
	// Now is the clock of dead-letter records (time.Now when nil).
	Now func() time.Time

	mu   sync.Mutex // serialises DeadLetter
	torn bool       // the last DeadLetter write failed after a part of its line
}

var _ feed.LeaseHandler = (*Retry)(nil)

// DeadLetterRecord is one line of the dead-letter file: a public contract, fields are added,
// never renamed.
type DeadLetterRecord struct {
	Time  time.Time `json:"time"`
	Lease string    `json:"lease"`
	// Range is {"min","max"} in hex EPKs, as in every cfp JSON view (a "min-max" string
	// before).
	Range        feed.Range        `json:"range"`
	Owner        string            `json:"owner,omitempty"`
	Continuation string            `json:"continuation"`
	Attempts     int               `json:"attempts"`
	Error        string            `json:"error"`
	Items        []json.RawMessage `json:"items"`
}

// Validate checks the policy.
func (r *Retry) Validate() error {
	if r.Handler == nil {
		return errors.New("retry: no handler")
	}
	if r.MaxRetries < 0 {
		return fmt.Errorf("retry: max retries must not be negative, got %d", r.MaxRetries)
	}
	if r.OnError != "" {
		if _, err := ParseOnError(string(r.OnError)); err != nil {
			return fmt.Errorf("retry: %w", err)
		}
	}
	if r.OnError == OnErrorDeadLetter && r.DeadLetter == nil {
		return errors.New("retry: the dead-letter policy needs a dead-letter writer")
	}
	return nil
}

// Handle runs the inner handler with retries and applies the policy.
func (r *Retry) Handle(ctx context.Context, b feed.Batch) error {
	if err := r.Validate(); err != nil {
		return feed.Stop(err)
	}
	backoff := feed.Backoff{Min: r.Backoff, Max: r.MaxBackoff}
	if backoff.Min <= 0 {
		backoff.Min = DefaultBackoff
	}
	if backoff.Max <= 0 {
		backoff.Max = DefaultMaxBackoff
	}
	attempts := 0
	first := max(b.Attempt, 1)
	var err error
	for {
		attempts++
		// Each try is a delivery: the handler sees its number (--exec-lines and the
		// application protocol send it as "attempt").
		b.Attempt = first + attempts - 1
		err = r.Handler.Handle(ctx, b)
		if passThrough(ctx, err) {
			return err
		}
		level := slog.LevelWarn
		if r.AttemptsReported {
			level = slog.LevelDebug
		}
		r.log(ctx, level, "handler failed", b, attempts, err)
		if attempts > r.MaxRetries {
			break
		}
		t := time.NewTimer(backoff.Wait(attempts))
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("retry batch of lease %s: %w", b.LeaseToken, errors.Join(err, ctx.Err()))
		case <-t.C:
		}
	}
	switch r.OnError {
	case OnErrorSkip:
		r.log(ctx, slog.LevelError, "batch skipped", b, attempts, err)
		return nil
	case OnErrorDeadLetter:
		if dlErr := r.deadLetter(b, attempts, err); dlErr != nil {
			return errors.Join(err, dlErr)
		}
		r.log(ctx, slog.LevelError, "batch dead-lettered", b, attempts, err)
		return nil
	default:
		return feed.Stop(&FailedError{Lease: b.LeaseToken, Attempts: attempts, Err: err})
	}
}

// FailedError is the error of a batch that failed every attempt Retry made; with OnErrorStop
// it stops the processor.
type FailedError struct {
	Lease    string
	Attempts int
	Err      error
}

func (e *FailedError) Error() string {
	return fmt.Sprintf("lease %s: batch failed %d times: %v", e.Lease, e.Attempts, e.Err)
}

func (e *FailedError) Unwrap() error { return e.Err }

// FailedAttempts returns how many deliveries of the batch failed (the processor records it on
// the lease).
func (e *FailedError) FailedAttempts() int { return e.Attempts }

// passThrough reports whether err is an answer Retry must not act on.
func passThrough(ctx context.Context, err error) bool {
	var stop *feed.StopError
	// ErrParentGone: the application that handles batches is gone and the host is stopping;
	// the batch was not processed, and neither retries nor --on-error skip/dead-letter apply.
	return err == nil || errors.Is(err, feed.ErrNoCheckpoint) || errors.As(err, &stop) || ctx.Err() != nil ||
		errors.Is(err, ErrParentGone)
}

func (r *Retry) deadLetter(b feed.Batch, attempts int, cause error) error {
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	items := b.Items
	if items == nil {
		items = []json.RawMessage{}
	}
	line, err := json.Marshal(DeadLetterRecord{
		Time: now().UTC(), Lease: b.LeaseToken, Range: b.Range, Owner: b.Owner,
		Continuation: b.Continuation, Attempts: attempts, Error: cause.Error(), Items: items,
	})
	if err != nil {
		return fmt.Errorf("encode dead letter of lease %s: %w", b.LeaseToken, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.torn {
		// End the part of a line a failed write left, so that this record is a line of its own.
		line = append([]byte{'\n'}, line...)
	}
	n, err := r.DeadLetter.Write(append(line, '\n'))
	if err != nil {
		r.torn = r.torn && n == 0 || n > 0 && n < len(line)+1
		return fmt.Errorf("write dead letter of lease %s: %w", b.LeaseToken, err)
	}
	r.torn = false
	if f, ok := r.DeadLetter.(interface{ Flush() error }); ok {
		if err := f.Flush(); err != nil {
			return fmt.Errorf("flush dead letter of lease %s: %w", b.LeaseToken, err)
		}
	}
	if f, ok := r.DeadLetter.(interface{ Sync() error }); ok {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("sync dead letter of lease %s: %w", b.LeaseToken, err)
		}
	}
	return nil
}

func (r *Retry) log(ctx context.Context, level slog.Level, msg string, b feed.Batch, attempts int, err error) {
	if r.Logger == nil {
		return
	}
	r.Logger.Log(ctx, level, msg, "lease", b.LeaseToken, "items", len(b.Items),
		"attempt", attempts, "max_retries", r.MaxRetries, "err", err)
}

// OpenLease forwards to the inner handler.
func (r *Retry) OpenLease(ctx context.Context, l feed.LeaseInfo) error {
	return OpenLease(ctx, r.Handler, l)
}

// CloseLease forwards to the inner handler.
func (r *Retry) CloseLease(ctx context.Context, l feed.LeaseInfo, reason feed.CloseReason) error {
	return CloseLease(ctx, r.Handler, l, reason)
}

// OpenLease calls h.OpenLease when h is a feed.LeaseHandler and returns its answer; for any
// other handler it does nothing and returns nil. A handler that wraps another forwards the
// lease lifecycle with it.
func OpenLease(ctx context.Context, h feed.Handler, l feed.LeaseInfo) error {
	if lh, ok := h.(feed.LeaseHandler); ok {
		return lh.OpenLease(ctx, l)
	}
	return nil
}

// CloseLease calls h.CloseLease when h is a feed.LeaseHandler and returns its answer (which
// may be feed.ErrNoCheckpoint); for any other handler it does nothing and returns nil.
func CloseLease(ctx context.Context, h feed.Handler, l feed.LeaseInfo, reason feed.CloseReason) error {
	if lh, ok := h.(feed.LeaseHandler); ok {
		return lh.CloseLease(ctx, l, reason)
	}
	return nil
}
