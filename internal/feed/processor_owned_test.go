package feed_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/feed/feedtest"
	"github.com/cfp-dev/cfp/internal/leases"
)

// steal makes owner the owner of the lease token, as a .NET host's steal does.
func steal(t testing.TB, docs leases.Documents, token, owner string) {
	t.Helper()
	store := leases.NewStore(docs, testPrefix, leases.StoreOptions{})
	for _, l := range listLeases(t, docs) {
		if l.Token == token {
			if _, err := store.Acquire(context.Background(), l, owner); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("no lease %s", token)
}

// keepRenewing renews the leases owner holds every interval until the test ends, as a live
// .NET host does.
func keepRenewing(t testing.TB, docs leases.Documents, owner string, interval time.Duration) {
	t.Helper()
	store := leases.NewStore(docs, testPrefix, leases.StoreOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			ls, err := store.List(ctx)
			if err != nil {
				continue
			}
			for _, l := range ls {
				if l.Owner == owner {
					_, _ = store.Renew(ctx, l, owner)
				}
			}
		}
	}()
}

// ownedElsewhere returns the leases in p's Owned() whose documents name another owner.
func ownedElsewhere(t testing.TB, docs leases.Documents, p *feed.Processor) []string {
	t.Helper()
	owner := map[string]string{}
	for _, l := range listLeases(t, docs) {
		owner[l.Token] = l.Owner
	}
	var out []string
	for _, tok := range p.Owned() {
		if owner[tok] != p.Options().Instance {
			out = append(out, tok+" (owner "+owner[tok]+")")
		}
	}
	return out
}

// TestProcessor_ListingRevealsAStolenLease has a .NET host steal an idle lease from a cfp host
// whose next renew of it is far away (KeepAlive, 43s with the defaults) and that writes no
// checkpoint (no changes): the host's next listing shows the new owner, and the host stops
// the lease's worker and drops it from Owned() then, instead of processing the range next to
// its new owner until that renew. The .NET host owns leases from the start, so the cfp host
// never settles and lists every lease each cycle (a settled host's quiet cycles read only the
// presence records, see processor_calm.go).
func TestProcessor_ListingRevealsAStolenLease(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		src := feedtest.NewMemSource(4)
		docs := leases.NewMemDocuments("/id")
		opts := fastOptions("a")
		opts.RenewInterval, opts.Expiration = feed.DefaultRenewInterval, feed.DefaultExpiration
		// The lease set exists, and the .NET host owns leases 2 and 3 before a starts.
		ctx := context.Background()
		store := leases.NewStore(docs, testPrefix, leases.StoreOptions{})
		parts, err := src.Partitions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, part := range parts {
			l := leases.NewDotNetV0(testPrefix, part.ID, part.Range, leases.ModeIncremental)
			if part.ID == "2" || part.ID == "3" {
				l.Owner, l.Timestamp = "dotnet-host", time.Now()
			}
			if _, err := store.Create(ctx, l); err != nil {
				t.Fatal(err)
			}
		}
		if err := store.MarkInitialized(ctx); err != nil {
			t.Fatal(err)
		}
		keepRenewing(t, docs, "dotnet-host", 100*time.Millisecond)
		a := startHost(t, src, docs, newRecorder(0).handler("a"), opts)
		waitFor(t, 5*time.Second, "a to hold leases 0 and 1", func() bool {
			o := a.p.Owned()
			slices.Sort(o)
			return slices.Equal(o, []string{"0", "1"})
		})
		time.Sleep(10 * opts.AcquireInterval) // a few cycles at its share

		steal(t, docs, "0", "dotnet-host")
		waitFor(t, 5*time.Second, "a to learn that lease 0 was stolen", func() bool {
			return len(a.ev.of(feed.EventLost)) > 0
		})
		if got := a.ev.of(feed.EventLost)[0].Lease; got != "0" {
			t.Fatalf("lost lease %s, want 0", got)
		}
		// a takes one lease back from the .NET host, the .NET way; whatever it holds then, its
		// Owned() agrees with the lease documents.
		waitFor(t, 5*time.Second, "a to hold two leases again", func() bool { return ownerCounts(listLeases(t, docs))["a"] == 2 })
		waitFor(t, 5*time.Second, "a's Owned() to match the lease documents", func() bool {
			return len(a.p.Owned()) == 2 && len(ownedElsewhere(t, docs, a.p)) == 0
		})
	})
}

