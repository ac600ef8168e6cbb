package dotnettest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/feed/feedtest"
	"github.com/cfp-dev/cfp/internal/leases"
)

// Where the model was kinder than .NET (issue 22): each test pins one behaviour of the .NET
// source (Azure/azure-cosmos-dotnet-v3 at 8c53d35, Microsoft.Azure.Cosmos/src/ChangeFeedProcessor)
// that hides or causes bugs in a mixed deployment. They run in synctest bubbles: virtual time.

// spyDocs records the lease container requests of a host.
type spyDocs struct {
	leases.Documents
	mu       sync.Mutex
	replaces []spyReplace
	pages    []int // QueryPageSize of each listing
	// beforeReplace, when set, runs before a replace is forwarded.
	beforeReplace func(id, ifMatch string)
}

type spyReplace struct {
	id, ifMatch string
	err         error
}

func (s *spyDocs) Replace(ctx context.Context, id, pk, ifMatch string, body []byte) (leases.Document, error) {
	s.mu.Lock()
	hook := s.beforeReplace
	s.mu.Unlock()
	if hook != nil {
		hook(id, ifMatch)
	}
	d, err := s.Documents.Replace(ctx, id, pk, ifMatch, body)
	s.mu.Lock()
	s.replaces = append(s.replaces, spyReplace{id: id, ifMatch: ifMatch, err: err})
	s.mu.Unlock()
	return d, err
}

func (s *spyDocs) QueryPrefix(ctx context.Context, p string) ([]leases.Document, error) {
	s.mu.Lock()
	s.pages = append(s.pages, QueryPageSize(ctx))
	s.mu.Unlock()
	return s.Documents.QueryPrefix(ctx, p)
}

func (s *spyDocs) replacesOf(id string) []spyReplace {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []spyReplace
	for _, r := range s.replaces {
		if r.id == id {
			out = append(out, r)
		}
	}
	return out
}

func writeDocs(t *testing.T, src *feedtest.MemSource, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		if _, err := src.Write(fmt.Sprintf("pk%d", i), fmt.Appendf(nil, `{"id":"d%d"}`, i)); err != nil {
			t.Fatal(err)
		}
	}
}

func ownerOf(t *testing.T, docs leases.Documents, id string) string {
	t.Helper()
	d, err := docs.Read(context.Background(), id, id)
	if err != nil {
		t.Fatal(err)
	}
	l, err := decodeLease(d.Body)
	if err != nil {
		t.Fatal(err)
	}
	return l.owner()
}

// TestHost_EveryCheckpointFirstFailsItsIfMatch: .NET keeps the lease object it sent, with the
// _etag it read, after a replace (TryReplaceItemAsync wraps the item it was given,
// Utils/CosmosContainerExtensions.cs:66-87; PartitionCheckpointerCore.cs:24 keeps it), so each
// checkpoint's replace fails with 412, then the updater reads the lease and replaces again
// (LeaseManagement/DocumentServiceLeaseUpdaterCosmos.cs:35-70).
func TestHost_EveryCheckpointFirstFailsItsIfMatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := feedtest.NewMemSource(1, feedtest.WithPageSize(5))
		spy := &spyDocs{Documents: leases.NewMemDocuments("/id")}
		o := fast("dotnet-a")
		o.RenewInterval, o.Expiration = time.Hour, 2*time.Hour // no renew between the checkpoints
		h := New(src, spy, o)
		if err := h.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		defer h.Stop()
		time.Sleep(time.Second)
		synctest.Wait()
		id := prefix + "..0"
		before := len(spy.replacesOf(id)) // the acquire
		writeDocs(t, src, 0, 15)          // three pages, three checkpoints
		time.Sleep(time.Second)
		synctest.Wait()
		rs := spy.replacesOf(id)[before:]
		var failed, ok int
		for _, r := range rs {
			switch {
			case errors.Is(r.err, leases.ErrPreconditionFailed):
				failed++
			case r.err == nil:
				ok++
			}
		}
		if ok != 3 || failed != 3 {
			t.Errorf("3 checkpoints made %d replaces that succeeded and %d that failed their If-Match, want 3 and 3 (.NET's every checkpoint: 412, read, replace)", ok, failed)
		}
	})
}

