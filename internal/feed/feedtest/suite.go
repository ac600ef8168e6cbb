package feedtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/leases"
)

// Fixture is one feed.Source under test plus the means to change the container behind it.
type Fixture struct {
	// Source is the implementation under test, over an empty container.
	Source feed.Source
	// Write upserts doc (a JSON object with an "id") under partition-key value pk.
	Write func(pk string, doc []byte) error
	// Split splits a physical partition; nil skips the split checks.
	Split func(partitionID string) error
}

// RunSourceSuite checks the feed.Source contract the engine relies on, against a fresh fixture
// per subtest: partitions tile the key space, every start position, continuations that resume
// without repeats, latest-version updates, page sizes, partition-key scope and, when the
// fixture can split, *feed.RangeGoneError for the parent and exact delivery on the children
// from the parent's continuation.
func RunSourceSuite(t *testing.T, newFixture func(t *testing.T) Fixture) {
	ctx := context.Background()
	beginning := feed.StartFrom{Kind: feed.StartBeginning}
	write := func(t *testing.T, f Fixture, pk, id string, v int) {
		t.Helper()
		if err := f.Write(pk, fmt.Appendf(nil, `{"id":%q,"pk":%q,"v":%d}`, id, pk, v)); err != nil {
			t.Fatalf("write %s: %v", id, err)
		}
	}
	// drain reads a partition to its first empty page and returns the items' ids, the last
	// continuation and the highest _lsn seen.
	drain := func(t *testing.T, src feed.Source, req feed.ReadRequest) ([]string, string, int64) {
		t.Helper()
		var ids []string
		var top int64
		for range 1000 {
			p, err := src.ReadPage(ctx, req)
			if err != nil {
				t.Fatalf("read %+v: %v", req, err)
			}
			if p.Continuation == "" {
				t.Fatalf("page without a continuation: %+v", p)
			}
			req.Start = feed.StartFrom{Kind: feed.StartContinuation, Continuation: p.Continuation}
			if len(p.Items) == 0 {
				if !p.NotModified {
					t.Errorf("empty page not marked NotModified")
				}
				return ids, p.Continuation, top
			}
			for _, it := range p.Items {
				var v struct {
					ID  string `json:"id"`
					LSN int64  `json:"_lsn"`
				}
				if err := json.Unmarshal(it, &v); err != nil {
					t.Fatalf("item %s: %v", it, err)
				}
				if v.LSN <= top {
					t.Errorf("item %s: _lsn %d not after %d", v.ID, v.LSN, top)
				}
				top = v.LSN
				ids = append(ids, v.ID)
			}
			if p.LatestLSN < top {
				t.Errorf("LatestLSN %d below an item's _lsn %d", p.LatestLSN, top)
			}
		}
		t.Fatal("feed never caught up")
		return nil, "", 0
	}
	partitions := func(t *testing.T, src feed.Source) []feed.Partition {
		t.Helper()
		ps, err := src.Partitions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return ps
	}
	all := func(t *testing.T, f Fixture, start feed.StartFrom) ([]string, map[string]string) {
		t.Helper()
		var ids []string
		conts := map[string]string{}
		for _, p := range partitions(t, f.Source) {
			got, c, _ := drain(t, f.Source, feed.ReadRequest{PartitionID: p.ID, Start: start})
			ids = append(ids, got...)
			conts[p.ID] = c
		}
		slices.Sort(ids)
		return ids, conts
	}

	t.Run("PartitionsTileKeySpace", func(t *testing.T) {
		ps := partitions(t, newFixture(t).Source)
		if len(ps) == 0 || ps[0].Range.Min != "" || leases.CompareEPK(ps[len(ps)-1].Range.Max, "FF") != 0 {
			t.Fatalf("partitions do not cover [\"\", FF): %+v", ps)
		}
		for i := 1; i < len(ps); i++ {
			if leases.CompareEPK(ps[i-1].Range.Max, ps[i].Range.Min) != 0 {
				t.Fatalf("gap or overlap between %v and %v", ps[i-1].Range, ps[i].Range)
			}
		}
	})

	t.Run("BeginningContinuationNow", func(t *testing.T) {
		f := newFixture(t)
		for i := range 12 {
			write(t, f, fmt.Sprintf("k%d", i%5), fmt.Sprintf("d%02d", i), 0)
		}
		ids, conts := all(t, f, beginning)
		if len(ids) != 12 {
			t.Fatalf("from the beginning: %v", ids)
		}
		nowIDs, nowConts := all(t, f, feed.StartFrom{Kind: feed.StartNow})
		if len(nowIDs) != 0 {
			t.Fatalf("from now: %v", nowIDs)
		}
		write(t, f, "k1", "new", 0)
		write(t, f, "k3", "d03", 1) // an update of d03 (written under k3)
		for name, cs := range map[string]map[string]string{"continuation": conts, "now": nowConts} {
			var got []string
			for id, c := range cs {
				more, _, _ := drain(t, f.Source, feed.ReadRequest{PartitionID: id, Start: feed.StartFrom{Kind: feed.StartContinuation, Continuation: c}})
				got = append(got, more...)
			}
			slices.Sort(got)
			if !slices.Equal(got, []string{"d03", "new"}) {
				t.Errorf("after %s: %v, want [d03 new]", name, got)
			}
		}
		ids, _ = all(t, f, beginning)
		if len(ids) != 13 {
			t.Errorf("an updated item must appear once: %v", ids)
		}
	})

	t.Run("PageSizeAndPartitionKey", func(t *testing.T) {
		f := newFixture(t)
		for i := range 6 {
			write(t, f, "one", fmt.Sprintf("a%d", i), 0)
			write(t, f, "two", fmt.Sprintf("b%d", i), 0)
		}
		pk, _ := json.Marshal([]string{"two"})
		p, err := f.Source.ReadPage(ctx, feed.ReadRequest{PartitionKey: pk, Start: beginning, MaxItems: 4})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Items) != 4 {
			t.Fatalf("MaxItems 4 gave %d items", len(p.Items))
		}
		ids, _, _ := drain(t, f.Source, feed.ReadRequest{PartitionKey: pk, Start: beginning})
		if !slices.Equal(ids, []string{"b0", "b1", "b2", "b3", "b4", "b5"}) {
			t.Fatalf("by partition key: %v", ids)
		}
	})

	t.Run("SplitFromParentContinuation", func(t *testing.T) {
		f := newFixture(t)
		if f.Split == nil {
			t.Skip("fixture cannot split")
		}
		for i := range 30 {
			write(t, f, fmt.Sprintf("k%d", i), fmt.Sprintf("d%02d", i), 0)
		}
		parent := partitions(t, f.Source)[0]
		want, _, _ := drain(t, f.Source, feed.ReadRequest{PartitionID: parent.ID, Start: beginning})
		first, err := f.Source.ReadPage(ctx, feed.ReadRequest{PartitionID: parent.ID, Start: beginning, MaxItems: 3})
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Split(parent.ID); err != nil {
			t.Fatal(err)
		}
		_, err = f.Source.ReadPage(ctx, feed.ReadRequest{PartitionID: parent.ID, Start: beginning})
		var gone *feed.RangeGoneError
		if !errors.As(err, &gone) {
			t.Fatalf("read of split parent: %v, want *feed.RangeGoneError", err)
		}
		var got []string
		for _, it := range first.Items {
			var v struct {
				ID string `json:"id"`
			}
			if err := json.Unmarshal(it, &v); err != nil {
				t.Fatal(err)
			}
			got = append(got, v.ID)
		}
		children := 0
		for _, c := range partitions(t, f.Source) {
			if !parent.Range.Overlaps(c.Range) {
				continue
			}
			children++
			more, _, _ := drain(t, f.Source, feed.ReadRequest{PartitionID: c.ID, Start: feed.StartFrom{Kind: feed.StartContinuation, Continuation: first.Continuation}})
			got = append(got, more...)
		}
		if children < 2 {
			t.Fatalf("split left %d partitions over the parent's range", children)
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("parent's first page + children = %v, want the parent's items %v", got, want)
		}
	})
}
