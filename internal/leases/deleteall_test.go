package leases_test

import (
	"context"
	"testing"
	"time"
)

// TestStore_DeleteAll removes a prefix's leases, markers and host records, in both container
// layouts, leaves another prefix's leases and what under the prefix is not a lease, and is
// idempotent.
func TestStore_DeleteAll(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"/id", "/partitionKey"} {
		t.Run(path, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s, docs, other := newFullSet(t, path, "0", "1", "2")
			stray := `{"id":"` + testPrefix + `..stray","partitionKey":"` + testPrefix + `..stray","note":"not a lease"}`
			if _, err := docs.Put(testPrefix+"..stray", []byte(stray)); err != nil {
				t.Fatal(err)
			}

			for range 2 {
				if err := s.DeleteAll(ctx); err != nil {
					t.Fatalf("DeleteAll: %v", err)
				}
			}
			if ls, err := s.List(ctx); err != nil || len(ls) != 0 {
				t.Errorf("leases after DeleteAll: %v, %v", ls, err)
			}
			if ok, err := s.IsInitialized(ctx); err != nil || ok {
				t.Errorf("IsInitialized after DeleteAll = %v, %v; want false", ok, err)
			}
			if hs, err := s.Hosts(ctx); err != nil || len(hs) != 0 {
				t.Errorf("hosts after DeleteAll: %v, %v", hs, err)
			}
			if ok, _, err := s.TryLock(ctx, 30*time.Second, "host-b"); !ok || err != nil {
				t.Errorf("TryLock after DeleteAll = %v, %v; want the lock free", ok, err)
			}
			if ls, err := other.List(ctx); err != nil || len(ls) != 1 {
				t.Errorf("the other prefix's leases: %v, %v; want its one lease", ls, err)
			}
			// Left: the other prefix's lease, the stray document and host-b's new lock.
			if n := docs.Len(); n != 3 {
				t.Errorf("%d documents left, want 3", n)
			}
		})
	}
}
