package cosmos

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cfp-dev/cfp/emulator"
	"github.com/cfp-dev/cfp/internal/epk"
	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/leases"
)

// openLocal opens an account on the embedded emulator in a fresh directory, so every test has
// its own endpoint (the port hash of its directory) and its own azcosmos caches.
func openLocal(t testing.TB, partitions int) *Account {
	t.Helper()
	a, err := Open(context.Background(), Config{
		LocalDir:        t.TempDir(),
		LocalPartitions: partitions,
		Logger:          slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatalf("Open(local) error = %v", err)
	}
	t.Cleanup(func() {
		if err := a.Close(); err != nil {
			t.Errorf("Close() error = %v", err)
		}
	})
	return a
}

// newFeedContainer creates db/orders partitioned on /pk.
func newFeedContainer(t testing.TB, a *Account) *Container {
	t.Helper()
	ctx := context.Background()
	if err := a.CreateDatabaseIfNotExists(ctx, "db"); err != nil {
		t.Fatalf("CreateDatabaseIfNotExists() error = %v", err)
	}
	c, err := a.CreateContainerIfNotExists(ctx, "db", "orders", "/pk", nil)
	if err != nil {
		t.Fatalf("CreateContainerIfNotExists() error = %v", err)
	}
	return c
}

// upsert writes documents {id, pk, n} and returns their ids.
func upsert(t testing.TB, c *Container, pks []string, from, n int) []string {
	t.Helper()
	var ids []string
	for i := from; i < from+n; i++ {
		pk := pks[i%len(pks)]
		id := fmt.Sprintf("doc-%04d", i)
		body := fmt.Sprintf(`{"id":%q,"pk":%q,"n":%d}`, id, pk, i)
		if err := c.UpsertItem(context.Background(), pk, []byte(body)); err != nil {
			t.Fatalf("UpsertItem(%s) error = %v", id, err)
		}
		ids = append(ids, id)
	}
	return ids
}

var somePKs = []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"}

// drain reads one partition page by page until a NotModified page, returning the ids in order and
// the last continuation.
func drain(t testing.TB, c *Container, req feed.ReadRequest) (ids []string, cont string) {
	t.Helper()
	for range 1000 {
		page, err := c.ReadPage(context.Background(), req)
		if err != nil {
			t.Fatalf("ReadPage(%+v) error = %v", req, err)
		}
		if page.Continuation == "" {
			t.Fatalf("ReadPage(%+v) returned no continuation", req)
		}
		for _, it := range page.Items {
			ids = append(ids, idOf(it))
		}
		cont = page.Continuation
		if page.NotModified {
			if len(page.Items) != 0 {
				t.Fatalf("NotModified page has %d items", len(page.Items))
			}
			return ids, cont
		}
		req.Start = feed.StartFrom{Kind: feed.StartContinuation, Continuation: cont}
	}
	t.Fatal("the feed never ran dry")
	return nil, ""
}

func partitions(t testing.TB, c *Container) []feed.Partition {
	t.Helper()
	ps, err := c.Partitions(context.Background())
	if err != nil {
		t.Fatalf("Partitions() error = %v", err)
	}
	return ps
}

func sorted(ids []string) []string {
	out := slices.Clone(ids)
	sort.Strings(out)
	return out
}

func TestContainer_Partitions(t *testing.T) {
	t.Parallel()
	a := openLocal(t, 3)
	c := newFeedContainer(t, a)
	ps := partitions(t, c)
	if len(ps) != 3 {
		t.Fatalf("Partitions() = %d partitions, want 3: %+v", len(ps), ps)
	}
	if ps[0].Range.Min != "" || leases.CompareEPK(ps[2].Range.Max, "FF") != 0 {
		t.Errorf("partitions do not span the key space: %+v", ps)
	}
	for i := 1; i < len(ps); i++ {
		if leases.CompareEPK(ps[i-1].Range.Max, ps[i].Range.Min) != 0 {
			t.Errorf("gap or overlap between %+v and %+v", ps[i-1], ps[i])
		}
	}
	info, err := c.Info(context.Background())
	if err != nil {
		t.Fatalf("Info() error = %v", err)
	}
	if info.ContainerRID == "" || info.DatabaseRID == "" || !slices.Equal(info.PartitionKeyPaths, []string{"/pk"}) {
		t.Errorf("Info() = %+v, want RIDs and paths [/pk]", info)
	}
}

func TestContainer_ReadPage_Beginning(t *testing.T) {
	t.Parallel()
	a := openLocal(t, 2)
	c := newFeedContainer(t, a)
	want := upsert(t, c, somePKs, 0, 20)
	// An updated document appears once, at its newest version.
	upsert(t, c, somePKs, 5, 1)

	var got []string
	for _, p := range partitions(t, c) {
		ids, _ := drain(t, c, feed.ReadRequest{PartitionID: p.ID, Start: feed.StartFrom{Kind: feed.StartBeginning}, MaxItems: 7})
		got = append(got, ids...)
	}
	if !slices.Equal(sorted(got), want) {
		t.Fatalf("read from the beginning = %v, want each of %v once", sorted(got), want)
	}
}

func TestContainer_ReadPage_PageFields(t *testing.T) {
	t.Parallel()
	a := openLocal(t, 1)
	c := newFeedContainer(t, a)
	upsert(t, c, somePKs, 0, 3)
	page, err := c.ReadPage(context.Background(), feed.ReadRequest{PartitionID: "0", Start: feed.StartFrom{Kind: feed.StartBeginning}})
	if err != nil {
		t.Fatalf("ReadPage() error = %v", err)
	}
	if len(page.Items) != 3 || page.NotModified {
		t.Fatalf("ReadPage() = %d items (not modified %v), want 3", len(page.Items), page.NotModified)
	}
	if page.LatestLSN < 3 {
		t.Errorf("LatestLSN = %d, want >= 3 after three writes", page.LatestLSN)
	}
	if !strings.HasPrefix(page.Continuation, `"`) {
		t.Errorf("Continuation = %q, want the raw quoted ETag", page.Continuation)
	}
	if page.RequestCharge <= 0 {
		t.Errorf("RequestCharge = %v, want > 0", page.RequestCharge)
	}
	// Items are the stored documents, raw, system properties included.
	var doc map[string]any
	if err := json.Unmarshal(page.Items[0], &doc); err != nil || doc["_etag"] == nil || doc["pk"] == nil {
		t.Errorf("item %s is not the raw stored document", page.Items[0])
	}
}

func TestContainer_ReadPage_NowAndContinuation(t *testing.T) {
	t.Parallel()
	a := openLocal(t, 1)
	c := newFeedContainer(t, a)
	upsert(t, c, somePKs, 0, 5)
	page, err := c.ReadPage(context.Background(), feed.ReadRequest{PartitionID: "0", Start: feed.StartFrom{Kind: feed.StartNow}})
	if err != nil {
		t.Fatalf("ReadPage(now) error = %v", err)
	}
	if !page.NotModified || len(page.Items) != 0 {
		t.Fatalf("ReadPage(now) = %d items, want none", len(page.Items))
	}
	now := page.Continuation
	want := upsert(t, c, somePKs, 5, 4)

	// Page by page from "now": the later writes, in order, each once.
	got, last := drain(t, c, feed.ReadRequest{PartitionID: "0", Start: feed.StartFrom{Kind: feed.StartContinuation, Continuation: now}, MaxItems: 3})
	if !slices.Equal(got, want) {
		t.Fatalf("read from now = %v, want %v", got, want)
	}
	// The last continuation is caught up; a new write shows up after it.
	more := upsert(t, c, somePKs, 9, 1)
	got, _ = drain(t, c, feed.ReadRequest{PartitionID: "0", Start: feed.StartFrom{Kind: feed.StartContinuation, Continuation: last}})
	if !slices.Equal(got, more) {
		t.Fatalf("read from the last continuation = %v, want %v", got, more)
	}
}

func TestContainer_ReadPage_Time(t *testing.T) {
	t.Parallel()
	a := openLocal(t, 1)
	c := newFeedContainer(t, a)
	before := upsert(t, c, somePKs, 0, 3)
	// _ts has one-second resolution: wait for the next second before the second batch.
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + 10*time.Millisecond)))
	cut := time.Now().Truncate(time.Second)
	after := upsert(t, c, somePKs, 3, 3)

	read := func(t0 time.Time) []string {
		ids, _ := drain(t, c, feed.ReadRequest{PartitionID: "0", Start: feed.StartFrom{Kind: feed.StartTime, Time: t0}})
		return ids
	}
	if got := read(cut.Add(-time.Hour)); !slices.Equal(sorted(got), sorted(append(before, after...))) {
		t.Errorf("read from an hour ago = %v, want everything", got)
	}
	if got := read(cut); !slices.Equal(sorted(got), after) {
		t.Errorf("read from %s = %v, want %v", cut, got, after)
	}
	if got := read(cut.Add(time.Hour)); len(got) != 0 {
		t.Errorf("read from the future = %v, want nothing", got)
	}
}

