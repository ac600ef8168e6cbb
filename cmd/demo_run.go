package cmd

// The demo's driver: the run's state, its setup, the two processors, the orders writer, the
// split halfway, the drain and the views read from the lease table. demo_live.go shows them.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/cfp-dev/cfp/emulator"
	"github.com/cfp-dev/cfp/internal/account"
	"github.com/cfp-dev/cfp/internal/cosmos"
	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/leases"
	"github.com/cfp-dev/cfp/internal/render"
)

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
	// upsert writes an order (orders.UpsertItem; a test's stand-in).
	upsert func(ctx context.Context, pk any, body []byte) error
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

// setup creates the database, the containers and the lease store.
func (r *demoRun) setup(ctx context.Context, acct *account.Account) error {
	if err := acct.CreateDatabaseIfNotExists(ctx, demoDatabase); err != nil {
		return fmt.Errorf("create demo database: %w", err)
	}
	// The throughput the service gives demoPartitions physical partitions, so the emulator
	// gives the orders container as many (the lease container, at the default, has one).
	tp := &cosmos.ContainerOptions{Throughput: demoPartitions * emulator.ThroughputPerPartition}
	orders, err := acct.CreateContainerIfNotExists(ctx, demoDatabase, demoContainer, "/customer", tp)
	if err != nil {
		return fmt.Errorf("create demo container: %w", err)
	}
	info, err := orders.Info(ctx)
	if err != nil {
		return err
	}
	r.orders = orders
	r.upsert = orders.UpsertItem
	r.store, err = cosmos.OpenLeaseSet(ctx, cosmos.LeaseSet{
		Monitored: acct.Account, Info: info, Database: demoDatabase, Container: demoLeases,
		Processor: demoProcessor, Create: true, Store: leases.StoreOptions{Now: r.f.Now},
	})
	if err != nil {
		return fmt.Errorf("demo lease container: %w", err)
	}
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
		// Neither the end of the duration nor Ctrl-C cuts a write off: cancelled in flight, it
		// could land all the same, and its order be delivered without being counted as written
		// (599 written, 600 deliveries, 0 duplicates).
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), demoWriteTimeout)
		err = r.upsert(wctx, order["customer"], body)
		cancel()
		if err != nil {
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
	ev := render.NewEstimateView(r.store.Prefix(), lags, sum, r.f.Now())
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
