package feed_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/feed/feedtest"
	"github.com/cfp-dev/cfp/internal/leases"
)

// TestProcessor_ShutdownKeepsRenewingWhileTheLastBatchRuns stops a host while its handler is in
// the middle of a batch that outlasts the lease expiration (a short --lease-expiration and the
// default 30s --shutdown-timeout): the host must keep its lease alive until the batch ended and
// the lease was released, or the other host takes the expired lease and processes it at the
// same time.
func TestProcessor_ShutdownKeepsRenewingWhileTheLastBatchRuns(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		src := feedtest.NewMemSource(2)
		docs := leases.NewMemDocuments("/id")
		opts := func(name string) feed.ProcessorOptions {
			o := fastOptions(name)
			o.Expiration = 300 * time.Millisecond
			o.RenewInterval = 40 * time.Millisecond
			o.ShutdownTimeout = 5 * time.Second
			return o
		}
		rec := newRecorder(0)
		var slow atomic.Bool
		inSlow := make(chan string, 1)
		handlerA := rec.handler("a")
		a := startHost(t, src, docs, feed.HandlerFunc(func(ctx context.Context, b feed.Batch) error {
			if slow.Load() {
				select {
				case inSlow <- b.LeaseToken:
				default:
				}
				time.Sleep(time.Second) // ignores ctx: a batch that takes its time
			}
			return handlerA.Handle(ctx, b)
		}), opts("a"))
		b := startHost(t, src, docs, rec.handler("b"), opts("b"))
		waitFor(t, 10*time.Second, "one lease each", func() bool {
			return len(a.p.Owned()) == 1 && len(b.p.Owned()) == 1
		})

		slow.Store(true)
		var wg sync.WaitGroup
		defer wg.Wait()
		stopWriting := make(chan struct{})
		defer close(stopWriting)
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stopWriting:
					return
				case <-time.After(2 * time.Millisecond):
				}
				writeDocs(t, src, i, i+1)
			}
		})
		token := <-inSlow
		if err := a.stop(t); err != nil { // returns once a's batch ended and its lease was released
			t.Fatalf("Run = %v", err)
		}
		rec.mu.Lock()
		overlaps := rec.overlaps
		rec.mu.Unlock()
		if len(overlaps) > 0 {
			t.Fatalf("lease %s handled by two hosts at once while its owner shut down: %v", token, overlaps)
		}
		if n := len(a.ev.of(feed.EventLost)); n != 0 {
			t.Errorf("host a lost %d leases while finishing its last batch, want 0", n)
		}
		waitFor(t, 10*time.Second, "b to take the released lease", func() bool { return len(b.p.Owned()) == 2 })
	})
}

// TestProcessor_HandoffWaitsForTheBatchInFlight has a second host ask for a lease while the
// owner is in a batch that outlasts the lease expiration: the owner accepts, finishes the
// batch, checkpoints and releases; the requester must wait for that instead of stealing the
// lease after an expiration as from a host that ignores requests.
func TestProcessor_HandoffWaitsForTheBatchInFlight(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		src := feedtest.NewMemSource(2)
		docs := leases.NewMemDocuments("/id")
		rec := newRecorder(600 * time.Millisecond)
		var wg sync.WaitGroup
		defer wg.Wait()
		stopWriting := make(chan struct{})
		defer close(stopWriting)
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stopWriting:
					return
				case <-time.After(5 * time.Millisecond):
				}
				writeDocs(t, src, i, i+1)
			}
		})
		opts := func(name string) feed.ProcessorOptions {
			o := fastOptions(name)
			o.Expiration = 250 * time.Millisecond
			o.RenewInterval = 40 * time.Millisecond
			return o
		}
		a := startHost(t, src, docs, rec.handler("a"), opts("a"))
		waitFor(t, 5*time.Second, "a to hold both leases", func() bool { return len(a.p.Owned()) == 2 })
		b := startHost(t, src, docs, rec.handler("b"), opts("b"))
		waitFor(t, 10*time.Second, "b to hold one lease", func() bool { return len(b.p.Owned()) == 1 })
		time.Sleep(time.Second) // a few more batches on both hosts
		rec.mu.Lock()
		overlaps := rec.overlaps
		rec.mu.Unlock()
		if len(overlaps) > 0 {
			t.Fatalf("leases handled by two hosts at once during a handoff: %v", overlaps)
		}
		if lost := a.ev.of(feed.EventLost); len(lost) > 0 {
			t.Fatalf("a lost lease %s (%v) instead of handing it over", lost[0].Lease, lost[0].Err)
		}
		if rel := a.ev.of(feed.EventReleased); len(rel) != 1 {
			t.Fatalf("a released %d leases, want the one handed off", len(rel))
		}
		for _, l := range listLeases(t, docs) {
			if l.Properties["cfpHandoff"] != "" || l.Properties["cfpHandoffAccepted"] != "" {
				t.Errorf("lease %s kept its handoff properties after it moved: %v", l.Token, l.Properties)
			}
		}
	})
}

