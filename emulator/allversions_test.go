package emulator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cfp-dev/cfp/emulator"
)

// avChange is one all-versions change as the wire carries it.
type avChange struct {
	Current  map[string]any `json:"current"`
	Previous map[string]any `json:"previous"`
	Metadata struct {
		OperationType     string          `json:"operationType"`
		LSN               int64           `json:"lsn"`
		CRTS              int64           `json:"crts"`
		PreviousImageLSN  int64           `json:"previousImageLSN"`
		TimeToLiveExpired *bool           `json:"timeToLiveExpired"`
		ID                string          `json:"id"`
		PartitionKey      json.RawMessage `json:"partitionKey"`
	} `json:"metadata"`
}

func (c avChange) String() string {
	id := c.Metadata.ID
	if id == "" {
		id, _ = c.Current["id"].(string)
	}
	return fmt.Sprintf("%s %s@%d", c.Metadata.OperationType, id, c.Metadata.LSN)
}

// avFeed sends one all-versions read of container coll with the headers hdr.
func avFeed(t *testing.T, e *emulator.Emulator, coll string, hdr map[string]string) (*http.Response, []avChange) {
	t.Helper()
	h := map[string]string{"A-IM": "Full-Fidelity Feed", "x-ms-cosmos-changefeed-wire-format-version": "2021-09-15"}
	for k, v := range hdr {
		h[k] = v
	}
	resp, body := rawRequest(t, e, http.MethodGet, "/dbs/db/colls/"+coll+"/docs", h, "")
	if resp.Header.Get("etag") == "" && resp.StatusCode < 400 {
		t.Errorf("all-versions %d response without etag", resp.StatusCode)
	}
	if resp.StatusCode != http.StatusOK {
		return resp, nil
	}
	var page struct {
		Documents []avChange
		Count     int `json:"_count"`
	}
	if err := json.Unmarshal(body, &page); err != nil {
		t.Fatalf("all-versions body %s: %v", body, err)
	}
	if page.Count != len(page.Documents) {
		t.Errorf("_count %d for %d changes", page.Count, len(page.Documents))
	}
	return resp, page.Documents
}

func changeList(cs []avChange) string {
	var s []string
	for _, c := range cs {
		s = append(s, c.String())
	}
	return strings.Join(s, ", ")
}

