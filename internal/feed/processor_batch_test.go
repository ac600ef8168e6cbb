package feed_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/feed/feedtest"
	"github.com/cfp-dev/cfp/internal/leases"
)

// TestProcessor_BatchCarriesTheLeaseCheckpoint checks Batch.Checkpoint, which a delegate
// restarted after a crash is told (exec-lines "initialize"): empty before the first checkpoint,
// then the continuation of the last batch checkpointed, also on the redelivery of a failed batch.
func TestProcessor_BatchCarriesTheLeaseCheckpoint(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		src := feedtest.NewMemSource(1)
		docs := leases.NewMemDocuments("/id")
		writeDocs(t, src, 0, 9)
		var (
			mu      sync.Mutex
			got     []feed.Batch
			failed  bool
			handled int
		)
		opts := fastOptions("a")
		opts.MaxItems = 3
		startHost(t, src, docs, feed.HandlerFunc(func(_ context.Context, b feed.Batch) error {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, b)
			if len(got) == 2 && !failed {
				failed = true
				return errors.New("try again")
			}
			handled += len(b.Items)
			return nil
		}), opts)
		waitFor(t, 10*time.Second, "9 documents", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return handled == 9
		})
		mu.Lock()
		defer mu.Unlock()
		if len(got) != 4 {
			t.Fatalf("%d deliveries, want 4 (3 batches, one of them twice)", len(got))
		}
		want := []string{"", got[0].Continuation, got[0].Continuation, got[2].Continuation}
		for i, b := range got {
			if b.Checkpoint != want[i] {
				t.Errorf("delivery %d (attempt %d): checkpoint %q, want %q", i+1, b.Attempt, b.Checkpoint, want[i])
			}
		}
	})
}
