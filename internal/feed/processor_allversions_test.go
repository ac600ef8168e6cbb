package feed_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/feed/feedtest"
	"github.com/cfp-dev/cfp/internal/leases"
)

// avadOptions are fastOptions for an all-versions-and-deletes processor (which starts from now).
func avadOptions(instance string) feed.ProcessorOptions {
	o := fastOptions(instance)
	o.Mode = feed.AllVersionsAndDeletes
	o.StartFrom = feed.StartFrom{Kind: feed.StartNow}
	return o
}

// itemCollector is a handler that keeps every item it was given, in delivery order.
type itemCollector struct {
	mu    sync.Mutex
	items []json.RawMessage
}

func (c *itemCollector) Handle(_ context.Context, b feed.Batch) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.items = append(c.items, b.Items...)
	return nil
}

func (c *itemCollector) snapshot() []json.RawMessage {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]json.RawMessage(nil), c.items...)
}

// avadMeta is the part of an all-versions item the tests check.
type avadMeta struct {
	Current  map[string]any `json:"current"`
	Previous map[string]any `json:"previous"`
	Metadata struct {
		OperationType string `json:"operationType"`
		LSN           int64  `json:"lsn"`
		ID            string `json:"id"`
	} `json:"metadata"`
}

func decodeAVAD(t *testing.T, raw json.RawMessage) avadMeta {
	t.Helper()
	var m avadMeta
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("item %s: %v", raw, err)
	}
	return m
}

func TestProcessor_AllVersionsDeliversCreateReplaceDelete(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		src := feedtest.NewMemSource(1)
		docs := leases.NewMemDocuments("/id")
		// Written before the processor starts: "now" must skip it.
		if _, err := src.Write("pk", []byte(`{"id":"before"}`)); err != nil {
			t.Fatal(err)
		}
		c := &itemCollector{}
		hs := startHost(t, src, docs, c, avadOptions("avad-1"))
		// The first read fixes "now" for the lease; changes after it must all come.
		waitFor(t, 10*time.Second, "the lease's first read", func() bool { return src.Reads() > 0 })
		created, err := src.Write("pk", []byte(`{"id":"x","v":1}`))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := src.Write("pk", []byte(`{"id":"x","v":2}`)); err != nil {
			t.Fatal(err)
		}
		if err := src.Delete("pk", "x"); err != nil {
			t.Fatal(err)
		}
		last, _ := src.LSN("0")
		waitFor(t, 10*time.Second, "three items", func() bool { return len(c.snapshot()) >= 3 })
		waitFor(t, 10*time.Second, "the checkpoint of the delete", func() bool {
			for _, e := range hs.ev.of(feed.EventCheckpoint) {
				if e.Continuation == fmt.Sprintf(`"%d"`, last) {
					return true
				}
			}
			return false
		})
		if err := hs.stop(t); err != nil {
			t.Fatal(err)
		}

		got := c.snapshot()
		if len(got) != 3 {
			t.Fatalf("got %d items, want create, replace and delete:\n%s", len(got), bytes.Join(rawSlice(got), []byte("\n")))
		}
		wantOps := []string{feed.OperationCreate, feed.OperationReplace, feed.OperationDelete}
		for i, raw := range got {
			m := decodeAVAD(t, raw)
			if m.Metadata.OperationType != wantOps[i] || m.Metadata.LSN != created+int64(i) {
				t.Errorf("item %d: %s at LSN %d, want %s at %d", i, m.Metadata.OperationType, m.Metadata.LSN, wantOps[i], created+int64(i))
			}
		}
		if del := decodeAVAD(t, got[2]); del.Metadata.ID != "x" || del.Previous["v"] != 2.0 {
			t.Errorf("delete item lacks its identity or previous image: %s", got[2])
		}
		// The items are the feed's own bytes, envelope and all.
		page, err := src.ReadPage(ctx, feed.ReadRequest{PartitionID: "0", Mode: feed.AllVersionsAndDeletes,
			Start: feed.StartFrom{Kind: feed.StartContinuation, Continuation: fmt.Sprintf(`"%d"`, created-1)}})
		if err != nil {
			t.Fatal(err)
		}
		for i := range page.Items {
			if !bytes.Equal(page.Items[i], got[i]) {
				t.Errorf("item %d delivered as\n%s\nthe feed returned\n%s", i, got[i], page.Items[i])
			}
		}

		ls := listLeases(t, docs)
		if len(ls) != 1 {
			t.Fatalf("%d leases, want 1", len(ls))
		}
		if ls[0].Mode != leases.ModeFullFidelity || ls[0].Continuation != fmt.Sprintf(`"%d"`, last) {
			t.Errorf("lease mode %q continuation %s, want %q and \"%d\"", ls[0].Mode, ls[0].Continuation, leases.ModeFullFidelity, last)
		}
		d, err := docs.Read(ctx, ls[0].ID, ls[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(d.Body, []byte(`"Mode":"Full-Fidelity Feed"`)) {
			t.Errorf("lease document lacks .NET's all-versions mode: %s", d.Body)
		}
	})
}

