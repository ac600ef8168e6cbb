package cmd

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cfp-dev/cfp/internal/account"
	"github.com/cfp-dev/cfp/internal/render"
)

// The demo's setup: names, partitions and the short lease timings that make balancing and
// splits visible within seconds.
const (
	demoDatabase       = "demo"
	demoContainer      = "orders"
	demoLeases         = "leases"
	demoProcessor      = "demo"
	demoPartitions     = 4 // the orders container asks for them with its throughput
	demoAcquire        = time.Second
	demoRenew          = 1500 * time.Millisecond
	demoExpiration     = 5 * time.Second
	demoPoll           = 250 * time.Millisecond
	demoDrainTimeout   = 15 * time.Second
	demoWriteTimeout   = 10 * time.Second
	demoPlainEvery     = 5 // off a terminal, a snapshot every this many refreshes
	demoRecentEvents   = 6
	demoMinDuration    = 2 * time.Second
	demoDefaultRefresh = time.Second
)

var demoInstances = []string{"worker-1", "worker-2"}

type demoOptions struct {
	f        *factory
	Duration time.Duration
	Rate     int
	Data     string
	Keep     bool
	Refresh  time.Duration
}

const demoLong = `Run a small change feed pipeline on the embedded emulator and watch it work.

The demo needs no account and nothing else running. In a temporary directory (or --data DIR)
it creates a database "demo" with a container "orders" of 4 physical partitions and a lease
container "leases", writes sample orders at --rate per second, and runs two processor
instances, worker-1 and worker-2, that share the leases of processor "demo" (lease timings:
acquire 1s, renew 1.5s, expiration 5s). Halfway through it splits one partition in two, as
Cosmos DB does when a partition grows: the lease of the split partition is replaced by two
child leases that continue from its checkpoint.

On a terminal the demo is a live view that owns the screen: the lease table (token, range,
owner, checkpoint and latest LSN, lag) with totals and the latest lease events, redrawn every
--refresh and at every resize; r, l and o sort by range, lag and owner, q ends the demo early.
Off a terminal the events are lines and a snapshot is printed every few seconds instead. At the end cfp stops writing, lets the workers catch up, stops them
(each releases its leases) and prints a summary: orders written, orders processed by each
instance, duplicates (the change feed processor delivers at least once: a batch in flight
when its lease moves is delivered again), orders lost (always 0), whether they add up
(written = deliveries - duplicates + lost + pending, each term shown; exit 1 if not), and the
leases before and after the split. With -o json the summary is one JSON object on stdout instead.

--duration (default 30s) ends the demo by itself; q (exit 0) or Ctrl-C (exit 130) end it
early and cleanly: orders not processed yet are reported as pending. The temporary directory is removed at the end unless --keep; a --data directory is
kept, so other commands can look at it afterwards:

  cfp demo --data demo-data --duration 10s
  cfp --local=demo-data leases list -d demo -c orders -p demo
  cfp --local=demo-data replay-from beginning -d demo -c orders -p demo | head`

const demoExample = `  # The README's first command
  go run . demo

  # A shorter, busier run that keeps its data for later commands
  cfp demo --duration 10s --rate 50 --data demo-data

  # The summary as JSON
  cfp demo --duration 8s -o json --jq '.processed'`

func newDemoCmd(f *factory) *cobra.Command {
	opts := &demoOptions{f: f}
	c := &cobra.Command{
		Use:     "demo [flags]",
		Short:   "Watch two processors share a container's change feed across a split, locally",
		Long:    demoLong,
		Example: demoExample,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if opts.Duration < demoMinDuration {
				return usageErrorf("--duration must be at least %s, got %s", demoMinDuration, opts.Duration)
			}
			if opts.Rate < 1 || opts.Rate > 1000 {
				return usageErrorf("--rate must be between 1 and 1000 orders per second, got %d", opts.Rate)
			}
			if opts.Refresh <= 0 {
				return usageErrorf("--refresh must be positive, got %s", opts.Refresh)
			}
			return runDemo(contextOf(c), opts)
		},
	}
	fs := c.Flags()
	fs.DurationVar(&opts.Duration, "duration", 30*time.Second, "how long to write orders before the demo winds down")
	fs.IntVar(&opts.Rate, "rate", 20, "write `N` orders per second")
	fs.StringVar(&opts.Data, "data", "", "keep the emulator's data in `DIR` (default: a temporary directory)")
	fs.BoolVar(&opts.Keep, "keep", false, "keep the temporary directory and print its path")
	fs.DurationVar(&opts.Refresh, "refresh", demoDefaultRefresh, "how often the lease table is redrawn")
	return c
}

