package feed

import "time"

// Backoff is the capped exponential backoff of every cfp retry loop: the processor's waits
// after failed reads, handlers and lease operations, the reader's after throttled reads, the
// sink's retries of a batch, cfp import's throttled writes, and the Cosmos request policy. The
// wait before retry n (1-based) is Min, doubled for each retry after the first, never longer
// than Max. Callers add their own jitter and honour the service's retry-after on top (see
// Reader.Next).
type Backoff struct {
	Min, Max time.Duration
}

// Wait returns the wait before retry n; n below 1 counts as 1.
func (b Backoff) Wait(n int) time.Duration {
	d := b.Min
	for i := 1; i < n && d < b.Max; i++ {
		d *= 2
	}
	return min(d, b.Max)
}