func rawSlice(items []json.RawMessage) [][]byte {
	out := make([][]byte, len(items))
	for i, it := range items {
		out[i] = it
	}
	return out
}

func TestProcessor_AllVersionsTakesOverDotNetLeases(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		src := feedtest.NewMemSource(2)
		writeDocs(t, src, 0, 40)
		for i := 0; i < 40; i += 4 {
			if err := src.Delete(fmt.Sprintf("pk%d", i), fmt.Sprintf("doc%d", i)); err != nil {
				t.Fatal(err)
			}
		}
		writeDocs(t, src, 1, 40) // replaces (doc1, doc2, ...), and creates again doc4, doc8, ...
		parts, err := src.Partitions(ctx)
		if err != nil {
			t.Fatal(err)
		}

		// Expected: per partition, every version after half its LSN, as the feed serves it.
		docs := leases.NewMemDocuments("/id")
		want := map[string][]json.RawMessage{}
		cuts := map[string]int64{}
		total := 0
		for _, part := range parts {
			lsn, _ := src.LSN(part.ID)
			cuts[part.ID] = lsn / 2
			cont := fmt.Sprintf(`"%d"`, lsn/2)
			page, err := src.ReadPage(ctx, feed.ReadRequest{PartitionID: part.ID, Mode: feed.AllVersionsAndDeletes, MaxItems: 1000,
				Start: feed.StartFrom{Kind: feed.StartContinuation, Continuation: cont}})
			if err != nil {
				t.Fatal(err)
			}
			want[part.ID] = page.Items
			total += len(page.Items)
			body := fmt.Sprintf(`{"id":%q,"version":0,"LeaseToken":%q,"FeedRange":{"Range":{"min":%q,"max":%q}},"Owner":"dotnet-avad-1","ContinuationToken":%q,"properties":{},"timestamp":%q,"Mode":"Full-Fidelity Feed"}`,
				leases.LeaseID(testPrefix, part.ID), part.ID, part.Range.Min, part.Range.Max, cont, time.Now().Add(-24*time.Hour).UTC().Format(time.RFC3339)) // expired a day ago (the bubble's clock starts in 2000)
			if _, err := docs.Create(ctx, leases.LeaseID(testPrefix, part.ID), []byte(body)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := docs.Create(ctx, leases.InfoID(testPrefix), fmt.Appendf(nil, `{"id":%q}`, leases.InfoID(testPrefix))); err != nil {
			t.Fatal(err)
		}

		var mu sync.Mutex
		got := map[string][]json.RawMessage{}
		h := feed.HandlerFunc(func(_ context.Context, b feed.Batch) error {
			mu.Lock()
			defer mu.Unlock()
			got[b.LeaseToken] = append(got[b.LeaseToken], b.Items...)
			return nil
		})
		hs := startHost(t, src, docs, h, avadOptions("cfp-avad"))
		waitFor(t, 10*time.Second, "every version after the .NET continuations", func() bool {
			mu.Lock()
			defer mu.Unlock()
			n := 0
			for _, items := range got {
				n += len(items)
			}
			return n >= total
		})
		if err := hs.stop(t); err != nil {
			t.Fatal(err)
		}

		deletes := 0
		for id, items := range want {
			if len(got[id]) != len(items) {
				t.Errorf("lease %s: %d items, want %d", id, len(got[id]), len(items))
				continue
			}
			for i := range items {
				if !bytes.Equal(got[id][i], items[i]) {
					t.Errorf("lease %s item %d: got %s, want %s", id, i, got[id][i], items[i])
				}
				m := decodeAVAD(t, got[id][i])
				if m.Metadata.LSN <= cuts[id] {
					t.Errorf("lease %s: LSN %d at or before the continuation %d delivered again", id, m.Metadata.LSN, cuts[id])
				}
				if m.Metadata.OperationType == feed.OperationDelete {
					deletes++
				}
			}
		}
		if deletes == 0 {
			t.Error("no delete delivered; the fixture should put some after the continuations")
		}
		for _, l := range listLeases(t, docs) {
			lsn, _ := src.LSN(l.Token)
			if l.Mode != leases.ModeFullFidelity || l.Continuation != fmt.Sprintf(`"%d"`, lsn) || l.Owner != "" || l.Family != leases.FamilyDotNetV0 {
				t.Errorf("lease %s: %s mode %q continuation %s owner %q, want a released v0 all-versions lease at \"%d\"",
					l.Token, l.Family, l.Mode, l.Continuation, l.Owner, lsn)
			}
		}
	})
}

