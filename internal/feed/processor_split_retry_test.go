package feed_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cfp-dev/cfp/internal/feed/feedtest"
	"github.com/cfp-dev/cfp/internal/leases"
)

// lostChildDocs applies the first create of lease token `child` but answers it with a timeout,
// after holding the answer until the test lets it go: the split's first attempt made the
// child, did not learn it, and retries later.
type lostChildDocs struct {
	leases.Documents
	child string

	mu      sync.Mutex
	done    bool
	entered chan struct{}
	proceed chan struct{}
}

func (d *lostChildDocs) Create(ctx context.Context, pk string, body []byte) (leases.Document, error) {
	doc, err := d.Documents.Create(ctx, pk, body)
	if _, token, ok := leases.SplitID(pk); ok && token == d.child && err == nil {
		d.mu.Lock()
		first := !d.done
		d.done = true
		d.mu.Unlock()
		if first {
			close(d.entered)
			<-d.proceed
			return leases.Document{}, errors.New("request timed out after it was sent")
		}
	}
	return doc, err
}

// TestProcessor_ASplitRetriedAfterTheMapChangedLeavesNoOverlap: a split's first attempt made
// the child lease of partition 2 but lost the answer; before the retry, partition 2 split and
// its halves merged again (partition 5, over 2's keys). The retry made a lease for partition 5
// beside the one for 2, over the same keys, and when 2's lease was handled as a merge, an EPK
// lease over those keys joined 5's: two leases read the same keys for ever. Found by the
// simulation (seed 861 of the full mix). Now the retry leaves the keys an earlier attempt's
// child covers to that child.
func TestProcessor_ASplitRetriedAfterTheMapChangedLeavesNoOverlap(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		src := feedtest.NewMemSource(1)
		docs := &lostChildDocs{Documents: leases.NewMemDocuments("/id"), child: "2",
			entered: make(chan struct{}), proceed: make(chan struct{})}
		writeDocs(t, src, 0, 40)
		rec := newRecorder(0)
		startHost(t, src, docs, rec.handler("a"), fastOptions("a"))
		waitFor(t, 10*time.Second, "the first documents", func() bool { return rec.distinct() == 40 })
		if ids, err := src.Split("0"); err != nil || len(ids) != 2 || ids[1] != "2" {
			t.Fatalf("Split(0) = %v, %v; want children 1 and 2", ids, err)
		}
		<-docs.entered // the first attempt created lease 2; its answer is held
		halves, err := src.Split("2")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := src.Merge(halves[0], halves[1]); err != nil {
			t.Fatal(err)
		}
		close(docs.proceed)
		writeDocs(t, src, 40, 80)
		waitFor(t, 10*time.Second, "every document", func() bool { return rec.distinct() == 80 })
		time.Sleep(2 * time.Second) // every gone lease handled (virtual time: a synctest bubble)
		wantCoverage(t, src, docs)
	})
}

// TestProcessor_AnEPKSplitRetriedAfterAMergeBackLeavesNoOverlap: an EPK lease's partition
// split; the first attempt made the child lease over the lower half but lost the answer;
// before the retry, the two halves merged again, so the parent's range lay in one partition.
// The retry kept the parent and read it from the merged partition, beside the child the first
// attempt made, which the acquire cycle took as a free lease: two leases read the child's keys
// for ever. Found by the simulation (seed 4913 of the full mix: a lost create, then a merge).
// Now the retry replaces the parent by leases over the keys no other lease covers.
func TestProcessor_AnEPKSplitRetriedAfterAMergeBackLeavesNoOverlap(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		src := feedtest.NewMemSource(2) // 0 [""-20), 1 [20-FF) (keys end at 40)
		docs := &lostChildDocs{Documents: leases.NewMemDocuments("/id"), child: "20-28",
			entered: make(chan struct{}), proceed: make(chan struct{})}
		writeDocs(t, src, 0, 40)
		rec := newRecorder(0)
		startHost(t, src, docs, rec.handler("a"), fastOptions("a"))
		waitFor(t, 10*time.Second, "the first documents", func() bool { return rec.distinct() == 40 })
		tokens := func() string {
			var ts []string
			for _, l := range listLeases(t, docs) {
				ts = append(ts, l.Token)
			}
			slices.Sort(ts)
			return strings.Join(ts, " ")
		}
		// 0 splits (children 2 [""-10) and 3 [10-20)), then 3 merges with 1 (4 [10-FF)):
		// leases 3 and 1 become EPK leases over their ranges, 10-20 and 20-FF.
		if _, err := src.Split("0"); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "leases 1, 2 and 3", func() bool { return tokens() == "1 2 3" })
		merged, err := src.Merge("3", "1")
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "EPK leases 10-20 and 20-FF", func() bool { return tokens() == "10-20 2 20-FF" })
		// The merged partition splits at 28: lease 20-FF now spans both halves; its split's
		// first attempt creates 20-28 and its answer is held.
		halves, err := src.Split(merged)
		if err != nil {
			t.Fatal(err)
		}
		<-docs.entered
		if _, err := src.Merge(halves[0], halves[1]); err != nil {
			t.Fatal(err)
		}
		close(docs.proceed)
		writeDocs(t, src, 40, 80)
		waitFor(t, 10*time.Second, "every document", func() bool { return rec.distinct() == 80 })
		time.Sleep(2 * time.Second) // every gone lease handled (virtual time: a synctest bubble)
		wantCoverage(t, src, docs)
	})
}

