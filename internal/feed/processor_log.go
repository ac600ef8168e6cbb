package feed

import (
	"sync"
	"time"
)

// logLimiter lets one log line per key through per period and counts the ones it held back,
// so that a failing loop does not flood stderr.
type logLimiter struct {
	now    func() time.Time
	period time.Duration

	mu   sync.Mutex
	keys map[string]*limitState
}

type limitState struct {
	next       time.Time
	suppressed int
}

func newLogLimiter(now func() time.Time, period time.Duration) *logLimiter {
	return &logLimiter{now: now, period: period, keys: map[string]*limitState{}}
}

// allow reports whether a line for key may be logged now, and how many were suppressed since
// the last one that was.
func (l *logLimiter) allow(key string) (bool, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	s := l.keys[key]
	if s == nil {
		s = &limitState{}
		l.keys[key] = s
	}
	if now.Before(s.next) {
		s.suppressed++
		return false, 0
	}
	n := s.suppressed
	s.next, s.suppressed = now.Add(l.period), 0
	return true, n
}

// reset forgets key, so that the next failure after a success is logged at once.
func (l *logLimiter) reset(key string) {
	l.mu.Lock()
	delete(l.keys, key)
	l.mu.Unlock()
}
