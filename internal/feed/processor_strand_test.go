package feed_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/feed/feedtest"
	"github.com/cfp-dev/cfp/internal/leases"
)

// lateWriteDocs holds the first lease write after it is armed until release is closed, as a
// starved process or a slow request does, and closes landed once it was written.
type lateWriteDocs struct {
	leases.Documents
	mu      sync.Mutex
	armed   bool
	release chan struct{}
	landed  chan struct{}
	lateErr error // the held write's
}

func (d *lateWriteDocs) arm() {
	d.mu.Lock()
	d.armed = true
	d.mu.Unlock()
}

func (d *lateWriteDocs) Replace(ctx context.Context, id, pk, ifMatch string, body []byte) (leases.Document, error) {
	d.mu.Lock()
	late := d.armed && !strings.Contains(id, ".host.") // a lease, not a presence record
	if late {
		d.armed = false
	}
	d.mu.Unlock()
	if !late {
		return d.Documents.Replace(ctx, id, pk, ifMatch, body)
	}
	<-d.release
	doc, err := d.Documents.Replace(ctx, id, pk, ifMatch, body)
	d.mu.Lock()
	d.lateErr = err
	d.mu.Unlock()
	close(d.landed)
	return doc, err
}

// TestProcessor_ARenewLandingAfterTheFenceDoesNotStrandTheLease holds a renew, stamped before
// the lease's expiration, until the host stopped the lease's worker for not writing it within
// the expiration (the fence), and lets it land then, before any acquire cycle looked: the
// lease looks live again, in this host's name. It must not stay that way with no worker for
// it (the host counts it as its own and no host takes it until it expires again, an expiration
// later: 999 of 1000 leases held at the end of a scalebench join). The host releases it after
// the fence, as .NET releases a lost lease, and takes it up again at its next cycle.
func TestProcessor_ARenewLandingAfterTheFenceDoesNotStrandTheLease(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		src := feedtest.NewMemSource(1)
		docs := &lateWriteDocs{Documents: leases.NewMemDocuments("/id"), release: make(chan struct{}), landed: make(chan struct{})}
		opts := fastOptions("a")
		// The renew comes at KeepAlive (1.9s), the fence at the expiration (3s): the late renew
		// makes the lease look live for almost 2s more.
		opts.Expiration = 3 * time.Second
		opts.RenewInterval = 400 * time.Millisecond
		// A window between the fence and the next cycle. Not a divisor of the expiration: the fence
		// fires an expiration after the acquire, which a cycle made, so with 200 ms a cycle ran at
		// the fence's instant and, in the scheduler's order, now and then took the lease back
		// (4fa8d74) before the held renew landed, which then failed its If-Match.
		opts.AcquireInterval = 350 * time.Millisecond
		ev := &events{}
		opts.Notify = func(e feed.Event) {
			ev.add(e)
			if e.Type == feed.EventLost {
				close(docs.release) // the fence fired: let the held renew land now
				select {
				case <-docs.landed:
				case <-time.After(5 * time.Second):
				}
			}
		}
		p, err := feed.NewProcessor(src, leases.NewStore(docs, testPrefix, leases.StoreOptions{}),
			feed.HandlerFunc(func(context.Context, feed.Batch) error { return nil }), opts)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- p.Run(ctx) }()
		defer func() { cancel(); <-done }()

		waitFor(t, 10*time.Second, "a to hold the lease", func() bool { return len(p.Owned()) == 1 })
		docs.arm() // the next lease write is the lease's renew: no change is written, no checkpoint
		select {
		case <-docs.landed:
		case <-time.After(10 * time.Second):
			t.Fatal("the fence never fired, or the held renew never landed")
		}
		docs.mu.Lock()
		lateErr := docs.lateErr
		docs.mu.Unlock()
		if lateErr != nil {
			// The renew did not land (the race this test is about did not happen). Its document is
			// not checked here: the worker releases it right after the fence's event.
			t.Fatalf("the held renew failed: %v", lateErr)
		}
		// The worker releases the lease at the instant the renew landed; once the bubble is still
		// (synctest.Wait, no poll racing the worker) the lease is free. The acquire cycle's take-back
		// of a lease in the host's name that no worker reads (4fa8d74) would rescue it too, but
		// only at the next cycle: this check pins the release.
		synctest.Wait()
		if l := listLeases(t, docs.Documents)[0]; l.Owner != "" {
			t.Errorf("lease after the held renew landed: owner %q, stamped %s, want it released", l.Owner, l.Timestamp.Format("05.000"))
		}
		// Stranded, the lease would look live until an expiration after the renew was stamped, about
		// 1.9s from now: a host taking it up again within 750ms did not wait for it to expire.
		waitFor(t, opts.Expiration/4, "a to process the lease again without waiting for it to expire", func() bool { return len(p.Owned()) == 1 })
	})
}
