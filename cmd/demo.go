package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/cfp-dev/cfp/internal/account"
	"github.com/cfp-dev/cfp/internal/cosmos"
	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/leases"
	"github.com/cfp-dev/cfp/internal/render"
)

// The demo's setup: names, partitions and the short lease timings that make balancing and
// splits visible within seconds.
const (
	demoDatabase       = "demo"
	demoContainer      = "orders"
	demoLeases         = "leases"
	demoProcessor      = "demo"
	demoPartitions     = 4
	demoAcquire        = time.Second
	demoRenew          = 1500 * time.Millisecond
	demoExpiration     = 5 * time.Second
	demoPoll           = 250 * time.Millisecond
	demoDrainTimeout   = 15 * time.Second
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
when its lease moves is delivered again), orders lost (always 0), and the leases before and
after the split. With -o json the summary is one JSON object on stdout instead.

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

// The demo's views live in render.
type (
	demoView      = render.DemoView
	demoSplitView = render.DemoSplitView
)

// demoRun is the state of a running demo.
type demoRun struct {
	o      *demoOptions
	show   render.DemoSetup // what the views say about the run
	f      *factory
	orders *cosmos.Container
	store  *leases.Store
	tty    bool // show the live view (render.Live) on the terminal
	quiet  bool // JSON output: the summary only
	began  time.Time

	mu        sync.Mutex
	written   int64
	delivered map[string]int   // order id -> deliveries
	byWorker  map[string]int64 // instance -> orders processed
	events    []string         // recent events, newest last
	split     *demoSplitView
	latest    *demoView // the last view read, drawn by the live view
	live      *render.Live
	quitBy    render.LiveQuit
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
	acct, err := account.Open(ctx, account.Config{LocalDir: dir, LocalPartitions: demoPartitions, Logger: f.Log})
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

// setup creates the database, the containers and the lease store.
func (r *demoRun) setup(ctx context.Context, acct *account.Account) error {
	if err := acct.CreateDatabaseIfNotExists(ctx, demoDatabase); err != nil {
		return fmt.Errorf("create demo database: %w", err)
	}
	orders, err := acct.CreateContainerIfNotExists(ctx, demoDatabase, demoContainer, "/customer", nil)
	if err != nil {
		return fmt.Errorf("create demo container: %w", err)
	}
	if _, err := acct.CreateContainerIfNotExists(ctx, demoDatabase, demoLeases, "/id", cosmos.LeaseContainerOptions()); err != nil {
		return fmt.Errorf("create demo lease container: %w", err)
	}
	info, err := orders.Info(ctx)
	if err != nil {
		return err
	}
	r.orders = orders
	r.store = leases.NewStore(acct.LeaseDocuments(demoDatabase, demoLeases),
		leases.Prefix(demoProcessor, acct.Host(), info.DatabaseRID, info.ContainerRID), leases.StoreOptions{Now: r.f.Now})
	return nil
}

// run writes orders for the duration with the two processors running, splits a partition
// halfway, then lets the processors catch up and stops them.
func (r *demoRun) run(ctx context.Context, acct *account.Account) error {
	procCtx, stopProcs := context.WithCancel(ctx)
	defer stopProcs()
	procs, err := errgroupProcessors(procCtx, r)
	if err != nil {
		return err
	}

	writeCtx, stopWriting := context.WithTimeout(ctx, r.o.Duration)
	defer stopWriting()
	var g errgroup.Group
	g.Go(func() error { return r.write(writeCtx) })
	g.Go(func() error { return r.splitHalfway(writeCtx, acct) })
	viewCtx, stopView := context.WithCancel(ctx)
	defer stopView()
	viewDone := make(chan struct{})
	go func() { defer close(viewDone); r.redraw(viewCtx) }()

	werr := g.Wait()
	if ctx.Err() == nil && werr == nil {
		r.event("stopped writing: waiting for the workers to catch up")
		r.drain(ctx)
	}
	stopProcs()
	perr := procs.Wait()
	stopView()
	<-viewDone
	return errors.Join(werr, perr)
}

// errgroupProcessors starts the demo's processor instances in a group whose Wait returns when
// all stopped.
func errgroupProcessors(ctx context.Context, r *demoRun) (*errgroup.Group, error) {
	var g errgroup.Group
	for _, name := range demoInstances {
		p, err := feed.NewProcessor(r.orders, r.store, r.handler(name), feed.ProcessorOptions{
			Instance:        name,
			AcquireInterval: demoAcquire,
			RenewInterval:   demoRenew,
			Expiration:      demoExpiration,
			PollInterval:    demoPoll,
			ReleaseTimeout:  5 * time.Second,
			StartFrom:       feed.StartFrom{Kind: feed.StartBeginning},
			Logger:          r.f.Log,
			Notify:          r.notify,
		})
		if err != nil {
			return nil, err
		}
		g.Go(func() error {
			if err := p.Run(ctx); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			return nil
		})
	}
	return &g, nil
}

// handler counts the orders an instance processed.
func (r *demoRun) handler(instance string) feed.Handler {
	return feed.HandlerFunc(func(_ context.Context, b feed.Batch) error {
		ids := make([]string, 0, len(b.Items))
		for _, it := range b.Items {
			var v struct {
				ID string `json:"id"`
			}
			if err := json.Unmarshal(it, &v); err == nil && v.ID != "" {
				ids = append(ids, v.ID)
			}
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, id := range ids {
			r.delivered[id]++
		}
		r.byWorker[instance] += int64(len(ids))
		return nil
	})
}

// notify turns the processors' lease events into lines of the event log.
func (r *demoRun) notify(e feed.Event) {
	switch e.Type {
	case feed.EventAcquired:
		r.event(fmt.Sprintf("%s acquired lease %s", e.Owner, e.Lease))
	case feed.EventReleased:
		r.event(fmt.Sprintf("%s released lease %s", e.Owner, e.Lease))
	case feed.EventLost:
		r.event(fmt.Sprintf("%s lost lease %s", e.Owner, e.Lease))
	case feed.EventSplit:
		r.event(fmt.Sprintf("%s split lease %s into %s", e.Owner, e.Lease, strings.Join(e.Children, ", ")))
	case feed.EventError:
		if e.Cause == feed.CauseInfra {
			r.event(fmt.Sprintf("%s: %v", e.Owner, e.Err))
		}
	}
}

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

// write upserts orders at the configured rate until ctx ends.
func (r *demoRun) write(ctx context.Context) error {
	tick := time.NewTicker(time.Second / time.Duration(r.o.Rate))
	defer tick.Stop()
	rng := rand.New(rand.NewPCG(uint64(r.began.UnixNano()), 7))
	statuses := []string{"placed", "paid", "packed", "shipped"}
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		order := map[string]any{
			"id":        fmt.Sprintf("order-%06d", n),
			"customer":  fmt.Sprintf("customer-%03d", rng.IntN(500)),
			"status":    statuses[rng.IntN(len(statuses))],
			"total":     float64(rng.IntN(50000)) / 100,
			"items":     1 + rng.IntN(5),
			"createdAt": r.f.Now().UTC().Format(time.RFC3339Nano),
		}
		body, err := json.Marshal(order)
		if err != nil {
			return err
		}
		if err := r.orders.UpsertItem(ctx, order["customer"], body); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("write order: %w", err)
		}
		r.mu.Lock()
		r.written = int64(n)
		r.mu.Unlock()
	}
}