func TestContainer_ReadPage_PartitionKey(t *testing.T) {
	t.Parallel()
	a := openLocal(t, 4)
	c := newFeedContainer(t, a)
	all := upsert(t, c, somePKs, 0, 24)
	var want []string
	for i, id := range all {
		if somePKs[i%len(somePKs)] == "charlie" {
			want = append(want, id)
		}
	}
	got, _ := drain(t, c, feed.ReadRequest{PartitionKey: json.RawMessage(`["charlie"]`), Start: feed.StartFrom{Kind: feed.StartBeginning}})
	if !slices.Equal(got, want) {
		t.Fatalf("read of partition key charlie = %v, want %v", got, want)
	}
}

func TestContainer_ReadPage_SubRange(t *testing.T) {
	t.Parallel()
	a := openLocal(t, 1)
	c := newFeedContainer(t, a)
	ids := upsert(t, c, somePKs, 0, 16)
	epkOf := map[string]string{}
	var keys []string
	for i, id := range ids {
		k := epk.HashV2([]any{somePKs[i%len(somePKs)]})
		epkOf[id] = k
		keys = append(keys, k)
	}
	sort.Strings(keys)
	mid := keys[len(keys)/2]
	halves := []leases.Range{{Min: "", Max: mid}, {Min: mid, Max: "FF"}}
	var total int
	for _, r := range halves {
		var want []string
		for _, id := range ids {
			if r.Contains(epkOf[id]) {
				want = append(want, id)
			}
		}
		if len(want) == 0 || len(want) == len(ids) {
			t.Fatalf("test setup: range %s holds %d of %d documents", r, len(want), len(ids))
		}
		got, _ := drain(t, c, feed.ReadRequest{PartitionID: "0", Range: r, Start: feed.StartFrom{Kind: feed.StartBeginning}})
		if !slices.Equal(sorted(got), sorted(want)) {
			t.Errorf("read of sub-range %s = %v, want %v", r, sorted(got), sorted(want))
		}
		total += len(got)
	}
	if total != len(ids) {
		t.Errorf("the two halves read %d documents, want %d", total, len(ids))
	}
	// The whole range of the partition is no restriction.
	got, _ := drain(t, c, feed.ReadRequest{PartitionID: "0", Range: leases.FullRange, Start: feed.StartFrom{Kind: feed.StartBeginning}})
	if len(got) != len(ids) {
		t.Errorf("read of the full range = %d documents, want %d", len(got), len(ids))
	}
}

