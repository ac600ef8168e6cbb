package cmd

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/cfp-dev/cfp/internal/render"
)

// estimateTrend is how many estimates the TREND column of the live view shows.
const estimateTrend = 12

// estimateLive is the live view of `cfp estimate --watch` on a terminal: every lease with its
// owner, state, lag, the trend of its lag, time lag and progress, redrawn at each estimate and
// at each resize, sortable by range, lag, time lag or owner.
type estimateLive struct {
	f    *factory
	opts *estimateOptions
	live *render.Live

	mu     sync.Mutex
	last   *estimateView
	trends map[string][]int64 // by lease: the lags of the latest estimates, oldest first
	status string             // the last failure or threshold message, "" after a good round

	release func()
	once    sync.Once
}

// startEstimateLive takes over the terminal until stop; stderr is held meanwhile.
func startEstimateLive(f *factory, opts *estimateOptions) *estimateLive {
	e := &estimateLive{f: f, opts: opts, trends: map[string][]int64{}}
	e.release = f.holdStderr()
	e.live = render.StartLive(f.IO, e.frame, estimateSorts...)
	return e
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
	e.live.Refresh()
}

// failed shows that an estimate failed; the last good one stays on screen.
func (e *estimateLive) failed(msg string) {
	e.mu.Lock()
	e.status = msg
	e.mu.Unlock()
	e.live.Refresh()
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

// frame draws the view at width x height.
func (e *estimateLive) frame(width, height int, sortBy string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	ios := *e.f.IO
	ios.Width = width
	st := ios.Styles()
	g := e.f.Global
	var b strings.Builder
	when := "waiting for the first estimate"
	if e.last != nil {
		if t, err := time.Parse(time.RFC3339Nano, e.last.Time); err == nil {
			when = t.Local().Format("15:04:05")
		}
	}
	fmt.Fprintf(&b, "%s  %s/%s  processor %s  %s  every %s\n\n", st.Bold.Render("cfp estimate"),
		g.Database, g.Container, g.Processor, when, e.opts.Watch)
	if e.last != nil {
		_ = render.EstimateTable(&ios, *e.last, render.EstimateTableOptions{Sort: sortBy, Trends: e.trends}).RenderTo(&b)
		b.WriteString("\n")
		_ = render.WriteEstimateSummary(&b, *e.last)
	}
	if e.status != "" {
		b.WriteString(st.Warning.Render(render.Safe(oneLine(e.f.redact(e.status)))) + "\n")
	}
	return b.String()
}
