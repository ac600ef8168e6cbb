package sim

import (
	"hash/fnv"
	"math/rand/v2"
	"sync"
	"time"
)

// Exact replay. Inside the bubble, goroutines that wake at one virtual instant run in the Go
// scheduler's order, so a seed could play out differently from one run to the next (a figure
// off by a cycle, a finding that showed once in three replays). The simulation leaves the
// scheduler no choice that matters:
//
//   - the driver acts only once every goroutine woken at its instant has run to a stop
//     (synctest.Wait after each of its sleeps), and waits likewise after starting or stopping a
//     host, so that a write never races a poll of the same instant and two hosts never
//     bootstrap at once;
//   - every interval a host's timers use (acquire, renew, expiration, poll, backoffs, timeouts)
//     is lengthened by a sub-millisecond offset drawn from the seed and the host's name
//     (jitter), so that two hosts' timers, and a host's timer and the driver's steps (whole
//     milliseconds), do not fire at one instant;
//   - a cfp host's throttled reads back off with a jitter drawn from a seeded source
//     (feed.ProcessorOptions.Rand), not the process's.
//
// What is left to the scheduler is the order of goroutines of one host woken together (two
// workers of one host polling at one instant); the fingerprint sorts events within an instant.

// jitter returns a function that lengthens a duration by a fixed, seeded offset of 1 µs to
// 1 ms, a different one for each duration it is given (in order) and for each host name.
func (w *World) jitter(name string) func(time.Duration) time.Duration {
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	rng := rand.New(rand.NewPCG(w.seed^h.Sum64(), h.Sum64()+0x6a09e667f3bcc908))
	return func(d time.Duration) time.Duration {
		return d + time.Microsecond + time.Duration(rng.Int64N(int64(time.Millisecond-time.Microsecond)))
	}
}

// jittered is t with each interval lengthened by j.
func (t Timing) jittered(j func(time.Duration) time.Duration) Timing {
	return Timing{Acquire: j(t.Acquire), Renew: j(t.Renew), Expiration: j(t.Expiration)}
}

// random returns a seeded source of numbers in [0, 1) for host name's backoff jitter
// (feed.ProcessorOptions.Rand), safe for its workers to share.
func (w *World) random(name string) func() float64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	rng := rand.New(rand.NewPCG(w.seed^h.Sum64(), h.Sum64()+0xbb67ae8584caa73b))
	var mu sync.Mutex
	return func() float64 {
		mu.Lock()
		defer mu.Unlock()
		return rng.Float64()
	}
}
