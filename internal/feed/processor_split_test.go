package feed_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/feed/feedtest"
	"github.com/cfp-dev/cfp/internal/leases"
)

// splitGateDocs is a lease container that honours cancellation like a network client (a call
// with an ended context fails before it is sent) and, once armed, holds the first create of a
// lease other than the parent until the test lets it through: that write was already on its
// way when the host was told to stop.
type splitGateDocs struct {
	leases.Documents
	parent string // token of the lease being split

	mu      sync.Mutex
	armed   bool
	entered chan struct{} // closed when the held create arrives
	proceed chan struct{} // closed by the test to let it through
}

func (d *splitGateDocs) hold(id string) bool {
	_, token, ok := leases.SplitID(id)
	if !ok || token == d.parent || strings.Contains(id, ".host.") {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.armed {
		return false
	}
	d.armed = false
	return true
}

func (d *splitGateDocs) Create(ctx context.Context, pk string, body []byte) (leases.Document, error) {
	if d.hold(pk) { // an /id container: the partition key is the id
		close(d.entered)
		<-d.proceed
		return d.Documents.Create(ctx, pk, body)
	}
	if err := ctx.Err(); err != nil {
		return leases.Document{}, err
	}
	return d.Documents.Create(ctx, pk, body)
}

func (d *splitGateDocs) Read(ctx context.Context, id, pk string) (leases.Document, error) {
	if err := ctx.Err(); err != nil {
		return leases.Document{}, err
	}
	return d.Documents.Read(ctx, id, pk)
}

func (d *splitGateDocs) QueryPrefix(ctx context.Context, prefix string) ([]leases.Document, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return d.Documents.QueryPrefix(ctx, prefix)
}

func (d *splitGateDocs) Replace(ctx context.Context, id, pk, ifMatch string, body []byte) (leases.Document, error) {
	if err := ctx.Err(); err != nil {
		return leases.Document{}, err
	}
	return d.Documents.Replace(ctx, id, pk, ifMatch, body)
}

func (d *splitGateDocs) Delete(ctx context.Context, id, pk, ifMatch string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return d.Documents.Delete(ctx, id, pk, ifMatch)
}

// TestProcessor_SplitInterruptedByShutdown stops the host while its split is creating the child
// leases: the split must either finish or leave the parent alone, and in both cases leave no
// lease owned by the stopped host, so the other hosts take over at once instead of waiting for
// the leases to expire.
func TestProcessor_SplitInterruptedByShutdown(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		src := feedtest.NewMemSource(1)
		docs := &splitGateDocs{
			Documents: leases.NewMemDocuments("/id"), parent: "0",
			entered: make(chan struct{}), proceed: make(chan struct{}),
		}
		writeDocs(t, src, 0, 20)
		rec := newRecorder(0)
		hs := startHost(t, src, docs, rec.handler("a"), fastOptions("a"))
		waitFor(t, 10*time.Second, "the first documents", func() bool { return rec.distinct() == 20 })

		docs.mu.Lock()
		docs.armed = true
		docs.mu.Unlock()
		children, err := src.Split("0")
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-docs.entered:
		case <-time.After(10 * time.Second):
			t.Fatal("the host never created a child lease")
		}
		hs.cancel() // shutdown while the split is under way
		close(docs.proceed)
		if err := hs.stop(t); err != nil {
			t.Fatal(err)
		}

		var tokens []string
		for _, l := range listLeases(t, docs) {
			tokens = append(tokens, l.Token)
			if l.Owner != "" {
				t.Errorf("lease %s is still owned by %q after its host stopped: the other hosts wait for it to expire", l.Token, l.Owner)
			}
		}
		slices.Sort(tokens)
		if !slices.Equal(tokens, []string{"0"}) && !slices.Equal(tokens, slices.Sorted(slices.Values(children))) {
			t.Fatalf("leases %v after an interrupted split, want the parent [0] or the children %v", tokens, children)
		}
	})
}

// flakyPartitions is a source whose partition list fails while failing is set, counting the
// failed calls.
type flakyPartitions struct {
	*feedtest.MemSource

	mu      sync.Mutex
	failing bool
	failed  int
}