// TestProcessor_OwnedDropsALostLeaseWhoseHandlerIsStuck has a handler that ignores its
// context hold a batch while a .NET host steals the lease: the cfp host learns of it at its
// next renew and must drop the lease from Owned() then, though the worker only ends once the
// handler returns, and that late batch writes no checkpoint. Summed over hosts, Owned() must
// not count a lease twice for longer than it takes a host to learn that it lost it.
func TestProcessor_OwnedDropsALostLeaseWhoseHandlerIsStuck(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		src := feedtest.NewMemSource(2)
		docs := leases.NewMemDocuments("/id")
		opts := fastOptions("a")
		opts.Expiration = 2 * time.Second // the renewer writes every renew interval (40ms)
		inBatch, release := make(chan struct{}), make(chan struct{})
		var once, released sync.Once
		unstick := func() { released.Do(func() { close(release) }) }
		a := startHost(t, src, docs, feed.HandlerFunc(func(ctx context.Context, b feed.Batch) error {
			if b.LeaseToken == "0" {
				once.Do(func() {
					close(inBatch)
					<-release // ignores ctx
				})
			}
			return nil
		}), opts)
		t.Cleanup(unstick) // before the host stops
		waitFor(t, 5*time.Second, "a to hold both leases", func() bool { return len(a.p.Owned()) == 2 })
		writeDocs(t, src, 0, 20)
		<-inBatch
		before := ""
		for _, l := range listLeases(t, docs) {
			if l.Token == "0" {
				before = l.Continuation
			}
		}

		steal(t, docs, "0", "dotnet-host")
		keepRenewing(t, docs, "dotnet-host", 100*time.Millisecond)
		waitFor(t, 5*time.Second, "lease 0 to leave a's Owned() while its handler is stuck", func() bool {
			return !slices.Contains(a.p.Owned(), "0")
		})
		if bad := ownedElsewhere(t, docs, a.p); len(bad) > 0 {
			t.Fatalf("a counts leases another host owns: %v", bad)
		}
		unstick()
		waitFor(t, 5*time.Second, "the lost event", func() bool { return len(a.ev.of(feed.EventLost)) == 1 })
		for _, l := range listLeases(t, docs) {
			if l.Token == "0" && (l.Owner != "dotnet-host" || l.Continuation != before) {
				t.Fatalf("lease 0 after the stuck batch: owner %q continuation %q, want dotnet-host's, unchanged %q", l.Owner, l.Continuation, before)
			}
		}
	})
}

// renewFirst is a lease container in which the first write of the lease id that names owner
// "a" finds the lease renewed by its owner just before (between a's listing and its acquire).
type renewFirst struct {
	leases.Documents
	id, owner string
	once      sync.Once
	renewed   chan struct{}
}

func (r *renewFirst) Replace(ctx context.Context, id, pk, ifMatch string, body []byte) (leases.Document, error) {
	if id == r.id && strings.Contains(string(body), `"Owner":"a"`) {
		r.once.Do(func() {
			store := leases.NewStore(r.Documents, testPrefix, leases.StoreOptions{})
			ls, _ := store.List(ctx)
			for _, l := range ls {
				if l.ID == r.id {
					if _, err := store.Renew(ctx, l, r.owner); err == nil {
						close(r.renewed)
					}
				}
			}
		})
	}
	return r.Documents.Replace(ctx, id, pk, ifMatch, body)
}

// TestProcessor_DoesNotTakeALeaseRenewedSinceItsListing lists a lease that looks expired, and
// its owner, a cfp host, renews it before the acquire is written: the acquire's If-Match
// fails, the re-read shows the owner's fresh write, and the host must leave the lease to its
// owner (and ask for its share of x's leases, as from any live cfp owner) instead of
// overwriting the renew.
func TestProcessor_DoesNotTakeALeaseRenewedSinceItsListing(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		src := feedtest.NewMemSource(2)
		mem := leases.NewMemDocuments("/id")
		ctx := context.Background()
		store := leases.NewStore(mem, testPrefix, leases.StoreOptions{})
		parts, err := src.Partitions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// x holds both leases; lease 0 looks expired in a's first listing.
		var l *leases.Lease
		for i, part := range parts {
			c := leases.NewDotNetV0(testPrefix, part.ID, part.Range, leases.ModeIncremental)
			c.Owner, c.Timestamp = "x", time.Now()
			if i == 0 {
				c.Timestamp, l = time.Now().Add(-time.Hour), c
			}
			if _, err := store.Create(ctx, c); err != nil {
				t.Fatal(err)
			}
		}
		if err := store.MarkInitialized(ctx); err != nil {
			t.Fatal(err)
		}
		// x is a live cfp host (a presence record) that keeps renewing its lease from now on.
		if _, err := store.Announce(ctx, "x", time.Hour); err != nil {
			t.Fatal(err)
		}
		docs := &renewFirst{Documents: mem, id: l.ID, owner: "x", renewed: make(chan struct{})}
		opts := fastOptions("a")
		a := startHost(t, src, docs, newRecorder(0).handler("a"), opts)
		select {
		case <-docs.renewed:
		case <-time.After(5 * time.Second):
			t.Fatal("a never tried to acquire the expired lease")
		}
		keepRenewing(t, mem, "x", 100*time.Millisecond)
		// a's share is one of x's two leases: it asks for one, which it would not, holding one
		// already, had it overwritten x's renew.
		waitFor(t, 5*time.Second, "a to ask x for a lease", func() bool {
			return slices.ContainsFunc(listLeases(t, mem), func(l *leases.Lease) bool { return l.Properties["cfpHandoff"] == "x>a" })
		})
		if got := a.p.Owned(); len(got) != 0 {
			t.Fatalf("a holds %v, want nothing yet: x renewed lease 0 before a's acquire", got)
		}
		for _, c := range listLeases(t, mem) {
			if c.Token == l.Token && c.Owner != "x" {
				t.Fatalf("lease %s owner %q, want x", c.Token, c.Owner)
			}
		}
	})
}
