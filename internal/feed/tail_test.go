package feed_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/feed/feedtest"
	"github.com/cfp-dev/cfp/internal/leases"
)

// collector records emitted changes.
type collector struct {
	mu      sync.Mutex
	changes []feed.Change
}

func (c *collector) emit(ch feed.Change) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.changes = append(c.changes, ch)
	return nil
}

func (c *collector) ids(t *testing.T) []string {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, ch := range c.changes {
		out = append(out, itemIDs(t, []json.RawMessage{ch.Item})...)
	}
	return out
}

// fill writes n items with ids d0..d(n-1) over many partition keys.
func fill(t *testing.T, src *feedtest.MemSource, from, n int) []string {
	t.Helper()
	var ids []string
	for i := from; i < from+n; i++ {
		id := fmt.Sprintf("d%d", i)
		write(t, src, fmt.Sprintf("pk%d", i%37), id)
		ids = append(ids, id)
	}
	return ids
}

// sameSet fails unless got holds exactly want's elements, each once.
func sameSet(t *testing.T, got, want []string) {
	t.Helper()
	seen := map[string]int{}
	for _, id := range got {
		seen[id]++
	}
	for id, n := range seen {
		if n > 1 {
			t.Errorf("%s delivered %d times", id, n)
		}
	}
	for _, id := range want {
		if seen[id] == 0 {
			t.Errorf("%s never delivered", id)
		}
	}
	if len(seen) != len(want) {
		t.Errorf("delivered %d distinct items, want %d", len(seen), len(want))
	}
}

func fastOpts(clock *feedtest.Clock) feed.TailOptions {
	return feed.TailOptions{
		Start:  feed.StartFrom{Kind: feed.StartBeginning},
		Now:    clock.Now,
		Reader: feed.ReaderOptions{Sleep: clock.Sleep},
	}
}

func TestTail_ExitAtEnd_AllPartitions(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		clock := feedtest.NewClock(t0)
		src := feedtest.NewMemSource(4, feedtest.WithClock(clock.Now), feedtest.WithPageSize(7))
		want := fill(t, src, 0, 100)
		opts := fastOpts(clock)
		opts.ExitAtEnd = true
		var statuses []feed.TailStatus
		opts.OnStatus = func(s feed.TailStatus) { statuses = append(statuses, s) }
		var c collector
		sum, err := feed.Tail(context.Background(), src, opts, c.emit)
		if err != nil {
			t.Fatal(err)
		}
		sameSet(t, c.ids(t), want)
		if sum.Items != 100 || sum.Reason != feed.TailStopCaughtUp || sum.Ranges != 4 || sum.CaughtUp != 4 {
			t.Fatalf("summary = %+v", sum)
		}
		if last := statuses[len(statuses)-1]; last.CaughtUp != 4 || last.Ranges != 4 || last.Items != 100 {
			t.Fatalf("last status = %+v", last)
		}
		// Per partition, changes come in LSN order with envelope facts filled in.
		lastLSN := map[string]int64{}
		for _, ch := range c.changes {
			if ch.LSN <= lastLSN[ch.PartitionID] {
				t.Fatalf("partition %s: LSN %d after %d", ch.PartitionID, ch.LSN, lastLSN[ch.PartitionID])
			}
			lastLSN[ch.PartitionID] = ch.LSN
			if !ch.TS.Equal(t0) || !ch.Range.Contains(feedtest.EPK(pkOf(t, ch.Item))) {
				t.Fatalf("envelope = %+v", ch)
			}
		}
		if len(clock.Sleeps()) != 0 {
			t.Fatalf("polled although every range ended at its first empty page: %v", clock.Sleeps())
		}
	})
}

func pkOf(t *testing.T, item json.RawMessage) string {
	t.Helper()
	var v struct {
		PK string `json:"pk"`
	}
	if err := json.Unmarshal(item, &v); err != nil {
		t.Fatal(err)
	}
	return v.PK
}

