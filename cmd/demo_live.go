package cmd

// How a running demo shows itself: the event log, the snapshots off a terminal, the live view
// on one and the summary.

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/cfp-dev/cfp/internal/render"
)

// event records a line of the event log; off a terminal it is printed at once.
func (r *demoRun) event(msg string) {
	line := fmt.Sprintf("%5.1fs  %s", r.f.Now().Sub(r.began).Seconds(), msg)
	r.mu.Lock()
	r.events = append(r.events, line)
	if len(r.events) > demoRecentEvents {
		r.events = slices.Delete(r.events, 0, len(r.events)-demoRecentEvents)
	}
	if !r.tty && !r.quiet {
		fmt.Fprintln(r.f.IO.Out, line)
	}
	r.mu.Unlock()
	r.refresh()
}

// redraw reads the lease table every refresh until ctx ends: for the live view on a
// terminal, else to print a snapshot every demoPlainEvery refreshes.
func (r *demoRun) redraw(ctx context.Context) {
	if r.quiet {
		return
	}
	t := time.NewTicker(r.o.Refresh)
	defer t.Stop()
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !r.tty && n%demoPlainEvery != 0 {
			continue
		}
		v, err := r.view(ctx)
		if err != nil {
			if ctx.Err() == nil {
				r.event("read leases: " + err.Error())
			}
			continue
		}
		if r.tty {
			r.mu.Lock()
			r.latest = &v
			r.mu.Unlock()
			r.refresh()
			continue
		}
		var frame bytes.Buffer
		_ = render.WriteDemoTotals(&frame, r.f.IO, r.show, v, render.SortRange)
		frame.WriteString("\n")
		_, _ = r.f.IO.Out.Write(frame.Bytes())
	}
}

func (r *demoRun) printSummary(v demoView) {
	_ = render.WriteDemoSummary(r.f.IO.Out, r.f.IO, r.show, v)
}

// startLive shows the live view on the terminal until the returned stop function is called.
// The returned context ends when the user quits the view (q or Ctrl-C, which in a live view
// are keys) or ctx ends. Stderr is held while the view owns the terminal.
func (r *demoRun) startLive(ctx context.Context) (context.Context, *render.Live, func()) {
	ctx, cancel := context.WithCancel(ctx)
	release := r.f.holdStderr()
	live := render.StartLive(r.f.IO, r.liveFrame, demoSorts...)
	r.live = live
	go func() {
		select {
		case q := <-live.Quit():
			r.mu.Lock()
			r.quitBy = q
			r.mu.Unlock()
			r.event("stopping: the workers release their leases")
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, live, func() {
		r.stopLive(live)
		release()
		cancel()
	}
}

// stopLive ends the live view, giving the terminal back, and writes out the held stderr.
func (r *demoRun) stopLive(live *render.Live) {
	if err := live.Stop(); err != nil {
		r.f.warnf("live view: %v", err)
	}
}

// refresh redraws the live view, if there is one.
func (r *demoRun) refresh() {
	if r.live != nil {
		r.live.Refresh()
	}
}

// liveFrame draws the live view at width x height.
func (r *demoRun) liveFrame(width, height int, sortBy string) string {
	r.mu.Lock()
	v := r.latest
	events := slices.Clone(r.events)
	r.mu.Unlock()
	ios := *r.f.IO
	ios.Width = width
	return render.DemoLiveFrame(&ios, r.show, v, events, r.f.Now(), height, sortBy)
}
