package feed_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/feed/feedtest"
	"github.com/cfp-dev/cfp/internal/leases"
)

// TestProcessor_ALeaseTakenAgainWhileItsLostWorkerWindsDownIsRead has a host lose a lease (a
// .NET host steals it) while the lease's worker is inside a handler that does not return on
// its cancellation (a handler blocked in I/O, a frozen process), and get it back free while
// that worker still winds down. The host must take the lease again at its next cycles, not
// leave it free and unread for as long as the old handler call lasts, and the new worker must
// read it: a change written after the old worker ended is delivered, and the host still holds
// the lease. Before, the acquire cycle skipped a lease whose old worker was still registered,
// so the lease stayed free and unread (no other host at its share takes it); and an acquire
// that did land then (the balancer's take racing the old worker's exit) started no worker
// (startLocked found the old one registered), so the lease stayed in the host's name and was
// never read.
func TestProcessor_ALeaseTakenAgainWhileItsLostWorkerWindsDownIsRead(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) { retakeWhileWindingDown(t, true) })
}

// TestProcessor_ALeaseTakenAgainIsReadWhenItsOldWorkerNeverEnds is the same with a handler
// call that never returns: the new worker waits for the old one at most ShutdownTimeout, then
// reads the lease all the same.
func TestProcessor_ALeaseTakenAgainIsReadWhenItsOldWorkerNeverEnds(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) { retakeWhileWindingDown(t, false) })
}

// retakeWhileWindingDown plays the two tests above; end says whether the old worker's handler
// call returns once the lease was taken again.
func retakeWhileWindingDown(t *testing.T, end bool) {
	src := feedtest.NewMemSource(1)
	docs := leases.NewMemDocuments("/id")
	var mu sync.Mutex
	seen := map[string]int{}
	block := false
	entered := make(chan struct{}, 1)
	stuck := make(chan struct{})
	var unstick sync.Once
	h := feed.HandlerFunc(func(ctx context.Context, b feed.Batch) error {
		mu.Lock()
		blk := block
		block = false
		if !blk {
			for _, it := range b.Items {
				seen[docID(it)]++
			}
		}
		mu.Unlock()
		if blk {
			entered <- struct{}{}
			<-stuck // ignores ctx: the worker winds down only when this returns
		}
		return nil
	})
	seenDoc := func(id string) func() bool {
		return func() bool { mu.Lock(); defer mu.Unlock(); return seen[id] > 0 }
	}
	opts := fastOptions("a")
	a := startHost(t, src, docs, h, opts)
	t.Cleanup(func() { unstick.Do(func() { close(stuck) }) }) // before the host's stop

	writeDocs(t, src, 0, 1)
	waitFor(t, time.Second, "a to deliver doc0", seenDoc("doc0"))
	mu.Lock()
	block = true
	mu.Unlock()
	writeDocs(t, src, 1, 2)
	<-entered // the lease's worker is in the handler, and stays there

	token := listLeases(t, docs)[0].Token
	steal(t, docs, token, "other")
	waitFor(t, time.Second, "a to find the lease lost", func() bool { return len(a.p.Owned()) == 0 })
	store := leases.NewStore(docs, testPrefix, leases.StoreOptions{})
	if err := store.Release(context.Background(), listLeases(t, docs)[0], "other"); err != nil {
		t.Fatal(err)
	}

	// Free again, with its old worker still in the handler: taken again within a few cycles.
	waitFor(t, 10*opts.AcquireInterval, "a to take the free lease again while its old worker winds down", func() bool {
		return listLeases(t, docs)[0].Owner == "a"
	})
	wait := time.Second
	if end {
		unstick.Do(func() { close(stuck) })
	} else {
		wait += opts.ShutdownTimeout
	}
	writeDocs(t, src, 2, 3)
	waitFor(t, wait, "the new worker to deliver doc2, written after the lease was taken again", seenDoc("doc2"))
	if got := a.p.Owned(); !slices.Equal(got, []string{token}) {
		t.Errorf("a holds %v, want [%s]", got, token)
	}
	if owner := listLeases(t, docs)[0].Owner; owner != "a" {
		t.Errorf("the lease names %q, want a", owner)
	}
	if end {
		// The old worker's lost event comes before the new worker's acquired event, so that a
		// consumer that follows the events ends with the lease held.
		a.ev.mu.Lock()
		var order []feed.EventType
		for _, e := range a.ev.all {
			if e.Lease == token && (e.Type == feed.EventAcquired || e.Type == feed.EventLost) {
				order = append(order, e.Type)
			}
		}
		a.ev.mu.Unlock()
		want := []feed.EventType{feed.EventAcquired, feed.EventLost, feed.EventAcquired}
		if !slices.Equal(order, want) {
			t.Errorf("the lease's events are %v, want %v", order, want)
		}
	}
}