func TestTail_MaxItemsThenResumeAcrossSplit(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		clock := feedtest.NewClock(t0)
		src := feedtest.NewMemSource(2, feedtest.WithClock(clock.Now), feedtest.WithPageSize(10))
		want := fill(t, src, 0, 60)

		opts := fastOpts(clock)
		opts.MaxItems = 25
		var saved []feed.TailState
		opts.SaveState = func(s feed.TailState) error { saved = append(saved, s); return nil }
		var first collector
		sum, err := feed.Tail(context.Background(), src, opts, first.emit)
		if err != nil {
			t.Fatal(err)
		}
		if sum.Items != 25 || len(first.ids(t)) != 25 || sum.Reason != feed.TailStopMaxItems {
			t.Fatalf("first run: summary %+v, %d items", sum, len(first.ids(t)))
		}
		if len(saved) == 0 {
			t.Fatal("state not saved on exit")
		}
		// The state survives JSON and a split of every partition before the resume.
		b, err := json.Marshal(saved[len(saved)-1])
		if err != nil {
			t.Fatal(err)
		}
		var st feed.TailState
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"0", "1"} {
			if _, err := src.Split(id); err != nil {
				t.Fatal(err)
			}
		}
		want = append(want, fill(t, src, 60, 20)...)

		opts = fastOpts(clock)
		opts.State = &st
		opts.ExitAtEnd = true
		var second collector
		sum, err = feed.Tail(context.Background(), src, opts, second.emit)
		if err != nil {
			t.Fatal(err)
		}
		if sum.Splits != 2 || sum.Ranges != 4 {
			t.Fatalf("resume summary = %+v", sum)
		}
		sameSet(t, append(first.ids(t), second.ids(t)...), want)
		if len(sum.State.Ranges) != 4 {
			t.Fatalf("final state = %+v", sum.State)
		}
	})
}

func TestTail_SplitWhileTailing(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		clock := feedtest.NewClock(t0)
		src := feedtest.NewMemSource(1, feedtest.WithClock(clock.Now), feedtest.WithPageSize(5))
		want := fill(t, src, 0, 50)
		opts := fastOpts(clock)
		opts.ExitAtEnd = true
		var c collector
		n := 0
		sum, err := feed.Tail(context.Background(), src, opts, func(ch feed.Change) error {
			n++
			if n == 12 {
				if _, err := src.Split("0"); err != nil {
					return err
				}
			}
			return c.emit(ch)
		})
		if err != nil {
			t.Fatal(err)
		}
		sameSet(t, c.ids(t), want)
		if sum.Splits != 1 || sum.Ranges != 2 {
			t.Fatalf("summary = %+v", sum)
		}
	})
}

func TestTail_Until(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		clock := feedtest.NewClock(t0)
		src := feedtest.NewMemSource(2, feedtest.WithClock(clock.Now))
		want := fill(t, src, 0, 10)
		clock.Advance(time.Minute)
		fill(t, src, 10, 10) // after the end time
		opts := fastOpts(clock)
		opts.Until = t0.Add(30 * time.Second)
		var c collector
		sum, err := feed.Tail(context.Background(), src, opts, c.emit)
		if err != nil {
			t.Fatal(err)
		}
		sameSet(t, c.ids(t), want)
		if sum.Reason != feed.TailStopUntil {
			t.Fatalf("reason = %q", sum.Reason)
		}
		// The state points at the first change after the end time: a resume starts there.
		opts = fastOpts(clock)
		opts.State = &sum.State
		opts.ExitAtEnd = true
		var rest collector
		if _, err := feed.Tail(context.Background(), src, opts, rest.emit); err != nil {
			t.Fatal(err)
		}
		if len(rest.ids(t)) != 10 {
			t.Fatalf("resume after until delivered %v", rest.ids(t))
		}
	})
}

