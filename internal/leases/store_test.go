package leases_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/internal/leases"
)

const testPrefix = "procexample.documents.azure.com_Z4hMAA==_Z4hMAIs0cjs="

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2024, 5, 24, 14, 22, 42, 541742100, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newTestStore(t *testing.T, path string) (*leases.Store, *leases.MemDocuments, *clock) {
	t.Helper()
	clk := newClock()
	docs := leases.NewMemDocuments(path)
	docs.Now = clk.Now
	return leases.NewStore(docs, testPrefix, leases.StoreOptions{Now: clk.Now}), docs, clk
}

func createLease(t *testing.T, s *leases.Store, token string) *leases.Lease {
	t.Helper()
	l, err := s.Create(context.Background(), leases.NewDotNetV0(testPrefix, token, leases.Range{Min: "", Max: "FF"}, ""))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	return l
}

func bodyField(t *testing.T, b []byte, name string) any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("body: %v", err)
	}
	return m[name]
}

func TestStore_Create_PartitionKeyContainer(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"/id", "/partitionKey"} {
		t.Run(path, func(t *testing.T) {
			t.Parallel()
			s, docs, _ := newTestStore(t, path)
			ctx := context.Background()
			l := createLease(t, s, "0")
			id := leases.LeaseID(testPrefix, "0")
			d, err := docs.Read(ctx, id, id)
			if err != nil {
				t.Fatalf("lease not stored under its id as partition key: %v", err)
			}
			pk := bodyField(t, d.Body, "partitionKey")
			if path == "/partitionKey" && pk != id {
				t.Errorf("partitionKey = %v, want the lease id", pk)
			}
			if path == "/id" && pk != nil {
				t.Errorf("partitionKey written in an /id container: %v", pk)
			}
			if l.ETag != d.ETag || l.Owner != "" || l.Continuation != "" {
				t.Errorf("created lease = %+v", l)
			}
			if _, err := s.Create(ctx, leases.NewDotNetV0(testPrefix, "0", leases.FullRange, "")); !errors.Is(err, leases.ErrConflict) {
				t.Errorf("second Create = %v, want ErrConflict", err)
			}
		})
	}
}

