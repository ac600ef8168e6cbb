package feed

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// rateLog is the processor's one rate-limited logger: it lets one line per key through per
// period and adds to it how many it held back since the last one ("suppressed"), so that a
// failing loop does not flood stderr. A key is an operation and, when the failure is a
// lease's, its token (see limitKey); reset after a success logs the next failure at once.
type rateLog struct {
	log    *slog.Logger
	now    func() time.Time
	period time.Duration

	mu   sync.Mutex
	keys map[string]*limitState
}

type limitState struct {
	next       time.Time
	suppressed int
}

func newRateLog(log *slog.Logger, now func() time.Time, period time.Duration) *rateLog {
	return &rateLog{log: log, now: now, period: period, keys: map[string]*limitState{}}
}

// limitKey is the rate-limit key of an operation on a lease (token "" for none).
func limitKey(op, token string) string { return op + "\x00" + token }

// logAt writes msg with attrs at level unless a line for key was written within the period.
func (r *rateLog) logAt(ctx context.Context, level slog.Level, key, msg string, attrs ...any) {
	ok, suppressed := r.allow(key)
	if !ok {
		return
	}
	if suppressed > 0 {
		attrs = append(attrs, "suppressed", suppressed)
	}
	r.log.Log(ctx, level, msg, attrs...)
}

// allow reports whether a line for key may be logged now, and how many were suppressed since
// the last one that was.
func (r *rateLog) allow(key string) (bool, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	s := r.keys[key]
	if s == nil {
		s = &limitState{}
		r.keys[key] = s
	}
	if now.Before(s.next) {
		s.suppressed++
		return false, 0
	}
	n := s.suppressed
	s.next, s.suppressed = now.Add(r.period), 0
	return true, n
}

// reset forgets key, so that the next failure after a success is logged at once.
func (r *rateLog) reset(key string) {
	r.mu.Lock()
	delete(r.keys, key)
	r.mu.Unlock()
}

// warnLimited logs a failed lease-container operation (on the lease token, or none),
// rate-limited, without an error event.
func (p *Processor) warnLimited(ctx context.Context, op, token string, err error) {
	attrs := []any{"op", op, "err", err}
	if token != "" {
		attrs = append(attrs, "lease", token)
	}
	p.limit.logAt(ctx, slog.LevelWarn, limitKey(op, token), "lease operation failed", attrs...)
}

// infraError notifies a failure of the store or the feed and logs it (rate-limited).
func (p *Processor) infraError(ctx context.Context, op, token string, err error) {
	p.notify(Event{Type: EventError, Lease: token, Err: err, Cause: CauseInfra})
	p.warnLimited(ctx, op, token, err)
}

// handlerError notifies a handler failure and logs it (rate-limited). A StopError is logged
// at debug level only: Run returns it, so the caller reports it once.
func (p *Processor) handlerError(ctx context.Context, info LeaseInfo, err error) {
	p.notify(Event{Type: EventError, Lease: info.Token, Range: info.Range, Err: err, Cause: CauseUser})
	level := slog.LevelWarn
	var stop *StopError
	if errors.As(err, &stop) {
		level = slog.LevelDebug
	}
	p.limit.logAt(ctx, level, limitKey("handler", info.Token), "handler failed", "lease", info.Token, "err", err)
}
