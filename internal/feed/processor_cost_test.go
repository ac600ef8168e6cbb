package feed_test

import (
	"context"
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

// leaseWrites counts the successful replaces of lease documents (not presence records), and
// remembers the oldest a lease got between two of its writes.
type leaseWrites struct {
	leases.Documents
	writes atomic.Int64
	mu     sync.Mutex
	last   map[string]time.Time
	maxGap time.Duration
}

func (c *leaseWrites) Replace(ctx context.Context, id, pk, ifMatch string, body []byte) (leases.Document, error) {
	d, err := c.Documents.Replace(ctx, id, pk, ifMatch, body)
	if err == nil && strings.Contains(id, "..") {
		c.writes.Add(1)
		now := time.Now()
		c.mu.Lock()
		if c.last == nil {
			c.last = map[string]time.Time{}
		}
		if prev, ok := c.last[id]; ok {
			c.maxGap = max(c.maxGap, now.Sub(prev))
		}
		c.last[id] = now
		c.mu.Unlock()
	}
	return d, err
}

func (c *leaseWrites) gap() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.maxGap
}

// TestProcessor_IdleLeaseWrittenOncePerKeepAlive holds an idle lease for a while: the renewer
// writes it once per KeepAlive (here 950ms, for a renew interval of 200ms and an expiration
// of 2s), not every renew interval as .NET does, and never lets it get as old as the expiration.
func TestProcessor_IdleLeaseWrittenOncePerKeepAlive(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		src := feedtest.NewMemSource(1)
		docs := &leaseWrites{Documents: leases.NewMemDocuments("/id")}
		opts := fastOptions("a")
		opts.RenewInterval, opts.Expiration = 200*time.Millisecond, 2*time.Second
		if k := opts.KeepAlive(); k != 950*time.Millisecond {
			t.Fatalf("KeepAlive() = %s, want 950ms (a second and a quarter interval short of the expiration)", k)
		}
		h := startHost(t, src, docs, feed.HandlerFunc(func(context.Context, feed.Batch) error { return nil }), opts)
		waitFor(t, 5*time.Second, "the lease acquired", func() bool { return len(h.ev.of(feed.EventAcquired)) == 1 })
		before := docs.writes.Load()
		const hold = 3 * time.Second
		time.Sleep(hold)
		if len(h.p.Owned()) != 1 || len(h.ev.of(feed.EventLost)) != 0 {
			t.Fatalf("owned %v, lost events %v: want the lease held throughout", h.p.Owned(), h.ev.of(feed.EventLost))
		}
		// One write per renew interval would be 15; one per keep-alive is about 3.
		if n := docs.writes.Load() - before; n < 1 || n > int64(hold/opts.KeepAlive())+2 {
			t.Errorf("%d writes of the idle lease in %s, want 1 to %d (one per keep-alive)", n, hold, int64(hold/opts.KeepAlive())+2)
		}
		if g := docs.gap(); g >= opts.Expiration {
			t.Errorf("the lease went %s without a write, want less than the expiration %s", g, opts.Expiration)
		}
	})
}

// TestProcessor_CheckpointInterval_CoalescesAndFlushesOnStop delivers five batches with a
// checkpoint interval longer than the test: none is written while running, the last one is
// written when the host stops, and a host that takes over later starts after it.
func TestProcessor_CheckpointInterval_CoalescesAndFlushesOnStop(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		src := feedtest.NewMemSource(1)
		docs := leases.NewMemDocuments("/id")
		opts := fastOptions("a")
		opts.MaxItems = 1
		opts.CheckpointInterval = time.Hour
		var delivered atomic.Int64
		h := startHost(t, src, docs, feed.HandlerFunc(func(_ context.Context, b feed.Batch) error {
			delivered.Add(int64(len(b.Items)))
			return nil
		}), opts)
		writeDocs(t, src, 0, 5)
		waitFor(t, 5*time.Second, "five documents delivered", func() bool { return delivered.Load() == 5 })
		time.Sleep(100 * time.Millisecond) // more polls: none may write the pending checkpoint
		if n := len(h.ev.of(feed.EventCheckpoint)); n != 0 {
			t.Errorf("%d checkpoints written while running, want 0 (the interval is an hour)", n)
		}
		if got := listLeases(t, docs)[0].Continuation; got != "" {
			t.Errorf("stored continuation %q while running, want none yet", got)
		}
		if err := h.stop(t); err != nil {
			t.Fatal(err)
		}
		if n := len(h.ev.of(feed.EventCheckpoint)); n != 1 {
			t.Errorf("%d checkpoints after stopping, want 1 (the pending one, flushed)", n)
		}
		var again atomic.Int64
		startHost(t, src, docs, feed.HandlerFunc(func(_ context.Context, b feed.Batch) error {
			again.Add(int64(len(b.Items)))
			return nil
		}), fastOptions("b"))
		writeDocs(t, src, 5, 6)
		waitFor(t, 5*time.Second, "the next document delivered to b", func() bool { return again.Load() >= 1 })
		if n := again.Load(); n != 1 {
			t.Errorf("b got %d documents, want only the new one (the flushed checkpoint covers the first five)", n)
		}
	})
}

