package cosmos

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/internal/epk"
	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/leases"
)

// TestTail_MergeWhileTailing: a tail through azcosmos over two partitions that merge mid-tail,
// while more changes arrive, delivers every change exactly once: each old range goes on from its
// own position on the merged partition, restricted to its EPK range.
func TestTail_MergeWhileTailing(t *testing.T) {
	t.Parallel()
	a := openLocal(t, 2)
	c := newFeedContainer(t, a)
	want := upsert(t, c, somePKs, 0, 300)
	seen := map[string]int{}
	merged := false
	var gone []feed.Partition
	sum, err := feed.Tail(context.Background(), c, feed.TailOptions{
		Start: feed.StartFrom{Kind: feed.StartBeginning}, ExitAtEnd: true, PageSize: 40, Poll: time.Millisecond,
	}, func(ch feed.Change) error {
		seen[idOf(ch.Item)]++
		if len(seen) == 100 && !merged {
			merged = true
			gone = partitions(t, c)
			if _, err := a.Emulator().Merge("db", "orders", []string{"0", "1"}); err != nil {
				return err
			}
			want = append(want, upsert(t, c, somePKs, 300, 30)...)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Tail() error = %v", err)
	}
	if sum.Merges != 1 || sum.Splits != 0 || sum.Ranges != 2 {
		t.Errorf("summary: %d merges, %d splits, %d ranges; want one merge, both ranges moved to the merged partition", sum.Merges, sum.Splits, sum.Ranges)
	}
	for _, id := range want {
		if seen[id] != 1 {
			t.Errorf("%s delivered %d times, want once", id, seen[id])
		}
	}
	if len(seen) != len(want) {
		t.Errorf("delivered %d distinct changes, want %d", len(seen), len(want))
	}
	// The saved state resumes each old range on the merged partition.
	if len(sum.State.Ranges) != 2 {
		t.Fatalf("final state has %d ranges, want 2: %+v", len(sum.State.Ranges), sum.State)
	}
	for i, rs := range sum.State.Ranges {
		if rs.PartitionID != "2" || rs.Range != gone[i].Range || rs.Continuation == "" {
			t.Errorf("state range %d = %+v, want partition 2 over %s with a continuation", i, rs, gone[i].Range)
		}
	}
}

// mergeFixture is a container over two partitions with a lease container.
type mergeFixture struct {
	acct   *Account
	orders *Container
	store  *leases.Store
}

func newMergeFixture(t *testing.T) *mergeFixture {
	t.Helper()
	ctx := context.Background()
	a := openLocal(t, 2)
	orders := newFeedContainer(t, a)
	if _, err := a.CreateContainerIfNotExists(ctx, "db", "leases", "/id", nil); err != nil {
		t.Fatalf("create lease container: %v", err)
	}
	info, err := orders.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	prefix := leases.Prefix("merge", a.Host(), info.DatabaseRID, info.ContainerRID)
	return &mergeFixture{acct: a, orders: orders, store: leases.NewStore(a.LeaseDocuments("db", "leases"), prefix, leases.StoreOptions{})}
}

// process runs a processor until every id of want was handled, and returns how often each id
// was handled and the tokens of the leases it replaced after a split or merge.
func (fx *mergeFixture) process(t *testing.T, want []string, during func(handled int)) (map[string]int, []string) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var mu sync.Mutex
	seen := map[string]int{}
	var replaced []string
	done := make(chan struct{})
	missing := func() int {
		n := 0
		for _, id := range want {
			if seen[id] == 0 {
				n++
			}
		}
		return n
	}
	p, err := feed.NewProcessor(fx.orders, fx.store, feed.HandlerFunc(func(_ context.Context, b feed.Batch) error {
		mu.Lock()
		defer mu.Unlock()
		for _, it := range b.Items {
			seen[idOf(it)]++
		}
		if during != nil {
			during(len(seen))
		}
		if missing() == 0 {
			select {
			case <-done:
			default:
				close(done)
			}
		}
		return nil
	}), feed.ProcessorOptions{
		Instance: "host-1", StartFrom: feed.StartFrom{Kind: feed.StartBeginning}, MaxItems: 20,
		AcquireInterval: 20 * time.Millisecond, RenewInterval: 100 * time.Millisecond, PollInterval: 5 * time.Millisecond,
		ErrorBackoff: 5 * time.Millisecond, MaxErrorBackoff: 50 * time.Millisecond,
		Notify: func(e feed.Event) {
			if e.Type == feed.EventSplit || e.Type == feed.EventMerge {
				mu.Lock()
				replaced = append(replaced, e.Lease)
				mu.Unlock()
			}
		},
	})
	if err != nil {
		t.Fatalf("NewProcessor() error = %v", err)
	}
	runErr := make(chan error, 1)
	go func() { runErr <- p.Run(ctx) }()
	select {
	case <-done:
	case err := <-runErr:
		t.Fatalf("Run() ended early: %v", err)
	case <-time.After(30 * time.Second):
		mu.Lock()
		n := missing()
		mu.Unlock()
		stop()
		<-runErr
		t.Fatalf("processor still misses %d of %d changes", n, len(want))
	}
	// Let the last checkpoints land before stopping (Run flushes them anyway).
	stop()
	if err := <-runErr; err != nil {
		t.Fatalf("Run() error = %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	return seen, replaced
}

// TestProcessor_MergeLosesNothingAndLeavesEPKLeases: a processor with .NET v0 leases over two
// partitions that merge while it runs handles every change, and ends with one v1 lease per old
// range ("<min>-<max>", the parent's continuation), the v0 leases deleted, reading the merged
// partition with the EPK range; the estimator measures their lag (no sentinel): 0 when caught
// up, the number of changes written since for a range that has some.
func TestProcessor_MergeLosesNothingAndLeavesEPKLeases(t *testing.T) {
	t.Parallel()
	fx := newMergeFixture(t)
	ctx := context.Background()
	before := partitions(t, fx.orders)
	want := upsert(t, fx.orders, somePKs, 0, 200)
	var mergeErr error
	mergedOnce := false
	seen, replaced := fx.process(t, want, func(handled int) {
		if handled >= 60 && !mergedOnce {
			mergedOnce = true
			_, mergeErr = fx.acct.Emulator().Merge("db", "orders", []string{"0", "1"})
		}
	})
	if mergeErr != nil {
		t.Fatalf("Merge() error = %v", mergeErr)
	}
	for _, id := range want {
		if seen[id] == 0 {
			t.Errorf("%s never handled", id)
		}
	}
	// Writes after the merge reach the new leases too. A lease whose changes were all delivered
	// before the merge learns of it at its next read, which the first run may end before (CI,
	// loaded, saw only lease 1 replaced): this run takes every lease past it.
	more := upsert(t, fx.orders, somePKs, 200, 40)
	seen, again := fx.process(t, more, nil)
	replaced = append(replaced, again...)
	slices.Sort(replaced)
	if !slices.Equal(replaced, []string{"0", "1"}) {
		t.Errorf("leases replaced: %v, want both v0 leases 0 and 1", replaced)
	}
	for _, id := range more {
		if seen[id] == 0 {
			t.Errorf("%s (written after the merge) never handled", id)
		}
	}

	ls, err := fx.store.List(ctx)
	slices.SortFunc(ls, func(a, b *leases.Lease) int { return a.Range.Compare(b.Range) }) // listing order is not range order
	if err != nil {
		t.Fatalf("List() error = %v", err)
	}
	if len(ls) != 2 {
		t.Fatalf("leases after the merge: %d, want 2", len(ls))
	}
	for i, l := range ls {
		wantToken := before[i].Range.Min + "-" + before[i].Range.Max
		if l.Family != leases.FamilyDotNetV1 || l.Token != wantToken || l.Range != before[i].Range {
			t.Errorf("lease %d: family %v token %q range %s, want a v1 lease %q over %s", i, l.Family, l.Token, l.Range, wantToken, before[i].Range)
		}
		if l.Continuation == "" {
			t.Errorf("lease %s has no continuation", l.Token)
		}
		if strings.Contains(l.ID, "..0") || strings.Contains(l.ID, "..1") {
			t.Errorf("lease %s is a v0 lease of a merged partition", l.ID)
		}
	}

	lags, _, err := feed.Estimate(ctx, fx.orders, ls, feed.EstimateOptions{})
	if err != nil {
		t.Fatalf("Estimate() error = %v", err)
	}
	for _, l := range lags {
		if l.Sentinel != "" || l.Lag != 0 || l.PartitionID != "2" {
			t.Errorf("caught-up lease %s: lag %d sentinel %q partition %q, want 0 measured on partition 2", l.Token, l.Lag, l.Sentinel, l.PartitionID)
		}
	}
	// Pending changes in the first old range only.
	var pk string
	for _, p := range somePKs {
		if before[0].Range.Contains(epk.HashV2([]any{p})) {
			pk = p
			break
		}
	}
	if pk == "" {
		t.Fatal("no test partition key falls in the first range")
	}
	upsert(t, fx.orders, []string{pk}, 300, 3)
	lags, sum, err := feed.Estimate(ctx, fx.orders, ls, feed.EstimateOptions{})
	if err != nil {
		t.Fatalf("Estimate() error = %v", err)
	}
	// The new changes have LSNs above every merged partition's, so the .NET formula (latest -
	// first pending + 1) counts exactly them.
	if lags[0].Sentinel != "" || lags[0].Lag != 3 || lags[0].OldestPending.IsZero() {
		t.Errorf("lease %s with 3 pending changes: lag %d sentinel %q oldest %v, want a measured lag of 3", lags[0].Token, lags[0].Lag, lags[0].Sentinel, lags[0].OldestPending)
	}
	if lags[1].Sentinel != "" || lags[1].Lag != 0 {
		t.Errorf("lease %s without pending changes: lag %d sentinel %q, want 0", lags[1].Token, lags[1].Lag, lags[1].Sentinel)
	}
	if sum.TotalLag != lags[0].Lag {
		t.Errorf("total lag = %d, want %d", sum.TotalLag, lags[0].Lag)
	}
}

// TestProcessor_MergeOfLeasesWithoutFeedRange: .NET v0 leases without a FeedRange (written by a
// pre-FeedRange v3 library) over two partitions that merge while a processor runs. The acquire
// fills the range in from the partition key ranges and writes it with the same replace, as .NET
// does, so the merge replaces both leases by EPK leases and every change is delivered; the
// estimator then measures the backlog on the merged partition. Before, the split handler
// retried "lease 0 has no range to merge" forever: 92 of 200 changes were delivered and the
// estimator reported a lag of 1 per lease.
func TestProcessor_MergeOfLeasesWithoutFeedRange(t *testing.T) {
	t.Parallel()
	fx := newMergeFixture(t)
	ctx := context.Background()
	before := partitions(t, fx.orders)
	for _, p := range before {
		l := leases.NewDotNetV0(fx.store.Prefix(), p.ID, leases.Range{}, "")
		if _, err := fx.store.Create(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	if err := fx.store.MarkInitialized(ctx); err != nil {
		t.Fatal(err)
	}
	want := upsert(t, fx.orders, somePKs, 0, 200)
	var mergeErr error
	mergedOnce := false
	seen, replaced := fx.process(t, want, func(handled int) {
		if handled >= 60 && !mergedOnce {
			mergedOnce = true
			_, mergeErr = fx.acct.Emulator().Merge("db", "orders", []string{"0", "1"})
		}
	})
	if mergeErr != nil {
		t.Fatalf("Merge() error = %v", mergeErr)
	}
	n := 0
	for _, id := range want {
		if seen[id] > 0 {
			n++
		}
	}
	if n != len(want) {
		t.Errorf("%d of %d changes delivered", n, len(want))
	}
	// A lease whose changes were all delivered before the merge learns of the merge at its next
	// read, which the run may end before (CI, loaded, saw only lease 1 replaced): a second run
	// over changes written after the merge takes every lease past it.
	_, again := fx.process(t, upsert(t, fx.orders, somePKs, 200, 40), nil)
	replaced = append(replaced, again...)
	slices.Sort(replaced)
	if !slices.Equal(replaced, []string{"0", "1"}) {
		t.Errorf("leases replaced: %v, want both range-less v0 leases 0 and 1", replaced)
	}
	ls, err := fx.store.List(ctx)
	slices.SortFunc(ls, func(a, b *leases.Lease) int { return a.Range.Compare(b.Range) }) // listing order is not range order
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 2 {
		t.Fatalf("%d leases after the merge, want 2", len(ls))
	}
	for i, l := range ls {
		if l.Family != leases.FamilyDotNetV1 || l.Range != before[i].Range {
			t.Errorf("lease %d: %s %s over %s, want a v1 lease over %s", i, l.Family, l.Token, l.Range, before[i].Range)
		}
	}
	// A backlog written while no host runs is measured, not hidden behind the sentinel 1.
	upsert(t, fx.orders, somePKs, 300, 10)
	lags, sum, err := feed.Estimate(ctx, fx.orders, ls, feed.EstimateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lags {
		if l.Sentinel != "" {
			t.Errorf("lease %s: sentinel %q, want a measured lag", l.Token, l.Sentinel)
		}
	}
	if sum.TotalLag < 10 {
		t.Errorf("total lag %d after 10 pending changes, want at least 10", sum.TotalLag)
	}
}

// TestProcessor_SplitThenMergeWhileDownLeavesNoOverlap: while no host runs, partition 0 splits
// and its upper child merges with partition 1. The host that starts next replaces lease 0 by a
// v0 lease of the lower child and an EPK lease over the parent's part of the merged partition
// (not a v0 lease over the whole merged partition, which overlapped lease 1's EPK successor and
// delivered that range twice on every run: 1235 deliveries for 1000 changes). So 1000 new
// changes are delivered with at most one batch of duplicates and the lease set has no overlap.
func TestProcessor_SplitThenMergeWhileDownLeavesNoOverlap(t *testing.T) {
	t.Parallel()
	fx := newMergeFixture(t)
	ctx := context.Background()
	first := upsert(t, fx.orders, somePKs, 0, 50)
	fx.process(t, first, nil)

	em := fx.acct.Emulator()
	children, err := em.Split("db", "orders", "0")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := em.Merge("db", "orders", []string{children[1], "1"}); err != nil {
		t.Fatal(err)
	}
	want := upsert(t, fx.orders, somePKs, 100, 1000)
	seen, _ := fx.process(t, want, nil)
	deliveries := 0
	for _, id := range want {
		deliveries += seen[id]
	}
	// MaxItems is 20: one batch in flight when the processor stopped may come again.
	if deliveries > len(want)+20 {
		t.Errorf("%d deliveries of %d changes, want at most one batch (20) of duplicates", deliveries, len(want))
	}
	ls, err := fx.store.List(ctx)
	slices.SortFunc(ls, func(a, b *leases.Lease) int { return a.Range.Compare(b.Range) }) // listing order is not range order
	if err != nil {
		t.Fatal(err)
	}
	var parts []leases.Partition
	for _, p := range partitions(t, fx.orders) {
		parts = append(parts, leases.Partition{ID: p.ID, Range: p.Range, Parents: p.Parents})
	}
	for _, f := range leases.Check(ls, time.Now(), time.Minute, leases.WithPartitions(parts)) {
		if f.Kind == leases.FindingOverlap || f.Kind == leases.FindingGap {
			t.Errorf("lease set after the split and the merge: %s %v: %s", f.Kind, f.Tokens, f.Message)
		}
	}
	var tokens []string
	for _, l := range ls {
		tokens = append(tokens, string(l.Family)+" "+l.Token)
	}
	t.Logf("leases: %v; %d deliveries of %d changes", tokens, deliveries, len(want))
}

// TestContainer_ReadPage_TimeAfterMerge starts from a time on a merged partition: cfp must
// announce the capability the service needs (else 400) and get exactly the changes since then.
func TestContainer_ReadPage_TimeAfterMerge(t *testing.T) {
	t.Parallel()
	a := openLocal(t, 2)
	c := newFeedContainer(t, a)
	before := upsert(t, c, somePKs, 0, 8)
	// _ts has one-second resolution: wait for the next second before the second batch.
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + 10*time.Millisecond)))
	cut := time.Now().Truncate(time.Second)
	after := upsert(t, c, somePKs, 8, 8)
	merged, err := a.Emulator().Merge("db", "orders", []string{"0", "1"})
	if err != nil {
		t.Fatal(err)
	}
	read := func(t0 time.Time) []string {
		ids, _ := drain(t, c, feed.ReadRequest{PartitionID: merged, Start: feed.StartFrom{Kind: feed.StartTime, Time: t0}, MaxItems: 3})
		return sorted(ids)
	}
	if got := read(cut.Add(-time.Hour)); !slices.Equal(got, sorted(append(before, after...))) {
		t.Errorf("read of the merged partition from an hour ago = %v, want everything", got)
	}
	if got := read(cut); !slices.Equal(got, sorted(after)) {
		t.Errorf("read of the merged partition from %s = %v, want %v", cut, got, sorted(after))
	}
}

// TestPartitions_MergedPartitionNamesBothParents: after a merge the listed partition names both
// merged partitions as parents, which is how the split handler finds the partition that
// replaced a Java PK-range lease's partition (such a lease has no range to look it up by).
func TestPartitions_MergedPartitionNamesBothParents(t *testing.T) {
	t.Parallel()
	a := openLocal(t, 2)
	c := newFeedContainer(t, a)
	partitions(t, c) // listed once before, as a running host has
	merged, err := a.Emulator().Merge("db", "orders", []string{"0", "1"})
	if err != nil {
		t.Fatal(err)
	}
	ps := partitions(t, c)
	if len(ps) != 1 || ps[0].ID != merged {
		t.Fatalf("Partitions() after the merge = %+v, want only %s", ps, merged)
	}
	if got := slices.Sorted(slices.Values(ps[0].Parents)); !slices.Equal(got, []string{"0", "1"}) {
		t.Errorf("merged partition %s parents = %v, want [0 1]", merged, got)
	}
}