func (f *flakyPartitions) set(failing bool) {
	f.mu.Lock()
	f.failing = failing
	f.mu.Unlock()
}

func (f *flakyPartitions) failures() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failed
}

func (f *flakyPartitions) Partitions(ctx context.Context) ([]feed.Partition, error) {
	f.mu.Lock()
	if f.failing {
		f.failed++
		f.mu.Unlock()
		return nil, errors.New("service unavailable")
	}
	f.mu.Unlock()
	return f.MemSource.Partitions(ctx)
}

// TestProcessor_SplitRetryBacksOff makes every split attempt fail for a while: the attempts
// must back off like other failures (doubling up to MaxErrorBackoff), not hammer the service
// every ErrorBackoff; once the service answers the split completes.
func TestProcessor_SplitRetryBacksOff(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		src := &flakyPartitions{MemSource: feedtest.NewMemSource(1)}
		docs := leases.NewMemDocuments("/id")
		writeDocs(t, src.MemSource, 0, 10)
		rec := newRecorder(0)
		opts := fastOptions("a")
		opts.ErrorBackoff, opts.MaxErrorBackoff = 10*time.Millisecond, 100*time.Millisecond
		hs := startHost(t, src, docs, rec.handler("a"), opts)
		waitFor(t, 10*time.Second, "the first documents", func() bool { return rec.distinct() == 10 })

		src.set(true)
		children, err := src.Split("0")
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "a failed split", func() bool { return src.failures() > 0 })
		time.Sleep(500 * time.Millisecond)
		// Backing off 10, 20, 40, 80, 100, 100... ms makes about 8 attempts in 500ms; a constant
		// 10ms wait makes about 50.
		if n := src.failures(); n > 20 {
			t.Errorf("%d split attempts in 500ms: the retry does not back off", n)
		}
		src.set(false)
		waitFor(t, 10*time.Second, "the children's workers", func() bool { return len(hs.p.Owned()) == 2 })
		if err := hs.stop(t); err != nil {
			t.Fatal(err)
		}
		var tokens []string
		for _, l := range listLeases(t, docs) {
			tokens = append(tokens, l.Token)
		}
		slices.Sort(tokens)
		if want := slices.Sorted(slices.Values(children)); !slices.Equal(tokens, want) {
			t.Fatalf("leases %v after the split, want the children %v", tokens, want)
		}
	})
}

// oneChildDocs lets one child lease (any lease but "0") be created and fails the others.
type oneChildDocs struct {
	leases.Documents

	mu      sync.Mutex
	created bool
}

func (d *oneChildDocs) Create(ctx context.Context, pk string, body []byte) (leases.Document, error) {
	if _, token, ok := leases.SplitID(pk); ok && token != "0" {
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.created {
			return leases.Document{}, errors.New("service unavailable")
		}
		d.created = true
	}
	return d.Documents.Create(ctx, pk, body)
}

// TestProcessor_SplitHalfDoneReleasesChildren stops a host whose split keeps failing after it
// created one of the two children: the child it owns must be released with the parent, not left
// owned by the stopped host until it expires.
func TestProcessor_SplitHalfDoneReleasesChildren(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		src := feedtest.NewMemSource(1)
		docs := &oneChildDocs{Documents: leases.NewMemDocuments("/id")}
		writeDocs(t, src, 0, 10)
		rec := newRecorder(0)
		hs := startHost(t, src, docs, rec.handler("a"), fastOptions("a"))
		waitFor(t, 10*time.Second, "the first documents", func() bool { return rec.distinct() == 10 })
		if _, err := src.Split("0"); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "the first child lease", func() bool { return len(listLeases(t, docs)) == 2 })
		time.Sleep(50 * time.Millisecond) // a few failed attempts to create the second
		if err := hs.stop(t); err != nil {
			t.Fatal(err)
		}
		for _, l := range listLeases(t, docs) {
			if l.Owner != "" {
				t.Errorf("lease %s is still owned by %q after its host stopped", l.Token, l.Owner)
			}
		}
	})
}

