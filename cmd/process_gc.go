package cmd

import (
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
)

// processGCBudget is the heap up to which `cfp process` trades memory for fewer garbage
// collections: GOGC 400, as cfp tail, while five times the live heap fits in it, less as the
// live heap grows, and Go's default 100 from half the budget on; so the heap goal is never
// above the larger of the budget and the default's (twice the live heap). Unlike the tail, the process
// sets no memory limit: its live heap grows with the busy leases it holds (a page in flight
// each), and a live heap past a limit makes the collector run back to back.
const processGCBudget = 128 << 20

// processGCEvery is how often the live heap is looked at.
const processGCEvery = time.Second

// processGCPercent is the GOGC for a live heap of live bytes: the largest value from 100 to 400
// whose heap goal, live × (1 + GOGC/100), stays within processGCBudget (in steps of 10).
func processGCPercent(live uint64) int {
	if live == 0 {
		return 400
	}
	p := int((float64(processGCBudget)/float64(live)-1)*10) * 10
	return min(max(p, 100), 400)
}

// tuneProcessGC keeps GOGC at processGCPercent of the live heap, looked at every
// processGCEvery, unless the environment sets GOGC or GOMEMLIMIT; the returned function stops
// it and restores the previous GOGC.
func tuneProcessGC(getenv func(string) string) (stop func()) {
	if getenv("GOGC") != "" || getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	current := processGCPercent(liveHeap())
	previous := debug.SetGCPercent(current)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(processGCEvery)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			if p := processGCPercent(liveHeap()); p != current {
				debug.SetGCPercent(p)
				current = p
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
		debug.SetGCPercent(previous)
	}
}

// liveHeap is the heap the last garbage collection found live, in bytes (0 before the first).
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}