// TestContainer_ReadPage_Split: after a split the parent's read fails with RangeGoneError (both
// when azcosmos meets the 410 itself and when its routing map already knows the children), and
// the children, read from the parent's continuation, deliver the rest without loss or repeat.
func TestContainer_ReadPage_Split(t *testing.T) {
	t.Parallel()
	for _, warm := range []bool{false, true} {
		t.Run(fmt.Sprintf("sdk cache warm=%v", warm), func(t *testing.T) {
			t.Parallel()
			a := openLocal(t, 1)
			c := newFeedContainer(t, a)
			all := upsert(t, c, somePKs, 0, 30)
			first, err := c.ReadPage(context.Background(), feed.ReadRequest{PartitionID: "0", Start: feed.StartFrom{Kind: feed.StartBeginning}, MaxItems: 10})
			if err != nil || len(first.Items) != 10 {
				t.Fatalf("first page = %d items, %v; want 10", len(first.Items), err)
			}
			children, err := a.Emulator().Split("db", "orders", "0")
			if err != nil {
				t.Fatalf("Split() error = %v", err)
			}
			later := upsert(t, c, somePKs, 30, 6)
			if warm {
				// Another Container (same account, so the same azcosmos caches) reads a child:
				// azcosmos refreshes its routing map, while c still believes in partition 0.
				other := a.Container("db", "orders")
				if _, err := other.ReadPage(context.Background(), feed.ReadRequest{PartitionID: children[0], Start: feed.StartFrom{Kind: feed.StartNow}}); err != nil {
					t.Fatalf("ReadPage(child) error = %v", err)
				}
			}
			_, err = c.ReadPage(context.Background(), feed.ReadRequest{PartitionID: "0", Start: feed.StartFrom{Kind: feed.StartContinuation, Continuation: first.Continuation}, MaxItems: 10})
			var gone *feed.RangeGoneError
			if !errors.As(err, &gone) || gone.PartitionID != "0" {
				t.Fatalf("ReadPage(parent) after split error = %v, want RangeGoneError for 0", err)
			}

			ps := partitions(t, c)
			if len(ps) != 2 {
				t.Fatalf("Partitions() after split = %+v, want two children", ps)
			}
			var got []string
			for _, p := range ps {
				if !slices.Equal(p.Parents, []string{"0"}) {
					t.Errorf("child %s parents = %v, want [0]", p.ID, p.Parents)
				}
				ids, _ := drain(t, c, feed.ReadRequest{PartitionID: p.ID, Start: feed.StartFrom{Kind: feed.StartContinuation, Continuation: first.Continuation}, MaxItems: 4})
				got = append(got, ids...)
			}
			for _, it := range first.Items {
				got = append(got, idOf(it))
			}
			if want := append(slices.Clone(all), later...); !slices.Equal(sorted(got), sorted(want)) {
				t.Fatalf("parent page + children = %v, want each of %v once", sorted(got), sorted(want))
			}
		})
	}
}

