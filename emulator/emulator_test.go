package emulator_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cfp-dev/cfp/emulator"
	"github.com/cfp-dev/cfp/emulator/auth"
)

func TestDatabaseAndContainer_CreateReadConflict(t *testing.T) {
	t.Parallel()
	e := openEmu(t, emulator.Options{})
	c := newClient(t, e, "")
	ctx := context.Background()

	if _, err := c.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "db1"}, nil); err != nil {
		t.Fatalf("create database: %v", err)
	}
	_, err := c.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "db1"}, nil)
	if got := statusOf(err); got != http.StatusConflict {
		t.Fatalf("duplicate database: status %d (%v), want 409", got, err)
	}
	d, _ := c.NewDatabase("db1")
	dr, err := d.Read(ctx, nil)
	if err != nil || dr.DatabaseProperties.ID != "db1" || dr.DatabaseProperties.ResourceID == "" {
		t.Fatalf("read database: %+v, %v", dr.DatabaseProperties, err)
	}
	missing, _ := c.NewDatabase("nope")
	if _, err := missing.Read(ctx, nil); statusOf(err) != http.StatusNotFound {
		t.Fatalf("read missing database: %v, want 404", err)
	}

	props := azcosmos.ContainerProperties{ID: "c1", PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/pk"}}}
	if _, err := d.CreateContainer(ctx, props, nil); err != nil {
		t.Fatalf("create container: %v", err)
	}
	if _, err := d.CreateContainer(ctx, props, nil); statusOf(err) != http.StatusConflict {
		t.Fatalf("duplicate container: %v, want 409", err)
	}
	cc, _ := c.NewContainer("db1", "c1")
	cr, err := cc.Read(ctx, nil)
	if err != nil {
		t.Fatalf("read container: %v", err)
	}
	pk := cr.ContainerProperties.PartitionKeyDefinition
	if pk.Version != 2 || pk.Kind != azcosmos.PartitionKeyKindHash || len(pk.Paths) != 1 || pk.Paths[0] != "/pk" {
		t.Errorf("partition key definition = %+v, want /pk Hash version 2", pk)
	}
	if cr.ContainerProperties.ResourceID == "" {
		t.Error("container has no _rid")
	}
	gone, _ := c.NewContainer("db1", "nope")
	if _, err := gone.Read(ctx, nil); statusOf(err) != http.StatusNotFound {
		t.Fatalf("read missing container: %v, want 404", err)
	}

	// Queries over /dbs and /dbs/{db}/colls.
	pager := c.NewQueryDatabasesPager("SELECT * FROM c WHERE c.id = 'db1'", nil)
	var ids []string
	for pager.More() {
		p, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatalf("query databases: %v", err)
		}
		for _, db := range p.Databases {
			ids = append(ids, db.ID)
		}
	}
	if len(ids) != 1 || ids[0] != "db1" {
		t.Errorf("database query = %v, want [db1]", ids)
	}
	cpager := d.NewQueryContainersPager("SELECT * FROM c", nil)
	var cids []string
	for cpager.More() {
		p, err := cpager.NextPage(ctx)
		if err != nil {
			t.Fatalf("query containers: %v", err)
		}
		for _, cp := range p.Containers {
			cids = append(cids, cp.ID)
		}
	}
	if len(cids) != 1 || cids[0] != "c1" {
		t.Errorf("container query = %v, want [c1]", cids)
	}
}

