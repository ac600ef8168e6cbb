package emulator_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"github.com/cfp-dev/cfp/emulator"
)

// A query scoped to a prefix of a hierarchical (MultiHash) partition key reads every logical
// partition under that prefix, as the service does; the JavaScript SDK sends such a prefix as
// the partition-key header of items.query(q, {partitionKey: ["a"]}).
func TestQuery_HierarchicalPrefixPartitionKey(t *testing.T) {
	t.Parallel()
	e := openEmu(t, emulator.Options{})
	post := func(path, body string, hdr map[string]string) (int, []byte) {
		t.Helper()
		resp, b := rawRequest(t, e, http.MethodPost, path, hdr, body)
		return resp.StatusCode, b
	}
	if st, b := post("/dbs", `{"id":"db"}`, nil); st != http.StatusCreated {
		t.Fatalf("create database: %d %s", st, b)
	}
	if st, b := post("/dbs/db/colls", `{"id":"h","partitionKey":{"paths":["/t","/u"],"kind":"MultiHash","version":2}}`, nil); st != http.StatusCreated {
		t.Fatalf("create container: %d %s", st, b)
	}
	for _, d := range []struct{ id, t, u string }{{"1", "a", "x"}, {"2", "a", "y"}, {"3", "b", "x"}, {"4", "ab", "x"}} {
		body, _ := json.Marshal(map[string]string{"id": d.id, "t": d.t, "u": d.u})
		pk, _ := json.Marshal([]string{d.t, d.u})
		if st, b := post("/dbs/db/colls/h/docs", string(body), map[string]string{"x-ms-documentdb-partitionkey": string(pk)}); st != http.StatusCreated {
			t.Fatalf("create %s: %d %s", d.id, st, b)
		}
	}
	query := func(pk string) []string {
		t.Helper()
		st, b := post("/dbs/db/colls/h/docs", `{"query":"SELECT * FROM c"}`, map[string]string{
			"Content-Type":                 "application/query+json",
			"x-ms-documentdb-isquery":      "true",
			"x-ms-documentdb-partitionkey": pk,
		})
		if st != http.StatusOK {
			t.Fatalf("query with partition key %s: %d %s", pk, st, b)
		}
		var res struct{ Documents []struct{ ID string } }
		if err := json.Unmarshal(b, &res); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, d := range res.Documents {
			ids = append(ids, d.ID)
		}
		slices.Sort(ids)
		return ids
	}
	for _, tc := range []struct {
		pk   string
		want []string
	}{
		{`["a"]`, []string{"1", "2"}},
		{`["b"]`, []string{"3"}},
		{`["a","y"]`, []string{"2"}},
		{`["c"]`, nil},
	} {
		if got := query(tc.pk); !slices.Equal(got, tc.want) {
			t.Errorf("query with partition key %s returned %v, want %v", tc.pk, got, tc.want)
		}
	}

	// A point read still needs the whole key.
	resp, _ := rawRequest(t, e, http.MethodGet, "/dbs/db/colls/h/docs/1", map[string]string{"x-ms-documentdb-partitionkey": `["a"]`}, "")
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("read with a prefix key answered %d, want 404", resp.StatusCode)
	}
}
