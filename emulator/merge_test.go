package emulator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cfp-dev/cfp/emulator"
)

// feedRead is one raw latest-version change-feed read of a partition.
type feedRead struct {
	rangeID    string
	etag       string // If-None-Match, "" for the beginning
	start, end string // x-ms-start-epk/x-ms-end-epk, "" for none
	max        int
}

// readFeedRaw sends r straight to the handler and returns the status, the documents and the etag.
func readFeedRaw(t *testing.T, e *emulator.Emulator, coll string, r feedRead) (int, []doc, string) {
	t.Helper()
	hdr := map[string]string{
		"A-IM":                                "Incremental Feed",
		"x-ms-documentdb-partitionkeyrangeid": r.rangeID,
		"x-ms-max-item-count":                 strconv.Itoa(r.max),
	}
	if r.etag != "" {
		hdr["If-None-Match"] = r.etag
	}
	if r.start != "" || r.end != "" {
		hdr["x-ms-start-epk"], hdr["x-ms-end-epk"] = r.start, r.end
		hdr["x-ms-read-key-type"] = "EffectivePartitionKeyRange"
	}
	resp, body := rawRequest(t, e, http.MethodGet, "/dbs/db/colls/"+coll+"/docs", hdr, "")
	var page struct{ Documents []doc }
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(body, &page); err != nil {
			t.Fatalf("decode change-feed page: %v: %s", err, body)
		}
	}
	return resp.StatusCode, page.Documents, resp.Header.Get("etag")
}

// drainFeedRaw reads r page by page until a 304 and returns the documents and the last etag.
func drainFeedRaw(t *testing.T, e *emulator.Emulator, coll string, r feedRead) ([]doc, string) {
	t.Helper()
	var out []doc
	for range 10000 {
		status, docs, etag := readFeedRaw(t, e, coll, r)
		switch status {
		case http.StatusNotModified:
			return out, etag
		case http.StatusOK:
			out = append(out, docs...)
			r.etag = etag
		default:
			t.Fatalf("change feed of range %s: HTTP %d", r.rangeID, status)
		}
	}
	t.Fatal("change feed did not end")
	return nil, ""
}

func containerStatus(t *testing.T, e *emulator.Emulator, coll string) emulator.ContainerStatus {
	t.Helper()
	st, err := e.Status()
	if err != nil {
		t.Fatalf("Status() error = %v", err)
	}
	for _, d := range st.Databases {
		for _, c := range d.Containers {
			if c.ID == coll {
				return c
			}
		}
	}
	t.Fatalf("container %s not in the status", coll)
	return emulator.ContainerStatus{}
}

// TestMerge_OldContinuationsStayMeaningful: after two partitions merge, each one's continuation,
// read on the merged partition with its EPK range, returns exactly the changes it had not
// delivered and the new ones; the old ids are gone; and the merged partition read whole from the
// beginning (one item per page, so pages end between items that share an LSN) returns every
// live change once, including updates and deletes of items written before the merge.
func TestMerge_OldContinuationsStayMeaningful(t *testing.T) {
	t.Parallel()
	e := openEmu(t, emulator.Options{Partitions: 2})
	cc := setupContainer(t, newClient(t, e, ""), "db", "m")
	ctx := context.Background()
	want := map[string]int{}
	write := func(id string, pk, v int) {
		upsert(t, cc, doc{ID: id, PK: fmt.Sprintf("pk-%d", pk), V: v})
		want[id] = v
	}
	for i := range 40 {
		write(fmt.Sprintf("d%02d", i), i%7, 1)
	}
	old := containerStatus(t, e, "m").Ranges
	if len(old) != 2 || old[0].LSN == 0 || old[1].LSN == 0 {
		t.Fatalf("ranges before the merge: %+v, want two with writes", old)
	}

	// Each old partition delivers one page of 4; its etag is where its reader stands.
	var got []doc
	etags := make([]string, len(old))
	for i, r := range old {
		status, docs, etag := readFeedRaw(t, e, "m", feedRead{rangeID: r.ID, max: 4})
		if status != http.StatusOK || len(docs) != 4 {
			t.Fatalf("first page of range %s: HTTP %d, %d docs", r.ID, status, len(docs))
		}
		got = append(got, docs...)
		etags[i] = etag
	}

	merged, err := e.Merge("db", "m", []string{old[1].ID, old[0].ID})
	if err != nil {
		t.Fatalf("Merge() error = %v", err)
	}
	now := containerStatus(t, e, "m").Ranges
	if len(now) != 1 || now[0].ID != merged || now[0].Min != "" || now[0].Max != "FF" {
		t.Fatalf("ranges after the merge: %+v, want one range %s over the key space", now, merged)
	}
	if !slices.Contains(now[0].Parents, old[0].ID) || !slices.Contains(now[0].Parents, old[1].ID) {
		t.Errorf("merged range parents = %v, want both %s and %s", now[0].Parents, old[0].ID, old[1].ID)
	}
	if wantLSN := max(old[0].LSN, old[1].LSN); now[0].LSN != wantLSN {
		t.Errorf("merged range LSN = %d, want the highest of the merged ones, %d", now[0].LSN, wantLSN)
	}
	for _, r := range old {
		resp, _ := rawRequest(t, e, http.MethodGet, "/dbs/db/colls/m/docs", map[string]string{"A-IM": "Incremental Feed", "x-ms-documentdb-partitionkeyrangeid": r.ID}, "")
		if resp.StatusCode != http.StatusGone || resp.Header.Get("x-ms-substatus") != "1002" {
			t.Errorf("read of merged range %s: HTTP %d substatus %q, want 410/1002", r.ID, resp.StatusCode, resp.Header.Get("x-ms-substatus"))
		}
	}
	if _, err := e.Merge("db", "m", []string{old[0].ID, merged}); err == nil {
		t.Error("merging a gone range succeeded")
	}

	// Updates of undelivered items from both old partitions (their LSNs collide on the merged
	// one), a delete, and new items.
	delivered := map[string]bool{}
	for _, d := range got {
		delivered[d.ID] = true
	}
	deleted := ""
	for i := range 40 {
		id := fmt.Sprintf("d%02d", i)
		switch {
		case delivered[id]:
		case deleted == "":
			if _, err := cc.DeleteItem(ctx, azcosmos.NewPartitionKeyString(fmt.Sprintf("pk-%d", i%7)), id, nil); err != nil {
				t.Fatalf("delete %s: %v", id, err)
			}
			delete(want, id)
			deleted = id
		case i%3 == 0:
			write(id, i%7, 2)
		}
	}
	for i := range 10 {
		write(fmt.Sprintf("n%02d", i), i, 1)
	}

	for i, r := range old {
		docs, _ := drainFeedRaw(t, e, "m", feedRead{rangeID: merged, etag: etags[i], start: r.Min, end: r.Max, max: 3})
		got = append(got, docs...)
	}
	checkExactlyOnce(t, got, want)

	whole, _ := drainFeedRaw(t, e, "m", feedRead{rangeID: merged, max: 1})
	checkExactlyOnce(t, whole, want)
	for i := 1; i < len(whole); i++ {
		if whole[i].LSN < whole[i-1].LSN {
			t.Errorf("merged feed out of LSN order: %s@%d after %s@%d", whole[i].ID, whole[i].LSN, whole[i-1].ID, whole[i-1].LSN)
		}
	}
}

