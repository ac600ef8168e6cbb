package emulator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cfp-dev/cfp/emulator"
)

// createScript creates a script resource (sprocs, triggers, udfs) of container db/coll with a raw
// signed request (azcosmos has no scripts API) and fails the test unless it is created.
func createScript(t *testing.T, e *emulator.Emulator, kind, db, coll string, def map[string]any) map[string]any {
	t.Helper()
	b, _ := json.Marshal(def)
	resp, body := rawRequest(t, e, http.MethodPost, "/dbs/"+db+"/colls/"+coll+"/"+kind, nil, string(b))
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create %s %v: %d %s", kind, def["id"], resp.StatusCode, body)
	}
	var out map[string]any
	_ = json.Unmarshal(body, &out)
	return out
}

// execSproc runs a stored procedure on partition key pk (a string) with args.
func execSproc(t *testing.T, e *emulator.Emulator, db, coll, id, pk string, args ...any) (*http.Response, []byte) {
	t.Helper()
	if args == nil {
		args = []any{}
	}
	b, _ := json.Marshal(args)
	pkh, _ := json.Marshal([]string{pk})
	return rawRequest(t, e, http.MethodPost, "/dbs/"+db+"/colls/"+coll+"/sprocs/"+id,
		map[string]string{"x-ms-documentdb-partitionkey": string(pkh), "Content-Type": "application/json"}, string(b))
}

func itemStatus(t *testing.T, cc *azcosmos.ContainerClient, pk, id string) int {
	t.Helper()
	_, err := cc.ReadItem(context.Background(), azcosmos.NewPartitionKeyString(pk), id, nil)
	if err == nil {
		return http.StatusOK
	}
	return statusOf(err)
}