func TestItems_CRUDAndETags(t *testing.T) {
	t.Parallel()
	e := openEmu(t, emulator.Options{})
	c := newClient(t, e, "")
	cc := setupContainer(t, c, "db", "items")
	ctx := context.Background()
	pk := azcosmos.NewPartitionKeyString("a")

	created, err := cc.CreateItem(ctx, pk, []byte(`{"id":"x1","pk":"a","v":1,"_etag":"client-forged"}`), nil)
	if err != nil || created.RawResponse.StatusCode != http.StatusCreated {
		t.Fatalf("create: %v", err)
	}
	if _, err := cc.CreateItem(ctx, pk, []byte(`{"id":"x1","pk":"a","v":9}`), nil); statusOf(err) != http.StatusConflict {
		t.Fatalf("create duplicate: %v, want 409", err)
	}
	// The same id in another logical partition is another item.
	if _, err := cc.CreateItem(ctx, azcosmos.NewPartitionKeyString("b"), []byte(`{"id":"x1","pk":"b","v":1}`), nil); err != nil {
		t.Fatalf("create same id in other partition: %v", err)
	}
	if _, err := cc.CreateItem(ctx, pk, []byte(`{"id":"x2","pk":"zzz"}`), nil); statusOf(err) != http.StatusBadRequest {
		t.Fatalf("create with mismatched partition key: %v, want 400", err)
	}

	read, err := cc.ReadItem(ctx, pk, "x1", nil)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	var body map[string]any
	if err := json.Unmarshal(read.Value, &body); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"_rid", "_self", "_etag", "_ts", "_attachments"} {
		if _, ok := body[p]; !ok {
			t.Errorf("read item lacks %s: %s", p, read.Value)
		}
	}
	// As on the service, _lsn is on change-feed items only.
	if _, ok := body["_lsn"]; ok {
		t.Errorf("read item has _lsn: %s", read.Value)
	}
	if feed, _ := drainAll(t, cc); len(feed) == 0 || feed[0].LSN == 0 {
		t.Errorf("change-feed items lack _lsn: %+v", feed)
	}
	if body["_etag"] == "client-forged" || string(read.ETag) != body["_etag"] {
		t.Errorf("etag header %q, body _etag %v: want the server's etag in both", read.ETag, body["_etag"])
	}
	if created.ETag != read.ETag {
		t.Errorf("create etag %q != read etag %q", created.ETag, read.ETag)
	}

	stale := read.ETag
	replaced, err := cc.ReplaceItem(ctx, pk, "x1", []byte(`{"id":"x1","pk":"a","v":2}`), &azcosmos.ItemOptions{IfMatchEtag: &stale})
	if err != nil {
		t.Fatalf("replace with current etag: %v", err)
	}
	if replaced.ETag == stale || replaced.ETag == "" {
		t.Fatalf("replace did not change the etag (%q)", replaced.ETag)
	}
	if _, err := cc.ReplaceItem(ctx, pk, "x1", []byte(`{"id":"x1","pk":"a","v":3}`), &azcosmos.ItemOptions{IfMatchEtag: &stale}); statusOf(err) != http.StatusPreconditionFailed {
		t.Fatalf("replace with stale etag: %v, want 412", err)
	}
	if _, err := cc.DeleteItem(ctx, pk, "x1", &azcosmos.ItemOptions{IfMatchEtag: &stale}); statusOf(err) != http.StatusPreconditionFailed {
		t.Fatalf("delete with stale etag: %v, want 412", err)
	}
	if _, err := cc.ReplaceItem(ctx, pk, "missing", []byte(`{"id":"missing","pk":"a"}`), nil); statusOf(err) != http.StatusNotFound {
		t.Fatalf("replace missing: %v, want 404", err)
	}
	got, err := cc.ReadItem(ctx, pk, "x1", nil)
	if err != nil || !strings.Contains(string(got.Value), `"v":2`) {
		t.Fatalf("read after failed replace: %s, %v; want v2", got.Value, err)
	}

	up, err := cc.UpsertItem(ctx, pk, []byte(`{"id":"u1","pk":"a","v":1}`), nil)
	if err != nil || up.RawResponse.StatusCode != http.StatusCreated {
		t.Fatalf("upsert new: %v (status %v), want 201", err, up.RawResponse)
	}
	up, err = cc.UpsertItem(ctx, pk, []byte(`{"id":"u1","pk":"a","v":2}`), nil)
	if err != nil || up.RawResponse.StatusCode != http.StatusOK {
		t.Fatalf("upsert existing: %v, want 200", err)
	}
	if len(up.Value) != 0 {
		t.Errorf("upsert with Prefer: return=minimal returned a body: %s", up.Value)
	}
	if up.SessionToken == nil || !strings.Contains(*up.SessionToken, ":-1#") {
		t.Errorf("session token %v, want <range>:-1#<lsn>", up.SessionToken)
	}

	cur := replaced.ETag
	if _, err := cc.DeleteItem(ctx, pk, "x1", &azcosmos.ItemOptions{IfMatchEtag: &cur}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := cc.ReadItem(ctx, pk, "x1", nil); statusOf(err) != http.StatusNotFound {
		t.Fatalf("read deleted: %v, want 404", err)
	}
	if _, err := cc.DeleteItem(ctx, pk, "x1", nil); statusOf(err) != http.StatusNotFound {
		t.Fatalf("delete deleted: %v, want 404", err)
	}

	// Ids with spaces and non-ASCII characters travel escaped and are signed unescaped.
	if _, err := cc.CreateItem(ctx, pk, []byte(`{"id":"a b é","pk":"a"}`), nil); err != nil {
		t.Fatalf("create odd id: %v", err)
	}
	if _, err := cc.ReadItem(ctx, pk, "a b é", nil); err != nil {
		t.Fatalf("read odd id: %v", err)
	}
}