// cutOffDocs is a lease container that a host loses touch with: once armed, it lets one more
// lease write through (the host's last successful write of its lease) and fails every later
// write.
type cutOffDocs struct {
	leases.Documents

	mu        sync.Mutex
	armed     bool
	cut       bool
	lastWrite time.Time
}

func (d *cutOffDocs) Replace(ctx context.Context, id, pk, ifMatch string, body []byte) (leases.Document, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cut {
		return leases.Document{}, errors.New("connection reset")
	}
	start := time.Now()
	doc, err := d.Documents.Replace(ctx, id, pk, ifMatch, body)
	if err == nil && d.armed && !strings.Contains(id, ".host.") { // a lease, not a presence record
		d.cut, d.lastWrite = true, start
	}
	return doc, err
}

// TestProcessor_BatchInFlightEndsWhenTheLeaseExpires cuts a host off from its lease container
// in the middle of a long batch: the host must cancel the batch once it could not write the
// lease for an expiration (another host may take it from then on), not only at its next
// renewal after that, almost a renew interval later.
func TestProcessor_BatchInFlightEndsWhenTheLeaseExpires(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		src := feedtest.NewMemSource(1)
		docs := &cutOffDocs{Documents: leases.NewMemDocuments("/id")}
		writeDocs(t, src, 0, 5)
		opts := fastOptions("a")
		opts.Expiration = 600 * time.Millisecond
		opts.RenewInterval = 580 * time.Millisecond // the renewal after the expiration comes ~T+1160ms
		type ended struct {
			at    time.Time
			cause error
		}
		inBatch := make(chan struct{})
		endedCh := make(chan ended, 1)
		var once sync.Once
		startHost(t, src, docs, feed.HandlerFunc(func(ctx context.Context, b feed.Batch) error {
			once.Do(func() {
				close(inBatch)
				select {
				case <-ctx.Done():
					endedCh <- ended{time.Now(), context.Cause(ctx)}
				case <-time.After(5 * time.Second):
					endedCh <- ended{}
				}
			})
			return ctx.Err()
		}), opts)
		<-inBatch
		docs.mu.Lock()
		docs.armed = true
		docs.mu.Unlock()
		e := <-endedCh
		if e.at.IsZero() {
			t.Fatal("the batch in flight was never cancelled after the host lost touch with its lease")
		}
		if !errors.Is(e.cause, leases.ErrLeaseLost) {
			t.Errorf("batch cancelled with %v, want the lease lost (expired)", e.cause)
		}
		docs.mu.Lock()
		last := docs.lastWrite
		docs.mu.Unlock()
		if d := e.at.Sub(last); d > opts.Expiration+300*time.Millisecond {
			t.Fatalf("batch cancelled %s after the last write of the lease, want about the expiration (%s): another host may have held the lease for %s", d, opts.Expiration, d-opts.Expiration)
		}
	})
}

