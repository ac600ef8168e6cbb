package feed_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/feed/feedtest"
	"github.com/cfp-dev/cfp/internal/leases"
)

const replayPrefix = "orders.replay-0123abcd"

// replayFixture is a source of 3 partitions with a01..a09 written at t0 and, an hour later,
// b01..b04 and a second version of a01: a window that ends between the two holds a02..a09.
type replayFixture struct {
	src   *feedtest.MemSource
	docs  *leases.MemDocuments
	clock *feedtest.Clock
	until time.Time
}

func newReplayFixture(t *testing.T) replayFixture {
	t.Helper()
	clock := feedtest.NewClock(t0)
	src := feedtest.NewMemSource(3, feedtest.WithClock(clock.Now))
	write := func(id string, v int) {
		if _, err := src.Write("pk-"+id, fmt.Appendf(nil, `{"id":%q,"v":%d}`, id, v)); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i <= 9; i++ {
		write(fmt.Sprintf("a%02d", i), 1)
	}
	clock.Advance(time.Hour)
	for i := 1; i <= 4; i++ {
		write(fmt.Sprintf("b%02d", i), 1)
	}
	write("a01", 2)
	return replayFixture{src: src, docs: leases.NewMemDocuments("/id"), clock: clock, until: t0.Add(30 * time.Minute)}
}

func (fx replayFixture) store() *leases.Store {
	return leases.NewStore(fx.docs, replayPrefix, leases.StoreOptions{})
}

// replayCollector is a replay handler that records id -> v of every change and counts repeats.
type replayCollector struct {
	mu    sync.Mutex
	got   map[string]int
	twice int
	// onBatch, when set, runs after each batch.
	onBatch func()
}

func (c *replayCollector) Handle(_ context.Context, b feed.Batch) error {
	c.mu.Lock()
	for _, it := range b.Items {
		var v struct {
			ID string `json:"id"`
			V  int    `json:"v"`
		}
		_ = json.Unmarshal(it, &v)
		if _, ok := c.got[v.ID]; ok {
			c.twice++
		}
		c.got[v.ID] = v.V
	}
	c.mu.Unlock()
	if c.onBatch != nil {
		c.onBatch()
	}
	return nil
}

func (fx replayFixture) options(h feed.Handler, w feed.ReplayWindow) feed.ReplayOptions {
	return feed.ReplayOptions{
		Window: w, Handler: h, Instance: "test-replay", Cleanup: true,
		AcquireInterval: 20 * time.Millisecond, PollInterval: 10 * time.Millisecond, ProbeInterval: 10 * time.Millisecond,
		Now: fx.clock.Now,
	}
}

func replayCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestReplay_DeliversTheWindowOnceAndCleansUp: every change inside [beginning, until) reaches
// the handler once, none after it (a01's later version is past the window, so a01 is not
// delivered at all), progress reaches every range, and the lease set is deleted at the end.
func TestReplay_DeliversTheWindowOnceAndCleansUp(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		fx := newReplayFixture(t)
		h := &replayCollector{got: map[string]int{}}
		opts := fx.options(h, feed.ReplayWindow{Start: feed.StartFrom{Kind: feed.StartBeginning}, Until: fx.until})
		var mu sync.Mutex
		var last feed.ReplayProgress
		var started int
		opts.Started = func(w feed.ReplayWindow, resumed bool) {
			mu.Lock()
			defer mu.Unlock()
			started++
			if resumed || !w.Until.Equal(fx.until) {
				t.Errorf("Started(%v, resumed %v), want the given window, not resumed", w.Until, resumed)
			}
		}
		opts.Progress = func(p feed.ReplayProgress) {
			mu.Lock()
			last = p
			mu.Unlock()
		}
		res, err := feed.Replay(replayCtx(t), fx.src, fx.store(), opts)
		if err != nil || !res.Finished {
			t.Fatalf("Replay = %+v, %v; want finished", res, err)
		}
		want := map[string]int{}
		for i := 2; i <= 9; i++ {
			want[fmt.Sprintf("a%02d", i)] = 1
		}
		if !maps.Equal(h.got, want) || h.twice != 0 {
			t.Errorf("delivered %v (%d repeats), want %v once", h.got, h.twice, want)
		}
		if res.Items != int64(len(want)) || res.Ranges != 3 || res.Resumed {
			t.Errorf("result %+v, want %d items from 3 ranges, not resumed", res, len(want))
		}
		mu.Lock()
		if started != 1 || last.Done != 3 || last.Ranges != 3 || last.Items != int64(len(want)) {
			t.Errorf("Started called %d times, last progress %+v; want once and 3/3 ranges, %d items", started, last, len(want))
		}
		mu.Unlock()
		if n := fx.docs.Len(); n != 0 {
			t.Errorf("%d lease documents left after the cleanup, want none", n)
		}
	})
}