func TestQuery_CrossPartitionStartsWithPaging(t *testing.T) {
	t.Parallel()
	e := openEmu(t, emulator.Options{})
	c := newClient(t, e, "")
	cc := setupContainer(t, c, "db", "q")
	want := map[string]bool{}
	for i := range 7 {
		id := fmt.Sprintf("lease-%d", i)
		want[id] = true
		upsert(t, cc, doc{ID: id, PK: fmt.Sprintf("p%d", i), V: i})
	}
	for i := range 5 {
		upsert(t, cc, doc{ID: fmt.Sprintf("other-%d", i), PK: fmt.Sprintf("p%d", i)})
	}
	pager := cc.NewQueryItemsPager("SELECT * FROM c WHERE STARTSWITH(c.id, @prefix)", azcosmos.NewPartitionKey(),
		&azcosmos.QueryOptions{PageSizeHint: 2, QueryParameters: []azcosmos.QueryParameter{{Name: "@prefix", Value: "lease-"}}})
	got := map[string]int{}
	pages := 0
	for pager.More() {
		p, err := pager.NextPage(context.Background())
		if err != nil {
			t.Fatalf("query page %d: %v", pages, err)
		}
		pages++
		if len(p.Items) > 2 {
			t.Errorf("page %d has %d items, want at most 2", pages, len(p.Items))
		}
		for _, raw := range p.Items {
			var d doc
			_ = json.Unmarshal(raw, &d)
			got[d.ID]++
		}
	}
	if pages != 4 {
		t.Errorf("got %d pages, want 4 (2+2+2+1)", pages)
	}
	for id := range want {
		if got[id] != 1 {
			t.Errorf("%s returned %d times, want once", id, got[id])
		}
	}
	if len(got) != len(want) {
		t.Errorf("query returned %v, want only the 7 lease- ids", got)
	}

	// A partition-scoped query sees only its logical partition.
	pp := cc.NewQueryItemsPager("SELECT * FROM c", azcosmos.NewPartitionKeyString("p3"), nil)
	n := 0
	for pp.More() {
		p, err := pp.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		n += len(p.Items)
	}
	if n != 2 {
		t.Errorf("partition p3 query returned %d items, want 2", n)
	}

	// Unsupported SQL is a 400 with a JSON body.
	resp, body := rawRequest(t, e, http.MethodPost, "/dbs/db/colls/q/docs",
		map[string]string{"Content-Type": "application/query+json"}, `{"query":"SELECT c.id FROM c JOIN t IN c.tags"}`)
	var eb struct{ Code, Message string }
	if resp.StatusCode != http.StatusBadRequest || json.Unmarshal(body, &eb) != nil || eb.Code != "BadRequest" {
		t.Errorf("unsupported query: %d %s, want 400 with a JSON body", resp.StatusCode, body)
	}
}

// fillFeedFixture writes documents over 4 partitions: some updated several times, some deleted.
// It returns the live documents at their latest version.
func fillFeedFixture(t testing.TB, cc *azcosmos.ContainerClient, prefix string, n int) map[string]int {
	t.Helper()
	want := map[string]int{}
	for i := range n {
		d := doc{ID: fmt.Sprintf("%s%d", prefix, i), PK: fmt.Sprintf("pk-%d", i%13), V: 1}
		upsert(t, cc, d)
		want[d.ID] = 1
	}
	for i := 0; i < n; i += 3 {
		for v := 2; v <= 3; v++ {
			d := doc{ID: fmt.Sprintf("%s%d", prefix, i), PK: fmt.Sprintf("pk-%d", i%13), V: v}
			upsert(t, cc, d)
			want[d.ID] = v
		}
	}
	for i := 1; i < n; i += 5 {
		id := fmt.Sprintf("%s%d", prefix, i)
		if _, err := cc.DeleteItem(context.Background(), azcosmos.NewPartitionKeyString(fmt.Sprintf("pk-%d", i%13)), id, nil); err != nil {
			t.Fatalf("delete %s: %v", id, err)
		}
		delete(want, id)
	}
	return want
}