func TestSproc_CRUD(t *testing.T) {
	e := openEmu(t, emulator.Options{})
	setupContainer(t, newClient(t, e, ""), "db", "c")
	created := createScript(t, e, "sprocs", "db", "c", map[string]any{"id": "hello", "body": "function () { getContext().getResponse().setBody('hi'); }"})
	if created["body"] == nil || created["_rid"] == nil || created["_etag"] == nil || !strings.HasSuffix(created["_self"].(string), "/sprocs/"+created["_rid"].(string)+"/") {
		t.Fatalf("created sproc lacks its body or system properties: %v", created)
	}
	if resp, body := rawRequest(t, e, http.MethodPost, "/dbs/db/colls/c/sprocs", nil, `{"id":"hello","body":"function(){}"}`); resp.StatusCode != http.StatusConflict {
		t.Fatalf("second create: %d %s, want 409", resp.StatusCode, body)
	}
	if resp, body := rawRequest(t, e, http.MethodPost, "/dbs/db/colls/c/sprocs", nil, `{"id":"bad","body":"function( {"}`); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("create of a script that does not compile: %d %s, want 400", resp.StatusCode, body)
	}
	resp, body := rawRequest(t, e, http.MethodGet, "/dbs/db/colls/c/sprocs", nil, "")
	var feed struct {
		StoredProcedures []map[string]any
		Count            int `json:"_count"`
	}
	if err := json.Unmarshal(body, &feed); err != nil || resp.StatusCode != 200 || feed.Count != 1 || feed.StoredProcedures[0]["id"] != "hello" {
		t.Fatalf("list: %d %s", resp.StatusCode, body)
	}
	resp, body = rawRequest(t, e, http.MethodPut, "/dbs/db/colls/c/sprocs/hello", nil, `{"id":"hello","body":"function () { getContext().getResponse().setBody('bye'); }"}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("replace: %d %s", resp.StatusCode, body)
	}
	if resp, body := execSproc(t, e, "db", "c", "hello", "p"); resp.StatusCode != 200 || string(body) != `"bye"` {
		t.Fatalf("execute after replace: %d %s, want 200 \"bye\"", resp.StatusCode, body)
	}
	// By resource id, as a _self link ends.
	if resp, body := rawRequest(t, e, http.MethodGet, "/dbs/db/colls/c/sprocs/"+created["_rid"].(string), nil, ""); resp.StatusCode != 200 || !strings.Contains(string(body), `"id":"hello"`) {
		t.Fatalf("read by rid: %d %s", resp.StatusCode, body)
	}
	if resp, _ := rawRequest(t, e, http.MethodDelete, "/dbs/db/colls/c/sprocs/hello", nil, ""); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("delete: %d", resp.StatusCode)
	}
	if resp, _ := rawRequest(t, e, http.MethodGet, "/dbs/db/colls/c/sprocs/hello", nil, ""); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("read after delete: %d, want 404", resp.StatusCode)
	}
}

func TestSproc_ExecutesWithTheServerSideAPI(t *testing.T) {
	e := openEmu(t, emulator.Options{})
	cc := setupContainer(t, newClient(t, e, ""), "db", "c")
	upsert(t, cc, doc{ID: "old", PK: "p", V: 1})
	createScript(t, e, "sprocs", "db", "c", map[string]any{"id": "work", "body": `function (prefix, n) {
		var coll = getContext().getCollection(), link = coll.getSelfLink();
		for (var i = 0; i < n; i++) {
			if (!coll.createDocument(link, {id: prefix + i, pk: "p", v: i})) throw new Error("not accepted");
		}
		coll.readDocument(coll.getAltLink() + "/docs/old", function (err, d) {
			if (err) throw err;
			d.v = 100;
			coll.replaceDocument(d._self, d, {etag: d._etag}, function (err, r) {
				if (err) throw err;
				coll.queryDocuments(link, {query: "SELECT VALUE c.v FROM c WHERE c.v >= @min ORDER BY c.v", parameters: [{name: "@min", value: 1}]},
					function (err, vs) {
						if (err) throw err;
						__.deleteDocument(coll.getAltLink() + "/docs/" + prefix + "0", function (err) {
							if (err) throw err;
							getContext().getResponse().setBody({values: vs, self: link.length > 0});
						});
					});
			});
		});
	}`})
	resp, body := execSproc(t, e, "db", "c", "work", "p", "n", 3)
	if resp.StatusCode != 200 || string(body) != `{"values":[1,2,100],"self":true}` {
		t.Fatalf("execute: %d %s, want the query's values seen inside the script", resp.StatusCode, body)
	}
	if got := itemStatus(t, cc, "p", "n1"); got != 200 {
		t.Fatalf("n1 after the script: %d, want it committed", got)
	}
	if got := itemStatus(t, cc, "p", "n0"); got != 404 {
		t.Fatalf("n0 after the script deleted it: %d, want 404", got)
	}
}

// A script's writes commit all together or not at all: a throw after two creates leaves none.
func TestSproc_ThrowRollsBackEveryWrite(t *testing.T) {
	e := openEmu(t, emulator.Options{})
	cc := setupContainer(t, newClient(t, e, ""), "db", "c")
	createScript(t, e, "sprocs", "db", "c", map[string]any{"id": "half", "body": `function () {
		var coll = getContext().getCollection();
		coll.createDocument(coll.getSelfLink(), {id: "a", pk: "p"});
		coll.createDocument(coll.getSelfLink(), {id: "b", pk: "p"}, function (err) {
			if (err) throw err;
			throw new Error("boom after two writes");
		});
	}`})
	resp, body := execSproc(t, e, "db", "c", "half", "p")
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "Encountered exception while executing function") || !strings.Contains(string(body), "boom after two writes") {
		t.Fatalf("execute: %d %s, want 400 with the script's message", resp.StatusCode, body)
	}
	for _, id := range []string{"a", "b"} {
		if got := itemStatus(t, cc, "p", id); got != http.StatusNotFound {
			t.Fatalf("%s after the failed script: %d, want 404 (rolled back)", id, got)
		}
	}
	// An operation's own failure, uncaught, answers with its status (a conflict here).
	upsert(t, cc, doc{ID: "x", PK: "p"})
	createScript(t, e, "sprocs", "db", "c", map[string]any{"id": "dup", "body": `function () {
		var coll = getContext().getCollection();
		coll.createDocument(coll.getSelfLink(), {id: "y", pk: "p"});
		coll.createDocument(coll.getSelfLink(), {id: "x", pk: "p"});
	}`})
	if resp, body := execSproc(t, e, "db", "c", "dup", "p"); resp.StatusCode != http.StatusConflict {
		t.Fatalf("a conflicting create: %d %s, want 409", resp.StatusCode, body)
	}
	if got := itemStatus(t, cc, "p", "y"); got != http.StatusNotFound {
		t.Fatalf("y after the conflict: %d, want 404 (rolled back)", got)
	}
}

// A script reaches only the logical partition it runs on.
func TestSproc_OtherPartitionIsRefused(t *testing.T) {
	e := openEmu(t, emulator.Options{})
	cc := setupContainer(t, newClient(t, e, ""), "db", "c")
	createScript(t, e, "sprocs", "db", "c", map[string]any{"id": "mk", "body": `function (pk) {
		var coll = getContext().getCollection();
		coll.createDocument(coll.getSelfLink(), {id: "d", pk: pk}, {}, function (err) {
			if (err) throw new Error("create failed: " + err.message);
			getContext().getResponse().setBody(1);
		});
	}`})
	if resp, body := execSproc(t, e, "db", "c", "mk", "p", "p"); resp.StatusCode != 200 || string(body) != "1" {
		t.Fatalf("same partition: %d %s", resp.StatusCode, body)
	}
	if resp, body := execSproc(t, e, "db", "c", "mk", "q", "p"); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a document of another partition: %d %s, want 400", resp.StatusCode, body)
	}
	if got := itemStatus(t, cc, "q", "d"); got != http.StatusNotFound {
		t.Fatalf("the other partition's document: %d, want none", got)
	}
	resp, body := rawRequest(t, e, http.MethodPost, "/dbs/db/colls/c/sprocs/mk", nil, `["p"]`)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "x-ms-documentdb-partitionkey") {
		t.Fatalf("no partition key: %d %s, want 400 naming the header", resp.StatusCode, body)
	}
}

// A script that never ends is interrupted at the time bound: 408, and nothing it wrote stays.
func TestSproc_TimeBoundInterruptsAndRollsBack(t *testing.T) {
	e := openEmu(t, emulator.Options{ScriptTimeout: 50 * time.Millisecond})
	cc := setupContainer(t, newClient(t, e, ""), "db", "c")
	createScript(t, e, "sprocs", "db", "c", map[string]any{"id": "spin", "body": `function () {
		var coll = getContext().getCollection();
		coll.createDocument(coll.getSelfLink(), {id: "before", pk: "p"});
		while (true) {}
	}`})
	resp, body := execSproc(t, e, "db", "c", "spin", "p")
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(body), `"code":"RequestTimeout"`) {
		t.Fatalf("endless script: %d %s, want 408 RequestTimeout", resp.StatusCode, body)
	}
	if got := itemStatus(t, cc, "p", "before"); got != http.StatusNotFound {
		t.Fatalf("the interrupted script's write: %d, want 404", got)
	}
	// The emulator goes on serving writes.
	upsert(t, cc, doc{ID: "after", PK: "p"})
}

func TestSproc_ResponseSizeBoundAndLogging(t *testing.T) {
	e := openEmu(t, emulator.Options{})
	setupContainer(t, newClient(t, e, ""), "db", "c")
	createScript(t, e, "sprocs", "db", "c", map[string]any{"id": "big", "body": `function () {
		var s = "x"; while (s.length < getContext().getResponse().getMaxResponseBodySize()) s += s;
		getContext().getResponse().setBody(s);
	}`})
	if resp, body := execSproc(t, e, "db", "c", "big", "p"); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("a response over the bound: %d %.200s, want 413", resp.StatusCode, body)
	}
	createScript(t, e, "sprocs", "db", "c", map[string]any{"id": "log", "body": `function () {
		console.log('The value of %s is %s.', 'x', 1);
		for (var i = 0; i < 3; i++) getContext().getResponse().appendValue('Body', i);
	}`})
	pk := `["p"]`
	resp, body := rawRequest(t, e, http.MethodPost, "/dbs/db/colls/c/sprocs/log", map[string]string{"x-ms-documentdb-partitionkey": pk, "x-ms-documentdb-script-enable-logging": "true"}, "[]")
	if resp.StatusCode != 200 || string(body) != `"012"` || resp.Header.Get("x-ms-documentdb-script-log-results") != "The%20value%20of%20x%20is%201." {
		t.Fatalf("logging: %d %s %q", resp.StatusCode, body, resp.Header.Get("x-ms-documentdb-script-log-results"))
	}
	resp, _ = rawRequest(t, e, http.MethodPost, "/dbs/db/colls/c/sprocs/log", map[string]string{"x-ms-documentdb-partitionkey": pk}, "[]")
	if resp.Header.Get("x-ms-documentdb-script-log-results") != "" {
		t.Fatal("log results without x-ms-documentdb-script-enable-logging")
	}
}

func TestTriggers_PreAndPostThroughTheSDK(t *testing.T) {
	e := openEmu(t, emulator.Options{})
	cc := setupContainer(t, newClient(t, e, ""), "db", "c")
	// Type and operation are kept as given and compared without case (the Python SDK sends "pre").
	stamp := createScript(t, e, "triggers", "db", "c", map[string]any{"id": "stamp", "triggerType": "pre", "triggerOperation": "create", "body": `function () {
		var d = getContext().getRequest().getBody(); d.stamped = getContext().getRequest().getOperationType(); getContext().getRequest().setBody(d);
	}`})
	createScript(t, e, "triggers", "db", "c", map[string]any{"id": "audit", "triggerType": "Post", "triggerOperation": "All", "body": `function () {
		var d = getContext().getResponse().getBody(), coll = getContext().getCollection();
		if (d.v < 0) throw new Error("negative v");
		coll.createDocument(coll.getSelfLink(), {id: "audit-" + d.id, pk: d.pk});
	}`})
	if stamp["triggerType"] != "pre" || stamp["triggerOperation"] != "create" {
		t.Fatalf("trigger %v, want its type and operation as given", stamp)
	}
	ctx := context.Background()
	pk := azcosmos.NewPartitionKeyString("p")
	resp, err := cc.CreateItem(ctx, pk, []byte(`{"id":"a","pk":"p","v":1}`), &azcosmos.ItemOptions{PreTriggers: []string{"stamp"}, PostTriggers: []string{"audit"}, EnableContentResponseOnWrite: true})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(resp.Value), `"stamped":"Create"`) {
		t.Fatalf("created item %s lacks the pre-trigger's change", resp.Value)
	}
	if got := itemStatus(t, cc, "p", "audit-a"); got != 200 {
		t.Fatalf("the post-trigger's write: %d", got)
	}
	// A post-trigger that throws rolls the write back with it.
	_, err = cc.CreateItem(ctx, pk, []byte(`{"id":"b","pk":"p","v":-1}`), &azcosmos.ItemOptions{PostTriggers: []string{"audit"}})
	if statusOf(err) != http.StatusBadRequest {
		t.Fatalf("a throwing post-trigger: %v, want 400", err)
	}
	if got := itemStatus(t, cc, "p", "b"); got != http.StatusNotFound {
		t.Fatalf("b after its post-trigger threw: %d, want 404", got)
	}
	// A trigger of another type or operation is refused.
	if _, err = cc.UpsertItem(ctx, pk, []byte(`{"id":"c","pk":"p"}`), &azcosmos.ItemOptions{PreTriggers: []string{"audit"}}); statusOf(err) != http.StatusBadRequest {
		t.Fatalf("a post-trigger named as a pre-trigger: %v, want 400", err)
	}
	if _, err = cc.DeleteItem(ctx, pk, "a", &azcosmos.ItemOptions{PreTriggers: []string{"stamp"}}); statusOf(err) != http.StatusBadRequest {
		t.Fatalf("a create trigger on a delete: %v, want 400", err)
	}
	if _, err = cc.CreateItem(ctx, pk, []byte(`{"id":"d","pk":"p"}`), &azcosmos.ItemOptions{PreTriggers: []string{"nope"}}); statusOf(err) != http.StatusBadRequest {
		t.Fatalf("a trigger that does not exist: %v, want 400", err)
	}
	// A trigger's queries call the container's UDFs.
	createScript(t, e, "udfs", "db", "c", map[string]any{"id": "isAudit", "body": "function (id) { return id.indexOf('audit-') === 0; }"})
	createScript(t, e, "triggers", "db", "c", map[string]any{"id": "count", "triggerType": "Pre", "triggerOperation": "Create", "body": `function () {
		var coll = getContext().getCollection(), req = getContext().getRequest();
		coll.queryDocuments(coll.getSelfLink(), "SELECT VALUE c.id FROM c WHERE udf.isAudit(c.id)", function (err, ids) {
			if (err) throw err;
			var d = req.getBody(); d.audits = ids.length; req.setBody(d);
		});
	}`})
	if resp, err := cc.CreateItem(ctx, pk, []byte(`{"id":"e","pk":"p"}`), &azcosmos.ItemOptions{PreTriggers: []string{"count"}, EnableContentResponseOnWrite: true}); err != nil || !strings.Contains(string(resp.Value), `"audits":1`) {
		t.Fatalf("a trigger querying with a UDF: %v %s, want audits 1", err, resp.Value)
	}
	// A write that would skip the triggers it names is refused (azcosmos's PatchItem sends no
	// trigger headers: a raw request).
	presp, pbody := rawRequest(t, e, http.MethodPatch, "/dbs/db/colls/c/docs/a", map[string]string{"x-ms-documentdb-partitionkey": `["p"]`,
		"x-ms-documentdb-pre-trigger-include": "stamp"}, `{"operations":[{"op":"set","path":"/v","value":5}]}`)
	if presp.StatusCode != http.StatusBadRequest || !strings.Contains(string(pbody), "not supported by cfp emulator") {
		t.Fatalf("a patch naming a trigger: %d %s, want 400 not supported by cfp emulator", presp.StatusCode, pbody)
	}
	if r, err := cc.ReadItem(ctx, pk, "a", nil); err != nil || strings.Contains(string(r.Value), `"v":5`) {
		t.Fatalf("a refused patch changed the item: %s %v", r.Value, err)
	}
	bresp, bbody := rawRequest(t, e, http.MethodPost, "/dbs/db/colls/c/docs", map[string]string{"x-ms-documentdb-partitionkey": `["p"]`,
		"x-ms-cosmos-is-batch-request": "true", "x-ms-documentdb-post-trigger-include": "audit"}, `[{"operationType":"Create","resourceBody":{"id":"bt","pk":"p"}}]`)
	if bresp.StatusCode != http.StatusBadRequest || !strings.Contains(string(bbody), "not supported by cfp emulator") || itemStatus(t, cc, "p", "bt") != http.StatusNotFound {
		t.Fatalf("a batch naming a trigger: %d %s, want 400 not supported by cfp emulator and nothing written", bresp.StatusCode, bbody)
	}
}

func TestUDF_InQueriesAcrossPartitions(t *testing.T) {
	e := openEmu(t, emulator.Options{Partitions: 4})
	cc := setupContainer(t, newClient(t, e, ""), "db", "c")
	for i := range 20 {
		upsert(t, cc, doc{ID: "d" + string(rune('a'+i)), PK: "p" + string(rune('a'+i)), V: i})
	}
	createScript(t, e, "udfs", "db", "c", map[string]any{"id": "even", "body": "function (v) { return v % 2 === 0; }"})
	createScript(t, e, "udfs", "db", "c", map[string]any{"id": "sq", "body": "function (v) { return v * v; }"})
	ctx := context.Background()
	var got []int
	pager := cc.NewQueryItemsPager("SELECT VALUE udf.sq(c.v) FROM c WHERE udf.even(c.v) AND c.v < 10", azcosmos.NewPartitionKey(), &azcosmos.QueryOptions{PageSizeHint: 2})
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range page.Items {
			var n int
			_ = json.Unmarshal(it, &n)
			got = append(got, n)
		}
	}
	slices.Sort(got)
	if want := []int{0, 4, 16, 36, 64}; !equalInts(got, want) {
		t.Fatalf("udf query across partitions: %v, want %v", got, want)
	}
	pager = cc.NewQueryItemsPager("SELECT VALUE SUM(udf.sq(c.v)) FROM c", azcosmos.NewPartitionKey(), nil)
	if _, err := pager.NextPage(ctx); statusOf(err) != http.StatusBadRequest || !strings.Contains(err.Error(), "not supported by cfp emulator") {
		t.Fatalf("a UDF inside an aggregate: %v, want 400 not supported by cfp emulator", err)
	}
	pager = cc.NewQueryItemsPager("SELECT * FROM c WHERE udf.missing(c.v)", azcosmos.NewPartitionKeyString("pa"), nil)
	if _, err := pager.NextPage(ctx); statusOf(err) != http.StatusBadRequest {
		t.Fatalf("an unknown UDF: %v, want 400", err)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A script pages a query with pageSize and continuation, deleting what it read: the continuation
// goes on after the last document, so nothing is skipped, and other partitions are untouched.
func TestSproc_PagesAQueryWhileDeleting(t *testing.T) {
	e := openEmu(t, emulator.Options{})
	cc := setupContainer(t, newClient(t, e, ""), "db", "c")
	for i := range 25 {
		upsert(t, cc, doc{ID: fmt.Sprintf("d%02d", i), PK: "p", V: i})
	}
	upsert(t, cc, doc{ID: "other", PK: "q"})
	createScript(t, e, "sprocs", "db", "c", map[string]any{"id": "purge", "body": `function () {
		var coll = getContext().getCollection(), link = coll.getSelfLink(), out = {deleted: 0, pages: 0};
		next();
		function next(cont) {
			coll.queryDocuments(link, "SELECT * FROM c", {pageSize: 4, continuation: cont}, function (err, docs, opts) {
				if (err) throw err;
				out.pages++;
				del(docs, opts.continuation);
			});
		}
		function del(docs, cont) {
			if (docs.length === 0) {
				if (cont) next(cont); else getContext().getResponse().setBody(out);
				return;
			}
			coll.deleteDocument(docs[0]._self, {}, function (err, opts) {
				if (err) throw err;
				if (typeof opts !== "object") throw new Error("deleteDocument's callback got no options");
				out.deleted++;
				del(docs.slice(1), cont);
			});
		}
	}`})
	resp, body := execSproc(t, e, "db", "c", "purge", "p")
	if resp.StatusCode != 200 || string(body) != `{"deleted":25,"pages":7}` {
		t.Fatalf("purge: %d %s, want 25 deleted in 7 pages of 4", resp.StatusCode, body)
	}
	if got := itemStatus(t, cc, "q", "other"); got != 200 {
		t.Fatalf("the other partition's document: %d", got)
	}
}

// createDocument gives a document without an id a new GUID, unless told not to.
func TestSproc_CreateGeneratesAnID(t *testing.T) {
	e := openEmu(t, emulator.Options{})
	setupContainer(t, newClient(t, e, ""), "db", "c")
	createScript(t, e, "sprocs", "db", "c", map[string]any{"id": "mk", "body": `function (disable) {
		var coll = getContext().getCollection();
		coll.createDocument(coll.getSelfLink(), {pk: "p"}, {disableAutomaticIdGeneration: disable}, function (err, d) {
			if (err) throw err;
			getContext().getResponse().setBody(d.id);
		});
	}`})
	resp, body := execSproc(t, e, "db", "c", "mk", "p", false)
	var id string
	if resp.StatusCode != 200 || json.Unmarshal(body, &id) != nil || len(id) != 36 {
		t.Fatalf("create without an id: %d %s, want a GUID", resp.StatusCode, body)
	}
	if resp, body := execSproc(t, e, "db", "c", "mk", "p", true); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("create without an id, generation disabled: %d %s, want 400", resp.StatusCode, body)
	}
}

// A script that allocates without bound is stopped before it takes the process down.
func TestSproc_MemoryBound(t *testing.T) {
	e := openEmu(t, emulator.Options{ScriptTimeout: time.Minute})
	cc := setupContainer(t, newClient(t, e, ""), "db", "c")
	createScript(t, e, "sprocs", "db", "c", map[string]any{"id": "grow", "body": `function () {
		var coll = getContext().getCollection();
		coll.createDocument(coll.getSelfLink(), {id: "before", pk: "p"});
		var s = "x"; while (true) s += s;
	}`})
	resp, body := execSproc(t, e, "db", "c", "grow", "p")
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "allocated more than") {
		t.Fatalf("a script that allocates without bound: %d %s, want 400 naming the memory bound", resp.StatusCode, body)
	}
	if got := itemStatus(t, cc, "p", "before"); got != http.StatusNotFound {
		t.Fatalf("the stopped script's write: %d, want 404", got)
	}
}

// Scripts, users and permissions addressed by their _self links (resource ids), signed over the
// addressed resource's rid as the SDKs sign them.
func TestChildResources_BySelfLink(t *testing.T) {
	e := openEmu(t, emulator.Options{})
	setupContainer(t, newClient(t, e, ""), "db", "c")
	sp := createScript(t, e, "sprocs", "db", "c", map[string]any{"id": "hello", "body": "function (who) { getContext().getResponse().setBody('hi ' + who); }"})
	self := "/" + strings.TrimSuffix(sp["_self"].(string), "/")
	rid := strings.ToLower(sp["_rid"].(string))
	if code, body := ridRequest(t, e, self, "sprocs", rid); code != 200 || !strings.Contains(string(body), `"id":"hello"`) {
		t.Fatalf("GET %s: %d %s", self, code, body)
	}
	if code, body := ridDo(t, e, http.MethodPost, self, "sprocs", rid, map[string]string{"x-ms-documentdb-partitionkey": `["p"]`}, `["you"]`); code != 200 || string(body) != `"hi you"` {
		t.Fatalf("execute by _self: %d %s", code, body)
	}
	u := mustCreate(t, e, "/dbs/db/users", `{"id":"u"}`)
	p := mustCreate(t, e, "/dbs/db/users/u/permissions", `{"id":"p","permissionMode":"Read","resource":"dbs/db/colls/c"}`)
	for _, res := range []struct {
		typ  string
		body map[string]any
	}{{"users", u}, {"permissions", p}} {
		self := "/" + strings.TrimSuffix(res.body["_self"].(string), "/")
		if code, body := ridRequest(t, e, self, res.typ, strings.ToLower(res.body["_rid"].(string))); code != 200 || !strings.Contains(string(body), `"id":"`+res.body["id"].(string)+`"`) {
			t.Fatalf("GET %s: %d %s", self, code, body)
		}
	}
}

// Stored procedures run concurrently with each other and with plain writes, sharing the group
// committer's transactions: every execution's writes arrive, and a failing one (a duplicate id)
// takes none of the others down with it.
func TestSproc_ConcurrentExecutions(t *testing.T) {
	e := openEmu(t, emulator.Options{})
	cc := setupContainer(t, newClient(t, e, ""), "db", "c")
	createScript(t, e, "sprocs", "db", "c", map[string]any{"id": "pair", "body": `function (a) {
		var coll = getContext().getCollection();
		coll.createDocument(coll.getSelfLink(), {id: a + "-1", pk: "p"});
		coll.createDocument(coll.getSelfLink(), {id: a + "-2", pk: "p"});
		getContext().getResponse().setBody(a);
	}`})
	const workers, each = 6, 8
	var wg sync.WaitGroup
	errs := make(chan string, workers*each*2)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				id := fmt.Sprintf("w%d-%d", w, i)
				if resp, body := execSproc(t, e, "db", "c", "pair", "p", id); resp.StatusCode != 200 {
					errs <- fmt.Sprintf("%s: %d %s", id, resp.StatusCode, body)
				}
				// A duplicate of the first execution's id fails alone.
				if resp, _ := execSproc(t, e, "db", "c", "pair", "p", fmt.Sprintf("w%d-0", w)); i > 0 && resp.StatusCode != http.StatusConflict {
					errs <- fmt.Sprintf("duplicate w%d-0: %d, want 409", w, resp.StatusCode)
				}
				if _, err := cc.UpsertItem(context.Background(), azcosmos.NewPartitionKeyString("p"), []byte(`{"id":"plain-`+id+`","pk":"p"}`), nil); err != nil {
					errs <- fmt.Sprintf("plain upsert %s: %v", id, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for msg := range errs {
		t.Error(msg)
	}
	n := 0
	pager := cc.NewQueryItemsPager("SELECT VALUE COUNT(1) FROM c", azcosmos.NewPartitionKeyString("p"), nil)
	for pager.More() {
		page, err := pager.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range page.Items {
			_ = json.Unmarshal(it, &n)
		}
	}
	if want := workers * each * 3; n != want {
		t.Fatalf("%d documents after the executions, want %d (two per execution, one plain write each)", n, want)
	}
}
