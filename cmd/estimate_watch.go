package cmd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cfp-dev/cfp/changefeed/prom"
	"github.com/cfp-dev/cfp/internal/render"
)

// watchEstimate runs an estimate every --watch interval until ctx ends, --count rounds ran or
// the live view is quit: a live view on a terminal, JSON lines (or tables) elsewhere, and the
// metrics server with --metrics-addr. A failed round does not end the watch.
func watchEstimate(ctx context.Context, opts *estimateOptions, p *render.Printer, e *estimator) error {
	f := opts.f
	var gauges *estimateGauges
	var hl *prom.Health
	if opts.MetricsAddr != "" {
		reg := newMetricsRegistry()
		gauges = newEstimateGauges(reg, f.Global.Processor, f.Global.Database, f.Global.Container)
		// Wedged when no estimate ended for ten intervals plus two minutes of SDK retries.
		hl = prom.NewHealth(f.Now, 10*opts.Watch+2*time.Minute)
		addr, stop, err := serveMetrics(ctx, opts.MetricsAddr, reg, hl, f.Log)
		if err != nil {
			return err
		}
		defer stop()
		fmt.Fprintf(f.IO.ErrOut, "Serving metrics at http://%s/metrics\n", addr)
		if opts.metricsReady != nil {
			opts.metricsReady(addr)
		}
	}
	// On a terminal the watch is a live view that owns the screen; in a pipe, JSON lines.
	var live *estimateLive
	if p.Format == render.FormatTable && p.Query == nil && f.IO.IsStdoutTTY {
		live = startEstimateLive(ctx, f, opts, e)
		defer live.stop(ctx, p)
	}
	ticker := time.NewTicker(opts.Watch)
	defer ticker.Stop()
	var last, failed error
	for n := 1; ; n++ {
		v, err := e.estimate(ctx)
		failed = err
		switch {
		case err != nil && ctx.Err() != nil:
			return ctx.Err()
		case e.fatal != nil:
			return e.fatal
		case err != nil:
			// One failed round does not end a watch; the next may succeed. Every failed
			// round says so on stderr.
			f.warnf("estimate %s: %v", f.Now().UTC().Format(time.RFC3339), err)
			if live != nil {
				live.failed(fmt.Sprintf("estimate %s: %v", f.Now().Local().Format("15:04:05"), err))
			}
			gauges.failed()
			hl.Round(errors.New(f.redact(err.Error())))
		default:
			gauges.set(v)
			hl.Round(nil)
			last = errors.Join(opts.checkMaxLag(v), opts.checkMaxStuck(v), opts.checkFailOn(v))
			if live != nil {
				live.update(v, last)
			} else {
				if err := printEstimate(ctx, f, p, v); err != nil {
					return err
				}
				if p.Format == render.FormatTable {
					fmt.Fprintln(f.IO.Out)
				}
			}
			if last != nil {
				f.warnf("%v", last)
			}
		}
		if opts.Count > 0 && n >= opts.Count {
			if failed != nil {
				return fmt.Errorf("the last estimate of --count %d failed: %w", opts.Count, failed)
			}
			if last != nil {
				return &ExitError{Code: exitThreshold}
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case q := <-live.quit():
			if q == render.LiveQuitInterrupt {
				return &ExitError{Code: exitInterrupted}
			}
			if last != nil {
				return &ExitError{Code: exitThreshold}
			}
			return nil
		case <-ticker.C:
		}
	}
}