func TestTail_UntilInThePastOnIdleFeedStops(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		clock := feedtest.NewClock(t0)
		src := feedtest.NewMemSource(3, feedtest.WithClock(clock.Now))
		opts := fastOpts(clock)
		opts.Start = feed.StartFrom{Kind: feed.StartNow}
		opts.Until = t0.Add(-time.Second)
		sum, err := feed.Tail(context.Background(), src, opts, (&collector{}).emit)
		if err != nil || sum.Reason != feed.TailStopUntil || sum.Items != 0 {
			t.Fatalf("summary %+v, err %v", sum, err)
		}
	})
}

func TestTail_FromNowThenResume(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		clock := feedtest.NewClock(t0)
		src := feedtest.NewMemSource(2, feedtest.WithClock(clock.Now))
		fill(t, src, 0, 10)
		opts := fastOpts(clock)
		opts.Start = feed.StartFrom{Kind: feed.StartNow}
		opts.ExitAtEnd = true
		var c collector
		sum, err := feed.Tail(context.Background(), src, opts, c.emit)
		if err != nil || len(c.ids(t)) != 0 {
			t.Fatalf("from now delivered %v (err %v)", c.ids(t), err)
		}
		for _, rs := range sum.State.Ranges {
			lsn, _ := src.LSN(rs.PartitionID)
			if rs.Continuation != feed.LSNContinuation(lsn) {
				t.Fatalf("range %+v: want continuation at LSN %d", rs, lsn)
			}
		}
		want := fill(t, src, 10, 5)
		opts = fastOpts(clock)
		opts.State = &sum.State
		opts.ExitAtEnd = true
		var rest collector
		if _, err := feed.Tail(context.Background(), src, opts, rest.emit); err != nil {
			t.Fatal(err)
		}
		sameSet(t, rest.ids(t), want)
	})
}

func TestTail_Scopes(t *testing.T) {
	t.Parallel()
	clock := feedtest.NewClock(t0)
	src := feedtest.NewMemSource(4, feedtest.WithClock(clock.Now))
	fill(t, src, 0, 74)

	t.Run("partition key", func(t *testing.T) {
		opts := fastOpts(clock)
		opts.ExitAtEnd = true
		opts.PartitionKey = json.RawMessage(`["pk3"]`)
		var c collector
		sum, err := feed.Tail(context.Background(), src, opts, c.emit)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.ids(t); !slices.Equal(got, []string{"d3", "d40"}) {
			t.Fatalf("items = %v", got)
		}
		if string(sum.State.PartitionKey) != `["pk3"]` || len(sum.State.Ranges) != 1 {
			t.Fatalf("state = %+v", sum.State)
		}
	})
	t.Run("range", func(t *testing.T) {
		parts, _ := src.Partitions(context.Background())
		// From the middle of partition 1 to the middle of partition 2.
		rng := leases.Range{Min: parts[1].Range.Min + "8", Max: parts[2].Range.Min + "8"}
		var want []string
		for i := range 74 {
			if rng.Contains(feedtest.EPK(fmt.Sprintf("pk%d", i%37))) {
				want = append(want, fmt.Sprintf("d%d", i))
			}
		}
		opts := fastOpts(clock)
		opts.ExitAtEnd = true
		opts.Range = &rng
		var c collector
		sum, err := feed.Tail(context.Background(), src, opts, c.emit)
		if err != nil {
			t.Fatal(err)
		}
		sameSet(t, c.ids(t), want)
		if sum.Ranges != 2 || sum.State.Ranges[0].Range.Min != rng.Min || sum.State.Ranges[1].Range.Max != rng.Max {
			t.Fatalf("summary = %+v", sum)
		}
	})
	t.Run("both is an error", func(t *testing.T) {
		opts := fastOpts(clock)
		opts.PartitionKey = json.RawMessage(`["a"]`)
		opts.Range = &leases.FullRange
		if _, err := feed.Tail(context.Background(), src, opts, (&collector{}).emit); err == nil {
			t.Fatal("accepted a range and a partition key")
		}
	})
}

