package feed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/cfp-dev/cfp/internal/leases"
)

// Reader defaults, applied by NewReader to zero fields of ReaderOptions.
const (
	DefaultPoll       = 5 * time.Second
	DefaultMinBackoff = 500 * time.Millisecond
	DefaultMaxBackoff = 30 * time.Second
)

// ReaderOptions configures a Reader. Zero fields take the documented defaults.
type ReaderOptions struct {
	// Poll is how long Next waits before reading again after an empty page (default 5s, the
	// SDKs' poll delay). A negative value means no wait.
	Poll time.Duration
	// MinBackoff is the first wait after a throttled read (default 500ms); each further
	// consecutive throttle doubles it up to MaxBackoff (default 30s). The wait is never shorter
	// than the service's RetryAfter.
	MinBackoff, MaxBackoff time.Duration
	// MaxThrottleRetries bounds consecutive throttled reads inside one Next; 0 means retry until
	// the context ends.
	MaxThrottleRetries int
	// Sleep waits d or until ctx ends (default: a timer). Tests inject a fake clock's Sleep.
	Sleep func(ctx context.Context, d time.Duration) error
	// Rand returns a number in [0, 1) for backoff jitter (default math/rand/v2).
	Rand func() float64
	// Logger receives throttling events at debug level (default: discard).
	Logger *slog.Logger
}

// WithDefaults returns o with every zero field set to its default.
func (o ReaderOptions) WithDefaults() ReaderOptions {
	if o.Poll == 0 {
		o.Poll = DefaultPoll
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = DefaultMinBackoff
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = DefaultMaxBackoff
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = o.MinBackoff
	}
	if o.Sleep == nil {
		o.Sleep = sleepCtx
	}
	if o.Rand == nil {
		o.Rand = rand.Float64
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Reader drains the change feed of one partition (or EPK sub-range of it, or one logical
// partition) from a start position, one page per Next. It only forwards items: they stay raw.
// A Reader is not safe for concurrent use; run one per range.
type Reader struct {
	src     Source
	req     ReadRequest
	opts    ReaderOptions
	waitNow bool // the last page was empty: poll before the next read
}

// NewReader returns a Reader over req (its Start is the initial position). Zero option fields
// take their defaults.
func NewReader(src Source, req ReadRequest, opts ReaderOptions) *Reader {
	opts = opts.WithDefaults()
	return &Reader{src: src, req: req, opts: opts}
}

// Next reads the next page and moves the reader's position past it.
//
// Contract:
//   - A page with items is returned as soon as it is read.
//   - An empty page (NotModified) means the range is caught up: every change up to the page's
//     LatestLSN has been returned. Next returns it at once so the caller can notice; the poll
//     wait happens at the start of the following Next, and only then.
//   - Throttling (*ThrottledError) is retried inside Next, waiting at least RetryAfter with
//     capped exponential backoff and jitter; after MaxThrottleRetries (when set) the error is
//     returned wrapped.
//   - *RangeGoneError is returned unwrapped and the position is kept: read the children from
//     Position. Any other error is returned wrapped and the position is kept, so calling Next
//     again retries the same read.
//   - When ctx ends, Next returns ctx.Err().
func (r *Reader) Next(ctx context.Context) (Page, error) {
	if r.waitNow && r.opts.Poll > 0 {
		if err := r.opts.Sleep(ctx, r.opts.Poll); err != nil {
			return Page{}, err
		}
	}
	r.waitNow = false
	for {
		before := r.req.Start
		page, err := r.readOnce(ctx)
		if err != nil {
			return Page{}, err
		}
		if len(page.Items) == 0 && filteredGap(before, page) {
			// The service skipped changes outside our sub-range or key but has more to scan.
			continue
		}
		r.waitNow = len(page.Items) == 0
		return page, nil
	}
}

// readOnce reads exactly one page, retrying throttled reads, and moves the position past it.
func (r *Reader) readOnce(ctx context.Context) (Page, error) {
	throttles := 0
	for {
		if err := ctx.Err(); err != nil {
			return Page{}, err
		}
		page, err := r.src.ReadPage(ctx, r.req)
		var th *ThrottledError
		switch {
		case err == nil:
			leases.ReportCharge(ctx, page.RequestCharge)
			if page.Continuation != "" {
				r.req.Start = StartFrom{Kind: StartContinuation, Continuation: page.Continuation}
			}
			return page, nil
		case errors.As(err, &th):
			throttles++
			if r.opts.MaxThrottleRetries > 0 && throttles > r.opts.MaxThrottleRetries {
				return Page{}, fmt.Errorf("read %s: gave up after %d throttled reads: %w", r.describe(), throttles, err)
			}
			d := r.backoff(throttles, th.RetryAfter)
			r.opts.Logger.Debug("change feed throttled", "partition", r.req.PartitionID, "status", th.Status, "wait", d)
			if err := r.opts.Sleep(ctx, d); err != nil {
				return Page{}, err
			}
		case IsRangeGone(err):
			return Page{}, err
		case ctx.Err() != nil:
			return Page{}, ctx.Err()
		default:
			return Page{}, fmt.Errorf("read %s: %w", r.describe(), err)
		}
	}
}

// filteredGap reports whether an empty page moved the position forward yet stopped short of the
// partition's latest LSN, which a filtered (EPK or partition-key) read may do while not caught up.
func filteredGap(before StartFrom, page Page) bool {
	to, ok := ContinuationLSN(page.Continuation)
	if !ok || page.LatestLSN <= 0 || to >= page.LatestLSN {
		return false
	}
	if before.Kind != StartContinuation {
		return true
	}
	from, ok := ContinuationLSN(before.Continuation)
	return ok && to > from
}

// backoff is the wait before retry number n (1-based) after a throttle asking for retryAfter:
// MinBackoff doubled per retry plus up to 20% jitter, capped at MaxBackoff, never below
// retryAfter.
func (r *Reader) backoff(n int, retryAfter time.Duration) time.Duration {
	d := Backoff{Min: r.opts.MinBackoff, Max: r.opts.MaxBackoff}.Wait(n)
	d += time.Duration(r.opts.Rand() * float64(d) / 5)
	d = min(d, r.opts.MaxBackoff)
	return max(d, retryAfter)
}

func (r *Reader) describe() string {
	switch {
	case r.req.PartitionID != "":
		return "partition " + r.req.PartitionID
	case len(r.req.PartitionKey) > 0:
		return "partition key " + string(r.req.PartitionKey)
	default:
		return "change feed"
	}
}

// Position is where the next read starts: the continuation after the last page, or the initial
// start position when nothing has been read.
func (r *Reader) Position() StartFrom { return r.req.Start }

// Continuation is the raw continuation the reader would resume from, or "" when it has not read
// a page yet and did not start from a continuation.
func (r *Reader) Continuation() string {
	if r.req.Start.Kind != StartContinuation {
		return ""
	}
	return r.req.Start.Continuation
}

// Seek moves the reader to start (for example back to the last checkpoint after a failed batch)
// and cancels a pending poll wait.
func (r *Reader) Seek(start StartFrom) {
	r.req.Start = start
	r.waitNow = false
}

// Request returns the read request the next Next will send.
func (r *Reader) Request() ReadRequest { return r.req }