// TestProcessor_AcquiredComesBeforeTheLeasesBatches slows the acquired notification down (a
// consumer of `cfp process --events jsonl` that reads slowly): a lease's batch and checkpoint
// events must still come after its acquired event.
func TestProcessor_AcquiredComesBeforeTheLeasesBatches(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		src := feedtest.NewMemSource(2)
		docs := leases.NewMemDocuments("/id")
		writeDocs(t, src, 0, 20)
		rec := newRecorder(0)
		var mu sync.Mutex
		var order []feed.Event
		opts := fastOptions("a")
		opts.Notify = func(e feed.Event) {
			if e.Type == feed.EventAcquired {
				time.Sleep(50 * time.Millisecond)
			}
			mu.Lock()
			order = append(order, e)
			mu.Unlock()
		}
		p, err := feed.NewProcessor(src, leases.NewStore(docs, testPrefix, leases.StoreOptions{}), rec.handler("a"), opts)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- p.Run(ctx) }()
		waitFor(t, 10*time.Second, "20 documents", func() bool { return rec.distinct() == 20 })
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run = %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		acquired := map[string]bool{}
		for _, e := range order {
			switch e.Type {
			case feed.EventAcquired:
				acquired[e.Lease] = true
			case feed.EventBatch, feed.EventCheckpoint, feed.EventReleased:
				if !acquired[e.Lease] {
					t.Fatalf("%s event of lease %s before its acquired event", e.Type, e.Lease)
				}
			}
		}
	})
}

// TestProcessor_LeaseStolenWhileStoppingCancelsTheBatch has a .NET host steal a lease while its
// cfp owner shuts down with a batch in flight: once the owner learns that the lease is lost it
// must cancel the batch at once, as it does while running, instead of letting it run on for
// the rest of the shutdown timeout next to the new owner.
func TestProcessor_LeaseStolenWhileStoppingCancelsTheBatch(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		src := feedtest.NewMemSource(1)
		docs := leases.NewMemDocuments("/id")
		writeDocs(t, src, 0, 5)
		opts := fastOptions("a")
		opts.ShutdownTimeout = 5 * time.Second
		inBatch := make(chan struct{})
		type ended struct {
			at    time.Time
			cause error
		}
		endedCh := make(chan ended, 1)
		var once sync.Once
		a := startHost(t, src, docs, feed.HandlerFunc(func(ctx context.Context, b feed.Batch) error {
			once.Do(func() {
				close(inBatch)
				<-ctx.Done()
				endedCh <- ended{time.Now(), context.Cause(ctx)}
			})
			return ctx.Err()
		}), opts)
		<-inBatch
		a.cancel() // shut down: the batch in flight may run on for the shutdown timeout
		time.Sleep(50 * time.Millisecond)
		store := leases.NewStore(docs, testPrefix, leases.StoreOptions{})
		ls, err := store.List(context.Background())
		if err != nil || len(ls) != 1 {
			t.Fatalf("leases %v, %v", ls, err)
		}
		if _, err := store.Acquire(context.Background(), ls[0], "dotnet-host"); err != nil {
			t.Fatal(err)
		}
		stolen := time.Now()
		e := <-endedCh
		if d := e.at.Sub(stolen); d > time.Second || !errors.Is(e.cause, leases.ErrLeaseLost) {
			t.Fatalf("batch cancelled %s after the steal with cause %v, want at once (within a renew interval) with the lease lost", d, e.cause)
		}
	})
}

// TestProcessor_HandlerThatIgnoresCancellationDoesNotHoldTheLeaseForever shuts down a host
// whose handler never returns: the host renews the lease while the batch may still finish
// (the shutdown timeout), then lets it expire so that another host can take it over.
func TestProcessor_HandlerThatIgnoresCancellationDoesNotHoldTheLeaseForever(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		src := feedtest.NewMemSource(1)
		docs := leases.NewMemDocuments("/id")
		writeDocs(t, src, 0, 5)
		opts := fastOptions("a")
		opts.Expiration = 300 * time.Millisecond
		opts.ShutdownTimeout = 200 * time.Millisecond
		inBatch, release := make(chan struct{}), make(chan struct{})
		var once sync.Once
		a := startHost(t, src, docs, feed.HandlerFunc(func(ctx context.Context, b feed.Batch) error {
			once.Do(func() {
				close(inBatch)
				<-release // ignores ctx
			})
			return nil
		}), opts)
		defer close(release)
		<-inBatch
		a.cancel()
		waitFor(t, 5*time.Second, "the stuck host's lease to expire", func() bool {
			ls := listLeases(t, docs)
			return len(ls) == 1 && ls[0].Expired(time.Now(), opts.Expiration)
		})
	})
}
