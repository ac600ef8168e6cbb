package leases_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/cfp-dev/cfp/internal/leases"
)

// TestStore_ListDecodesOnlyChangedLeases checks that listing an unchanged lease set again costs
// a fraction of the first listing (every acquire cycle of every host lists every lease; with
// 1,000 leases on 50 hosts decoding them was most of the processors' CPU), while each listing
// still shows the stored documents as they are and every caller gets leases of its own.
// (Not parallel: testing.AllocsPerRun.)
func TestStore_ListDecodesOnlyChangedLeases(t *testing.T) {
	ctx := context.Background()
	s, docs, _ := newTestStore(t, "/id")
	for i := range 200 {
		createLease(t, s, fmt.Sprint(i))
	}
	listsOf := func(s *leases.Store) map[string]func() []*leases.Lease {
		return map[string]func() []*leases.Lease{
			"List": func() []*leases.Lease {
				ls, err := s.List(ctx)
				if err != nil {
					t.Fatal(err)
				}
				return ls
			},
			"ListWithHosts": func() []*leases.Lease {
				ls, _, err := s.ListWithHosts(ctx)
				if err != nil {
					t.Fatal(err)
				}
				return ls
			},
		}
	}
	lists := listsOf(s)
	for name, list := range lists {
		first := testing.AllocsPerRun(3, func() { listsOf(leases.NewStore(docs, testPrefix, leases.StoreOptions{}))[name]() })
		again := testing.AllocsPerRun(5, func() { list() })
		t.Logf("%s: %.0f allocations per lease the first time, %.0f again", name, first/200, again/200)
		if again > first/4 {
			t.Errorf("%s of 200 unchanged leases: %.0f allocations, the first listing %.0f; want at most a quarter (a listing that decodes every lease again costs about as much as the first)", name, again, first)
		}
	}

	// A caller's changes to its leases are its own.
	ls := lists["ListWithHosts"]()
	ls[0].Owner = "mine"
	ls[0].Properties = map[string]string{"x": "y"}
	for name, list := range lists {
		if l := list()[0]; l.Owner != "" || len(l.Properties) != 0 {
			t.Errorf("%s after a caller changed its copy: owner %q, properties %v", name, l.Owner, l.Properties)
		}
	}
	// A write shows at the next listing.
	got := lists["List"]()
	if _, err := s.Acquire(ctx, got[7], "host-a"); err != nil {
		t.Fatal(err)
	}
	for name, list := range lists {
		if l := list()[7]; l.Owner != "host-a" || l.ETag == got[7].ETag {
			t.Errorf("%s after an acquire: owner %q, ETag %s (was %s); want host-a and a new ETag", name, l.Owner, l.ETag, got[7].ETag)
		}
	}
}