func TestChangeFeedAll_EveryOperationWithPreviousImages(t *testing.T) {
	t.Parallel()
	clk := newClock()
	e := openEmu(t, emulator.Options{Partitions: 1, Now: clk.Now})
	cc := setupContainer(t, newClient(t, e, ""), "db", "av")
	ctx := context.Background()
	upsert(t, cc, doc{ID: "before", PK: "a", V: 1})

	resp, _ := avFeed(t, e, "av", map[string]string{"x-ms-documentdb-partitionkeyrangeid": "0", "If-None-Match": "*"})
	if resp.StatusCode != http.StatusNotModified || resp.Header.Get("etag") != `"1"` {
		t.Fatalf("from now: %d etag %s, want 304 \"1\"", resp.StatusCode, resp.Header.Get("etag"))
	}
	now := resp.Header.Get("etag")

	pk := azcosmos.NewPartitionKeyString("a")
	body := func(v int) []byte { b, _ := json.Marshal(doc{ID: "x", PK: "a", V: v}); return b }
	if _, err := cc.CreateItem(ctx, pk, body(1), nil); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	if _, err := cc.ReplaceItem(ctx, pk, "x", body(2), nil); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	if _, err := cc.DeleteItem(ctx, pk, "x", nil); err != nil {
		t.Fatal(err)
	}
	upsert(t, cc, doc{ID: "y", PK: "b", V: 1})
	upsert(t, cc, doc{ID: "y", PK: "b", V: 2})

	resp, got := avFeed(t, e, "av", map[string]string{"x-ms-documentdb-partitionkeyrangeid": "0", "If-None-Match": now})
	want := "create x@2, replace x@3, delete x@4, create y@5, replace y@6"
	if resp.StatusCode != http.StatusOK || changeList(got) != want {
		t.Fatalf("all versions after %s: %d [%s], want [%s]", now, resp.StatusCode, changeList(got), want)
	}
	if resp.Header.Get("etag") != `"6"` || resp.Header.Get("x-ms-session-token") != "0:-1#6" || resp.Header.Get("lsn") != "6" {
		t.Errorf("headers etag %s session %s lsn %s, want \"6\", 0:-1#6, 6", resp.Header.Get("etag"), resp.Header.Get("x-ms-session-token"), resp.Header.Get("lsn"))
	}
	create, replace, del := got[0], got[1], got[2]
	if create.Previous != nil || create.Metadata.PreviousImageLSN != 0 || create.Current["v"] != 1.0 || create.Current["_etag"] == nil {
		t.Errorf("create: %+v", create)
	}
	if replace.Current["v"] != 2.0 || replace.Previous["v"] != 1.0 || replace.Metadata.PreviousImageLSN != 2 {
		t.Errorf("replace: current %v previous %v previousImageLSN %d", replace.Current, replace.Previous, replace.Metadata.PreviousImageLSN)
	}
	if len(del.Current) != 0 || del.Previous["v"] != 2.0 || del.Metadata.PreviousImageLSN != 3 ||
		del.Metadata.ID != "x" || string(del.Metadata.PartitionKey) != `{"pk":"a"}` {
		t.Errorf("delete: current %v previous %v metadata %+v", del.Current, del.Previous, del.Metadata)
	}
	if create.Metadata.ID != "" || create.Metadata.PartitionKey != nil {
		t.Errorf("create carries the delete-only id/partitionKey: %+v", create.Metadata)
	}
	start := newClock().Now().Unix()
	for i, c := range got[:3] {
		if c.Metadata.CRTS != start+int64(i) || c.Metadata.TimeToLiveExpired == nil || *c.Metadata.TimeToLiveExpired {
			t.Errorf("%s: crts %d (want %d), timeToLiveExpired %v", c, c.Metadata.CRTS, start+int64(i), c.Metadata.TimeToLiveExpired)
		}
	}

	// Caught up: 304 with the same etag.
	resp, _ = avFeed(t, e, "av", map[string]string{"x-ms-documentdb-partitionkeyrangeid": "0", "If-None-Match": `"6"`})
	if resp.StatusCode != http.StatusNotModified || resp.Header.Get("etag") != `"6"` {
		t.Errorf("caught up: %d etag %s, want 304 \"6\"", resp.StatusCode, resp.Header.Get("etag"))
	}
	// Pages of 2 resume from their etags without loss or repeat.
	var paged []avChange
	cont := now
	for range 5 {
		resp, page := avFeed(t, e, "av", map[string]string{"x-ms-documentdb-partitionkeyrangeid": "0", "If-None-Match": cont, "x-ms-max-item-count": "2"})
		if resp.StatusCode == http.StatusNotModified {
			break
		}
		paged = append(paged, page...)
		cont = resp.Header.Get("etag")
	}
	if changeList(paged) != want {
		t.Errorf("paged: [%s], want [%s]", changeList(paged), want)
	}
	// A partition-key scoped read sees only that logical partition.
	_, got = avFeed(t, e, "av", map[string]string{"x-ms-documentdb-partitionkey": `["b"]`, "If-None-Match": now})
	if changeList(got) != "create y@5, replace y@6" {
		t.Errorf("pk b: [%s]", changeList(got))
	}
	// The latest-version feed still shows each live item once.
	lresp, lbody := rawRequest(t, e, http.MethodGet, "/dbs/db/colls/av/docs", map[string]string{"A-IM": "Incremental Feed", "If-None-Match": now}, "")
	if lresp.StatusCode != http.StatusOK || strings.Count(string(lbody), `"id":"y"`) != 1 || strings.Contains(string(lbody), `"id":"x"`) {
		t.Errorf("latest-version feed after %s: %d %s", now, lresp.StatusCode, lbody)
	}
}