// TestHost_AcquiresASplitChildWithoutIfMatch: the children of a split are created
// (TryCreateDocumentServiceLeaseAsync returns the object it sent, without _etag,
// DocumentServiceLeaseManagerCosmos.cs:329-338, Utils/CosmosContainerExtensions.cs:39-64) and
// acquired from that object (PartitionControllerCore.cs:184-194 -> AddOrUpdateLeaseAsync :62 ->
// AcquireAsync, DocumentServiceLeaseManagerCosmos.cs:51-111), whose replace then carries
// IfMatchEtag = null (DocumentServiceLeaseUpdaterCosmos.cs:114-117): a host that took a child
// between the create and the acquire is overwritten.
func TestHost_AcquiresASplitChildWithoutIfMatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := feedtest.NewMemSource(1)
		mem := leases.NewMemDocuments("/id")
		spy := &spyDocs{Documents: mem}
		h := New(src, spy, fast("dotnet-a"))
		if err := h.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		defer h.Stop()
		time.Sleep(time.Second)
		synctest.Wait()
		kids, err := src.Split("0")
		if err != nil {
			t.Fatal(err)
		}
		// Another host takes each child as soon as it exists, before dotnet-a's acquire.
		var once sync.Map
		spy.mu.Lock()
		spy.beforeReplace = func(id, _ string) {
			for _, k := range kids {
				if id != prefix+".."+k {
					continue
				}
				if _, done := once.LoadOrStore(id, true); done {
					return
				}
				d, err := mem.Read(context.Background(), id, id)
				if err != nil {
					t.Error(err)
					return
				}
				l, _ := decodeLease(d.Body)
				l.Owner = strPtr("cfp-host")
				b, _ := l.encode()
				if _, err := mem.Replace(context.Background(), id, id, d.ETag, b); err != nil {
					t.Error(err)
				}
			}
		}
		spy.mu.Unlock()
		writeDocs(t, src, 0, 3) // the read that finds the partition gone
		time.Sleep(time.Second)
		synctest.Wait()
		for _, k := range kids {
			id := prefix + ".." + k
			rs := spy.replacesOf(id)
			if len(rs) == 0 {
				t.Fatalf("child %s never written", k)
			}
			if rs[0].ifMatch != "" || rs[0].err != nil {
				t.Errorf("child %s: first replace with If-Match %q: %v, want an acquire without If-Match that succeeds", k, rs[0].ifMatch, rs[0].err)
			}
			if o := ownerOf(t, mem, id); o != "dotnet-a" {
				t.Errorf("child %s owned by %q after the acquire, want dotnet-a (it overwrote cfp-host)", k, o)
			}
		}
		if got := strings.Join(h.Owned(), ","); got != strings.Join(kids, ",") {
			t.Errorf("dotnet-a processes %s, want both children", got)
		}
		// The checkpointer keeps that object too (PartitionControllerCore.cs:62-66,92 ->
		// PartitionCheckpointerCore.cs:24): every checkpoint of a split child is a replace
		// without If-Match, which overwrites another host's owner with this one's.
		writeDocs(t, src, 3, 40)
		time.Sleep(time.Second)
		synctest.Wait()
		for _, k := range kids {
			unconditional := 0
			for _, r := range spy.replacesOf(prefix + ".." + k)[1:] {
				if r.ifMatch == "" {
					unconditional++
				}
			}
			if unconditional == 0 {
				t.Errorf("child %s: no checkpoint without If-Match after the acquire", k)
			}
		}
	})
}

// TestHost_KeepsProcessingADeletedLease: a renew's read of a deleted lease throws a
// CosmosException (TryGetItemAsync: EnsureSuccessStatusCode, Utils/CosmosContainerExtensions.cs:
// 24-37), not the null RenewAsync checks for (DocumentServiceLeaseManagerCosmos.cs:251-256);
// LeaseRenewerCore logs it and renews again (FeedManagement/LeaseRenewerCore.cs:70-74). The host
// goes on processing the lease until a checkpoint's replace finds it gone (404 ->
// LeaseLostException, DocumentServiceLeaseUpdaterCosmos.cs:95-98).
func TestHost_KeepsProcessingADeletedLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := feedtest.NewMemSource(1)
		docs := leases.NewMemDocuments("/id")
		var mu sync.Mutex
		handled := 0
		o := fast("dotnet-a")
		o.Handle = func(_ context.Context, b Batch) error {
			mu.Lock()
			handled += len(b.Items)
			mu.Unlock()
			return nil
		}
		h := New(src, docs, o)
		if err := h.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		defer h.Stop()
		time.Sleep(time.Second)
		synctest.Wait()
		if err := docs.Delete(context.Background(), prefix+"..0", prefix+"..0", ""); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * o.RenewInterval)
		synctest.Wait()
		if got := strings.Join(h.Owned(), ","); got != "0" {
			t.Fatalf("after 10 renew intervals of a deleted lease the host processes %q, want 0 (.NET ignores the renew's 404)", got)
		}
		writeDocs(t, src, 0, 3)
		time.Sleep(time.Second)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if handled != 3 {
			t.Errorf("handled %d changes of the deleted lease, want 3", handled)
		}
		if got := h.Owned(); len(got) != 0 {
			t.Errorf("after the checkpoint's 404 the host still processes %v", got)
		}
	})
}

