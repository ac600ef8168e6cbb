package feed_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/feed/feedtest"
	"github.com/cfp-dev/cfp/internal/leases"
)

// namedHost is a processor over a shared source and lease container, with its events.
type namedHost struct {
	p    *feed.Processor
	ev   *events
	done chan error
	stop context.CancelFunc
}

func runNamed(t *testing.T, src feed.Source, docs leases.Documents, instance string) *namedHost {
	t.Helper()
	opts := feed.ProcessorOptions{Instance: instance, StartFrom: feed.StartFrom{Kind: feed.StartBeginning}} // default intervals
	h := &namedHost{ev: &events{}, done: make(chan error, 1)}
	opts.Notify = h.ev.add
	p, err := feed.NewProcessor(src, leases.NewStore(docs, testPrefix, leases.StoreOptions{}),
		feed.HandlerFunc(func(context.Context, feed.Batch) error { return nil }), opts)
	if err != nil {
		t.Fatal(err)
	}
	h.p = p
	ctx, cancel := context.WithCancel(context.Background())
	h.stop = cancel
	go func() { h.done <- p.Run(ctx) }()
	return h
}

// TestProcessor_ASecondHostUnderOneNameRefusesToStart: a host started under the instance name
// of a live host took every lease in that shared name and both processed every change. It
// now sees the running host's presence record refreshed by another process and refuses to
// start, having acquired nothing; the first host keeps its leases.
func TestProcessor_ASecondHostUnderOneNameRefusesToStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := feedtest.NewMemSource(2)
		docs := leases.NewMemDocuments("/id")
		a := runNamed(t, src, docs, "web")
		time.Sleep(2 * feed.DefaultAcquireInterval)
		synctest.Wait()
		if len(a.p.Owned()) != 2 {
			t.Fatalf("first host owns %v, want both leases", a.p.Owned())
		}

		b := runNamed(t, src, docs, "WEB") // instance names match ignoring case, as owners do
		select {
		case err := <-b.done:
			var dup *feed.DuplicateInstanceError
			if !errors.As(err, &dup) || dup.Instance != "WEB" {
				t.Fatalf("second host's Run() = %v, want a *DuplicateInstanceError", err)
			}
		case <-time.After(2 * feed.DefaultExpiration):
			t.Fatal("the second host under the same name still runs after two expirations")
		}
		if n := len(b.ev.of(feed.EventAcquired)); n != 0 {
			t.Errorf("the second host acquired %d leases before it refused", n)
		}
		time.Sleep(2 * feed.DefaultAcquireInterval)
		synctest.Wait()
		if len(a.p.Owned()) != 2 || len(a.ev.of(feed.EventLost)) != 0 {
			t.Errorf("first host owns %v and lost %d leases, want both kept", a.p.Owned(), len(a.ev.of(feed.EventLost)))
		}
		a.stop()
		if err := <-a.done; err != nil {
			t.Errorf("first host's Run() = %v", err)
		}
	})
}

// TestProcessor_TwoHostsStartedTogetherUnderOneNameLeaveOne: two processes started at once
// under one name both found no record; within a few cycles exactly one of them runs, and it
// holds every lease.
func TestProcessor_TwoHostsStartedTogetherUnderOneNameLeaveOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := feedtest.NewMemSource(2)
		docs := leases.NewMemDocuments("/id")
		a := runNamed(t, src, docs, "web")
		b := runNamed(t, src, docs, "web")
		var loser, winner *namedHost
		select {
		case err := <-a.done:
			loser, winner = a, b
			a.done <- err
		case err := <-b.done:
			loser, winner = b, a
			b.done <- err
		case <-time.After(2 * feed.DefaultExpiration):
			t.Fatal("both hosts under one name still run after two expirations")
		}
		var dup *feed.DuplicateInstanceError
		if err := <-loser.done; !errors.As(err, &dup) {
			t.Fatalf("the stopped host's Run() = %v, want a *DuplicateInstanceError", err)
		}
		time.Sleep(feed.DefaultExpiration + 3*feed.DefaultAcquireInterval)
		synctest.Wait()
		if len(winner.p.Owned()) != 2 {
			t.Errorf("the remaining host owns %v, want both leases", winner.p.Owned())
		}
		winner.stop()
		if err := <-winner.done; err != nil {
			t.Errorf("remaining host's Run() = %v", err)
		}
	})
}

