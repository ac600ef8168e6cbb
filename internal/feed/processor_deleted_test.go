package feed_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/feed/feedtest"
	"github.com/cfp-dev/cfp/internal/leases"
)

// deletedFixture runs one host (default intervals) over two leases and returns it with its
// store, its log and a channel with Run's result.
func deletedFixture(t *testing.T) (*feed.Processor, *leases.Store, *events, *syncBuffer, chan error, context.CancelFunc) {
	t.Helper()
	src := feedtest.NewMemSource(2)
	store := leases.NewStore(leases.NewMemDocuments("/id"), testPrefix, leases.StoreOptions{})
	logs := &syncBuffer{}
	ev := &events{}
	opts := feed.ProcessorOptions{Instance: "a", StartFrom: feed.StartFrom{Kind: feed.StartBeginning},
		Logger: slog.New(slog.NewTextHandler(logs, nil)), Notify: ev.add}
	p, err := feed.NewProcessor(src, store, feed.HandlerFunc(func(context.Context, feed.Batch) error { return nil }), opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	time.Sleep(2 * feed.DefaultAcquireInterval)
	synctest.Wait()
	if len(p.Owned()) != 2 {
		t.Fatalf("owned %v, want both leases", p.Owned())
	}
	return p, store, ev, logs, done, cancel
}

// TestProcessor_ALeaseSetDeletedUnderTheHostStopsIt: `cfp leases delete --force` under a
// running host deleted its leases, the .info marker and its presence record; the host's
// workers stopped at their next renew with an Info line nobody sees, and the host idled for
// ever. Now it warns, and its next acquire cycle ends Run with a *LeaseSetDeletedError.
func TestProcessor_ALeaseSetDeletedUnderTheHostStopsIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, store, ev, logs, done, cancel := deletedFixture(t)
		defer cancel()
		if err := store.DeleteAll(context.Background()); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			var gone *feed.LeaseSetDeletedError
			if !errors.As(err, &gone) || len(gone.Leases) == 0 {
				t.Fatalf("Run() = %v, want a *LeaseSetDeletedError", err)
			}
		case <-time.After(feed.DefaultExpiration + 2*feed.DefaultAcquireInterval):
			t.Fatal("the host still runs an expiration after its lease set was deleted")
		}
		lost := 0
		for _, e := range ev.of(feed.EventLost) {
			var ll *leases.LeaseLostError
			if errors.As(e.Err, &ll) && ll.Gone {
				lost++
			}
		}
		if lost == 0 {
			t.Error("no lost event says a lease was deleted")
		}
		if out := logs.String(); !strings.Contains(out, "level=WARN msg=\"lease deleted while this host held it") {
			t.Errorf("no warning about the deleted lease:\n%s", out)
		}
	})
}

// TestProcessor_ALeaseDeletedUnderTheHostIsReported: one lease document deleted by hand (the
// .info marker stays) leaves its range without a lease; the host keeps its other lease and
// says, at ERROR, which range nobody reads.
func TestProcessor_ALeaseDeletedUnderTheHostIsReported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, store, _, logs, done, cancel := deletedFixture(t)
		ls, err := store.List(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Delete(context.Background(), ls[0]); err != nil {
			t.Fatal(err)
		}
		time.Sleep(feed.DefaultExpiration + 2*feed.DefaultAcquireInterval)
		synctest.Wait()
		if owned := p.Owned(); len(owned) != 1 || owned[0] != ls[1].Token {
			t.Errorf("owned %v, want only %s", owned, ls[1].Token)
		}
		if out := logs.String(); !strings.Contains(out, "level=ERROR msg=\"a lease was deleted under this host") || !strings.Contains(out, "lease="+ls[0].Token) {
			t.Errorf("no error naming the deleted lease %s:\n%s", ls[0].Token, out)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run() = %v", err)
		}
	})
}
