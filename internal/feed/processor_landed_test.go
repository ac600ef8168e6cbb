package feed_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/feed/feedtest"
	"github.com/cfp-dev/cfp/internal/leases"
)

// lostAnswerDocs applies the first lease write that names owner and answers it with an error,
// as a request whose response timed out (or a 503 from a gateway after the write) does.
type lostAnswerDocs struct {
	leases.Documents
	owner string
	mu    sync.Mutex
	lost  bool
	at    time.Time // when it lost the answer
}

func (d *lostAnswerDocs) Replace(ctx context.Context, id, pk, ifMatch string, body []byte) (leases.Document, error) {
	doc, err := d.Documents.Replace(ctx, id, pk, ifMatch, body)
	d.mu.Lock()
	defer d.mu.Unlock()
	if err == nil && !d.lost && !strings.Contains(id, ".host.") && strings.Contains(string(body), `"Owner":"`+d.owner+`"`) {
		d.lost, d.at = true, time.Now()
		return leases.Document{}, errors.New("request timed out (the write was applied)")
	}
	return doc, err
}

// TestProcessor_AnAcquireThatLandedIsKept: the host's acquire of a free lease is written, but
// its answer is lost. The lease then names the host, live, and the host, which counted the
// acquire failed, ran no worker for it: every host counted it as this host's and nobody read
// it until it expired. The host reads the lease again after an acquire that failed so, and
// starts its worker when the lease names it.
func TestProcessor_AnAcquireThatLandedIsKept(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		src := feedtest.NewMemSource(1)
		docs := &lostAnswerDocs{Documents: leases.NewMemDocuments("/id"), owner: "a"}
		opts := fastOptions("a")
		opts.AcquireInterval = 2 * time.Second // the next cycle would take it back (planCycle)
		h := startHost(t, src, docs, feed.HandlerFunc(func(context.Context, feed.Batch) error { return nil }), opts)
		waitFor(t, 10*time.Second, "an acquire answer lost", func() bool {
			docs.mu.Lock()
			defer docs.mu.Unlock()
			return docs.lost
		})
		docs.mu.Lock()
		at := docs.at
		docs.mu.Unlock()
		time.Sleep(time.Until(at.Add(opts.AcquireInterval / 4)))
		if ls := listLeases(t, docs); len(ls) != 1 || ls[0].Owner != "a" {
			t.Fatalf("leases %v, want one owned by a", ls)
		}
		if owned := h.p.Owned(); len(owned) != 1 {
			t.Fatalf("a's acquire landed, but a runs workers for %v a quarter cycle later, want the lease", owned)
		}
	})
}
