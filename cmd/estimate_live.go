package cmd

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/cfp-dev/cfp/changefeed"
	"github.com/cfp-dev/cfp/internal/render"
)

// estimateTrend is how many estimates the TREND column of the live view shows.
const estimateTrend = 12

// estimateLive is the live view of `cfp estimate --watch` on a terminal (render.LeaseLive): every
// lease with its owner, state, lag, the trend of its lag, time lag and verdict, redrawn at each
// estimate and at each resize; the user selects, filters, sorts and opens leases.
type estimateLive struct {
	f    *factory
	opts *estimateOptions
	live *render.LeaseLive

	mu     sync.Mutex
	last   *estimateView
	trends map[string][]int64 // by lease: the lags of the latest estimates, oldest first
	status string             // the last failure or threshold message, "" after a good round

	release func()
	once    sync.Once
}

// startEstimateLive takes over the terminal until stop; stderr is held meanwhile. e reads an
// opened lease whole.
func startEstimateLive(ctx context.Context, f *factory, opts *estimateOptions, e *estimator) *estimateLive {
	el := &estimateLive{f: f, opts: opts, trends: map[string][]int64{}}
	el.release = f.holdStderr()
	el.live = render.StartLeaseLive(ctx, render.LeaseLiveOptions{
		In: f.IO.In, Out: f.IO.Out, Width: f.IO.Width, Styles: f.IO.Styles(), Sorts: estimateSorts,
		Detail: func(ctx context.Context, token string) (*render.LeaseShow, error) {
			t, st := e.target()
			if t == nil {
				return nil, fmt.Errorf("the lease container has not answered yet")
			}
			all, err := st.List(ctx)
			if err != nil {
				return nil, err
			}
			v, err := showLease(ctx, f, t, st, all, token, opts.Expiration,
				changefeed.Thresholds{Stuck: opts.StuckThreshold, Lagging: opts.LagThreshold})
			if err != nil {
				return nil, err
			}
			return &v, nil
		},
	})
	el.live.Set(el.data())
	return el
}

// quit delivers how the user ended the view; a nil view never quits.
func (e *estimateLive) quit() <-chan render.LiveQuit {
	if e == nil {
		return nil
	}
	return e.live.Quit()
}

// update shows a new estimate.
func (e *estimateLive) update(v estimateView, problem error) {
	e.mu.Lock()
	e.last = &v
	seen := make(map[string][]int64, len(v.Leases))
	for _, l := range v.Leases {
		t := append(e.trends[l.Lease], l.Lag)
		seen[l.Lease] = t[max(0, len(t)-estimateTrend):]
	}
	e.trends = seen
	e.status = ""
	if problem != nil {
		e.status = problem.Error()
	}
	e.mu.Unlock()
	e.live.Set(e.data())
}

// failed shows that an estimate failed; the last good one stays on screen.
func (e *estimateLive) failed(msg string) {
	e.mu.Lock()
	e.status = msg
	e.mu.Unlock()
	e.live.Set(e.data())
}

// stop gives the terminal back, writes out the held stderr and then prints the last estimate
// as a table, so it stays on the screen.
func (e *estimateLive) stop(ctx context.Context, p *render.Printer) {
	if e == nil {
		return
	}
	e.once.Do(func() {
		err := e.live.Stop()
		e.release()
		if err != nil {
			e.f.warnf("live view: %v", err)
		}
		e.mu.Lock()
		last := e.last
		e.mu.Unlock()
		if last != nil {
			_ = printEstimate(context.WithoutCancel(ctx), e.f, p, *last)
		}
	})
}

// data is what the view shows now.
func (e *estimateLive) data() render.LeaseViewData {
	e.mu.Lock()
	defer e.mu.Unlock()
	g := e.f.Global
	when := "waiting for the first estimate"
	if e.last != nil {
		if t, err := time.Parse(time.RFC3339Nano, e.last.Time); err == nil {
			when = t.Local().Format("15:04:05")
		}
	}
	d := render.LeaseViewData{
		Title:  fmt.Sprintf("cfp estimate  %s/%s  processor %s  %s  every %s", g.Database, g.Container, g.Processor, when, e.opts.Watch),
		Trends: e.trends,
		Status: e.status,
	}
	if e.status != "" {
		d.Status = render.Safe(oneLine(e.f.redact(e.status)))
	}
	if e.last != nil {
		v := *e.last
		d.Estimate = &v
	}
	return d
}
