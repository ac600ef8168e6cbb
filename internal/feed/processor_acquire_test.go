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

// lateAnswer applies the first replace that makes "late" a lease's owner, then holds the answer
// until the test says so and answers ctx's error if ctx ended meanwhile: the write reached the
// store but the caller saw only its context end, as over a network.
type lateAnswer struct {
	leases.Documents
	once    sync.Once
	entered chan struct{}
	proceed chan struct{}
}

func (d *lateAnswer) Replace(ctx context.Context, id, pk, ifMatch string, body []byte) (leases.Document, error) {
	doc, err := d.Documents.Replace(ctx, id, pk, ifMatch, body)
	held := false
	if err == nil && strings.Contains(string(body), `"Owner":"late"`) {
		d.once.Do(func() { held = true })
	}
	if held {
		close(d.entered)
		<-d.proceed
		if ctx.Err() != nil {
			return leases.Document{}, ctx.Err()
		}
	}
	return doc, err
}

// An acquire whose write landed while the host was stopping must not leave the lease owned by
// the stopped host until it expires (TestProcess_OnErrorStopExitsOneAndReleasesLeases found it).
func TestProcessor_AcquireCutOffByShutdownLeavesNothingOwned(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		src := feedtest.NewMemSource(2)
		docs := &lateAnswer{Documents: leases.NewMemDocuments("/id"), entered: make(chan struct{}), proceed: make(chan struct{})}
		opts := fastOptions("late")
		h := startHost(t, src, docs, feed.HandlerFunc(func(context.Context, feed.Batch) error { return nil }), opts)
		select {
		case <-docs.entered:
		case <-time.After(10 * time.Second):
			t.Fatal("no acquire reached the store")
		}
		h.cancel() // shut down while the acquire's answer is in flight
		time.Sleep(20 * time.Millisecond)
		close(docs.proceed)
		if err := h.stop(t); err != nil {
			t.Fatalf("Run = %v", err)
		}
		for _, l := range listLeases(t, docs.Documents) {
			if l.Owner != "" {
				t.Errorf("lease %s still owned by %q after the host stopped", l.Token, l.Owner)
			}
		}
	})
}