// queryCounter counts the prefix queries that list every lease and those that read only the
// presence records.
type queryCounter struct {
	leases.Documents
	full, records atomic.Int64
}

func (q *queryCounter) QueryPrefix(ctx context.Context, prefix string) ([]leases.Document, error) {
	switch prefix {
	case testPrefix + ".":
		q.full.Add(1)
	case leases.HostIDPrefix(testPrefix):
		q.records.Add(1)
	}
	return q.Documents.QueryPrefix(ctx, prefix)
}

// TestProcessor_SettledHostsReadOnlyPresenceRecords balances 8 leases over 4 hosts and lets
// them run: once settled, an acquire cycle reads the presence records instead of listing every
// lease (.NET lists all leases every cycle). A host that joins later still gets its share.
func TestProcessor_SettledHostsReadOnlyPresenceRecords(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		src := feedtest.NewMemSource(8)
		docs := &queryCounter{Documents: leases.NewMemDocuments("/id")}
		noop := feed.HandlerFunc(func(context.Context, feed.Batch) error { return nil })
		var hs []*host
		for _, n := range []string{"a", "b", "c", "d"} {
			hs = append(hs, startHost(t, src, docs, noop, fastOptions(n)))
		}
		balanced := func(hs []*host, each int) func() bool {
			return func() bool {
				for _, h := range hs {
					if len(h.p.Owned()) != each {
						return false
					}
				}
				return true
			}
		}
		waitFor(t, 10*time.Second, "2 leases on each of 4 hosts", balanced(hs, 2))
		time.Sleep(200 * time.Millisecond) // the last handoffs' cycles
		full, records := docs.full.Load(), docs.records.Load()
		const cycles = 40 // per host: 800ms at an acquire interval of 20ms
		time.Sleep(cycles * fastOptions("x").AcquireInterval)
		full, records = docs.full.Load()-full, docs.records.Load()-records
		if full > 4*2 {
			t.Errorf("%d full lease listings by 4 settled hosts in %d cycles each (and %d presence-record reads), want at most 8", full, cycles, records)
		}
		if records < 4*cycles/4 {
			t.Errorf("%d presence-record reads by 4 hosts in %d cycles each, want their quiet cycles to read them", records, cycles)
		}
		hs = append(hs, startHost(t, src, docs, noop, fastOptions("e")), startHost(t, src, docs, noop, fastOptions("f")), startHost(t, src, docs, noop, fastOptions("g")), startHost(t, src, docs, noop, fastOptions("h")))
		waitFor(t, 10*time.Second, "1 lease on each of 8 hosts after 4 joined", balanced(hs, 1))
	})
}

// TestProcessor_CheckpointInterval_RidesOnTheKeepAlive: with a checkpoint interval longer
// than the keep-alive, the continuation of delivered batches is written by the next renew
// (one write for both), not held until the host stops.
func TestProcessor_CheckpointInterval_RidesOnTheKeepAlive(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		src := feedtest.NewMemSource(1)
		docs := &leaseWrites{Documents: leases.NewMemDocuments("/id")}
		opts := fastOptions("a")
		opts.RenewInterval, opts.Expiration = 200*time.Millisecond, 2*time.Second
		opts.CheckpointInterval = time.Hour
		var delivered atomic.Int64
		var last atomic.Value
		h := startHost(t, src, docs, feed.HandlerFunc(func(_ context.Context, b feed.Batch) error {
			delivered.Add(int64(len(b.Items)))
			last.Store(b.Continuation)
			return nil
		}), opts)
		writeDocs(t, src, 0, 5)
		waitFor(t, 5*time.Second, "five documents delivered", func() bool { return delivered.Load() == 5 })
		want := last.Load().(string)
		waitFor(t, 5*time.Second, "the continuation written by a renew", func() bool {
			return listLeases(t, docs)[0].Continuation == want
		})
		waitFor(t, 5*time.Second, "the checkpoint event of the renew's write", func() bool { return len(h.ev.of(feed.EventCheckpoint)) >= 1 })
		if g := docs.gap(); g >= opts.Expiration {
			t.Errorf("the lease went %s without a write, want less than the expiration", g)
		}
	})
}