func TestChangeFeed_PerFeedRange(t *testing.T) {
	t.Parallel()
	clk := newClock()
	e := openEmu(t, emulator.Options{Partitions: 4, Now: clk.Now})
	c := newClient(t, e, "")
	cc := setupContainer(t, c, "db", "feed")
	ctx := context.Background()

	want := fillFeedFixture(t, cc, "a", 40)
	frs, err := cc.ReadFeedRanges(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(frs) != 4 {
		t.Fatalf("got %d feed ranges, want 4", len(frs))
	}

	t.Run("beginning", func(t *testing.T) {
		got, _ := drainAll(t, cc)
		checkExactlyOnce(t, got, want)
		for _, d := range got {
			if d.LSN == 0 {
				t.Errorf("document %s has no _lsn", d.ID)
			}
		}
	})

	// Positions taken now: "from now" continuations and saved continuations after draining.
	cr, err := cc.Read(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	rid := cr.ContainerProperties.ResourceID
	var nowConts, savedConts []string
	for i := range frs {
		// "From now" is "*": the first read answers 304 with the current position, which the
		// composite continuation then carries.
		now := nowContinuation(rid, frs[i])
		resp, err := cc.ReadChangeFeed(ctx, &azcosmos.ChangeFeedOptions{Continuation: &now})
		if err != nil || resp.Count != 0 {
			t.Fatalf("read from now: %d items, %v; want none", resp.Count, err)
		}
		nowConts = append(nowConts, resp.ContinuationToken)
		_, cont := drainRange(t, cc, &frs[i], "", 7)
		savedConts = append(savedConts, cont)
	}

	clk.Advance(time.Hour)
	startTime := clk.Now()
	later := map[string]int{}
	for i := range 10 {
		d := doc{ID: fmt.Sprintf("b%d", i), PK: fmt.Sprintf("pk-%d", i), V: 1}
		upsert(t, cc, d)
		later[d.ID] = 1
	}
	upsert(t, cc, doc{ID: "a0", PK: "pk-0", V: 4}) // an old document updated after startTime
	later["a0"] = 4

	t.Run("now", func(t *testing.T) {
		var got []doc
		for i := range frs {
			docs, _ := drainRange(t, cc, nil, nowConts[i], 4)
			got = append(got, docs...)
		}
		checkExactlyOnce(t, got, later)
	})
	t.Run("continuation", func(t *testing.T) {
		var got []doc
		for i := range frs {
			docs, _ := drainRange(t, cc, nil, savedConts[i], 4)
			got = append(got, docs...)
		}
		checkExactlyOnce(t, got, later)
	})
	t.Run("time", func(t *testing.T) {
		var got []doc
		for i := range frs {
			// One page of 100 holds everything written after startTime.
			resp, err := cc.ReadChangeFeed(ctx, &azcosmos.ChangeFeedOptions{FeedRange: &frs[i], StartFrom: &startTime, MaxItemCount: 100})
			if err != nil {
				t.Fatal(err)
			}
			for _, raw := range resp.Items {
				var d doc
				_ = json.Unmarshal(raw, &d)
				got = append(got, d)
			}
		}
		checkExactlyOnce(t, got, later)
	})
}

func TestChangeFeed_WireProtocol(t *testing.T) {
	t.Parallel()
	clk := newClock()
	e := openEmu(t, emulator.Options{Partitions: 2, Now: clk.Now})
	c := newClient(t, e, "")
	cc := setupContainer(t, c, "db", "wire")
	for i := range 6 {
		upsert(t, cc, doc{ID: fmt.Sprintf("d%d", i), PK: "same", V: 1})
	}
	clk.Advance(time.Minute)
	upsert(t, cc, doc{ID: "late", PK: "same", V: 1})

	feed := func(h map[string]string) (*http.Response, []string) {
		h["A-IM"] = "Incremental Feed"
		resp, body := rawRequest(t, e, http.MethodGet, "/dbs/db/colls/wire/docs", h, "")
		var page struct {
			Documents []doc
			Count     int `json:"_count"`
		}
		var ids []string
		if resp.StatusCode == http.StatusOK {
			if err := json.Unmarshal(body, &page); err != nil {
				t.Fatalf("change-feed body %s: %v", body, err)
			}
			for _, d := range page.Documents {
				ids = append(ids, d.ID)
			}
			if page.Count != len(ids) {
				t.Errorf("_count %d for %d documents", page.Count, len(ids))
			}
			// The gateway announces the page's length: clients size their buffer by it.
			if cl := resp.Header.Get("Content-Length"); cl != strconv.Itoa(len(body)) {
				t.Errorf("Content-Length %q for a body of %d bytes", cl, len(body))
			}
		}
		if resp.Header.Get("etag") == "" {
			t.Errorf("change-feed %d response without etag", resp.StatusCode)
		}
		return resp, ids
	}

	// Partition-key scoped, no range id: all 7 in LSN order, then 304 with the same etag.
	resp, ids := feed(map[string]string{"x-ms-documentdb-partitionkey": `["same"]`})
	if resp.StatusCode != http.StatusOK || len(ids) != 7 || ids[6] != "late" {
		t.Fatalf("pk-scoped feed: %d %v", resp.StatusCode, ids)
	}
	etag := resp.Header.Get("etag")
	if etag != `"7"` || resp.Header.Get("lsn") != "7" {
		t.Errorf("etag %s lsn %s, want \"7\" and 7 (one partition holds all)", etag, resp.Header.Get("lsn"))
	}
	rangeID := resp.Header.Get("x-ms-documentdb-partitionkeyrangeid")
	if st := resp.Header.Get("x-ms-session-token"); st != rangeID+":-1#7" {
		t.Errorf("session token %q, want %s:-1#7", st, rangeID)
	}
	resp, _ = feed(map[string]string{"x-ms-documentdb-partitionkey": `["same"]`, "If-None-Match": etag})
	if resp.StatusCode != http.StatusNotModified || resp.Header.Get("etag") != etag {
		t.Errorf("caught-up read: %d etag %s, want 304 with %s", resp.StatusCode, resp.Header.Get("etag"), etag)
	}
	// Page size and continuation by etag.
	resp, ids = feed(map[string]string{"x-ms-documentdb-partitionkeyrangeid": rangeID, "x-ms-max-item-count": "4"})
	if len(ids) != 4 || resp.Header.Get("etag") != `"4"` {
		t.Errorf("first page of 4: %v etag %s", ids, resp.Header.Get("etag"))
	}
	_, ids = feed(map[string]string{"x-ms-documentdb-partitionkeyrangeid": rangeID, "If-None-Match": "4"})
	if len(ids) != 3 {
		t.Errorf("unquoted continuation 4: got %v, want the last 3", ids)
	}
	// From now.
	resp, _ = feed(map[string]string{"x-ms-documentdb-partitionkeyrangeid": rangeID, "If-None-Match": "*"})
	if resp.StatusCode != http.StatusNotModified || resp.Header.Get("etag") != `"7"` {
		t.Errorf("from now: %d etag %s, want 304 \"7\"", resp.StatusCode, resp.Header.Get("etag"))
	}
	// If-Modified-Since in both zone spellings.
	since := clk.Now().Add(-time.Second)
	for _, layout := range []string{since.UTC().Format(time.RFC1123), since.UTC().Format(http.TimeFormat)} {
		_, ids = feed(map[string]string{"x-ms-documentdb-partitionkeyrangeid": rangeID, "If-Modified-Since": layout})
		if len(ids) != 1 || ids[0] != "late" {
			t.Errorf("If-Modified-Since %q: got %v, want [late]", layout, ids)
		}
	}
	// EPK sub-range filtering: an empty sub-range has nothing, the whole space everything.
	_, ids = feed(map[string]string{"x-ms-documentdb-partitionkeyrangeid": rangeID, "x-ms-start-epk": "3F", "x-ms-end-epk": "3FF"})
	if len(ids) != 0 {
		t.Errorf("EPK sub-range without documents returned %v", ids)
	}
	_, ids = feed(map[string]string{"x-ms-documentdb-partitionkeyrangeid": rangeID, "x-ms-start-epk": "", "x-ms-end-epk": "FF"})
	if len(ids) != 7 {
		t.Errorf("whole EPK range returned %d documents, want 7", len(ids))
	}
	// An unknown range id is gone.
	resp, _ = rawRequest(t, e, http.MethodGet, "/dbs/db/colls/wire/docs", map[string]string{"A-IM": "Incremental Feed", "x-ms-documentdb-partitionkeyrangeid": "99"}, "")
	if resp.StatusCode != http.StatusGone || resp.Header.Get("x-ms-substatus") != "1002" {
		t.Errorf("unknown range: %d substatus %q, want 410/1002", resp.StatusCode, resp.Header.Get("x-ms-substatus"))
	}
}

func TestDurability_ReopenResumesAndKeepsRIDs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e1, err := emulator.Open(emulator.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	c1 := newClient(t, e1, "")
	cc1 := setupContainer(t, c1, "db", "durable")
	ctx := context.Background()
	want := fillFeedFixture(t, cc1, "a", 20)
	_, conts := drainAll(t, cc1)
	cr1, _ := cc1.Read(ctx, nil)
	item1, err := cc1.ReadItem(ctx, azcosmos.NewPartitionKeyString("pk-0"), "a0", nil)
	if err != nil {
		t.Fatal(err)
	}
	c1.Close()
	if err := e1.Close(); err != nil {
		t.Fatal(err)
	}

	e2 := openEmu(t, emulator.Options{Dir: dir})
	c2 := newClient(t, e2, "")
	cc2, _ := c2.NewContainer("db", "durable")
	cr2, err := cc2.Read(ctx, nil)
	if err != nil {
		t.Fatalf("read container after reopen: %v", err)
	}
	if cr1.ContainerProperties.ResourceID != cr2.ContainerProperties.ResourceID {
		t.Errorf("container RID changed across restart: %s -> %s", cr1.ContainerProperties.ResourceID, cr2.ContainerProperties.ResourceID)
	}
	item2, err := cc2.ReadItem(ctx, azcosmos.NewPartitionKeyString("pk-0"), "a0", nil)
	if err != nil || string(item2.Value) != string(item1.Value) {
		t.Errorf("item after reopen = %s (%v), want %s", item2.Value, err, item1.Value)
	}
	got, _ := drainAll(t, cc2)
	checkExactlyOnce(t, got, want)

	upsert(t, cc2, doc{ID: "new1", PK: "pk-1", V: 1})
	upsert(t, cc2, doc{ID: "a3", PK: "pk-3", V: 7})
	var resumed []doc
	for _, cont := range conts {
		docs, _ := drainRange(t, cc2, nil, cont, 10)
		resumed = append(resumed, docs...)
	}
	checkExactlyOnce(t, resumed, map[string]int{"new1": 1, "a3": 7})
}

func TestAuth_WrongKeyIs401WithJSONBody(t *testing.T) {
	t.Parallel()
	e := openEmu(t, emulator.Options{})
	other := "dGhpcyBpcyBub3QgdGhlIGVtdWxhdG9yIGtleSBhdCBhbGwhIQ=="
	c := newClient(t, e, other)
	_, err := c.CreateDatabase(context.Background(), azcosmos.DatabaseProperties{ID: "db"}, nil)
	if statusOf(err) != http.StatusUnauthorized {
		t.Fatalf("wrong key: %v, want 401", err)
	}
	if strings.Contains(err.Error(), other) {
		t.Error("the 401 error echoes the key")
	}
	req, _ := http.NewRequest(http.MethodGet, "http://raw.test/dbs", nil)
	req.Header.Set("x-ms-date", time.Now().UTC().Format(http.TimeFormat))
	req.Header.Set("Authorization", "type%3Dmaster%26ver%3D1.0%26sig%3DAAAA")
	resp, _ := emulator.Transport{Handler: e.Handler()}.Do(req)
	var body struct{ Code, Message string }
	if resp.StatusCode != http.StatusUnauthorized || json.NewDecoder(resp.Body).Decode(&body) != nil || body.Code != "Unauthorized" || body.Message == "" {
		t.Errorf("bad signature: %d %+v, want 401 with a JSON body", resp.StatusCode, body)
	}
}

func TestConcurrentWritersAndReaders(t *testing.T) {
	t.Parallel()
	e := openEmu(t, emulator.Options{})
	c := newClient(t, e, "")
	cc := setupContainer(t, c, "db", "conc")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const writers, perWriter = 4, 40
	var wg sync.WaitGroup
	errs := make(chan error, writers+2)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				pk := fmt.Sprintf("p%d", (i%10)%7)
				b, _ := json.Marshal(doc{ID: fmt.Sprintf("w%d-%d", w, i%10), PK: pk, V: i})
				if _, err := cc.UpsertItem(ctx, azcosmos.NewPartitionKeyString(pk), b, nil); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var readers sync.WaitGroup
	for range 2 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			frs, err := cc.ReadFeedRanges(ctx, nil)
			if err != nil {
				errs <- err
				return
			}
			conts := make([]string, len(frs))
			for ctx.Err() == nil {
				for i := range frs {
					opts := &azcosmos.ChangeFeedOptions{MaxItemCount: 5, FeedRange: &frs[i]}
					if conts[i] != "" {
						opts.FeedRange, opts.Continuation = nil, &conts[i]
					}
					resp, err := cc.ReadChangeFeed(ctx, opts)
					if err != nil {
						if ctx.Err() == nil {
							errs <- err
						}
						return
					}
					conts[i] = resp.ContinuationToken
				}
			}
		}()
	}
	wg.Wait()
	cancel()
	readers.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Each id lives in one logical partition and is written by one writer, so its latest
	// version is its last write.
	want := map[string]int{}
	for w := range writers {
		for i := range perWriter {
			want[fmt.Sprintf("w%d-%d", w, i%10)] = i
		}
	}
	got, _ := drainAll(t, cc)
	checkExactlyOnce(t, got, want)
}
func TestSplit_SDKFollowsWithoutLossOrRepeat(t *testing.T) {
	t.Parallel()
	e := openEmu(t, emulator.Options{Partitions: 2})
	c := newClient(t, e, "")
	cc := setupContainer(t, c, "db", "split")
	ctx := context.Background()
	want := fillFeedFixture(t, cc, "a", 30)

	frs, err := cc.ReadFeedRanges(ctx, nil)
	if err != nil || len(frs) != 2 {
		t.Fatalf("feed ranges %v, %v", frs, err)
	}
	// Read one page per range, then split both partitions.
	var got []doc
	conts := make([]string, len(frs))
	for i := range frs {
		resp, err := cc.ReadChangeFeed(ctx, &azcosmos.ChangeFeedOptions{FeedRange: &frs[i], MaxItemCount: 3})
		if err != nil {
			t.Fatal(err)
		}
		for _, raw := range resp.Items {
			var d doc
			_ = json.Unmarshal(raw, &d)
			got = append(got, d)
		}
		conts[i] = resp.ContinuationToken
	}
	for _, id := range []string{"0", "1"} {
		children, err := e.Split("db", "split", id)
		if err != nil || len(children) != 2 {
			t.Fatalf("split %s: %v %v", id, children, err)
		}
	}
	if _, err := e.Split("db", "split", "0"); err == nil {
		t.Error("splitting a gone range succeeded")
	}
	upsert(t, cc, doc{ID: "after", PK: "pk-5", V: 1})
	want["after"] = 1
	for i := range frs {
		docs, _ := drainRange(t, cc, nil, conts[i], 4)
		got = append(got, docs...)
	}
	checkExactlyOnce(t, got, want)

	after, err := cc.ReadFeedRanges(ctx, nil)
	if err != nil || len(after) != 4 {
		t.Fatalf("feed ranges after two splits: %d, %v; want 4", len(after), err)
	}
	resp, body := rawRequest(t, e, http.MethodGet, "/dbs/db/colls/split/pkranges", nil, "")
	var pk struct {
		PartitionKeyRanges []struct {
			ID      string   `json:"id"`
			Min     string   `json:"minInclusive"`
			Max     string   `json:"maxExclusive"`
			Parents []string `json:"parents"`
		}
	}
	if err := json.Unmarshal(body, &pk); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("pkranges: %d %s", resp.StatusCode, body)
	}
	sort.Slice(pk.PartitionKeyRanges, func(i, j int) bool { return pk.PartitionKeyRanges[i].Min < pk.PartitionKeyRanges[j].Min })
	prev := ""
	for _, r := range pk.PartitionKeyRanges {
		if r.Min != prev || len(r.Parents) != 1 {
			t.Errorf("range %+v does not tile after %q or lacks its parent", r, prev)
		}
		prev = r.Max
	}
	if prev != "FF" {
		t.Errorf("ranges end at %q, want FF", prev)
	}
	resp, _ = rawRequest(t, e, http.MethodGet, "/dbs/db/colls/split/docs", map[string]string{"A-IM": "Incremental Feed", "x-ms-documentdb-partitionkeyrangeid": "0"}, "")
	if resp.StatusCode != http.StatusGone || resp.Header.Get("x-ms-substatus") != "1002" {
		t.Errorf("read of split parent: %d, want 410/1002", resp.StatusCode)
	}
}

