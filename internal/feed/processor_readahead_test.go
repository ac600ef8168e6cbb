package feed_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/feed/feedtest"
	"github.com/cfp-dev/cfp/internal/leases"
)

// pageCounter counts the pages read.
type pageCounter struct {
	feed.Source
	reads atomic.Int64
}

func (s *pageCounter) ReadPage(ctx context.Context, req feed.ReadRequest) (feed.Page, error) {
	s.reads.Add(1)
	return s.Source.ReadPage(ctx, req)
}

// TestProcessor_ReadsTheNextPageWhileTheHandlerRuns checks that a lease's next page is read
// while its handler (and then its checkpoint) still works on the page before: the handler of
// the first batch waits for a second read.
func TestProcessor_ReadsTheNextPageWhileTheHandlerRuns(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		mem := feedtest.NewMemSource(1)
		writeDocs(t, mem, 0, 30)
		src := &pageCounter{Source: mem}
		var overlapped, waited atomic.Bool
		var handled atomic.Int64
		h := feed.HandlerFunc(func(_ context.Context, b feed.Batch) error {
			if handled.Add(int64(len(b.Items))) == int64(len(b.Items)) { // the first batch
				waited.Store(true)
				for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
					if src.reads.Load() >= 2 {
						overlapped.Store(true)
						break
					}
				}
			}
			return nil
		})
		opts := fastOptions("host-1")
		opts.MaxItems = 10
		hs := startHost(t, src, leases.NewMemDocuments("/id"), h, opts)
		waitFor(t, 10*time.Second, "30 documents handled", func() bool { return handled.Load() >= 30 })
		if err := hs.stop(t); err != nil {
			t.Fatal(err)
		}
		if !waited.Load() || !overlapped.Load() {
			t.Fatalf("the source saw %d reads while the first batch was handled: the next page was not read ahead", src.reads.Load())
		}
	})
}

// TestProcessor_ReadAheadKeepsOrderAcrossFailedBatches checks that the page read ahead of a
// batch that fails is not delivered: the failed batch comes again first, then the rest in order,
// every document handled, checkpointed to the end; also when the failure follows batches held
// back with ErrNoCheckpoint, which come again with it.
func TestProcessor_ReadAheadKeepsOrderAcrossFailedBatches(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		src := feedtest.NewMemSource(1)
		writeDocs(t, src, 0, 40)
		var mu sync.Mutex
		var delivered [][]int // the document numbers of each batch handled, failed or not
		var done []int        // of the batches handled without an error, in order
		calls := 0
		h := feed.HandlerFunc(func(_ context.Context, b feed.Batch) error {
			mu.Lock()
			defer mu.Unlock()
			var ns []int
			for _, it := range b.Items {
				var d struct{ N int }
				if err := json.Unmarshal(it, &d); err != nil {
					t.Error(err)
				}
				ns = append(ns, d.N)
			}
			delivered = append(delivered, ns)
			calls++
			switch calls {
			case 2, 5: // fails once each: it comes again
				return errors.New("delegate failed")
			case 4: // held back: comes again with the failure of the next batch
				done = append(done, ns...)
				return feed.ErrNoCheckpoint
			}
			done = append(done, ns...)
			return nil
		})
		opts := fastOptions("host-1")
		opts.MaxItems = 5
		docs := leases.NewMemDocuments("/id")
		hs := startHost(t, src, docs, h, opts)
		waitFor(t, 10*time.Second, "every document handled", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(done) > 0 && done[len(done)-1] == 39
		})
		waitFor(t, 10*time.Second, "the checkpoint at the end", func() bool {
			ls := listLeases(t, docs)
			lsn, ok := feed.ContinuationLSN(ls[0].Continuation)
			return len(ls) == 1 && ok && lsn == 40
		})
		if err := hs.stop(t); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		// Batch 2 (docs 5-9) fails and comes again; 10-14 are held back, 15-19 fail: the rewind goes
		// to the last checkpoint (after 9), so 10-14 come again, then 15-19 and the rest in order.
		want := [][]int{{0, 1, 2, 3, 4}, {5, 6, 7, 8, 9}, {5, 6, 7, 8, 9}, {10, 11, 12, 13, 14}, {15, 16, 17, 18, 19}, {10, 11, 12, 13, 14}, {15, 16, 17, 18, 19}}
		for i, w := range want {
			if i >= len(delivered) || !equalInts(delivered[i], w) {
				t.Fatalf("batches handled %v, want them to begin %v", delivered, want)
			}
		}
		next := 20
		for _, ns := range delivered[len(want):] {
			for _, n := range ns {
				if n != next {
					t.Fatalf("batches handled %v: after the failures, want 20 to 39 in order", delivered)
				}
				next++
			}
		}
		if next != 40 {
			t.Fatalf("batches handled %v: want 20 to 39 after the failures", delivered)
		}
	})
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// slowCheckpoints is a lease container whose checkpoints (a replace that moves the lease's
// ContinuationToken) take delay; steal makes the first of them find the lease taken by
// another host instead (it writes that owner, then fails the If-Match).
type slowCheckpoints struct {
	*leases.MemDocuments
	delay time.Duration
	steal bool
	log   func(string)

	mu     sync.Mutex
	stolen bool
}

