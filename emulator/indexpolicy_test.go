package emulator_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/cfp-dev/cfp/emulator"
)

// A container created with a legacy indexing policy (an included path with its own index list:
// kind Hash or Range, a dataType) reads back as the service stores it, the path without the list
// (the Python SDK's test_create_default_indexing_policy, "missing precision").
func TestIndexingPolicy_LegacyIndexListsAreDropped(t *testing.T) {
	t.Parallel()
	e := openEmu(t, emulator.Options{Partitions: 1})
	if resp, body := rawRequest(t, e, http.MethodPost, "/dbs", nil, `{"id":"db"}`); resp.StatusCode != http.StatusCreated {
		t.Fatalf("create database: %d %s", resp.StatusCode, body)
	}
	resp, body := rawRequest(t, e, http.MethodPost, "/dbs/db/colls", nil, `{"id":"c","partitionKey":{"paths":["/id"],"kind":"Hash"},
		"indexingPolicy":{"includedPaths":[{"path":"/*","indexes":[{"kind":"Hash","dataType":"String"},{"kind":"Range","dataType":"Number"}]}]}}`)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create container: %d %s", resp.StatusCode, body)
	}
	_, body = rawRequest(t, e, http.MethodGet, "/dbs/db/colls/c", nil, "")
	var props struct {
		IndexingPolicy struct {
			IncludedPaths []map[string]any
			ExcludedPaths []map[string]any
		}
	}
	if err := json.Unmarshal(body, &props); err != nil {
		t.Fatal(err)
	}
	inc := props.IndexingPolicy.IncludedPaths
	if len(inc) != 1 || inc[0]["path"] != "/*" || inc[0]["indexes"] != nil || len(props.IndexingPolicy.ExcludedPaths) != 1 {
		t.Errorf("indexing policy read back: %s, want /* included without an index list and /\"_etag\"/? excluded", body)
	}
}
