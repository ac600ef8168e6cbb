package sim

import (
	"encoding/binary"
	"hash/fnv"
	"math/rand/v2"
	"regexp"
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
//   - the goroutines of one host woken together (two workers polling at one instant, a worker
//     and the renewer woken by one cancellation, a resumed host's frozen requests) may run in
//     any order, so what they do must commute or be put in an order the seed decides: reads
//     commute (the container and the feed are not changed by a read); every lease write waits
//     out a latency drawn from the seed, the host, what it writes and the code path that
//     writes it (writeLatency), so that two writes of one instant reach the container at
//     different instants, in an order the seed decides; a resume releases the frozen requests
//     one at a time in the order of what they ask;
//   - each worker of a cfp host draws the jitter of its throttled reads' backoff from a seeded
//     source of its own (feed.ProcessorOptions.LeaseRand), not the process's, nor one shared
//     by the host's workers;
//   - the engine and the models decide nothing on map order or on select's random choice
//     between ready cases (the renewer lists due leases oldest first; loops that wake on a
//     tick stop when the context ended);
//   - the world records a lease write and its observation under one lock (observedDocs).
//
// What is left to the scheduler: the order of events of one instant that commute (the
// fingerprint sorts events within an instant), and two writes of one instant that draw the
// same latency (one chance in 200,000 per pair). -requests logs every request and every lease
// write's latency to the nanosecond: two replays' logs, sorted, show where they part.

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

// random returns, for host name, the seeded source of numbers in [0, 1) of each of its
// workers (feed.ProcessorOptions.LeaseRand): one per lease, drawn by its worker alone, so
// that the numbers a worker gets do not depend on the order in which the host's workers run.
func (w *World) random(name string) func(token string) func() float64 {
	return func(token string) func() float64 {
		h := fnv.New64a()
		_, _ = h.Write([]byte(name))
		_, _ = h.Write([]byte{0})
		_, _ = h.Write([]byte(token))
		rng := rand.New(rand.NewPCG(w.seed^h.Sum64(), h.Sum64()+0xbb67ae8584caa73b))
		return rng.Float64
	}
}

// writeLatency returns host name's latency of a lease write: a sub-millisecond delay drawn
// from the seed, the host's name and what the write asks (operation, document, precondition
// and body), not from the order of the calls. Two goroutines of one host that write at one
// instant (a worker handing its lease over while the renewer marks the handoff accepted, both
// woken by one cancellation) would otherwise reach the container in the scheduler's order; with
// different writes they now reach it at different instants, in an order the seed decides. Reads
// are not delayed: reads of one instant commute, and a read issued with a write sees the
// container before it.
func (w *World) writeLatency(name string) func(what ...[]byte) time.Duration {
	return func(what ...[]byte) time.Duration {
		h := fnv.New64a()
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], w.seed)
		_, _ = h.Write(b[:])
		_, _ = h.Write([]byte(name))
		for _, p := range what {
			_, _ = h.Write([]byte{0})
			_, _ = h.Write(incarnation.ReplaceAll(p, nil))
		}
		return minLatency + time.Duration(h.Sum64()%uint64(maxLatency-minLatency))
	}
}

// incarnation is a presence record's process id, random per cfp process
// (feed/processor_instance.go): left out of what a write's latency is drawn from.
var incarnation = regexp.MustCompile(`"cfpIncarnation":"[^"]*"`)

// The range of a lease write's latency: short beside every interval, on a grid fine enough
// (nanoseconds) that two writes of one instant almost never draw the same delay.
const (
	minLatency = time.Microsecond
	maxLatency = 200 * time.Microsecond
)