func (d *slowCheckpoints) Replace(ctx context.Context, id, pk, ifMatch string, body []byte) (leases.Document, error) {
	old, err := d.Read(ctx, id, pk)
	if err != nil {
		return leases.Document{}, err
	}
	var was, now struct{ ContinuationToken string }
	_ = json.Unmarshal(old.Body, &was)
	_ = json.Unmarshal(body, &now)
	if now.ContinuationToken == "" || now.ContinuationToken == was.ContinuationToken {
		return d.MemDocuments.Replace(ctx, id, pk, ifMatch, body) // not a checkpoint
	}
	d.log("checkpoint " + now.ContinuationToken + " sent")
	time.Sleep(d.delay)
	d.mu.Lock()
	steal := d.steal && !d.stolen
	d.stolen = d.stolen || steal
	d.mu.Unlock()
	if steal {
		var m map[string]any
		if err := json.Unmarshal(old.Body, &m); err != nil {
			return leases.Document{}, err
		}
		m["Owner"] = "thief"
		b, _ := json.Marshal(m)
		if _, err := d.MemDocuments.Replace(ctx, id, pk, "", b); err != nil {
			return leases.Document{}, err
		}
		d.log("checkpoint " + now.ContinuationToken + " lost")
		return leases.Document{}, leases.ErrPreconditionFailed
	}
	doc, err := d.MemDocuments.Replace(ctx, id, pk, ifMatch, body)
	if err == nil {
		d.log("checkpoint " + now.ContinuationToken + " durable")
	}
	return doc, err
}

// TestProcessor_ReadAheadWaitsForTheCheckpoint pins the order the read ahead keeps: the next
// page is read while the batch before it is checkpointed, but handed to the handler only
// after that checkpoint is durable (at-least-once: a crash between the two delivers the
// checkpointed batch's successor again, never skips it).
func TestProcessor_ReadAheadWaitsForTheCheckpoint(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		mem := feedtest.NewMemSource(1)
		writeDocs(t, mem, 0, 30)
		src := &pageCounter{Source: mem}
		var mu sync.Mutex
		var order []string
		logf := func(s string) {
			mu.Lock()
			order = append(order, s)
			mu.Unlock()
		}
		var readsAtDurable []int64
		docs := &slowCheckpoints{MemDocuments: leases.NewMemDocuments("/id"), delay: 50 * time.Millisecond}
		docs.log = func(s string) {
			logf(s)
			if strings.HasSuffix(s, " durable") {
				mu.Lock()
				readsAtDurable = append(readsAtDurable, src.reads.Load())
				mu.Unlock()
			}
		}
		var handled atomic.Int64
		h := feed.HandlerFunc(func(_ context.Context, b feed.Batch) error {
			logf("deliver " + b.Continuation)
			handled.Add(int64(len(b.Items)))
			return nil
		})
		opts := fastOptions("host-1")
		opts.MaxItems = 10
		hs := startHost(t, src, docs, h, opts)
		waitFor(t, 10*time.Second, "30 documents handled", func() bool { return handled.Load() >= 30 })
		waitFor(t, 10*time.Second, "the last checkpoint", func() bool {
			lsn, ok := feed.ContinuationLSN(listLeases(t, docs.MemDocuments)[0].Continuation)
			return ok && lsn == 30
		})
		if err := hs.stop(t); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		// Each batch comes after the checkpoint of the batch before it was durable.
		durable := map[string]bool{"": true}
		before := ""
		for _, s := range order {
			switch {
			case strings.HasPrefix(s, "deliver "):
				if !durable[before] {
					t.Fatalf("order %q: %q before the checkpoint of %s was durable", order, s, before)
				}
				before = strings.TrimPrefix(s, "deliver ")
			case strings.HasSuffix(s, " durable"):
				durable[strings.TrimSuffix(strings.TrimPrefix(s, "checkpoint "), " durable")] = true
			}
		}
		if len(readsAtDurable) < 3 || readsAtDurable[0] < 2 {
			t.Fatalf("reads when each checkpoint was durable %v: the next page was not read during the checkpoint", readsAtDurable)
		}
	})
}

// TestProcessor_ReadAheadDroppedWhenTheCheckpointFindsTheLeaseLost checks that a page read
// ahead while the checkpoint of the batch before it runs is never delivered when that
// checkpoint finds the lease taken by another host: the worker stops, the handler is told the
// lease was lost, and its next batch is the new owner's.
func TestProcessor_ReadAheadDroppedWhenTheCheckpointFindsTheLeaseLost(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		mem := feedtest.NewMemSource(1)
		writeDocs(t, mem, 0, 30)
		src := &pageCounter{Source: mem}
		var mu sync.Mutex
		var order []string
		logf := func(s string) {
			mu.Lock()
			order = append(order, s)
			mu.Unlock()
		}
		docs := &slowCheckpoints{MemDocuments: leases.NewMemDocuments("/id"), delay: 50 * time.Millisecond, steal: true, log: logf}
		var batches atomic.Int64
		h := feed.HandlerFunc(func(_ context.Context, b feed.Batch) error {
			logf(fmt.Sprintf("deliver %d items after %q", len(b.Items), b.Checkpoint))
			batches.Add(1)
			return nil
		})
		opts := fastOptions("host-1")
		opts.MaxItems = 10
		hs := startHost(t, src, docs, h, opts)
		waitFor(t, 10*time.Second, "the lease lost", func() bool { return len(hs.ev.of(feed.EventLost)) > 0 })
		reads := src.reads.Load()
		time.Sleep(time.Second) // virtual: whatever the worker would still do, it did
		if err := hs.stop(t); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		if batches.Load() != 1 {
			t.Fatalf("order %q: want the first batch only, the page read ahead dropped with the lease", order)
		}
		if reads < 2 {
			t.Fatalf("%d reads before the lease was lost: the next page was not read ahead during the checkpoint", reads)
		}
		if ls := listLeases(t, docs.MemDocuments); ls[0].Owner != "thief" {
			t.Fatalf("lease owner %q after the loss, want the thief's (nothing written over it)", ls[0].Owner)
		}
	})
}