func TestMerge_Refusals(t *testing.T) {
	t.Parallel()
	e := openEmu(t, emulator.Options{Partitions: 3})
	setupContainer(t, newClient(t, e, ""), "db", "m")
	for _, ids := range [][]string{{"0"}, {"0", "2"}, {"1", "1"}, {"0", "9"}} {
		if id, err := e.Merge("db", "m", ids); err == nil {
			t.Errorf("Merge(%v) = %s, want an error", ids, id)
		}
	}
	if n := len(containerStatus(t, e, "m").Ranges); n != 3 {
		t.Errorf("a refused merge changed the ranges: %d live, want 3", n)
	}
	// The admin API merges three adjacent ranges into one.
	resp, body := rawRequest(t, e, http.MethodPost, "/_cfp/merge", nil, `{"db":"db","coll":"m","ranges":["2","0","1"]}`)
	var mr emulator.MergeResponse
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &mr) != nil || mr.Merged != "3" {
		t.Fatalf("POST /_cfp/merge: HTTP %d %s, want 200 with merged range 3", resp.StatusCode, body)
	}
	if rs := containerStatus(t, e, "m").Ranges; len(rs) != 1 || rs[0].ID != "3" || len(rs[0].Parents) != 3 {
		t.Errorf("ranges after the admin merge: %+v, want range 3 with three parents", rs)
	}
}

// TestMerge_StartTimeNeedsCapability: a read from a time (If-Modified-Since) of a merged
// partition is refused as the service refuses it unless the client announces capability bit 2;
// with it, the time and the continuation apply together.
func TestMerge_StartTimeNeedsCapability(t *testing.T) {
	t.Parallel()
	e := openEmu(t, emulator.Options{Partitions: 2})
	cc := setupContainer(t, newClient(t, e, ""), "db", "c")
	for i := range 20 {
		upsert(t, cc, doc{ID: fmt.Sprintf("d%02d", i), PK: fmt.Sprintf("p%d", i), V: 1})
	}
	merged, err := e.Merge("db", "c", []string{"0", "1"})
	if err != nil {
		t.Fatal(err)
	}
	since := time.Now().Add(-time.Hour).UTC().Format(http.TimeFormat)
	read := func(caps, inm string) (int, []byte) {
		hdr := map[string]string{"A-IM": "Incremental Feed", "If-Modified-Since": since, "x-ms-documentdb-partitionkeyrangeid": merged}
		if caps != "" {
			hdr["x-ms-cosmos-sdk-supportedcapabilities"] = caps
		}
		if inm != "" {
			hdr["If-None-Match"] = inm
		}
		resp, body := rawRequest(t, e, http.MethodGet, "/dbs/db/colls/c/docs", hdr, "")
		return resp.StatusCode, body
	}
	for _, caps := range []string{"", "1"} {
		if code, body := read(caps, ""); code != http.StatusBadRequest || !strings.Contains(string(body), `"StartTime/IfModifiedSince is not currently supported with merged partitions."`) {
			t.Errorf("capabilities %q: %d %s, want the service's 400", caps, code, body)
		}
	}
	code, body := read("3", "")
	var page struct{ Documents []doc }
	if err := json.Unmarshal(body, &page); code != http.StatusOK || err != nil || len(page.Documents) != 20 {
		t.Fatalf("capabilities 3: %d, %d documents, want 200 with all 20: %s", code, len(page.Documents), body)
	}
	// Both apply: a time in the future hides everything after any continuation.
	since = time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)
	if code, body := read("3", `"0"`); code != http.StatusNotModified {
		t.Errorf("a future time with a continuation: %d %s, want 304", code, body)
	}
}