func TestTail_EmitErrorStopsAtFailingItem(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		clock := feedtest.NewClock(t0)
		src := feedtest.NewMemSource(1, feedtest.WithClock(clock.Now))
		want := fill(t, src, 0, 10)
		boom := errors.New("broken pipe")
		opts := fastOpts(clock)
		var c collector
		sum, err := feed.Tail(context.Background(), src, opts, func(ch feed.Change) error {
			if len(c.changes) == 4 {
				return boom
			}
			return c.emit(ch)
		})
		if !errors.Is(err, boom) || sum.Reason != feed.TailStopError {
			t.Fatalf("err %v, summary %+v", err, sum)
		}
		opts.State = &sum.State
		opts.ExitAtEnd = true
		var rest collector
		if _, err := feed.Tail(context.Background(), src, opts, rest.emit); err != nil {
			t.Fatal(err)
		}
		sameSet(t, append(c.ids(t), rest.ids(t)...), want)
	})
}

func TestTail_InterruptSavesState(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		src := feedtest.NewMemSource(2)
		fill(t, src, 0, 5)
		ctx, cancel := context.WithCancel(context.Background())
		var saves atomic.Int32
		opts := feed.TailOptions{
			Start: feed.StartFrom{Kind: feed.StartBeginning},
			Poll:  time.Millisecond,
			SaveState: func(feed.TailState) error {
				saves.Add(1)
				return nil
			},
			OnStatus: func(s feed.TailStatus) {
				if s.CaughtUp == s.Ranges {
					cancel()
				}
			},
		}
		sum, err := feed.Tail(ctx, src, opts, (&collector{}).emit)
		if !errors.Is(err, context.Canceled) || sum.Reason != feed.TailStopInterrupted || sum.Items != 5 {
			t.Fatalf("err %v, summary %+v", err, sum)
		}
		if saves.Load() == 0 {
			t.Fatal("state not saved on interrupt")
		}
	})
}

func TestTail_SaveErrorEndsTail(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		src := feedtest.NewMemSource(1)
		disk := errors.New("disk full")
		opts := feed.TailOptions{Poll: time.Millisecond, SaveEvery: time.Millisecond,
			SaveState: func(feed.TailState) error { return disk }}
		_, err := feed.Tail(context.Background(), src, opts, (&collector{}).emit)
		if !errors.Is(err, disk) {
			t.Fatalf("err = %v", err)
		}
	})
}

// countingSource records the most reads in flight at once.
type countingSource struct {
	feed.Source
	cur, peak atomic.Int32
}

func (c *countingSource) ReadPage(ctx context.Context, req feed.ReadRequest) (feed.Page, error) {
	n := c.cur.Add(1)
	defer c.cur.Add(-1)
	for {
		p := c.peak.Load()
		if n <= p || c.peak.CompareAndSwap(p, n) {
			break
		}
	}
	time.Sleep(time.Millisecond)
	return c.Source.ReadPage(ctx, req)
}

func TestTail_ConcurrencyBound(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		mem := feedtest.NewMemSource(8, feedtest.WithPageSize(2))
		want := fill(t, mem, 0, 80)
		src := &countingSource{Source: mem}
		var c collector
		_, err := feed.Tail(context.Background(), src, feed.TailOptions{
			Start: feed.StartFrom{Kind: feed.StartBeginning}, ExitAtEnd: true, Concurrency: 3,
		}, c.emit)
		if err != nil {
			t.Fatal(err)
		}
		sameSet(t, c.ids(t), want)
		if p := src.peak.Load(); p > 3 || p < 2 {
			t.Fatalf("peak reads in flight = %d, want 2..3", p)
		}
	})
}

func TestTailState_BadVersion(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		opts := feed.TailOptions{State: &feed.TailState{Version: 9, Ranges: []feed.RangeState{{Start: "now"}}}}
		if err := opts.Validate(); err == nil {
			t.Fatal("accepted state version 9")
		}
	})
}