func TestProcessor_ModeMismatchIsRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, leaseMode     string
		procMode            feed.FeedMode
		wantProc, wantLease string
	}{
		{"latest processor on all-versions leases", leases.ModeFullFidelity, feed.LatestVersion, leases.ModeIncremental, leases.ModeFullFidelity},
		{"all-versions processor on latest leases", leases.ModeIncremental, feed.AllVersionsAndDeletes, leases.ModeFullFidelity, leases.ModeIncremental},
		{"all-versions processor on leases without a mode", "", feed.AllVersionsAndDeletes, leases.ModeFullFidelity, leases.ModeIncremental},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			store := leases.NewStore(leases.NewMemDocuments("/id"), testPrefix, leases.StoreOptions{})
			if _, err := store.Create(ctx, leases.NewDotNetV0(testPrefix, "0", leases.FullRange, tc.leaseMode)); err != nil {
				t.Fatal(err)
			}
			if err := store.MarkInitialized(ctx); err != nil {
				t.Fatal(err)
			}
			o := avadOptions("m")
			o.Mode = tc.procMode
			src := feedtest.NewMemSource(1)
			p, err := feed.NewProcessor(src, store, &itemCollector{}, o)
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.Bootstrap(ctx)
			var mm *feed.ModeMismatchError
			if !errors.As(err, &mm) {
				t.Fatalf("Bootstrap = %v, want a *ModeMismatchError", err)
			}
			if mm.LeaseMode != tc.wantLease || mm.ProcessorMode != tc.wantProc || mm.Lease != "0" {
				t.Errorf("mismatch %+v, want lease 0 in %q, processor %q", mm, tc.wantLease, tc.wantProc)
			}
			if src.Reads() != 0 {
				t.Errorf("%d reads after a refused start", src.Reads())
			}
		})
	}
}

func TestProcessorOptions_AllVersionsStartsFromNowOnly(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		for _, tc := range []struct {
			start feed.StartFrom
			ok    bool
		}{
			{feed.StartFrom{Kind: feed.StartNow}, true},
			{feed.StartFrom{Kind: feed.StartBeginning}, false},
			{feed.StartFrom{Kind: feed.StartTime, Time: time.Now().Add(-time.Hour)}, false},
		} {
			o := avadOptions("v")
			o.StartFrom = tc.start
			err := o.WithDefaults().Validate()
			if (err == nil) != tc.ok {
				t.Errorf("start %s: Validate() = %v, want ok=%v", feed.FormatStart(tc.start), err, tc.ok)
			}
		}
		if m := fastOptions("l").WithDefaults().Mode; m != feed.LatestVersion {
			t.Errorf("default Mode = %s, want latest", m)
		}
	})
}