// TestProcessor_ARestartAfterACrashIsNotADuplicate: a host restarted under its explicit name
// after a crash finds its previous process's presence record, live but no longer refreshed.
// It waits for the record to expire, then starts and takes back the leases in its name.
func TestProcessor_ARestartAfterACrashIsNotADuplicate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		src := feedtest.NewMemSource(2)
		docs := leases.NewMemDocuments("/id")
		store := leases.NewStore(docs, testPrefix, leases.StoreOptions{})
		parts, err := src.Partitions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, part := range parts {
			l := leases.NewDotNetV0(testPrefix, part.ID, part.Range, "")
			l.Owner, l.Timestamp = "web", time.Now()
			if _, err := store.Create(ctx, l); err != nil {
				t.Fatal(err)
			}
		}
		if err := store.MarkInitialized(ctx); err != nil {
			t.Fatal(err)
		}
		crashed := leases.Host{Instance: "web", Incarnation: "crashed", Since: time.Now().Add(-time.Hour)}
		if _, err := store.AnnounceIncarnation(ctx, crashed, time.Hour); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		h := runNamed(t, src, docs, "web")
		time.Sleep(feed.DefaultExpiration + 2*feed.DefaultAcquireInterval)
		synctest.Wait()
		select {
		case err := <-h.done:
			t.Fatalf("the restarted host stopped: %v", err)
		default:
		}
		if len(h.p.Owned()) != 2 {
			t.Fatalf("the restarted host owns %v %s after its start, want both of its leases back", h.p.Owned(), time.Since(start))
		}
		h.stop()
		if err := <-h.done; err != nil {
			t.Errorf("Run() = %v", err)
		}
	})
}

// TestProcessor_ARestartUnderTheNameInAnotherCaseWaitsForTheCrashedRecord: names match
// ignoring case (a lease of "web" is a lease of "Web"), but the start looked for its previous
// process's presence record by the exact name only. Restarted as "Web" after "web" crashed,
// the host started at once and its first acquire cycle found the live record of an earlier
// start: it stopped with a *DuplicateInstanceError. It now finds the record at start, waits
// for it to expire, and takes the leases back.
func TestProcessor_ARestartUnderTheNameInAnotherCaseWaitsForTheCrashedRecord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		src := feedtest.NewMemSource(2)
		docs := leases.NewMemDocuments("/id")
		store := leases.NewStore(docs, testPrefix, leases.StoreOptions{})
		parts, err := src.Partitions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, part := range parts {
			l := leases.NewDotNetV0(testPrefix, part.ID, part.Range, "")
			l.Owner, l.Timestamp = "web", time.Now()
			if _, err := store.Create(ctx, l); err != nil {
				t.Fatal(err)
			}
		}
		if err := store.MarkInitialized(ctx); err != nil {
			t.Fatal(err)
		}
		crashed := leases.Host{Instance: "web", Incarnation: "crashed", Since: time.Now().Add(-time.Hour)}
		if _, err := store.AnnounceIncarnation(ctx, crashed, time.Hour); err != nil {
			t.Fatal(err)
		}
		h := runNamed(t, src, docs, "Web")
		time.Sleep(feed.DefaultExpiration + 2*feed.DefaultAcquireInterval)
		synctest.Wait()
		select {
		case err := <-h.done:
			t.Fatalf("the host restarted as \"Web\" stopped: %v", err)
		default:
		}
		if len(h.p.Owned()) != 2 {
			t.Fatalf("the restarted host owns %v, want both leases of \"web\" back", h.p.Owned())
		}
		h.stop()
		if err := <-h.done; err != nil {
			t.Errorf("Run() = %v", err)
		}
	})
}