func TestChangeFeedAll_RejectsBeginningTimeAndOtherWireFormats(t *testing.T) {
	t.Parallel()
	e := openEmu(t, emulator.Options{Partitions: 1})
	setupContainer(t, newClient(t, e, ""), "db", "av")
	for _, tc := range []struct {
		name string
		hdr  map[string]string
		msg  string
	}{
		// The service's sentence, which the JavaScript SDK's tests look for, and what to do.
		{"beginning", map[string]string{}, "cannot start from the beginning: start from now (If-None-Match: *) or from a continuation. You must read the change feed from within the retention period."},
		{"time", map[string]string{"If-Modified-Since": "Mon, 30 Nov 2026 11:55:36 GMT", "If-None-Match": "*"}, "cannot start from a point in time (If-Modified-Since): start from now (If-None-Match: *) or from a continuation. You must read the change feed from within the retention period."},
		{"no wire format", map[string]string{"If-None-Match": "*", "x-ms-cosmos-changefeed-wire-format-version": ""}, "2021-09-15"},
	} {
		hdr := map[string]string{"A-IM": "Full-Fidelity Feed", "x-ms-cosmos-changefeed-wire-format-version": "2021-09-15", "x-ms-documentdb-partitionkeyrangeid": "0"}
		for k, v := range tc.hdr {
			hdr[k] = v
		}
		resp, body := rawRequest(t, e, http.MethodGet, "/dbs/db/colls/av/docs", hdr, "")
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), tc.msg) {
			t.Errorf("%s: %d %s, want 400 mentioning %q", tc.name, resp.StatusCode, body, tc.msg)
		}
	}
}

func TestChangeFeedAll_ChildrenReadTheirParentsLogAfterSplit(t *testing.T) {
	t.Parallel()
	e := openEmu(t, emulator.Options{Partitions: 1})
	cc := setupContainer(t, newClient(t, e, ""), "db", "avsplit")
	resp, _ := avFeed(t, e, "avsplit", map[string]string{"x-ms-documentdb-partitionkeyrangeid": "0", "If-None-Match": "*"})
	from := resp.Header.Get("etag")
	const n = 12
	for i := range n {
		upsert(t, cc, doc{ID: fmt.Sprintf("i%d", i), PK: fmt.Sprintf("pk-%d", i), V: 1})
	}
	children, err := e.Split("db", "avsplit", "0")
	if err != nil {
		t.Fatal(err)
	}
	// After the split every item is replaced once, in whichever child holds it.
	for i := range n {
		upsert(t, cc, doc{ID: fmt.Sprintf("i%d", i), PK: fmt.Sprintf("pk-%d", i), V: 2})
	}
	resp, _ = avFeed(t, e, "avsplit", map[string]string{"x-ms-documentdb-partitionkeyrangeid": "0", "If-None-Match": from})
	if resp.StatusCode != http.StatusGone {
		t.Fatalf("read of the split parent: %d, want 410", resp.StatusCode)
	}
	ops := map[string][]string{}
	for _, child := range children {
		_, got := avFeed(t, e, "avsplit", map[string]string{"x-ms-documentdb-partitionkeyrangeid": child, "If-None-Match": from})
		last := int64(0)
		for _, c := range got {
			if c.Metadata.LSN <= last {
				t.Errorf("child %s: %s not in LSN order", child, changeList(got))
			}
			last = c.Metadata.LSN
			id, _ := c.Current["id"].(string)
			ops[id] = append(ops[id], c.Metadata.OperationType)
			if c.Metadata.OperationType == "replace" && (c.Previous["v"] != 1.0 || c.Metadata.PreviousImageLSN == 0) {
				t.Errorf("child %s: replace of %s lacks the pre-split image: %v", child, id, c.Previous)
			}
		}
	}
	for i := range n {
		id := fmt.Sprintf("i%d", i)
		if got := strings.Join(ops[id], ","); got != "create,replace" {
			t.Errorf("%s across the children: %s, want create,replace exactly once each", id, got)
		}
	}
}