// TestReplay_ResumesTheRecordedWindowAndFreshStartsOver: a replay whose leases were kept
// resumes with the window recorded in them, whatever window it is given, and delivers nothing
// again; Fresh deletes them and replays the new window.
func TestReplay_ResumesTheRecordedWindowAndFreshStartsOver(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		fx := newReplayFixture(t)
		first := feed.ReplayWindow{Start: feed.StartFrom{Kind: feed.StartBeginning}, Until: fx.until}
		h := &replayCollector{got: map[string]int{}}
		opts := fx.options(h, first)
		opts.Cleanup = false
		if res, err := feed.Replay(replayCtx(t), fx.src, fx.store(), opts); err != nil || !res.Finished || len(h.got) != 8 {
			t.Fatalf("first run: %+v, %v, delivered %v", res, err, h.got)
		}

		fx.clock.Advance(2 * time.Hour) // the later window has closed: its end is in the past
		later := feed.ReplayWindow{Start: feed.StartFrom{Kind: feed.StartBeginning}, Until: t0.Add(2 * time.Hour)}
		again := &replayCollector{got: map[string]int{}}
		opts = fx.options(again, later)
		opts.Cleanup = false
		res, err := feed.Replay(replayCtx(t), fx.src, fx.store(), opts)
		if err != nil || !res.Finished || !res.Resumed || !res.Window.Until.Equal(fx.until) {
			t.Fatalf("re-run: %+v, %v; want finished, resumed with the first window", res, err)
		}
		if len(again.got) != 0 {
			t.Errorf("the re-run delivered %v, want nothing (every range was done)", again.got)
		}

		fresh := &replayCollector{got: map[string]int{}}
		opts = fx.options(fresh, later)
		opts.Fresh = true
		res, err = feed.Replay(replayCtx(t), fx.src, fx.store(), opts)
		if err != nil || !res.Finished || res.Resumed {
			t.Fatalf("fresh run: %+v, %v; want finished, not resumed", res, err)
		}
		if len(fresh.got) != 13 || fresh.got["a01"] != 2 {
			t.Errorf("the fresh run delivered %v, want all 13 documents at their latest version", fresh.got)
		}
	})
}

// TestReplay_InterruptedKeepsTheLeases: a replay whose context ends is not finished, returns
// no error and keeps its leases, so that a re-run resumes.
func TestReplay_InterruptedKeepsTheLeases(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		fx := newReplayFixture(t)
		ctx, cancel := context.WithCancel(replayCtx(t))
		defer cancel()
		h := &replayCollector{got: map[string]int{}, onBatch: cancel}
		res, err := feed.Replay(ctx, fx.src, fx.store(),
			fx.options(h, feed.ReplayWindow{Start: feed.StartFrom{Kind: feed.StartBeginning}, Until: fx.until}))
		if err != nil || res.Finished {
			t.Fatalf("Replay = %+v, %v; want not finished and no error", res, err)
		}
		if ls, err := fx.store().List(context.Background()); err != nil || len(ls) != 3 {
			t.Errorf("leases after the interruption: %d, %v; want the 3 kept", len(ls), err)
		}
	})
}

// TestReplayOptions_Validate refuses a replay without a handler, an instance or an end.
func TestReplayOptions_Validate(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ok := feed.ReplayOptions{Handler: &replayCollector{}, Instance: "i", Window: feed.ReplayWindow{Until: t0}}
		if err := ok.Validate(); err != nil {
			t.Errorf("valid options: %v", err)
		}
		for name, mutate := range map[string]func(*feed.ReplayOptions){
			"no handler":  func(o *feed.ReplayOptions) { o.Handler = nil },
			"no instance": func(o *feed.ReplayOptions) { o.Instance = "" },
			"no end":      func(o *feed.ReplayOptions) { o.Window.Until = time.Time{} },
			"negative":    func(o *feed.ReplayOptions) { o.MaxItems = -1 },
		} {
			o := ok
			mutate(&o)
			if o.Validate() == nil {
				t.Errorf("%s: Validate accepted %+v", name, o)
			}
		}
	})
}

// TestReplay_ProgressReportsTheTimeCovered: a window that starts at a time reports, at its
// first probe, that it covered nothing past its start, never goes back, and ends at the
// window's end once every range is done.
func TestReplay_ProgressReportsTheTimeCovered(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		fx := newReplayFixture(t)
		start := t0.Add(-time.Minute)
		until := t0.Add(2 * time.Hour)
		fx.clock.Advance(2 * time.Hour) // the window has closed
		opts := fx.options(&replayCollector{got: map[string]int{}}, feed.ReplayWindow{Start: feed.StartFrom{Kind: feed.StartTime, Time: start}, Until: until})
		var mu sync.Mutex
		var seen []feed.ReplayProgress
		opts.Progress = func(p feed.ReplayProgress) {
			mu.Lock()
			seen = append(seen, p)
			mu.Unlock()
		}
		res, err := feed.Replay(replayCtx(t), fx.src, fx.store(), opts)
		if err != nil || !res.Finished {
			t.Fatalf("Replay = %+v, %v; want finished", res, err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(seen) == 0 {
			t.Fatal("no progress reported")
		}
		for i, p := range seen {
			if p.Covered.Before(start) || p.Covered.After(until) {
				t.Errorf("progress %d covered %v, outside the window [%v, %v)", i, p.Covered, start, until)
			}
			if i > 0 && p.Covered.Before(seen[i-1].Covered) {
				t.Errorf("progress %d covered %v, before the %v reported earlier", i, p.Covered, seen[i-1].Covered)
			}
		}
		if last := seen[len(seen)-1]; last.Done != last.Ranges || !last.Covered.Equal(until.Truncate(time.Second)) {
			t.Errorf("last progress %+v, want every range done and covered up to %v", last, until)
		}
	})
}
