package feed_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/feed/feedtest"
)

// TestTail_GoneButLive: a 410 that names a partition which still serves the range (a stale
// route, or a 1002 from a replica that is behind) makes the tail list the partitions again and
// read on from the same position, without losing or repeating a change.
func TestTail_GoneButLive(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"410 substatus 1000", &feed.StaleRouteError{PartitionID: "1", Substatus: 1000}},
		{"410 substatus 1002 for a live partition", &feed.RangeGoneError{PartitionID: "1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				clock := feedtest.NewClock(t0)
				src := feedtest.NewMemSource(2, feedtest.WithClock(clock.Now), feedtest.WithPageSize(5))
				want := fill(t, src, 0, 40)
				opts := fastOpts(clock)
				opts.ExitAtEnd = true
				src.Fail(3, tc.err)
				var c collector
				sum, err := feed.Tail(context.Background(), src, opts, c.emit)
				if err != nil {
					t.Fatalf("Tail() through %s: %v", tc.name, err)
				}
				sameSet(t, c.ids(t), want)
				if sum.Splits != 0 || sum.Ranges != 2 {
					t.Fatalf("summary = %+v, want 2 ranges and no split", sum)
				}
			})
		})
	}
}

// TestTail_BlockedEmitStillStops: an emit that never returns (a stdout nobody reads) does not
// keep the tail from stopping when ctx ends; the state it saves counts only the changes written
// out (Written), never those the blocked emit holds.
func TestTail_BlockedEmitStillStops(t *testing.T) {
	t.Parallel()
	src := feedtest.NewMemSource(2, feedtest.WithPageSize(5))
	fill(t, src, 0, 40)
	var written atomic.Int64
	entered := make(chan struct{})
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	emitted := 0
	emit := func(feed.Change) error {
		emitted++
		if emitted <= 3 {
			written.Store(int64(emitted)) // these three were written out
			return nil
		}
		if emitted == 4 {
			close(entered)
		}
		<-release // blocked on the output
		return nil
	}
	var saved []feed.TailState
	opts := feed.TailOptions{
		Start:     feed.StartFrom{Kind: feed.StartBeginning},
		Written:   written.Load,
		StopGrace: 50 * time.Millisecond,
		SaveState: func(st feed.TailState) error { saved = append(saved, st); return nil },
		SaveEvery: time.Hour,
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var sum feed.TailSummary
	go func() {
		var err error
		sum, err = feed.Tail(ctx, src, opts, emit)
		done <- err
	}()
	<-entered
	cancel()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	select {
	case <-done:
	case <-deadline.C:
		t.Fatal("Tail() did not return after cancel while emit was blocked")
	}
	if len(saved) == 0 {
		t.Fatal("no state saved on the way out")
	}
	// Resuming from the saved state delivers exactly what was not written: 40 - 3.
	var c collector
	rest, err := feed.Tail(context.Background(), src, feed.TailOptions{State: &saved[len(saved)-1], ExitAtEnd: true}, c.emit)
	if err != nil {
		t.Fatal(err)
	}
	if rest.Items != 37 || sum.Reason != feed.TailStopInterrupted {
		t.Fatalf("resumed tail delivered %d changes (want 37); first tail stopped with %q", rest.Items, sum.Reason)
	}
}