func TestChangeFeedAll_MergedPartitionReadsBothParentsLogs(t *testing.T) {
	t.Parallel()
	e := openEmu(t, emulator.Options{Partitions: 2})
	cc := setupContainer(t, newClient(t, e, ""), "db", "avmerge")
	// Both partitions from now; then a create per item, each partition counting its own LSNs.
	from := map[string]string{}
	for _, id := range []string{"0", "1"} {
		resp, _ := avFeed(t, e, "avmerge", map[string]string{"x-ms-documentdb-partitionkeyrangeid": id, "If-None-Match": "*"})
		from[id] = resp.Header.Get("etag")
	}
	const n = 10
	for i := range n {
		upsert(t, cc, doc{ID: fmt.Sprintf("i%d", i), PK: fmt.Sprintf("pk-%d", i), V: 1})
	}
	resp, body := rawRequest(t, e, http.MethodGet, "/dbs/db/colls/avmerge/pkranges", nil, "")
	var pk struct {
		PartitionKeyRanges []struct {
			ID  string `json:"id"`
			Min string `json:"minInclusive"`
			Max string `json:"maxExclusive"`
		}
	}
	if err := json.Unmarshal(body, &pk); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("pkranges: %d %s", resp.StatusCode, body)
	}
	bounds := map[string][2]string{}
	for _, r := range pk.PartitionKeyRanges {
		bounds[r.ID] = [2]string{r.Min, r.Max}
	}
	merged, err := e.Merge("db", "avmerge", []string{"0", "1"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		upsert(t, cc, doc{ID: fmt.Sprintf("i%d", i), PK: fmt.Sprintf("pk-%d", i), V: 2})
	}
	// Each old partition's continuation, read on the merged partition over its old key range,
	// in pages of 3: its creates from its own log, then the replaces, each exactly once.
	if len(bounds) != 2 || bounds["0"][1] != bounds["1"][0] || bounds["0"][1] == "" {
		t.Fatalf("partitions before the merge: %v", bounds)
	}
	ops := map[string][]string{}
	for old, cont := range from {
		for range 20 {
			resp, page := avFeed(t, e, "avmerge", map[string]string{"x-ms-documentdb-partitionkeyrangeid": merged, "If-None-Match": cont,
				"x-ms-start-epk": bounds[old][0], "x-ms-end-epk": bounds[old][1], "x-ms-max-item-count": "3"})
			if resp.StatusCode == http.StatusNotModified {
				break
			}
			for _, c := range page {
				id, _ := c.Current["id"].(string)
				ops[id] = append(ops[id], c.Metadata.OperationType)
			}
			cont = resp.Header.Get("etag")
		}
	}
	for i := range n {
		id := fmt.Sprintf("i%d", i)
		if got := strings.Join(ops[id], ","); got != "create,replace" {
			t.Errorf("%s over the merge: %s, want create,replace exactly once each", id, got)
		}
	}
	// The whole merged partition from LSN 0: both parents' creates share LSNs; a page of 3
	// never ends between two of them, so none is skipped.
	ops = map[string][]string{}
	cont := `"0"`
	for range 20 {
		resp, page := avFeed(t, e, "avmerge", map[string]string{"x-ms-documentdb-partitionkeyrangeid": merged, "If-None-Match": cont, "x-ms-max-item-count": "3"})
		if resp.StatusCode == http.StatusNotModified {
			break
		}
		for _, c := range page {
			id, _ := c.Current["id"].(string)
			ops[id] = append(ops[id], c.Metadata.OperationType)
		}
		cont = resp.Header.Get("etag")
	}
	for i := range n {
		id := fmt.Sprintf("i%d", i)
		if got := strings.Join(ops[id], ","); got != "create,replace" {
			t.Errorf("%s on the whole merged partition: %s, want create,replace exactly once each", id, got)
		}
	}
}