// wantCoverage fails t on every error leases.Check finds in the lease set against src's live
// partitions (a gap, an overlap, an orphan parent...), and then logs the leases.
func wantCoverage(t *testing.T, src *feedtest.MemSource, docs leases.Documents) {
	t.Helper()
	var parts []leases.Partition
	ps, err := src.Partitions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		parts = append(parts, leases.Partition{ID: p.ID, Range: p.Range, Parents: p.Parents})
	}
	ls := listLeases(t, docs)
	for _, f := range leases.Check(ls, time.Now(), time.Minute, leases.WithPartitions(parts)) {
		if f.Severity == leases.SeverityError {
			t.Errorf("%s: %s", f.Kind, f.Message)
		}
	}
	if t.Failed() {
		for _, l := range ls {
			t.Logf("lease %s %s owner %q", l.Token, l.Range, l.Owner)
		}
	}
}

// slowDeleteDocs holds every delete of a lease whose token is in tokens for a second (of
// virtual time) before it applies it: time for another worker of the host to plan its own
// split on a listing that still shows the lease.
type slowDeleteDocs struct {
	leases.Documents
	tokens map[string]bool
}

func (d *slowDeleteDocs) Delete(ctx context.Context, id, pk, ifMatch string) error {
	if _, token, ok := leases.SplitID(id); ok && d.tokens[token] {
		time.Sleep(time.Second)
	}
	return d.Documents.Delete(ctx, id, pk, ifMatch)
}

// TestProcessor_TwoLeasesOverTheSameKeysSplitAtOnceLeaveOneOverThem: .NET's own overlap can
// leave a v0 lease and an EPK lease over the same keys (the simulation's seed 4866); one cfp
// host holds both, and their partition splits. Each lease's split counted the other as
// covering its keys (the rule that leaves an earlier attempt's children their keys), made no
// children and deleted itself: no lease read those keys again, and their changes were never
// delivered (found by review of seed 4866's fix). A host now plans and performs one split at a
// time, so the second sees the first's outcome.
func TestProcessor_TwoLeasesOverTheSameKeysSplitAtOnceLeaveOneOverThem(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		src := feedtest.NewMemSource(2)
		parts, err := src.Partitions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		mem := leases.NewMemDocuments("/id")
		store := leases.NewStore(mem, testPrefix, leases.StoreOptions{})
		upper := parts[1]
		for _, l := range []*leases.Lease{
			leases.NewDotNetV0(testPrefix, parts[0].ID, parts[0].Range, ""),
			leases.NewDotNetV0(testPrefix, upper.ID, upper.Range, ""),
			leases.NewDotNetV1(testPrefix, upper.Range, "", ""),
		} {
			if _, err := store.Create(ctx, l); err != nil {
				t.Fatal(err)
			}
		}
		if err := store.MarkInitialized(ctx); err != nil {
			t.Fatal(err)
		}
		epk := leases.NewDotNetV1(testPrefix, upper.Range, "", "").Token
		docs := &slowDeleteDocs{Documents: mem, tokens: map[string]bool{upper.ID: true, epk: true}}
		rec := newRecorder(0)
		startHost(t, src, docs, rec.handler("a"), fastOptions("a"))
		writeDocs(t, src, 0, 40)
		waitFor(t, 10*time.Second, "the first documents", func() bool { return rec.distinct() == 40 })
		if _, err := src.Split(upper.ID); err != nil {
			t.Fatal(err)
		}
		writeDocs(t, src, 40, 80)
		time.Sleep(5 * time.Second) // every gone lease handled (virtual time: a synctest bubble)
		wantCoverage(t, src, docs)
		if n := rec.distinct(); n != 80 {
			t.Errorf("%d of 80 documents delivered", n)
		}
	})
}
