package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cfp-dev/cfp/changefeed"
	"github.com/cfp-dev/cfp/internal/account"
	"github.com/cfp-dev/cfp/internal/cosmos"
	"github.com/cfp-dev/cfp/internal/leases"
	"github.com/cfp-dev/cfp/internal/render"
	"github.com/cfp-dev/cfp/internal/sink"
)

// Where `cfp process` shows its live view (processOptions.viewPlace).
const (
	viewNone   = iota
	viewStdout // stdout is the terminal: the view replaces what the delegate would print there
	viewStderr // stdout is redirected, stderr is the terminal: documents go to stdout as before
)

// viewPlace decides where the live view goes: nowhere with --no-view, when stdin is not a
// terminal (no keys) or when neither stdout nor stderr is one; on stdout's terminal when it is
// one; else on stderr's.
func (o *processOptions) viewPlace() int {
	ios := o.f.IO
	switch {
	case o.NoView || o.app.Protocol != 0 || !ios.IsStdinTTY: // --app-protocol: stdin and stdout are the parent's channel
		return viewNone
	case ios.IsStdoutTTY:
		return viewStdout
	case ios.IsStderrTTY:
		return viewStderr
	}
	return viewNone
}

// processView is the live view of `cfp process` on a terminal (render.LeaseLive): the leases of
// the processor with their verdicts, read every few seconds as cfp estimate reads them, and a
// line about this host: the leases it holds and the changes it counted. q (or Ctrl-C) shuts the
// host down as SIGINT does. What cfp writes to stderr meanwhile is held and written out after.
type processView struct {
	f        *factory
	place    int
	instance string
	interval time.Duration
	eopts    changefeed.EstimateOptions
	tracker  *changefeed.ProgressTracker
	out      io.Writer // the terminal the view is drawn on
	hold     func()
	release  func()

	live   *render.LeaseLive
	cancel context.CancelFunc
	done   chan struct{}
	stop   sync.Once

	changes, batches, failures atomic.Int64

	mu     sync.Mutex
	last   *estimateView
	trends map[string][]int64
	status string
}

// newProcessView prepares the view when there is a terminal for it (nil otherwise), holding
// stderr from now on when it is that terminal, so that nothing of the delegates or the events
// writes across the view.
func newProcessView(o *processOptions) *processView {
	place := o.viewPlace()
	if place == viewNone {
		return nil
	}
	f := o.f
	v := &processView{f: f, place: place, instance: o.instance(), trends: map[string][]int64{}, done: make(chan struct{}), hold: func() {}, release: func() {}}
	v.out = f.IO.Out
	if place == viewStderr {
		v.out = f.IO.ErrOut
	}
	if f.IO.IsStderrTTY {
		// From now on (the delegate and the events take stderr before the host starts), held
		// from when the view shows.
		v.hold, v.release = f.redirectStderr()
	}
	// An estimate every poll interval, between one and five seconds: one read per lease.
	v.interval = min(max(o.PollInterval, time.Second), 5*time.Second)
	v.eopts = changefeed.EstimateOptions{
		Expiration: o.Expiration, Now: f.Now, Logger: f.Log,
		Thresholds: changefeed.Thresholds{Stuck: o.StuckThreshold, Lagging: changefeed.DefaultLagThreshold},
	}
	v.tracker = &changefeed.ProgressTracker{StuckAfter: o.StuckAfter}
	return v
}

// discardStdout makes f's stdout, until restore, a discard: the delegate is built then, so that
// with the view on stdout its stdout (the default delegate's documents, an --exec command's
// output) is counted and dropped instead of being written across the view.
func (v *processView) discardStdout(f *factory) (restore func()) {
	if v == nil || v.place != viewStdout {
		return func() {}
	}
	orig := f.IO
	ios := *f.IO
	ios.Out, ios.IsStdoutTTY = io.Discard, false
	f.IO = &ios
	return func() { f.IO = orig }
}

// count counts the changes of every batch h processed, for the host line.
func (v *processView) count(h batchHandler) batchHandler {
	if v == nil {
		return h
	}
	return &countedHandler{h: h, v: v}
}