func TestContainer_ReadPage_Throttled(t *testing.T) {
	t.Parallel()
	a := openLocal(t, 1)
	c := newFeedContainer(t, a)
	want := upsert(t, c, somePKs, 0, 3)
	req := feed.ReadRequest{PartitionID: "0", Start: feed.StartFrom{Kind: feed.StartBeginning}}

	// Two 429s and a 503: the request policy retries them (after the service's retry-after)
	// and the read succeeds. TestRequestPolicy_WritesAndBudget covers giving up.
	for _, rule := range []emulator.FaultRule{
		{Status: 429, RetryAfter: 5 * time.Millisecond, Count: 2, ChangeFeedOnly: true},
		{Status: 503, Count: 1, ChangeFeedOnly: true},
	} {
		if err := a.Emulator().InjectFaults(rule); err != nil {
			t.Fatalf("InjectFaults() error = %v", err)
		}
		page, err := c.ReadPage(context.Background(), req)
		if err != nil || len(page.Items) != len(want) {
			t.Fatalf("ReadPage() through %d x %d = %d items, %v; want %d", rule.Count, rule.Status, len(page.Items), err, len(want))
		}
	}
}

func TestContainer_ReadPage_Missing(t *testing.T) {
	t.Parallel()
	a := openLocal(t, 1)
	c := newFeedContainer(t, a)

	_, err := c.ReadPage(context.Background(), feed.ReadRequest{PartitionID: "42", Start: feed.StartFrom{Kind: feed.StartBeginning}})
	if !feed.IsRangeGone(err) {
		t.Errorf("ReadPage(unknown partition) error = %v, want RangeGoneError", err)
	}

	missing := a.Container("db", "nope")
	_, err = missing.ReadPage(context.Background(), feed.ReadRequest{PartitionID: "0", Start: feed.StartFrom{Kind: feed.StartBeginning}})
	if !errors.Is(err, feed.ErrNotFound) || !strings.Contains(err.Error(), "db/nope") {
		t.Errorf("ReadPage(missing container) error = %v, want ErrNotFound naming db/nope", err)
	}
	_, err = a.Container("nodb", "orders").Info(context.Background())
	if !errors.Is(err, leases.ErrNotFound) || !strings.Contains(err.Error(), "database nodb") {
		t.Errorf("Info(missing database) error = %v, want ErrNotFound naming database nodb", err)
	}
}

