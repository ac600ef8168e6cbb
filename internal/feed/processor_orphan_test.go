package feed_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cfp-dev/cfp/internal/feed/feedtest"
	"github.com/cfp-dev/cfp/internal/leases"
)

// TestProcessor_SplitParentBesideItsChildrenIsRetired: an EPK lease whose split was cut short
// after both children were created (its host could not tell its writes had succeeded and gave
// it up), and whose range a merge then put back in one partition, reads without a 410 again:
// the host that takes it must retire it, not deliver its keys a second time beside the children
// (found by the deployment simulation, internal/feed/sim, seed 59 -only=cfp).
func TestProcessor_SplitParentBesideItsChildrenIsRetired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		src := feedtest.NewMemSource(1)
		docs := leases.NewMemDocuments("/id")
		store := leases.NewStore(docs, testPrefix, leases.StoreOptions{})
		ps, err := src.Partitions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		whole := ps[0].Range
		mid := "20"
		parent := leases.NewDotNetV1(testPrefix, whole, "", "")
		children := []*leases.Lease{
			leases.NewDotNetV1(testPrefix, leases.Range{Min: whole.Min, Max: mid}, "", ""),
			leases.NewDotNetV1(testPrefix, leases.Range{Min: mid, Max: whole.Max}, "", ""),
		}
		for _, l := range append([]*leases.Lease{parent}, children...) {
			if _, err := store.Create(ctx, l); err != nil {
				t.Fatal(err)
			}
		}
		if err := store.MarkInitialized(ctx); err != nil {
			t.Fatal(err)
		}
		writeDocs(t, src, 0, 30)
		rec := newRecorder(0)
		opts := fastOptions("cfp-1")
		opts.AcquireInterval, opts.RenewInterval, opts.Expiration = time.Second, 2*time.Second, 10*time.Second
		h := startHost(t, src, docs, rec.handler("cfp-1"), opts)
		time.Sleep(10 * time.Second)
		for _, l := range listLeases(t, docs) {
			if l.Token == parent.Token {
				t.Errorf("lease %s is still there 10 acquire cycles on, beside its children %s and %s", l.Token, children[0].Token, children[1].Token)
			}
		}
		if n := rec.distinct(); n != 30 {
			t.Errorf("%d of 30 documents delivered", n)
		}
		if err := h.stop(t); err != nil {
			t.Errorf("Run = %v", err)
		}
	})
}
