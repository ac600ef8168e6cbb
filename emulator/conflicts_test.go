package emulator_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/cfp-dev/cfp/emulator"
)

// A container's conflicts (the Python SDK's list_conflicts, query_conflicts, get_conflict and
// delete_conflict): one region with one writer never has any, so the feed and a query over it
// are empty and a conflict by id is 404, as on a single-write-region account.
func TestConflicts_NoneOnOneWriteRegion(t *testing.T) {
	t.Parallel()
	e := openEmu(t, emulator.Options{Partitions: 2})
	cc := setupContainer(t, newClient(t, e, ""), "db", "c")
	upsert(t, cc, doc{ID: "a", PK: "p"})

	for _, tc := range []struct {
		method, path, body string
		hdr                map[string]string
	}{
		{http.MethodGet, "/dbs/db/colls/c/conflicts", "", nil},
		{http.MethodPost, "/dbs/db/colls/c/conflicts", `{"query":"SELECT * FROM root r WHERE r.resourceType='document'"}`,
			map[string]string{"x-ms-documentdb-isquery": "true", "Content-Type": "application/query+json", "x-ms-documentdb-query-enablecrosspartition": "true"}},
	} {
		resp, body := rawRequest(t, e, tc.method, tc.path, tc.hdr, tc.body)
		var feed struct {
			Conflicts []any
			Count     *int `json:"_count"`
		}
		if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &feed) != nil || feed.Conflicts == nil || len(feed.Conflicts) != 0 || feed.Count == nil || *feed.Count != 0 {
			t.Errorf("%s %s: %d %s, want 200 with no conflicts", tc.method, tc.path, resp.StatusCode, body)
		}
	}
	for _, m := range []string{http.MethodGet, http.MethodDelete} {
		if resp, body := rawRequest(t, e, m, "/dbs/db/colls/c/conflicts/new%20conflict", nil, ""); resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s of a conflict: %d %s, want 404", m, resp.StatusCode, body)
		}
	}
	if resp, body := rawRequest(t, e, http.MethodGet, "/dbs/db/colls/nosuch/conflicts", nil, ""); resp.StatusCode != http.StatusNotFound {
		t.Errorf("conflicts of a missing container: %d %s, want 404", resp.StatusCode, body)
	}
}