// splitHalfway splits the first partition at half the duration.
func (r *demoRun) splitHalfway(ctx context.Context, acct *account.Account) error {
	t := time.NewTimer(r.o.Duration / 2)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return nil
	case <-t.C:
	}
	parts, err := r.orders.Partitions(ctx)
	if err != nil || len(parts) == 0 {
		return fmt.Errorf("list partitions for the split: %w", err)
	}
	before, err := r.store.List(ctx)
	if err != nil {
		return err
	}
	children, err := acct.Emulator().Split(demoDatabase, demoContainer, parts[0].ID)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.split = &demoSplitView{Partition: parts[0].ID, Children: children, LeasesBefore: len(before)}
	r.mu.Unlock()
	r.event(fmt.Sprintf("the emulator split partition %s into %s", parts[0].ID, strings.Join(children, " and ")))
	return nil
}

// drain waits until every order written was processed, or demoDrainTimeout.
func (r *demoRun) drain(ctx context.Context) {
	deadline := time.NewTimer(demoDrainTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if r.unprocessed() == 0 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-deadline.C:
			return
		case <-tick.C:
		}
	}
}

// unprocessed counts the orders written but not processed.
func (r *demoRun) unprocessed() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var n int64
	for i := int64(1); i <= r.written; i++ {
		if r.delivered[fmt.Sprintf("order-%06d", i)] == 0 {
			n++
		}
	}
	return n
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

// view reads the leases and their lag.
func (r *demoRun) view(ctx context.Context) (demoView, error) {
	ls, err := r.store.List(ctx)
	if err != nil {
		return demoView{}, err
	}
	lags, sum, err := feed.Estimate(ctx, r.orders, ls, feed.EstimateOptions{Expiration: demoExpiration, Now: r.f.Now})
	if err != nil {
		return demoView{}, err
	}
	ev := newEstimateView(r.store.Prefix(), lags, sum, r.f.Now())
	r.mu.Lock()
	defer r.mu.Unlock()
	v := demoView{Written: r.written, Processed: map[string]int64{}, Leases: ev.Leases, Seconds: r.f.Now().Sub(r.began).Seconds()}
	var deliveries int64
	for _, name := range demoInstances {
		v.Processed[name] = r.byWorker[name]
		deliveries += r.byWorker[name]
	}
	v.Duplicates = deliveries - int64(len(r.delivered))
	if r.split != nil {
		s := *r.split
		v.Split = &s
	}
	return v, nil
}

// summary is the final view, with the orders lost and the leases after the split. When the
// demo was interrupted, the orders not processed yet are pending, not lost: the workers had no
// time to catch up.
func (r *demoRun) summary(ctx context.Context, interrupted bool) (demoView, error) {
	v, err := r.view(ctx)
	if err != nil {
		return v, fmt.Errorf("read the final lease table: %w", err)
	}
	if interrupted {
		v.Pending = r.unprocessed()
	} else {
		v.Lost = r.unprocessed()
	}
	if v.Split != nil {
		v.Split.LeasesAfter = len(v.Leases)
	}
	return v, nil
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