// TestProcessor_SplitChildrenStartFromTheLastReadPosition: the children of an idle lease that
// never checkpointed (started from now, only empty pages read) carry the parent's last read
// position, as .NET's do, not a null continuation: the .NET estimator would report lag 1 per
// child, and whoever started such a child would apply its own start setting (history replayed,
// or changes written while no host read skipped).
func TestProcessor_SplitChildrenStartFromTheLastReadPosition(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		src := feedtest.NewMemSource(1)
		writeDocs(t, src, 0, 30)
		lsn, err := src.LSN("0")
		if err != nil {
			t.Fatal(err)
		}
		docs := leases.NewMemDocuments("/id")
		opts := fastOptions("host-1")
		opts.StartFrom = feed.StartFrom{Kind: feed.StartNow}
		rec := newRecorder(0)
		h := startHost(t, src, docs, rec.handler("host-1"), opts)
		reads := src.Reads()
		waitFor(t, 5*time.Second, "a few empty reads", func() bool { return src.Reads() > reads+3 })
		if _, err := src.Split("0"); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 5*time.Second, "the split", func() bool { return len(h.ev.of(feed.EventSplit)) == 1 })
		ls := listLeases(t, docs)
		if len(ls) != 2 {
			t.Fatalf("%d leases after the split, want 2", len(ls))
		}
		for _, l := range ls {
			if got, ok := l.LSN(); !ok || got != lsn {
				t.Errorf("child %s continuation %q, want the parent's read position %q", l.Token, l.Continuation, leases.FormatLSN(lsn))
			}
		}
		// Changes written after the split are delivered from there, and the old ones are not.
		writeDocs(t, src, 30, 40)
		waitFor(t, 5*time.Second, "the new changes", func() bool { return rec.distinct() == 10 })
	})
}

// TestProcessor_JavaEPKLeaseCheckpointsEmptyPages: on a Java EPK lease cfp checkpoints the
// continuation of an empty page, as Java's EPK processor does, so that Java's estimator (which
// reads the lease's continuation) shows no phantom lag on an idle range cfp owns. .NET leases
// keep .NET's rule: an empty page is never checkpointed.
func TestProcessor_JavaEPKLeaseCheckpointsEmptyPages(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		src := feedtest.NewMemSource(1)
		writeDocs(t, src, 0, 20) // history the lease (from now) never sees
		lsn, err := src.LSN("0")
		if err != nil {
			t.Fatal(err)
		}
		docs := leases.NewMemDocuments("/id")
		store := leases.NewStore(docs, testPrefix, leases.StoreOptions{})
		r := leases.FullRange
		body := fmt.Sprintf(`{"id":%q,"LeaseToken":%q,"Owner":null,"timestamp":null,"version":1,"ContinuationToken":null,"feedRange":{"Range":{"min":"","max":"FF","isMinInclusive":true,"isMaxInclusive":false}}}`,
			leases.LeaseID(testPrefix, r.String()), r.String())
		if _, err := docs.Create(context.Background(), leases.LeaseID(testPrefix, r.String()), []byte(body)); err != nil {
			t.Fatal(err)
		}
		if err := store.MarkInitialized(context.Background()); err != nil {
			t.Fatal(err)
		}
		opts := fastOptions("cfp")
		opts.StartFrom = feed.StartFrom{Kind: feed.StartNow}
		startHost(t, src, docs, newRecorder(0).handler("cfp"), opts)
		waitFor(t, 5*time.Second, "an empty page checkpointed", func() bool {
			ls := listLeases(t, docs)
			return len(ls) == 1 && ls[0].Continuation != ""
		})
		l := listLeases(t, docs)[0]
		if got, ok := l.LSN(); l.Family != leases.FamilyJavaEPK || !ok || got != lsn {
			t.Errorf("lease %s (%s) continuation %q, want the idle range's position %q", l.Token, l.Family, l.Continuation, leases.FormatLSN(lsn))
		}
	})
}

// createOwners records the Owner of every lease document created.
type createOwners struct {
	leases.Documents
	mu     sync.Mutex
	owners []string
}