func TestContainer_Query(t *testing.T) {
	t.Parallel()
	a := openLocal(t, 2)
	c := newFeedContainer(t, a)
	upsert(t, c, somePKs, 0, 16)
	var got []string
	err := c.Query(context.Background(), "SELECT * FROM c WHERE c.pk = @pk OR c.pk = @other", map[string]any{"pk": "alpha", "@other": "bravo"},
		func(raw []byte) error { got = append(got, idOf(raw)); return nil })
	if err != nil {
		t.Fatalf("Query() error = %v", err)
	}
	want := []string{"doc-0000", "doc-0001", "doc-0008", "doc-0009"}
	if !slices.Equal(sorted(got), want) {
		t.Fatalf("Query() = %v, want %v", sorted(got), want)
	}
	stop := errors.New("stop")
	if err := c.Query(context.Background(), "SELECT * FROM c", nil, func([]byte) error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("Query() with a failing callback error = %v, want it returned", err)
	}
}

func TestAccount_BadKeyNeverLeaks(t *testing.T) {
	t.Parallel()
	a := openLocal(t, 1)
	newFeedContainer(t, a)
	wrong := "d3Jvbmcta2V5LXdyb25nLWtleS13cm9uZy1rZXktd3Jvbmcta2V5LXdyb25nLWtleQ=="
	opts := a.clientOptionsForTest()
	cred, err := azcosmos.NewKeyCredential(wrong)
	if err != nil {
		t.Fatal(err)
	}
	client, err := azcosmos.NewClientWithKey(a.endpoint, cred, opts)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := base64.StdEncoding.DecodeString(wrong)
	b := NewAccount(client, a.endpoint, AccountSettings{Options: opts, Auth: &MetaAuth{Key: raw}, Logger: a.log})
	defer b.Close()
	_, err = b.Container("db", "orders").Info(context.Background())
	var ae *AuthError
	if !errors.As(err, &ae) || ae.Status != 401 {
		t.Fatalf("Info() with a wrong key error = %v, want AuthError 401", err)
	}
	if strings.Contains(err.Error(), wrong) || strings.Contains(ae.Hint, wrong) {
		t.Fatalf("the error leaks the key: %v", err)
	}
}

func TestNewAccount_RegionalEndpointWarns(t *testing.T) {
	t.Parallel()
	var buf strings.Builder
	log := slog.New(slog.NewTextHandler(&buf, nil))
	open := func(endpoint string, leasesOnly bool) *Account {
		cred, err := azcosmos.NewKeyCredential(testKey)
		if err != nil {
			t.Fatal(err)
		}
		opts := NewClientOptions(ClientSettings{Logger: log})
		client, err := azcosmos.NewClientWithKey(endpoint, cred, opts)
		if err != nil {
			t.Fatal(err)
		}
		a := NewAccount(client, endpoint, AccountSettings{Options: opts, LeasesOnly: leasesOnly, Logger: log})
		t.Cleanup(func() { _ = a.Close() })
		return a
	}
	a := open("https://acct-westeurope.documents.azure.com:443/", false)
	if a.Host() != "acct-westeurope.documents.azure.com" {
		t.Errorf("Host() = %q", a.Host())
	}
	if !strings.Contains(buf.String(), "regional endpoint") || !strings.Contains(buf.String(), "westeurope") {
		t.Errorf("no regional-endpoint warning; log = %q", buf.String())
	}
	if strings.Contains(buf.String(), testKey) {
		t.Errorf("the log leaks the key")
	}
	// A separate lease account may be regional: lease ids embed the monitored account's host.
	buf.Reset()
	open("https://leases-westeurope.documents.azure.com:443/", true)
	if buf.Len() != 0 {
		t.Errorf("a lease-only account warned: %q", buf.String())
	}
}