func runDemo(ctx context.Context, o *demoOptions) (err error) {
	f := o.f
	format, err := f.outputFormat(render.FormatTable)
	if err != nil {
		return err
	}
	jsonOut := format.IsJSON()

	dir := o.Data
	if dir == "" {
		if dir, err = os.MkdirTemp("", "cfp-demo-"); err != nil {
			return fmt.Errorf("create demo directory: %w", err)
		}
		if !o.Keep {
			defer os.RemoveAll(dir)
		}
	}
	acct, err := account.Open(ctx, account.Config{LocalDir: dir, Logger: f.Log})
	if err != nil {
		return withHint(fmt.Errorf("open the demo's emulator: %w", err), "pass another --data directory, or stop the cfp that holds it")
	}
	defer func() {
		if cerr := acct.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close the demo's emulator: %w", cerr)
		}
	}()
	r := &demoRun{o: o, f: f, tty: f.IO.IsStdoutTTY && !jsonOut, quiet: jsonOut, began: f.Now(),
		delivered: map[string]int{}, byWorker: map[string]int64{},
		show: render.DemoSetup{Duration: o.Duration, Instances: demoInstances,
			Try: fmt.Sprintf("cfp --local=DIR leases list -d %s -c %s -p %s", demoDatabase, demoContainer, demoProcessor)}}
	if err := r.setup(ctx, acct); err != nil {
		return err
	}
	if !jsonOut {
		// Short lines: nothing the demo prints wraps at 80 columns.
		fmt.Fprintf(f.IO.Out, "cfp demo: %d orders/s into %s/%s (%d partitions), a split at %s\n",
			o.Rate, demoDatabase, demoContainer, demoPartitions, (o.Duration / 2).Round(time.Second))
		fmt.Fprintf(f.IO.Out, "processors %s share the leases of %q\ndata in %s\n\n",
			strings.Join(demoInstances, " and "), demoProcessor, dir)
	}

	var live *render.Live
	if r.tty {
		var stop func()
		ctx, live, stop = r.startLive(ctx)
		defer stop()
	}
	runErr := r.run(ctx, acct)
	interrupted := ctx.Err() != nil
	v, verr := r.summary(context.WithoutCancel(ctx), interrupted)
	if verr != nil && runErr == nil {
		runErr = verr
	}
	if o.Keep || o.Data != "" {
		v.Data = dir
	}
	if jsonOut {
		p, err := f.printer(render.FormatJSON)
		if err != nil {
			return err
		}
		if err := p.JSON(context.WithoutCancel(ctx), v); err != nil {
			return err
		}
	} else {
		if live != nil {
			r.stopLive(live)
		}
		r.printSummary(v)
	}
	switch {
	case runErr != nil:
		return runErr
	case !v.AddsUp():
		return &ExitError{Code: exitError, Err: fmt.Errorf("the summary does not add up: %s", v.Balance())}
	case r.quitBy == render.LiveQuitKey:
		return nil // q: the user ended the demo early, on purpose
	case r.quitBy == render.LiveQuitInterrupt:
		return &ExitError{Code: exitInterrupted}
	case interrupted:
		return ctx.Err()
	case v.Lost > 0:
		return &ExitError{Code: exitError, Err: fmt.Errorf("%d orders were not processed", v.Lost)}
	}
	return nil
}
