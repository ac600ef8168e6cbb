package emulator_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/cfp-dev/cfp/emulator"
)

// A legacy non-partitioned collection (created without a partitionKey, as older SDKs and the
// REST API before 2018-12-31 create one) has one physical partition whatever the throughput or
// --partitions, reports the system key /_partitionKey, and serves its documents without a
// partition key: no x-ms-documentdb-partitionkey header, or the SDKs' "none" values [] and
// [{}], on every item operation, a query and a read feed without the cross-partition header,
// and its change feed without a range.
func TestLegacyNonPartitionedCollection(t *testing.T) {
	t.Parallel()
	e := openEmu(t, emulator.Options{Partitions: 4})
	old := map[string]string{"x-ms-version": "2017-02-22", "content-type": "application/json"}
	with := func(extra map[string]string) map[string]string {
		h := map[string]string{}
		for k, v := range old {
			h[k] = v
		}
		for k, v := range extra {
			h[k] = v
		}
		return h
	}
	do := func(method, path string, hdr map[string]string, body string, want int) []byte {
		t.Helper()
		resp, b := rawRequest(t, e, method, path, hdr, body)
		if resp.StatusCode != want {
			t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, b, want)
		}
		return b
	}
	do(http.MethodPost, "/dbs", old, `{"id":"db"}`, http.StatusCreated)
	body := do(http.MethodPost, "/dbs/db/colls", with(map[string]string{"x-ms-offer-throughput": "50000"}), `{"id":"legacy"}`, http.StatusCreated)
	var coll struct {
		PK struct {
			Paths     []string `json:"paths"`
			SystemKey bool     `json:"systemKey"`
		} `json:"partitionKey"`
	}
	if err := json.Unmarshal(body, &coll); err != nil {
		t.Fatal(err)
	}
	if len(coll.PK.Paths) != 1 || coll.PK.Paths[0] != "/_partitionKey" || !coll.PK.SystemKey {
		t.Errorf("legacy collection's partitionKey = %s, want the system key /_partitionKey", body)
	}
	var ranges struct {
		Ranges []json.RawMessage `json:"PartitionKeyRanges"`
	}
	if err := json.Unmarshal(do(http.MethodGet, "/dbs/db/colls/legacy/pkranges", old, "", http.StatusOK), &ranges); err != nil || len(ranges.Ranges) != 1 {
		t.Errorf("legacy collection: %d partition key ranges (%v), want 1 whatever --partitions and the throughput", len(ranges.Ranges), err)
	}

	docs := "/dbs/db/colls/legacy/docs"
	do(http.MethodPost, docs, old, `{"id":"a","v":1}`, http.StatusCreated)
	do(http.MethodPost, docs, with(map[string]string{"x-ms-documentdb-partitionkey": "[]"}), `{"id":"b","v":1}`, http.StatusCreated)
	do(http.MethodPost, docs, with(map[string]string{"x-ms-documentdb-partitionkey": "[{}]"}), `{"id":"c","v":1}`, http.StatusCreated)
	do(http.MethodPost, docs, with(map[string]string{"x-ms-documentdb-is-upsert": "true"}), `{"id":"a","v":2}`, http.StatusOK)
	for _, pk := range []string{"", "[]", "[{}]"} {
		h := old
		if pk != "" {
			h = with(map[string]string{"x-ms-documentdb-partitionkey": pk})
		}
		if b := do(http.MethodGet, docs+"/a", h, "", http.StatusOK); !strings.Contains(string(b), `"v":2`) {
			t.Errorf("read with partition key header %q: %s, want v 2", pk, b)
		}
	}
	do(http.MethodPut, docs+"/b", old, `{"id":"b","v":3}`, http.StatusOK)
	do(http.MethodPatch, docs+"/b", old, `{"operations":[{"op":"set","path":"/w","value":1}]}`, http.StatusOK)
	do(http.MethodDelete, docs+"/c", old, "", http.StatusNoContent)

	q := with(map[string]string{"content-type": "application/query+json", "x-ms-documentdb-isquery": "true"})
	if b := do(http.MethodPost, docs, q, `{"query":"SELECT c.id FROM c ORDER BY c.id"}`, http.StatusOK); !strings.Contains(string(b), `[{"id":"a"},{"id":"b"}]`) {
		t.Errorf("query without the cross-partition header: %s, want a and b", b)
	}
	if b := do(http.MethodGet, docs, old, "", http.StatusOK); !strings.Contains(string(b), `"_count":2`) {
		t.Errorf("read feed: %s, want 2 documents", b)
	}
	cf := with(map[string]string{"a-im": "Incremental feed", "if-none-match": "*"})
	do(http.MethodGet, docs, cf, "", http.StatusNotModified)
	cf["if-none-match"] = ""
	delete(cf, "if-none-match")
	if b := do(http.MethodGet, docs, cf, "", http.StatusOK); !strings.Contains(string(b), `"id":"a"`) || !strings.Contains(string(b), `"id":"b"`) {
		t.Errorf("change feed without a range: %s, want a and b", b)
	}

	// A partitioned container's documents still need their key, with the service's message.
	do(http.MethodPost, "/dbs/db/colls", old, `{"id":"p","partitionKey":{"paths":["/pk"],"kind":"Hash"}}`, http.StatusCreated)
	do(http.MethodPost, "/dbs/db/colls/p/docs", old, `{"id":"a","pk":"x"}`, http.StatusCreated)
	for _, m := range []string{http.MethodGet, http.MethodDelete} {
		if b := do(m, "/dbs/db/colls/p/docs/a", old, "", http.StatusBadRequest); !strings.Contains(string(b), "PartitionKey value must be supplied for this operation.") {
			t.Errorf("%s of a partitioned container's document without its key: %s", m, b)
		}
	}
}