// start shows the view once the host bootstrapped the lease set of prefix, and returns a
// context that ends when the user quits it (q or Ctrl-C: a graceful shutdown, as SIGINT). The
// view reads the set on its own (cosmos.OpenLeaseSet, no I/O), as cfp estimate would.
func (v *processView) start(ctx context.Context, acct *account.Account, prefix string) (context.Context, error) {
	if v == nil {
		return ctx, nil
	}
	f := v.f
	leaseAcct, err := f.leaseAccount(ctx)
	if err != nil {
		return ctx, err
	}
	store, err := cosmos.OpenLeaseSet(ctx, cosmos.LeaseSet{
		Leases: leaseAcct.Account, Database: f.leaseDatabase(), Container: f.Global.LeaseContainer,
		Explicit: prefix, MayBeMissing: true, Store: leases.StoreOptions{Now: f.Now},
	})
	if err != nil {
		return ctx, err
	}
	mon := acct.Container(f.Global.Database, f.Global.Container)
	t := &leaseTarget{monitored: mon, prefix: store.Prefix()}
	ios := f.IO
	v.hold()
	st := ios.Styles()
	if v.place == viewStderr {
		st = ios.StderrStyles()
	}
	v.live = render.StartLeaseLive(ctx, render.LeaseLiveOptions{
		In: ios.In, Out: v.out, Width: ios.Width, Styles: st, Sorts: estimateSorts,
		Detail: func(ctx context.Context, token string) (*render.LeaseShow, error) {
			all, err := store.List(ctx)
			if err != nil {
				return nil, err
			}
			s, err := showLease(ctx, f, t, store, all, token, v.eopts.Expiration, v.eopts.Thresholds)
			if err != nil {
				return nil, err
			}
			return &s, nil
		},
	})
	ctx, cancel := context.WithCancel(ctx)
	v.cancel = cancel
	go func() {
		defer close(v.done)
		tick := time.NewTicker(v.interval)
		defer tick.Stop()
		for {
			v.estimate(ctx, mon, store)
			select {
			case <-ctx.Done():
				return
			case <-v.live.Quit():
				cancel()
				return
			case <-tick.C:
			}
		}
	}()
	return ctx, nil
}

// estimate reads the leases and their lag and shows them.
func (v *processView) estimate(ctx context.Context, mon *cosmos.Container, store *leases.Store) {
	ls, err := store.List(ctx)
	var lags []changefeed.LeaseLag
	if err == nil {
		lags, _, err = changefeed.EstimateLeases(ctx, mon, ls, v.eopts)
	}
	v.mu.Lock()
	if err != nil {
		if ctx.Err() == nil {
			v.status = "estimate " + v.f.Now().Local().Format("15:04:05") + ": " + oneLine(v.f.redact(err.Error()))
		}
	} else {
		now := v.f.Now()
		v.tracker.Observe(lags, now)
		ev := render.NewEstimateView(store.Prefix(), lags, changefeed.Summarize(lags), now)
		v.last, v.status = &ev, ""
		seen := make(map[string][]int64, len(ev.Leases))
		for _, l := range ev.Leases {
			tr := append(v.trends[l.Lease], l.Lag)
			seen[l.Lease] = tr[max(0, len(tr)-estimateTrend):]
		}
		v.trends = seen
	}
	v.mu.Unlock()
	v.live.Set(v.data())
}

// data is what the view shows now.
func (v *processView) data() render.LeaseViewData {
	v.mu.Lock()
	defer v.mu.Unlock()
	g := v.f.Global
	d := render.LeaseViewData{
		Title:  fmt.Sprintf("cfp process  %s/%s  processor %s  %s", g.Database, g.Container, g.Processor, v.f.Now().Local().Format("15:04:05")),
		Trends: v.trends,
		Status: v.status,
	}
	held := 0
	if v.last != nil {
		e := *v.last
		d.Estimate = &e
		for _, l := range e.Leases {
			if l.Owner != nil && *l.Owner == v.instance && l.State == render.StateOwned {
				held++
			}
		}
	}
	d.Host = fmt.Sprintf("this host %s: %d lease(s) held; %d change(s) in %d batch(es), %d failed attempt(s)",
		render.Safe(v.instance), held, v.changes.Load(), v.batches.Load(), v.failures.Load())
	if v.place == viewStdout {
		d.Host += "; changes counted, not printed (--no-view prints them)"
	}
	return d
}

// end stops the view and writes out the held stderr; safe to call more than once and on nil.
func (v *processView) end() {
	if v == nil {
		return
	}
	v.stop.Do(func() {
		if v.cancel != nil {
			v.cancel()
			<-v.done
		}
		if v.live != nil {
			if err := v.live.Stop(); err != nil {
				defer v.f.warnf("live view: %v", err)
			}
		}
		v.release()
	})
}

// countedHandler counts what its delegate processed.
type countedHandler struct {
	h batchHandler
	v *processView
}

var _ changefeed.LeaseHandler = (*countedHandler)(nil)

func (c *countedHandler) Handle(ctx context.Context, b changefeed.Batch) error {
	err := c.h.Handle(ctx, b)
	if err == nil || errors.Is(err, changefeed.ErrNoCheckpoint) {
		c.v.changes.Add(int64(len(b.Items)))
		c.v.batches.Add(1)
	} else if ctx.Err() == nil {
		c.v.failures.Add(1)
	}
	return err
}

func (c *countedHandler) OpenLease(ctx context.Context, l changefeed.LeaseInfo) error {
	return sink.OpenLease(ctx, c.h, l)
}

func (c *countedHandler) CloseLease(ctx context.Context, l changefeed.LeaseInfo, reason changefeed.CloseReason) error {
	return sink.CloseLease(ctx, c.h, l, reason)
}