// TestHost_DropsALeaseOnAThrottledRead: a change feed read that fails with 429 once the SDK's
// retries gave up ends the lease's processing and releases the lease: FeedProcessorCore's
// HandleFailedRequest throws for every status but a split's 410
// (FeedProcessing/FeedProcessorCore.cs:69-81,108-123, DocDBErrors/ExceptionClassifier.cs:12-22),
// and ProcessPartitionAsync reports the error and calls RemoveLeaseAsync
// (FeedManagement/PartitionControllerCore.cs:175-181).
func TestHost_DropsALeaseOnAThrottledRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := feedtest.NewMemSource(1)
		spy := &spyDocs{Documents: leases.NewMemDocuments("/id")}
		o := fast("dotnet-a")
		o.AcquireInterval = time.Minute // the balancer takes it back only a minute later
		h := New(src, spy, o)
		if err := h.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		defer h.Stop()
		time.Sleep(time.Second)
		synctest.Wait()
		if got := h.Owned(); len(got) != 1 {
			t.Fatalf("owned %v before the 429", got)
		}
		src.Fail(1, &feed.ThrottledError{Status: 429, RetryAfter: 100 * time.Millisecond})
		time.Sleep(time.Second)
		synctest.Wait()
		if got := h.Owned(); len(got) != 0 {
			t.Errorf("after a throttled read the host still processes %v, want the lease dropped", got)
		}
		if o := ownerOf(t, spy, prefix+"..0"); o != "" {
			t.Errorf("lease owned by %q after the 429, want released", o)
		}
		if errs := h.Errors(); len(errs) != 1 || !errors.Is(errs[0], feed.ErrThrottled) {
			t.Errorf("errors reported: %v, want the 429", errs)
		}
	})
}

// TestHost_ListsLeasesInPagesOf1000: the lease query sets no MaxItemCount
// (LeaseManagement/DocumentServiceLeaseContainerCosmos.cs:16,50-53), and the query pipeline then
// pages by 1,000 (Query/Core/Pipeline/CosmosQueryExecutionContextFactory.cs:824,890).
func TestHost_ListsLeasesInPagesOf1000(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := feedtest.NewMemSource(1)
		spy := &spyDocs{Documents: leases.NewMemDocuments("/id")}
		h := New(src, spy, fast("dotnet-a"))
		if err := h.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		h.Stop()
		spy.mu.Lock()
		defer spy.mu.Unlock()
		if len(spy.pages) < 3 {
			t.Fatalf("%d listings", len(spy.pages))
		}
		for i, n := range spy.pages {
			if n != 1000 {
				t.Errorf("listing %d: page size %d, want 1000", i, n)
			}
		}
	})
}

// TestHost_ASplitWhoseChildMergedMakesALeaseOverTheWholePartition: when a PK-range lease's
// partition is gone and more than one partition overlaps its range, .NET creates a PK-range
// lease per overlapping partition with that partition's whole range
// (Bootstrapping/PartitionSynchronizerCore.cs:97-119, HandlePartitionGoneAsync for
// DocumentServiceLeaseCore; LeaseManagement/DocumentServiceLeaseManagerCosmos.cs:113-138,
// CreateLeaseIfNotExistAsync(PartitionKeyRange): FeedRange = new FeedRangeEpk(
// partitionKeyRange.ToRange())). A child of the split that merged with the neighbour before
// the split was handled reaches past the gone lease, over the neighbour's keys: .NET's own
// overlap, which the simulation attributes through HandledGone.
func TestHost_ASplitWhoseChildMergedMakesALeaseOverTheWholePartition(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		src := feedtest.NewMemSource(2)
		docs := leases.NewMemDocuments("/id")
		first := New(src, docs, fast("dotnet-a"))
		if err := first.Start(ctx); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "both leases owned", func() bool { return len(first.Owned()) == 2 })
		first.Stop() // the leases stay, released, while the partitions change
		kids, err := src.Split("0")
		if err != nil {
			t.Fatal(err)
		}
		merged, err := src.Merge(kids[1], "1")
		if err != nil {
			t.Fatal(err)
		}
		parts, err := src.Partitions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ranges := map[string]leases.Range{}
		for _, p := range parts {
			ranges[p.ID] = p.Range
		}
		var mu sync.Mutex
		var reported [][]leases.Range
		o := fast("dotnet-b")
		o.HandledGone = func(token string, gone leases.Range, created []leases.Range) {
			if token == "0" {
				mu.Lock()
				reported = append(reported, created)
				mu.Unlock()
			}
		}
		h := New(src, docs, o)
		if err := h.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer h.Stop()
		var wide *leases.Lease
		waitFor(t, "a lease named after the merged partition", func() bool {
			ls, err := leases.NewStore(docs, prefix, leases.StoreOptions{}).List(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range ls {
				if l.Token == merged {
					wide = l
					return true
				}
			}
			return false
		})
		if wide.Family != leases.FamilyDotNetV0 || !wide.Range.Equal(ranges[merged]) {
			t.Errorf("lease %s is %s over %s, want a PK-range lease over the whole merged partition %s", wide.Token, wide.Family, wide.Range, ranges[merged])
		}
		mu.Lock()
		defer mu.Unlock()
		if len(reported) != 1 || len(reported[0]) != 2 || !reported[0][1].Equal(ranges[merged]) {
			t.Errorf("HandledGone reported %v for lease 0, want its children %s and %s", reported, ranges[kids[0]], ranges[merged])
		}
	})
}