func TestStore_AcquireRenewCheckpointRelease(t *testing.T) {
	t.Parallel()
	s, _, clk := newTestStore(t, "/id")
	ctx := context.Background()
	l := createLease(t, s, "0")

	a, err := s.Acquire(ctx, l, "host-a")
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if a.Owner != "host-a" || !a.Timestamp.Equal(clk.Now()) {
		t.Fatalf("acquired lease owner %q timestamp %v, want host-a at %v", a.Owner, a.Timestamp, clk.Now())
	}
	clk.Add(17 * time.Second)
	r, err := s.Renew(ctx, l, "host-a") // stale copy: Renew re-reads
	if err != nil {
		t.Fatalf("Renew: %v", err)
	}
	if !r.Timestamp.Equal(clk.Now()) {
		t.Errorf("renewed timestamp %v, want %v", r.Timestamp, clk.Now())
	}
	// Checkpoint with the pre-renew copy: 412, re-read, owner unchanged, success.
	c, err := s.Checkpoint(ctx, a, "host-a", `"42"`)
	if err != nil {
		t.Fatalf("Checkpoint: %v", err)
	}
	if lsn, ok := c.LSN(); !ok || lsn != 42 {
		t.Errorf("checkpoint LSN = %d, %v; want 42", lsn, ok)
	}
	if err := s.Release(ctx, c, "host-a"); err != nil {
		t.Fatalf("Release: %v", err)
	}
	got, err := s.Get(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if got.Owner != "" || got.Continuation != `"42"` {
		t.Errorf("after release: owner %q continuation %q, want none and \"42\"", got.Owner, got.Continuation)
	}
}

func TestStore_Renew_LostToAnotherOwner(t *testing.T) {
	t.Parallel()
	s, _, _ := newTestStore(t, "/id")
	ctx := context.Background()
	l := createLease(t, s, "0")
	a, err := s.Acquire(ctx, l, "host-a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, a, "host-b"); err != nil { // host-b steals it
		t.Fatal(err)
	}
	_, err = s.Renew(ctx, a, "host-a")
	var lost *leases.LeaseLostError
	if !errors.As(err, &lost) || !errors.Is(err, leases.ErrLeaseLost) || lost.Owner != "host-b" || lost.Token != "0" {
		t.Fatalf("Renew after steal = %v, want LeaseLostError to host-b", err)
	}
	if _, err := s.Checkpoint(ctx, a, "host-a", `"7"`); !errors.Is(err, leases.ErrLeaseLost) {
		t.Errorf("Checkpoint after steal = %v, want ErrLeaseLost", err)
	}
	if err := s.Release(ctx, a, "host-a"); !errors.Is(err, leases.ErrLeaseLost) {
		t.Errorf("Release after steal = %v, want ErrLeaseLost", err)
	}
}

func TestStore_Acquire_RaceOneWinner(t *testing.T) {
	t.Parallel()
	s, _, _ := newTestStore(t, "/id")
	ctx := context.Background()
	l := createLease(t, s, "0")
	// Both hosts saw the lease free; the second acquire gets a 412, re-reads, sees host-a and
	// gives up instead of overwriting.
	if _, err := s.Acquire(ctx, l, "host-a"); err != nil {
		t.Fatal(err)
	}
	_, err := s.Acquire(ctx, l, "host-b")
	var lost *leases.LeaseLostError
	if !errors.As(err, &lost) || lost.Owner != "host-a" {
		t.Fatalf("second Acquire = %v, want lost to host-a", err)
	}
}

func TestStore_Deleted_LeaseLost(t *testing.T) {
	t.Parallel()
	s, _, _ := newTestStore(t, "/partitionKey")
	ctx := context.Background()
	l := createLease(t, s, "0")
	a, err := s.Acquire(ctx, l, "host-a")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, a); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if err := s.Delete(ctx, a); err != nil {
		t.Errorf("Delete of a deleted lease = %v, want nil", err)
	}
	_, err = s.Checkpoint(ctx, a, "host-a", `"9"`)
	var lost *leases.LeaseLostError
	if !errors.As(err, &lost) || !lost.Gone {
		t.Errorf("Checkpoint of a deleted lease = %v, want gone", err)
	}
	if err := s.Release(ctx, a, "host-a"); err != nil {
		t.Errorf("Release of a deleted lease = %v, want nil (split handling deletes leases)", err)
	}
}

// contended makes every Replace fail with 412 after changing the document, as a busy peer would.
type contended struct {
	*leases.MemDocuments
	replaces int
}

func (c *contended) Replace(ctx context.Context, id, pk, ifMatch string, body []byte) (leases.Document, error) {
	c.replaces++
	d, err := c.MemDocuments.Read(ctx, id, pk)
	if err != nil {
		return leases.Document{}, err
	}
	if _, err := c.MemDocuments.Replace(ctx, id, pk, "", d.Body); err != nil {
		return leases.Document{}, err
	}
	return c.MemDocuments.Replace(ctx, id, pk, ifMatch, body)
}

func TestStore_Update_RetriesExhausted(t *testing.T) {
	t.Parallel()
	mem := leases.NewMemDocuments("/id")
	docs := &contended{MemDocuments: mem}
	s := leases.NewStore(docs, testPrefix, leases.StoreOptions{})
	ctx := context.Background()
	l := createLease(t, s, "0")
	_, err := s.Update(ctx, l, func(n *leases.Lease) error { n.Owner = "x"; return nil })
	if !errors.Is(err, leases.ErrLeaseLost) {
		t.Fatalf("Update under constant contention = %v, want ErrLeaseLost", err)
	}
	if docs.replaces != 1+leases.RetryCountOnConflict {
		t.Errorf("replaces = %d, want %d", docs.replaces, 1+leases.RetryCountOnConflict)
	}
}