func TestOpen_SecondOpenGetsLockedError(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := openEmu(t, emulator.Options{Dir: dir})
	_, err := emulator.Open(emulator.Options{Dir: dir})
	var le *emulator.LockedError
	if !errors.As(err, &le) {
		t.Fatalf("second open: %v, want *LockedError", err)
	}
	if le.PID != os.Getpid() || le.Dir != dir || !strings.Contains(err.Error(), "cfp emulator --data") {
		t.Errorf("locked error %+v: %v", le, err)
	}
	e.SetServingAddr("127.0.0.1:18081")
	_, err = emulator.Open(emulator.Options{Dir: dir})
	if !errors.As(err, &le) || le.Addr != "127.0.0.1:18081" || !strings.Contains(err.Error(), "--endpoint http://127.0.0.1:18081/") {
		t.Errorf("locked error while serving: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e2, err := emulator.Open(emulator.Options{Dir: dir})
	if err != nil {
		t.Fatalf("open after close: %v", err)
	}
	_ = e2.Close()
}

func TestFaults_ThrottleUnavailableAndAdmin(t *testing.T) {
	t.Parallel()
	e := openEmu(t, emulator.Options{Partitions: 4})
	c := newClient(t, e, "")
	cc := setupContainer(t, c, "db", "faults")
	ctx := context.Background()
	upsert(t, cc, doc{ID: "x", PK: "a", V: 1})

	// Two 429s are retried by the SDK (x-ms-retry-after-ms honoured); the read succeeds.
	if err := e.InjectFaults(emulator.FaultRule{Status: http.StatusTooManyRequests, Count: 2, RetryAfter: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if _, err := cc.ReadItem(ctx, azcosmos.NewPartitionKeyString("a"), "x", nil); err != nil {
		t.Fatalf("read through two 429s: %v", err)
	}
	// A change-feed-only 503 leaves item reads alone.
	if err := e.InjectFaults(emulator.FaultRule{Status: http.StatusServiceUnavailable, Count: 1, ChangeFeedOnly: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := cc.ReadItem(ctx, azcosmos.NewPartitionKeyString("a"), "x", nil); err != nil {
		t.Fatalf("item read with a change-feed fault armed: %v", err)
	}
	frs, _ := cc.ReadFeedRanges(ctx, nil)
	if _, err := cc.ReadChangeFeed(ctx, &azcosmos.ChangeFeedOptions{FeedRange: &frs[0]}); statusOf(err) != http.StatusServiceUnavailable {
		t.Fatalf("change feed with 503 armed: %v, want 503", err)
	}
	if _, err := cc.ReadChangeFeed(ctx, &azcosmos.ChangeFeedOptions{FeedRange: &frs[0]}); err != nil {
		t.Fatalf("change feed after the fault was used up: %v", err)
	}
	if err := e.InjectFaults(emulator.FaultRule{Status: 502}); err == nil {
		t.Error("a 502 fault rule was accepted")
	}
	if err := e.InjectFaults(emulator.FaultRule{Status: 500, Count: 1}); err != nil {
		t.Fatal(err)
	}
	if resp, _ := rawRequest(t, e, http.MethodGet, "/dbs/db", nil, ""); resp.StatusCode != http.StatusInternalServerError {
		t.Fatalf("request with 500 armed: %d, want 500", resp.StatusCode)
	}

	// Admin endpoints, signed with the account key.
	resp, body := rawRequest(t, e, http.MethodPost, "/_cfp/faults", nil, `{"status":429,"count":1,"retryAfterMs":1}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /_cfp/faults: %d %s", resp.StatusCode, body)
	}
	resp, _ = rawRequest(t, e, http.MethodGet, "/dbs/db", nil, "")
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("x-ms-retry-after-ms") != "1" {
		t.Errorf("request after admin 429 rule: %d retry-after %q", resp.StatusCode, resp.Header.Get("x-ms-retry-after-ms"))
	}
	resp, body = rawRequest(t, e, http.MethodPost, "/_cfp/split", nil, `{"db":"db","coll":"faults","range":"2"}`)
	var sr emulator.SplitResponse
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &sr) != nil || len(sr.Children) != 2 {
		t.Fatalf("POST /_cfp/split: %d %s", resp.StatusCode, body)
	}
	resp, body = rawRequest(t, e, http.MethodGet, "/_cfp/status", nil, "")
	var st emulator.Status
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &st) != nil {
		t.Fatalf("GET /_cfp/status: %d %s", resp.StatusCode, body)
	}
	if len(st.Databases) != 1 || len(st.Databases[0].Containers) != 1 || len(st.Databases[0].Containers[0].Ranges) != 5 {
		t.Errorf("status after a split = %s, want 1 db, 1 container, 5 ranges", body)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://raw.test/_cfp/status", nil)
	resp, _ = emulator.Transport{Handler: e.Handler()}.Do(req)
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("unsigned admin request: %d, want 401", resp.StatusCode)
	}
}

func TestServe_OverLoopbackAndShutdown(t *testing.T) {
	t.Parallel()
	e := openEmu(t, emulator.Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Serve(ctx, ln) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		if e.ServingAddr() != "" {
			t.Error("serving address still recorded after Serve returned")
		}
	}()

	cred, _ := azcosmos.NewKeyCredential(auth.WellKnownKey)
	c, err := azcosmos.NewClientWithKey("http://"+ln.Addr().String()+"/", cred, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateDatabase(context.Background(), azcosmos.DatabaseProperties{ID: "sock"}, nil); err != nil {
		t.Fatalf("create database over a socket: %v", err)
	}
	if e.ServingAddr() != ln.Addr().String() {
		t.Errorf("serving address %q, want %q", e.ServingAddr(), ln.Addr())
	}
}

// TestItem_PropertyOrder: a document keeps its properties in the order it was written, and the
// system properties follow, in the service's order (_rid, _self, _etag, _attachments, _ts; the
// change feed adds _lsn last); system properties the client sent back are replaced, not kept.
func TestItem_PropertyOrder(t *testing.T) {
	t.Parallel()
	e := openEmu(t, emulator.Options{Partitions: 1})
	c := newClient(t, e, "")
	cc := setupContainer(t, c, "db", "order")
	ctx := context.Background()
	pk := azcosmos.NewPartitionKeyString("p")
	if _, err := cc.UpsertItem(ctx, pk, []byte(`{"zeta":1,"id":"d1","_etag":"stale","pk":"p","alpha":{"y":2,"b":3},"_ts":5}`), nil); err != nil {
		t.Fatal(err)
	}
	resp, err := cc.ReadItem(ctx, pk, "d1", nil)
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`^\{"zeta":1,"id":"d1","pk":"p","alpha":\{"y":2,"b":3\},"_rid":"[^"]+","_self":"[^"]+","_etag":"(?:[^"\\]|\\.)+","_attachments":"attachments/","_ts":\d+\}$`)
	if !re.Match(resp.Value) {
		t.Errorf("read item = %s, want the written order, then _rid, _self, _etag, _attachments, _ts", resp.Value)
	}
	if bytes.Contains(resp.Value, []byte(`"stale"`)) || bytes.Contains(resp.Value, []byte(`"_ts":5}`)) {
		t.Errorf("read item kept system properties the client sent: %s", resp.Value)
	}
	// A patch keeps the properties where they were and puts a new one after them.
	var ops azcosmos.PatchOperations
	ops.AppendSet("/alpha", 9)
	ops.AppendAdd("/beta", true)
	if _, err := cc.PatchItem(ctx, pk, "d1", ops, nil); err != nil {
		t.Fatal(err)
	}
	if resp, err = cc.ReadItem(ctx, pk, "d1", nil); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^\{"zeta":1,"id":"d1","pk":"p","alpha":9,"beta":true,"_rid":`).Match(resp.Value) {
		t.Errorf("patched item = %s, want the properties in place, the new one after them", resp.Value)
	}
	_, body := rawRequest(t, e, http.MethodGet, "/dbs/db/colls/order/docs", map[string]string{"A-IM": "Incremental Feed", "x-ms-documentdb-partitionkey": `["p"]`}, "")
	if !regexp.MustCompile(`"_ts":\d+,"_lsn":\d+\}\]`).Match(body) {
		t.Errorf("change-feed page %s: want _ts then _lsn last", body)
	}
}
