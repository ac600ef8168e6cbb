package feedtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/leases"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func ids(t *testing.T, items []json.RawMessage) []string {
	t.Helper()
	var out []string
	for _, it := range items {
		var v struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(it, &v); err != nil {
			t.Fatalf("item %s: %v", it, err)
		}
		out = append(out, v.ID)
	}
	return out
}

func mustWrite(t *testing.T, m *MemSource, pk, id string) int64 {
	t.Helper()
	lsn, err := m.Write(pk, fmt.Appendf(nil, `{"id":%q,"pk":%q}`, id, pk))
	if err != nil {
		t.Fatal(err)
	}
	return lsn
}

func read(t *testing.T, m *MemSource, req feed.ReadRequest) feed.Page {
	t.Helper()
	p, err := m.ReadPage(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// pkIn returns a partition-key value whose EPK falls in the given partition.
func pkIn(t *testing.T, m *MemSource, partitionID string, n int) string {
	t.Helper()
	parts, _ := m.Partitions(context.Background())
	for _, p := range parts {
		if p.ID != partitionID {
			continue
		}
		for i := n; i < n+10000; i++ {
			pk := fmt.Sprintf("k%d", i)
			if p.Range.Contains(EPK(pk)) {
				return pk
			}
		}
	}
	t.Fatalf("no key for partition %s", partitionID)
	return ""
}

func TestMemSource_PartitionsTileKeySpace(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 2, 3, 4, 7} {
		parts, err := NewMemSource(n).Partitions(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(parts) != n {
			t.Fatalf("n=%d: %d partitions", n, len(parts))
		}
		if parts[0].Range.Min != "" || parts[n-1].Range.Max != "FF" {
			t.Fatalf("n=%d: ends %v %v", n, parts[0].Range, parts[n-1].Range)
		}
		for i := 1; i < n; i++ {
			if parts[i].Range.Min != parts[i-1].Range.Max {
				t.Fatalf("n=%d: gap between %v and %v", n, parts[i-1].Range, parts[i].Range)
			}
		}
	}
}

func TestMemSource_LatestVersion(t *testing.T) {
	t.Parallel()
	m := NewMemSource(1, WithClock(func() time.Time { return t0 }))
	mustWrite(t, m, "a", "x")
	mustWrite(t, m, "a", "y")
	mustWrite(t, m, "a", "x") // update: x moves to LSN 3
	mustWrite(t, m, "b", "z")
	if err := m.Delete("b", "z"); err != nil {
		t.Fatal(err)
	}
	p := read(t, m, feed.ReadRequest{PartitionID: "0", Start: feed.StartFrom{Kind: feed.StartBeginning}})
	if got := ids(t, p.Items); fmt.Sprint(got) != "[y x]" {
		t.Fatalf("items = %v, want [y x]", got)
	}
	if p.Continuation != `"3"` || p.LatestLSN != 5 || p.NotModified {
		t.Fatalf("page = %+v", p)
	}
	var v struct {
		LSN int64 `json:"_lsn"`
		TS  int64 `json:"_ts"`
	}
	_ = json.Unmarshal(p.Items[1], &v)
	if v.LSN != 3 || v.TS != t0.Unix() {
		t.Fatalf("system properties = %+v", v)
	}
	// From the continuation: nothing new, position moves to the current LSN.
	p = read(t, m, feed.ReadRequest{PartitionID: "0", Start: feed.StartFrom{Kind: feed.StartContinuation, Continuation: p.Continuation}})
	if len(p.Items) != 0 || !p.NotModified || p.Continuation != `"5"` {
		t.Fatalf("caught-up page = %+v", p)
	}
	if err := m.Delete("b", "z"); !errors.Is(err, feed.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
}

func TestMemSource_StartPositions(t *testing.T) {
	t.Parallel()
	clock := NewClock(t0)
	m := NewMemSource(1, WithClock(clock.Now))
	mustWrite(t, m, "a", "old")
	clock.Advance(time.Minute)
	mustWrite(t, m, "a", "new")

	now := read(t, m, feed.ReadRequest{PartitionID: "0", Start: feed.StartFrom{Kind: feed.StartNow}})
	if len(now.Items) != 0 || now.Continuation != `"2"` {
		t.Fatalf("now: %+v", now)
	}
	tm := read(t, m, feed.ReadRequest{PartitionID: "0", Start: feed.StartFrom{Kind: feed.StartTime, Time: t0.Add(30 * time.Second)}})
	if got := ids(t, tm.Items); fmt.Sprint(got) != "[new]" {
		t.Fatalf("time: %v", got)
	}
	c := read(t, m, feed.ReadRequest{PartitionID: "0", Start: feed.StartFrom{Kind: feed.StartContinuation, Continuation: `"1"`}})
	if got := ids(t, c.Items); fmt.Sprint(got) != "[new]" {
		t.Fatalf("continuation: %v", got)
	}
	if _, err := m.ReadPage(context.Background(), feed.ReadRequest{PartitionID: "0", Start: feed.StartFrom{Kind: feed.StartContinuation, Continuation: "bogus"}}); err == nil {
		t.Fatal("bogus continuation accepted")
	}
}

func TestMemSource_PageSizeAndScopes(t *testing.T) {
	t.Parallel()
	m := NewMemSource(2)
	a := pkIn(t, m, "0", 0)
	b := pkIn(t, m, "0", 1000)
	for i := range 5 {
		mustWrite(t, m, a, fmt.Sprintf("a%d", i))
		mustWrite(t, m, b, fmt.Sprintf("b%d", i))
	}
	p := read(t, m, feed.ReadRequest{PartitionID: "0", Start: feed.StartFrom{Kind: feed.StartBeginning}, MaxItems: 3})
	if got := ids(t, p.Items); fmt.Sprint(got) != "[a0 b0 a1]" || p.Continuation != `"3"` {
		t.Fatalf("page of 3: %v %s", got, p.Continuation)
	}
	pk, _ := json.Marshal([]string{b})
	p = read(t, m, feed.ReadRequest{PartitionKey: pk, Start: feed.StartFrom{Kind: feed.StartBeginning}})
	if got := ids(t, p.Items); fmt.Sprint(got) != "[b0 b1 b2 b3 b4]" {
		t.Fatalf("by partition key: %v", got)
	}
	// An EPK sub-range holding only a's key.
	sub := leases.Range{Min: EPK(a), Max: EPK(a) + "01"}
	p = read(t, m, feed.ReadRequest{PartitionID: "0", Range: sub, Start: feed.StartFrom{Kind: feed.StartBeginning}})
	if got := ids(t, p.Items); fmt.Sprint(got) != "[a0 a1 a2 a3 a4]" {
		t.Fatalf("by sub-range: %v", got)
	}
	p = read(t, m, feed.ReadRequest{PartitionID: "1", Start: feed.StartFrom{Kind: feed.StartBeginning}})
	if len(p.Items) != 0 || p.LatestLSN != 0 {
		t.Fatalf("other partition: %+v", p)
	}
}

func TestMemSource_Split(t *testing.T) {
	t.Parallel()
	m := NewMemSource(1)
	var written []string
	for i := range 40 {
		id := fmt.Sprintf("d%d", i)
		mustWrite(t, m, fmt.Sprintf("pk%d", i), id)
		written = append(written, id)
	}
	mid := read(t, m, feed.ReadRequest{PartitionID: "0", Start: feed.StartFrom{Kind: feed.StartBeginning}, MaxItems: 10})
	children, err := m.Split("0")
	if err != nil {
		t.Fatal(err)
	}
	if len(children) != 2 {
		t.Fatalf("children = %v", children)
	}
	_, err = m.ReadPage(context.Background(), feed.ReadRequest{PartitionID: "0", Start: feed.StartFrom{Kind: feed.StartBeginning}})
	var gone *feed.RangeGoneError
	if !errors.As(err, &gone) || gone.PartitionID != "0" {
		t.Fatalf("read of parent: %v", err)
	}
	parts, _ := m.Partitions(context.Background())
	if len(parts) != 2 || parts[0].Range.Min != "" || parts[1].Range.Max != "FF" || parts[0].Range.Max != parts[1].Range.Min {
		t.Fatalf("partitions after split = %+v", parts)
	}
	if fmt.Sprint(parts[0].Parents) != "[0]" {
		t.Fatalf("parents = %v", parts[0].Parents)
	}
	// Children from the parent's continuation deliver exactly the rest.
	got := map[string]bool{}
	for _, id := range ids(t, mid.Items) {
		got[id] = true
	}
	for _, c := range children {
		lsn, _ := m.LSN(c)
		if lsn != 40 {
			t.Fatalf("child %s LSN = %d, want inherited 40", c, lsn)
		}
		p := read(t, m, feed.ReadRequest{PartitionID: c, Start: feed.StartFrom{Kind: feed.StartContinuation, Continuation: mid.Continuation}})
		for _, id := range ids(t, p.Items) {
			if got[id] {
				t.Fatalf("%s delivered twice", id)
			}
			got[id] = true
		}
	}
	for _, id := range written {
		if !got[id] {
			t.Fatalf("%s lost across the split", id)
		}
	}
	// New writes go to the child that holds the key, with LSNs after the inherited counter.
	lsn := mustWrite(t, m, "pk0", "after")
	if lsn != 41 {
		t.Fatalf("LSN after split = %d", lsn)
	}
	if _, err := m.Split("0"); err == nil {
		t.Fatal("split of a gone partition succeeded")
	}
}

// TestMemSource_Merge: after a merge each parent's continuation, read over the parent's range on
// the merged partition, delivers exactly the parent's remaining changes and the new ones.
func TestMemSource_Merge(t *testing.T) {
	t.Parallel()
	m := NewMemSource(2)
	var written []string
	for i := range 60 {
		id := fmt.Sprintf("d%d", i)
		mustWrite(t, m, fmt.Sprintf("pk%d", i), id)
		written = append(written, id)
	}
	parts, _ := m.Partitions(context.Background())
	got := map[string]int{}
	conts := map[string]string{}
	for _, p := range parts {
		pg := read(t, m, feed.ReadRequest{PartitionID: p.ID, Start: feed.StartFrom{Kind: feed.StartBeginning}, MaxItems: 5})
		for _, id := range ids(t, pg.Items) {
			got[id]++
		}
		conts[p.ID] = pg.Continuation
	}
	merged, err := m.Merge("1", "0")
	if err != nil {
		t.Fatal(err)
	}
	after, _ := m.Partitions(context.Background())
	if len(after) != 1 || after[0].ID != merged || after[0].Range != leases.FullRange || fmt.Sprint(after[0].Parents) != "[0 1]" {
		t.Fatalf("partitions after merge = %+v", after)
	}
	if _, err := m.ReadPage(context.Background(), feed.ReadRequest{PartitionID: "0", Start: feed.StartFrom{Kind: feed.StartBeginning}}); !feed.IsRangeGone(err) {
		t.Fatalf("read of a merged parent: %v", err)
	}
	for i := range 10 {
		id := fmt.Sprintf("n%d", i)
		mustWrite(t, m, fmt.Sprintf("npk%d", i), id)
		written = append(written, id)
	}
	for _, p := range parts {
		pg := read(t, m, feed.ReadRequest{PartitionID: merged, Range: p.Range, Start: feed.StartFrom{Kind: feed.StartContinuation, Continuation: conts[p.ID]}, MaxItems: 1000})
		for _, id := range ids(t, pg.Items) {
			got[id]++
		}
	}
	for _, id := range written {
		if got[id] != 1 {
			t.Errorf("%s delivered %d times across the merge, want once", id, got[id])
		}
	}
	if _, err := m.Merge(merged, "0"); err == nil {
		t.Fatal("merge with a gone partition succeeded")
	}
}

func TestMemSource_Fail(t *testing.T) {
	t.Parallel()
	m := NewMemSource(1)
	boom := &feed.ThrottledError{Status: 429, RetryAfter: time.Second}
	m.Fail(2, boom)
	for range 2 {
		if _, err := m.ReadPage(context.Background(), feed.ReadRequest{PartitionID: "0"}); !errors.Is(err, boom) {
			t.Fatalf("err = %v", err)
		}
	}
	if _, err := m.ReadPage(context.Background(), feed.ReadRequest{PartitionID: "0"}); err != nil {
		t.Fatal(err)
	}
	if m.Reads() != 3 {
		t.Fatalf("reads = %d", m.Reads())
	}
}

func TestMemSource_ConcurrentWritesAndReads(t *testing.T) {
	t.Parallel()
	m := NewMemSource(4)
	ctx := context.Background()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 200 {
			if _, err := m.Write(fmt.Sprintf("k%d", i%17), fmt.Appendf(nil, `{"id":"%d"}`, i)); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for range 50 {
		if _, err := m.ReadPage(ctx, feed.ReadRequest{PartitionID: "1", Start: feed.StartFrom{Kind: feed.StartBeginning}}); err != nil {
			t.Fatal(err)
		}
	}
	<-done
}

func TestMemSource_Conformance(t *testing.T) {
	t.Parallel()
	RunSourceSuite(t, func(t *testing.T) Fixture {
		m := NewMemSource(3)
		return Fixture{
			Source: m,
			Write:  func(pk string, doc []byte) error { _, err := m.Write(pk, doc); return err },
			Split:  func(id string) error { _, err := m.Split(id); return err },
		}
	})
}

// TestMemSource_MergedPagesKeepEveryChange: the two parents of a merge count LSNs from the
// same split point, so the merged partition holds changes of equal LSN; a page never ends
// between two of them (the service returns one LSN's changes together), else the next page,
// which starts after that LSN, would skip the rest of them.
func TestMemSource_MergedPagesKeepEveryChange(t *testing.T) {
	ctx := context.Background()
	m := NewMemSource(1, WithClock(func() time.Time { return t0 }))
	if _, err := m.Split("0"); err != nil {
		t.Fatal(err)
	}
	ps, err := m.Partitions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The service's keys lie below "40": split the lower child again, so that both halves of
	// the merge get writes.
	kids, err := m.Split(ps[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	ps, err = m.Partitions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	per := map[string]int{}
	for i := 0; len(want) < 12 && i < 10000; i++ {
		pk := fmt.Sprintf("k%d", i)
		for _, p := range ps[:2] {
			if p.Range.Contains(EPK(pk)) && per[p.ID] < 6 {
				per[p.ID]++
				id := fmt.Sprintf("doc%d", i)
				if _, err := m.Write(pk, fmt.Appendf(nil, `{"id":%q}`, id)); err != nil {
					t.Fatal(err)
				}
				want[id] = true
			}
		}
	}
	merged, err := m.Merge(kids[0], kids[1])
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	start := feed.StartFrom{Kind: feed.StartBeginning}
	for range 100 {
		page, err := m.ReadPage(ctx, feed.ReadRequest{PartitionID: merged, Start: start, MaxItems: 1})
		if err != nil {
			t.Fatal(err)
		}
		if page.NotModified {
			break
		}
		for _, id := range ids(t, page.Items) {
			got[id] = true
		}
		start = feed.StartFrom{Kind: feed.StartContinuation, Continuation: page.Continuation}
	}
	for id := range want {
		if !got[id] {
			t.Errorf("%s, written before the merge, was never read from the merged partition", id)
		}
	}
}