func TestStore_List_SkipsNonLeases(t *testing.T) {
	t.Parallel()
	var skipped []string
	docs := leases.NewMemDocuments("/id")
	s := leases.NewStore(docs, testPrefix, leases.StoreOptions{OnSkip: func(id string, err error) { skipped = append(skipped, id) }})
	ctx := context.Background()
	createLease(t, s, "0")
	createLease(t, s, "1")
	if _, err := docs.Put(testPrefix+"..junk", []byte(`{"id":"`+testPrefix+`..junk","hello":1}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := docs.Put("other..0", []byte(`{"id":"other..0","LeaseToken":"0"}`)); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkInitialized(ctx); err != nil {
		t.Fatal(err)
	}
	ls, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 2 || ls[0].Token != "0" || ls[1].Token != "1" {
		t.Errorf("List = %d leases, want tokens 0 and 1", len(ls))
	}
	if len(skipped) != 1 || skipped[0] != testPrefix+"..junk" {
		t.Errorf("skipped = %v, want the junk document", skipped)
	}
}

func TestStore_Markers(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"/id", "/partitionKey"} {
		t.Run(path, func(t *testing.T) {
			t.Parallel()
			s, docs, clk := newTestStore(t, path)
			ctx := context.Background()
			if ok, err := s.IsInitialized(ctx); ok || err != nil {
				t.Fatalf("IsInitialized on empty = %v, %v", ok, err)
			}
			if ok, _, err := s.TryLock(ctx, 30*time.Second, "host-a"); !ok || err != nil {
				t.Fatalf("TryLock = %v, %v; want true", ok, err)
			}
			other := leases.NewStore(docs, testPrefix, leases.StoreOptions{Now: clk.Now})
			ok, holder, err := other.TryLock(ctx, 30*time.Second, "host-b")
			if ok || err != nil || holder == nil || holder.Owner != "host-a" || holder.TTL != 30*time.Second || holder.Since.IsZero() {
				t.Fatalf("second TryLock = %v, %+v, %v; want false, held by host-a", ok, holder, err)
			}
			lock, err := docs.Read(ctx, leases.LockID(testPrefix), leases.LockID(testPrefix))
			if err != nil {
				t.Fatal(err)
			}
			if bodyField(t, lock.Body, "ttl") != 30.0 {
				t.Errorf("lock body = %s, want ttl 30", lock.Body)
			}
			if err := s.MarkInitialized(ctx); err != nil {
				t.Fatal(err)
			}
			if err := other.MarkInitialized(ctx); err != nil {
				t.Errorf("MarkInitialized twice = %v, want nil", err)
			}
			if ok, err := other.IsInitialized(ctx); !ok || err != nil {
				t.Errorf("IsInitialized = %v, %v; want true", ok, err)
			}
			if err := s.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			if ok, _, err := other.TryLock(ctx, 30*time.Second, "host-b"); !ok || err != nil {
				t.Fatalf("TryLock after Unlock = %v, %v; want true", ok, err)
			}
			// A lock older than its ttl (a container without time to live) is never taken
			// over: its holder may still be creating leases.
			clk.Add(time.Hour)
			if ok, holder, err := s.TryLock(ctx, 30*time.Second, "host-a"); ok || err != nil || holder.Owner != "host-b" {
				t.Fatalf("TryLock over an old lock = %v, %+v, %v; want false, held by host-b", ok, holder, err)
			}
			if _, err := docs.Read(ctx, leases.LockID(testPrefix), leases.LockID(testPrefix)); err != nil {
				t.Fatalf("the old lock was removed: %v", err)
			}
		})
	}
}

func TestStore_Renew_KeepsUnknownFields(t *testing.T) {
	t.Parallel()
	s, docs, _ := newTestStore(t, "/id")
	ctx := context.Background()
	id := leases.LeaseID(testPrefix, "3")
	body := `{"id":"` + id + `","version":0,"LeaseToken":"3","FeedRange":{"Range":{"min":"AA","max":"BB"}},` +
		`"Owner":"host-a","ContinuationToken":"\"5\"","properties":{"k":"v"},"timestamp":null,` +
		`"Mode":"Incremental Feed","x-custom":{"keep":[1,2]}}`
	if _, err := docs.Put(id, []byte(body)); err != nil {
		t.Fatal(err)
	}
	ls, err := s.List(ctx)
	if err != nil || len(ls) != 1 {
		t.Fatalf("List = %v, %v", ls, err)
	}
	if _, err := s.Renew(ctx, ls[0], "host-a"); err != nil {
		t.Fatal(err)
	}
	d, err := docs.Read(ctx, id, id)
	if err != nil {
		t.Fatal(err)
	}
	custom, _ := json.Marshal(bodyField(t, d.Body, "x-custom"))
	if string(custom) != `{"keep":[1,2]}` {
		t.Errorf("x-custom after renew = %s", custom)
	}
	if bodyField(t, d.Body, "timestamp") != "2024-05-24T14:22:42.5417421Z" {
		t.Errorf("timestamp = %v, want .NET format of the clock", bodyField(t, d.Body, "timestamp"))
	}
	if p := bodyField(t, d.Body, "properties").(map[string]any); p["k"] != "v" {
		t.Errorf("properties = %v", p)
	}
}

func TestStore_Update_WithoutETagRereads(t *testing.T) {
	t.Parallel()
	s, _, _ := newTestStore(t, "/id")
	ctx := context.Background()
	createLease(t, s, "0")
	if _, err := s.Acquire(ctx, createLeaseCopy("0"), "host-a"); err != nil {
		t.Fatal(err)
	}
	// A lease built in memory (no ETag) must not blindly overwrite the stored owner.
	_, err := s.Acquire(ctx, createLeaseCopy("0"), "host-b")
	var lost *leases.LeaseLostError
	if !errors.As(err, &lost) || lost.Owner != "host-a" {
		t.Fatalf("Acquire with an unread lease = %v, want lost to host-a", err)
	}
}

func createLeaseCopy(token string) *leases.Lease {
	return leases.NewDotNetV0(testPrefix, token, leases.FullRange, "")
}

func TestStore_ConcurrentAcquire(t *testing.T) {
	t.Parallel()
	s, _, _ := newTestStore(t, "/partitionKey")
	ctx := context.Background()
	l := createLease(t, s, "0")
	var wg sync.WaitGroup
	wins := make(chan string, 6)
	for _, h := range []string{"h1", "h2", "h3", "h4", "h5", "h6"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.Acquire(ctx, l, h); err == nil {
				wins <- h
			} else if !errors.Is(err, leases.ErrLeaseLost) {
				t.Errorf("Acquire %s: %v", h, err)
			}
		}()
	}
	wg.Wait()
	close(wins)
	var winners []string
	for w := range wins {
		winners = append(winners, w)
	}
	got, err := s.Get(ctx, l)
	if err != nil {
		t.Fatal(err)
	}
	if len(winners) != 1 || got.Owner != winners[0] {
		t.Errorf("winners %v, stored owner %s; want exactly one winner that owns the lease", winners, got.Owner)
	}
}

func TestStore_GUIDPartitionKeys(t *testing.T) {
	t.Parallel()
	s, docs, clk := newTestStore(t, "/partitionKey")
	ctx := context.Background()
	id := leases.LeaseID(testPrefix, "1")
	// Two copies of one lease in different logical partitions, as .NET 3.20-3.58 could create.
	for _, guid := range []string{"3f9d2c1e-8b7a-4e21-9c55-0d6f1a2b3c4d", "7a7a7a7a-0000-4000-8000-000000000001"} {
		body := `{"id":"` + id + `","partitionKey":"` + guid + `","version":0,"LeaseToken":"1",` +
			`"FeedRange":{"Range":{"min":"","max":"FF"}},"Owner":null,"ContinuationToken":null,"properties":{},"timestamp":null}`
		if _, err := docs.Put(guid, []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	ls, err := s.List(ctx)
	if err != nil || len(ls) != 2 {
		t.Fatalf("List = %d leases, %v; want both copies", len(ls), err)
	}
	fs := leases.Check(ls, clk.Now(), time.Minute)
	if len(fs) == 0 || fs[0].Kind != leases.FindingDuplicate {
		t.Errorf("Check = %+v, want a duplicate-token finding", fs)
	}
	a, err := s.Acquire(ctx, ls[0], "host-a")
	if err != nil {
		t.Fatalf("Acquire a GUID-keyed lease: %v", err)
	}
	if a.PK != ls[0].PK {
		t.Errorf("acquired lease PK = %s, want its GUID %s", a.PK, ls[0].PK)
	}
	d, err := docs.Read(ctx, id, ls[0].PK)
	if err != nil || bodyField(t, d.Body, "Owner") != "host-a" {
		t.Errorf("stored copy in %s: %s, %v", ls[0].PK, d.Body, err)
	}
	other, err := docs.Read(ctx, id, ls[1].PK)
	if err != nil || bodyField(t, other.Body, "Owner") != nil {
		t.Errorf("the other copy changed: %s, %v", other.Body, err)
	}
}

// countingDocs counts the requests a Store sends, by method.
type countingDocs struct {
	leases.Documents
	mu sync.Mutex
	n  map[string]int
}

func (c *countingDocs) count(m string) {
	c.mu.Lock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[m]++
	c.mu.Unlock()
}

func (c *countingDocs) Read(ctx context.Context, id, pk string) (leases.Document, error) {
	c.count("read")
	return c.Documents.Read(ctx, id, pk)
}

func (c *countingDocs) Replace(ctx context.Context, id, pk, ifMatch string, body []byte) (leases.Document, error) {
	c.count("replace")
	return c.Documents.Replace(ctx, id, pk, ifMatch, body)
}

func (c *countingDocs) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for k, v := range c.n {
		out[k] = v
	}
	c.n = nil
	return out
}

func TestStore_Renew_OneRequestWithTheCachedETag(t *testing.T) {
	t.Parallel()
	clk := newClock()
	mem := leases.NewMemDocuments("/id")
	mem.Now = clk.Now
	docs := &countingDocs{Documents: mem}
	s := leases.NewStore(docs, testPrefix, leases.StoreOptions{Now: clk.Now})
	ctx := context.Background()
	l, err := s.Acquire(ctx, createLease(t, s, "0"), "host-a")
	if err != nil {
		t.Fatal(err)
	}
	docs.snapshot()
	clk.Add(time.Second)
	r, err := s.Renew(ctx, l, "host-a")
	if err != nil {
		t.Fatal(err)
	}
	if got := docs.snapshot(); got["read"] != 0 || got["replace"] != 1 {
		t.Errorf("renew of a lease in hand sent %v, want one replace and no read", got)
	}
	if !r.Timestamp.Equal(clk.Now()) {
		t.Errorf("renewed timestamp %v, want %v", r.Timestamp, clk.Now())
	}
	// Changed since (a checkpoint by a copy this renewer did not see): the 412 re-reads, and
	// the renew keeps what the stored version says.
	if _, err := s.Checkpoint(ctx, r, "host-a", `"9"`); err != nil {
		t.Fatal(err)
	}
	docs.snapshot()
	r2, err := s.Renew(ctx, r, "host-a")
	if err != nil {
		t.Fatal(err)
	}
	if got := docs.snapshot(); got["read"] != 1 || got["replace"] != 2 {
		t.Errorf("renew of a stale copy sent %v, want a failed replace, a read and a replace", got)
	}
	if r2.Continuation != `"9"` {
		t.Errorf("continuation after renewing a stale copy = %q, want the stored \"9\"", r2.Continuation)
	}
}
