package emulator_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/cfp-dev/cfp/emulator"
)

// Holes in resource-token authorisation found by the round's adversarial review: a token
// scoped to one document or one logical partition reached other documents or partitions.
func TestResourceTokens_ReachNothingBeyondTheirScope(t *testing.T) {
	e := openEmu(t, emulator.Options{})
	cc := setupContainer(t, newClient(t, e, ""), "db", "c")
	upsert(t, cc, doc{ID: "mine", PK: "p1", V: 1})
	upsert(t, cc, doc{ID: "secret", PK: "p2", V: 2})
	mustCreate(t, e, "/dbs/db/users", `{"id":"u"}`)
	createScript(t, e, "sprocs", "db", "c", map[string]any{"id": "mk", "body": `function (id) {
		var coll = getContext().getCollection();
		coll.createDocument(coll.getSelfLink(), {id: id, pk: "p2"}, {}, function (err) {
			if (err) throw new Error("create failed: " + err.message);
			getContext().getResponse().setBody(1);
		});
	}`})
	check := func(name, method, path, tok string, hdr map[string]string, body string, want int) {
		t.Helper()
		resp, b := tokenRequest(t, e, method, path, tok, hdr, body)
		if resp.StatusCode != want {
			t.Errorf("%s: %d %s, want %d", name, resp.StatusCode, b, want)
		}
		if strings.Contains(string(b), "secret") { // no token here reaches partition p2
			t.Errorf("%s: the answer shows another partition's document: %s", name, b)
		}
	}

	// A token of one document reads that document and its container's definition, not the
	// container's read feed, change feed or the list of containers.
	docTok := mustCreate(t, e, "/dbs/db/users/u/permissions", `{"id":"doc","permissionMode":"Read","resource":"dbs/db/colls/c/docs/mine"}`)["_token"].(string)
	p1 := map[string]string{"x-ms-documentdb-partitionkey": `["p1"]`}
	check("the permitted document", http.MethodGet, "/dbs/db/colls/c/docs/mine", docTok, p1, "", 200)
	check("the read feed with a document's token", http.MethodGet, "/dbs/db/colls/c/docs", docTok, nil, "", http.StatusForbidden)
	check("the change feed with a document's token", http.MethodGet, "/dbs/db/colls/c/docs", docTok,
		map[string]string{"A-IM": "Incremental Feed", "x-ms-documentdb-partitionkeyrangeid": "0"}, "", http.StatusForbidden)
	check("the list of containers with a document's token", http.MethodGet, "/dbs/db/colls", docTok, nil, "", http.StatusForbidden)

	// A token of All on logical partition p1 writes only there: not by a stored procedure run
	// on another partition, not by a bulk request whose operations name another partition,
	// and it does not delete the container.
	allTok := mustCreate(t, e, "/dbs/db/users/u/permissions", `{"id":"p1","permissionMode":"All","resource":"dbs/db/colls/c","resourcePartitionKey":["p1"]}`)["_token"].(string)
	check("a stored procedure on another partition", http.MethodPost, "/dbs/db/colls/c/sprocs/mk", allTok,
		map[string]string{"x-ms-documentdb-partitionkey": `["p2"]`, "Content-Type": "application/json"}, `["bysproc"]`, http.StatusForbidden)
	check("a bulk operation on another partition", http.MethodPost, "/dbs/db/colls/c/docs", allTok,
		map[string]string{"x-ms-documentdb-partitionkey": `["p1"]`, "x-ms-cosmos-is-batch-request": "true", "x-ms-cosmos-batch-atomic": "false", "Content-Type": "application/json"},
		`[{"operationType":"Create","partitionKey":"[\"p2\"]","resourceBody":{"id":"bybulk","pk":"p2"}}]`, http.StatusForbidden)
	for _, id := range []string{"bysproc", "bybulk"} {
		if got := itemStatus(t, cc, "p2", id); got != http.StatusNotFound {
			t.Errorf("document %s written into partition p2 with a token of p1: %d, want 404", id, got)
		}
	}
	check("delete the container with a partition's token", http.MethodDelete, "/dbs/db/colls/c", allTok, nil, "", http.StatusForbidden)
	check("a stored procedure on the permitted partition", http.MethodPost, "/dbs/db/colls/c/sprocs/mk", allTok,
		map[string]string{"x-ms-documentdb-partitionkey": `["p1"]`, "Content-Type": "application/json"}, `["x"]`, http.StatusBadRequest) // it writes into p2: the script's own refusal
	check("read feed of the permitted partition", http.MethodGet, "/dbs/db/colls/c/docs", allTok, p1, "", 200)
	check("read feed of the permitted partition with a range id", http.MethodGet, "/dbs/db/colls/c/docs", allTok,
		map[string]string{"x-ms-documentdb-partitionkey": `["p1"]`, "x-ms-documentdb-partitionkeyrangeid": "0"}, "", 200)
}
