package sim

import (
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
)

// Read backoffs: a cfp worker whose read is throttled (the faults feed-429 and feed-503) waits
// before the next one MinBackoff doubled per throttle in a row, plus up to a fifth of jitter,
// capped at MaxBackoff (feed/reader.go, Reader.backoff; the processor's readers use the
// defaults, 500ms and 30s). A read throttled up to the faults' end is retried up to about as
// long after it as its run of throttles lasted: its changes are not delivered meanwhile, and
// the set cannot count as settled. The settle bound's clock starts when the last such wait of
// a live cfp host ends, if after the faults' end (World.settle): the bound measures the
// balancing of the leases, not the reader's backoff, which is its own design. Seed 9936:
// cfp-10's reads of 10 were answered 503 from 1m22.63 to the faults' end at 1m31.11, retried
// after 0.59, 1.06, 2.16 and 4.06 s, the last at 1m30.79; the next came 9.45 s later (8 s and
// 18% of jitter), at 1m40.24, and the set settled then, 8 acquire cycles after the faults'
// end (want at most 7).

// throttleRun is one read's run of throttled answers.
type throttleRun struct {
	n     int       // throttled answers in a row (0: the run ended with an answered read)
	until time.Time // the latest the reader retries after the last one; when the run ended, the read that ended it
}

// throttledRead returns h's faultSource.throttled: it notes each read of h, by partition and
// range, throttled or not.
func (w *World) throttledRead(h *host) func(read string, throttled bool) {
	return func(read string, throttled bool) {
		w.mu.Lock()
		defer w.mu.Unlock()
		if !throttled {
			if r := w.throttles[h][read]; r != nil && r.n > 0 {
				// The wait ended with this read: the run is over, its end is now.
				r.n = 0
				if now := time.Now(); now.Before(r.until) {
					r.until = now
				}
			}
			return
		}
		if w.throttles == nil {
			w.throttles = map[*host]map[string]*throttleRun{}
		}
		if w.throttles[h] == nil {
			w.throttles[h] = map[string]*throttleRun{}
		}
		r := w.throttles[h][read]
		if r == nil {
			r = &throttleRun{}
			w.throttles[h][read] = r
		}
		r.n++
		d := feed.Backoff{Min: feed.DefaultMinBackoff, Max: feed.DefaultMaxBackoff}.Wait(r.n)
		r.until = time.Now().Add(min(d+d/5, feed.DefaultMaxBackoff))
	}
}

// readBackoffEnd is when the last wait of a live cfp host's reader after a throttled read
// ends (zero: none).
func (w *World) readBackoffEnd() time.Time {
	live := w.liveNow()
	w.mu.Lock()
	defer w.mu.Unlock()
	var end time.Time
	for h, runs := range w.throttles {
		if !live(h) {
			continue
		}
		for _, r := range runs {
			if r.until.After(end) {
				end = r.until
			}
		}
	}
	return end
}