func (d *createOwners) Create(ctx context.Context, pk string, body []byte) (leases.Document, error) {
	doc, err := d.Documents.Create(ctx, pk, body)
	if l, derr := leases.Decode(leases.Document{ID: pk, Body: body}); err == nil && derr == nil {
		d.mu.Lock()
		d.owners = append(d.owners, l.Owner)
		d.mu.Unlock()
	}
	return doc, err
}

// TestProcessor_SplitChildrenCreatedUnownedWithoutHandoffProperties: split children are
// created unowned and then acquired, as .NET does, and carry none of the parent's stale handoff
// properties. Before, they were created owned by the splitting host and kept
// cfpHandoffAccepted.
func TestProcessor_SplitChildrenCreatedUnownedWithoutHandoffProperties(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		src := feedtest.NewMemSource(1)
		docs := &createOwners{Documents: leases.NewMemDocuments("/id")}
		h := startHost(t, src, docs, newRecorder(0).handler("cfp"), fastOptions("cfp"))
		waitFor(t, 5*time.Second, "the lease", func() bool { return len(h.p.Owned()) == 1 })
		store := leases.NewStore(docs, testPrefix, leases.StoreOptions{})
		ls := listLeases(t, docs)
		if _, err := store.Update(ctx, ls[0], func(n *leases.Lease) error {
			n.Properties["cfpHandoff"] = "old-host>someone"
			n.Properties["cfpHandoffAccepted"] = "old-host"
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		docs.mu.Lock()
		before := len(docs.owners)
		docs.mu.Unlock()
		if _, err := src.Split("0"); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 5*time.Second, "the children", func() bool { return len(h.p.Owned()) == 2 })
		docs.mu.Lock()
		created := slices.Clone(docs.owners[before:])
		docs.mu.Unlock()
		if len(created) != 2 || created[0] != "" || created[1] != "" {
			t.Errorf("children created with owners %q, want 2 unowned", created)
		}
		for _, l := range listLeases(t, docs) {
			if l.Owner != "cfp" || l.Properties["cfpHandoff"] != "" || l.Properties["cfpHandoffAccepted"] != "" {
				t.Errorf("child %s: owner %q properties %v, want owned by cfp without handoff properties", l.Token, l.Owner, l.Properties)
			}
		}
	})
}

