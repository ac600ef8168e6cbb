package leases_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/internal/leases"
)

// TestSetOf sorts a whole container's documents into one prefix's set: its leases, markers and
// host records, none of another prefix (one that extends it included), and a document under
// the prefix that is not a lease goes to skip.
func TestSetOf(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, docs, other := newFullSet(t, "/id", "0", "1")
	if err := other.MarkInitialized(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := docs.Put(testPrefix+"..stray", []byte(`{"id":"`+testPrefix+`..stray","note":"not a lease"}`)); err != nil {
		t.Fatal(err)
	}
	all, err := docs.QueryPrefix(ctx, "")
	if err != nil {
		t.Fatal(err)
	}

	var skipped []string
	set := leases.SetOf(all, testPrefix, func(id string, _ error) { skipped = append(skipped, id) })
	if len(set.Leases) != 2 || !set.HasInfo || len(set.Hosts) != 1 || set.Hosts[0].Instance != "host-a" {
		t.Errorf("set = %d leases, info %v, hosts %+v; want 2 leases, the info marker and host-a", len(set.Leases), set.HasInfo, set.Hosts)
	}
	if set.LockTime.IsZero() || set.LockTTL != 30*time.Second {
		t.Errorf("lock = %v, ttl %v; want its _ts and 30s", set.LockTime, set.LockTTL)
	}
	if len(set.Docs) != 5 { // two leases, .info, .lock, the host record
		t.Errorf("%d documents in the set, want 5", len(set.Docs))
	}
	if len(skipped) != 1 || skipped[0] != testPrefix+"..stray" {
		t.Errorf("skipped %v, want the stray document", skipped)
	}
	if o := leases.SetOf(all, other.Prefix(), nil); len(o.Leases) != 1 || !o.HasInfo || len(o.Docs) != 2 {
		t.Errorf("the other prefix's set = %+v, want its one lease and marker", o)
	}
}

// TestSet_DeleteOrder: markers first, then leases in their given order, then host records, so
// an interrupted delete never leaves .info with leases missing.
func TestSet_DeleteOrder(t *testing.T) {
	t.Parallel()
	const p = "pfx"
	docs := []leases.Document{
		{ID: p + "..1"}, {ID: leases.HostID(p, "host-a")}, {ID: leases.InfoID(p)}, {ID: p + "..0"}, {ID: leases.LockID(p)},
	}
	set := leases.Set{Docs: docs}
	var got []string
	for _, d := range set.DeleteOrder(p) {
		got = append(got, d.ID)
	}
	want := []string{leases.InfoID(p), leases.LockID(p), p + "..1", p + "..0", leases.HostID(p, "host-a")}
	if !slices.Equal(got, want) {
		t.Errorf("DeleteOrder() = %v, want %v", got, want)
	}
	if docs[0].ID != p+"..1" {
		t.Errorf("DeleteOrder reordered the set's own documents")
	}
}

// newFullSet makes a lease container (partitioned on path) holding a whole lease set under
// testPrefix: a lease per token, .info, a bootstrap lock and host-a's presence record; and, under
// the prefix that extends it (testPrefix+"x"), another store with lease "0".
func newFullSet(t *testing.T, path string, tokens ...string) (*leases.Store, *leases.MemDocuments, *leases.Store) {
	t.Helper()
	ctx := context.Background()
	s, docs, clk := newTestStore(t, path)
	for _, tok := range tokens {
		createLease(t, s, tok)
	}
	if err := s.MarkInitialized(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, _, err := s.TryLock(ctx, 30*time.Second, "host-a"); !ok || err != nil {
		t.Fatalf("TryLock = %v, %v", ok, err)
	}
	if _, err := s.Announce(ctx, "host-a", time.Minute); err != nil {
		t.Fatal(err)
	}
	other := leases.NewStore(docs, testPrefix+"x", leases.StoreOptions{Now: clk.Now})
	if _, err := other.Create(ctx, leases.NewDotNetV0(other.Prefix(), "0", leases.Range{Min: "", Max: "FF"}, "")); err != nil {
		t.Fatal(err)
	}
	return s, docs, other
}