// TestProcessor_JavaPKMergeDeliversBothParents: two Java PK-range leases whose partitions are
// merged. The first handled parent (the other is held by a host that stopped, until it
// expires) creates the merged partition's lease, as Java does; that lease must start low
// enough to deliver the other parent's changes too, since a merged partition's items keep
// their parents' LSNs. Before, the merge stranded the leases (no range to build a merged lease
// from) and nothing written after it was delivered; a child at the first parent's continuation
// would skip the other parent's changes. At the end one Java PK lease names the merged
// partition and none names a gone one.
func TestProcessor_JavaPKMergeDeliversBothParents(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		src := feedtest.NewMemSource(2)
		parts, err := src.Partitions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// pks by partition, so that partition 0 is far ahead of partition 1 in LSNs.
		var in0, in1 []int
		for i := 0; len(in0) < 40 || len(in1) < 10; i++ {
			if parts[0].Range.Contains(feedtest.EPK(fmt.Sprintf("pk%d", i))) {
				in0 = append(in0, i)
			} else {
				in1 = append(in1, i)
			}
		}
		write := func(ns []int) {
			for _, n := range ns {
				writeDocs(t, src, n, n+1)
			}
		}
		write(in0[:35])
		write(in1[:5])
		docs := leases.NewMemDocuments("/id")
		store := leases.NewStore(docs, testPrefix, leases.StoreOptions{})
		now := time.Now()
		for i, owner := range []string{"", "host-gone"} {
			lsn, err := src.LSN(parts[i].ID)
			if err != nil {
				t.Fatal(err)
			}
			id := leases.LeaseID(testPrefix, parts[i].ID)
			ownerJSON, ts := "null", "null"
			if owner != "" {
				ownerJSON, ts = fmt.Sprintf("%q", owner), fmt.Sprintf("%q", leases.FormatJavaTime(now))
			}
			body := fmt.Sprintf(`{"id":%q,"LeaseToken":%q,"ContinuationToken":%q,"timestamp":%s,"Owner":%s}`, id, parts[i].ID, leases.FormatLSN(lsn), ts, ownerJSON)
			if _, err := docs.Create(ctx, id, []byte(body)); err != nil {
				t.Fatal(err)
			}
		}
		if err := store.MarkInitialized(ctx); err != nil {
			t.Fatal(err)
		}
		// The changes no lease delivered yet, in both partitions, then the merge.
		write(in0[35:])
		write(in1[5:])
		merged, err := src.Merge(parts[0].ID, parts[1].ID)
		if err != nil {
			t.Fatal(err)
		}
		opts := fastOptions("host-1")
		opts.Expiration = time.Second
		rec := newRecorder(0)
		startHost(t, src, docs, rec.handler("host-1"), opts)
		want := append(append([]int(nil), in0[35:]...), in1[5:]...)
		waitFor(t, 10*time.Second, "every change written before the merge and after the leases' checkpoints", func() bool {
			rec.mu.Lock()
			defer rec.mu.Unlock()
			for _, n := range want {
				if rec.seen[fmt.Sprintf("doc%d", n)] == 0 {
					return false
				}
			}
			return true
		})
		waitFor(t, 10*time.Second, "one lease, over the merged partition", func() bool {
			ls := listLeases(t, docs)
			return len(ls) == 1 && ls[0].Token == merged
		})
		l := listLeases(t, docs)[0]
		if l.Family != leases.FamilyJavaPK || l.ID != leases.LeaseID(testPrefix, merged) {
			t.Errorf("merged lease %s is %s, want a Java PK lease %s", l.ID, l.Family, leases.LeaseID(testPrefix, merged))
		}
		rec.mu.Lock()
		if len(rec.overlaps) > 0 {
			t.Errorf("leases handled by two hosts at once: %v", rec.overlaps)
		}
		rec.mu.Unlock()
		// New changes go on being delivered from the merged lease.
		writeDocs(t, src, 1000, 1005)
		waitFor(t, 10*time.Second, "changes after the merge", func() bool {
			rec.mu.Lock()
			defer rec.mu.Unlock()
			return rec.seen["doc1004"] > 0 && rec.seen["doc1000"] > 0
		})
	})
}

// A merge is reported as a merge: each parent lease whose partition was merged away is
// replaced by one lease over its part of the merged partition, and the event that says so is
// EventMerge, not EventSplit (which cfp process printed before, calling a merge a split).
func TestProcessor_MergeIsReportedAsMerge(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		src := feedtest.NewMemSource(2)
		docs := leases.NewMemDocuments("/id")
		writeDocs(t, src, 0, 20)
		rec := newRecorder(0)
		hs := startHost(t, src, docs, rec.handler("solo"), fastOptions("solo"))
		waitFor(t, 10*time.Second, "20 documents", func() bool { return rec.distinct() == 20 })
		if _, err := src.Merge("0", "1"); err != nil {
			t.Fatal(err)
		}
		writeDocs(t, src, 20, 30)
		waitFor(t, 10*time.Second, "30 documents", func() bool { return rec.distinct() == 30 })
		waitFor(t, 10*time.Second, "two merge events", func() bool { return len(hs.ev.of(feed.EventMerge)) == 2 })
		if splits := hs.ev.of(feed.EventSplit); len(splits) != 0 {
			t.Errorf("split events %+v after a merge, want none", splits)
		}
		var parents []string
		for _, e := range hs.ev.of(feed.EventMerge) {
			parents = append(parents, e.Lease)
			if len(e.Children) != 1 {
				t.Errorf("merge event %+v, want one lease in place of %s", e, e.Lease)
			}
		}
		if slices.Sort(parents); !slices.Equal(parents, []string{"0", "1"}) {
			t.Errorf("merged leases %v, want 0 and 1", parents)
		}
	})
}
