package emulator_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/emulator"
)

// tokenRequest sends a request signed with a resource token, as the SDKs send one: the token,
// URL-encoded, is the Authorization header.
func tokenRequest(t *testing.T, e *emulator.Emulator, method, path, token string, hdr map[string]string, body string) (*http.Response, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://raw.test"+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	if _, set := hdr["x-ms-date"]; !set {
		req.Header.Set("x-ms-date", time.Now().UTC().Format(http.TimeFormat))
	}
	req.Header.Set("Authorization", url.QueryEscape(token))
	resp, err := emulator.Transport{Handler: e.Handler()}.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	return resp, b
}

func mustCreate(t *testing.T, e *emulator.Emulator, path, body string) map[string]any {
	t.Helper()
	resp, b := rawRequest(t, e, http.MethodPost, path, nil, body)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST %s %s: %d %s", path, body, resp.StatusCode, b)
	}
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return out
}

func TestUsers_CRUD(t *testing.T) {
	e := openEmu(t, emulator.Options{})
	setupContainer(t, newClient(t, e, ""), "db", "c")
	u := mustCreate(t, e, "/dbs/db/users", `{"id":"alice"}`)
	if u["_permissions"] != "permissions/" || u["_rid"] == nil {
		t.Fatalf("user body: %v", u)
	}
	// Replace renames.
	if resp, b := rawRequest(t, e, http.MethodPut, "/dbs/db/users/alice", nil, `{"id":"bob"}`); resp.StatusCode != 200 || !strings.Contains(string(b), `"id":"bob"`) {
		t.Fatalf("rename: %d %s", resp.StatusCode, b)
	}
	if resp, _ := rawRequest(t, e, http.MethodGet, "/dbs/db/users/alice", nil, ""); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("old name after the rename: %d, want 404", resp.StatusCode)
	}
	// Upsert of an existing user replaces it; of a new one creates it.
	if resp, _ := rawRequest(t, e, http.MethodPost, "/dbs/db/users", map[string]string{"x-ms-documentdb-is-upsert": "true"}, `{"id":"bob"}`); resp.StatusCode != http.StatusOK {
		t.Fatalf("upsert of an existing user: %d, want 200", resp.StatusCode)
	}
	if resp, _ := rawRequest(t, e, http.MethodPost, "/dbs/db/users", map[string]string{"x-ms-documentdb-is-upsert": "true"}, `{"id":"carol"}`); resp.StatusCode != http.StatusCreated {
		t.Fatalf("upsert of a new user: %d, want 201", resp.StatusCode)
	}
	resp, b := rawRequest(t, e, http.MethodPost, "/dbs/db/users", map[string]string{"Content-Type": "application/query+json", "x-ms-documentdb-isquery": "true"},
		`{"query":"SELECT * FROM root r WHERE r.id=@id","parameters":[{"name":"@id","value":"carol"}]}`)
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"Users":[{`) || !strings.Contains(string(b), `"_count":1`) {
		t.Fatalf("query users: %d %s", resp.StatusCode, b)
	}
	mustCreate(t, e, "/dbs/db/users/bob/permissions", `{"id":"p","permissionMode":"Read","resource":"dbs/AQAAAA==/colls/AQAAAJ0fgTc="}`)
	if resp, b := rawRequest(t, e, http.MethodPost, "/dbs/db/users/bob/permissions", nil, `{"id":"q","permissionMode":"Write","resource":"dbs/db"}`); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a permission mode the service has not: %d %s, want 400", resp.StatusCode, b)
	}
	if resp, _ := rawRequest(t, e, http.MethodDelete, "/dbs/db/users/bob", nil, ""); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("delete user: %d", resp.StatusCode)
	}
	if resp, _ := rawRequest(t, e, http.MethodGet, "/dbs/db/users/bob/permissions/p", nil, ""); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("a deleted user's permission: %d, want 404", resp.StatusCode)
	}
}

// A resource token serves its permission's resource in its mode, and nothing else.
func TestResourceTokens_AuthoriseOnlyTheirResourceAndMode(t *testing.T) {
	e := openEmu(t, emulator.Options{})
	c := newClient(t, e, "")
	cc := setupContainer(t, c, "db", "c")
	upsert(t, cc, doc{ID: "d1", PK: "p1", V: 1})
	mustCreate(t, e, "/dbs/db/colls", `{"id":"other","partitionKey":{"paths":["/pk"],"kind":"Hash"}}`)
	mustCreate(t, e, "/dbs/db/users", `{"id":"u"}`)
	read := mustCreate(t, e, "/dbs/db/users/u/permissions", `{"id":"read","permissionMode":"Read","resource":"dbs/db/colls/c"}`)
	token, _ := read["_token"].(string)
	if !strings.HasPrefix(token, "type=resource&ver=1.0&sig=") {
		t.Fatalf("permission token %q", token)
	}
	pk := map[string]string{"x-ms-documentdb-partitionkey": `["p1"]`}
	check := func(name, method, path, tok string, hdr map[string]string, body string, want int) {
		t.Helper()
		if resp, b := tokenRequest(t, e, method, path, tok, hdr, body); resp.StatusCode != want {
			t.Fatalf("%s: %d %s, want %d", name, resp.StatusCode, b, want)
		}
	}
	check("account read", http.MethodGet, "/", token, nil, "", 200)
	check("read the container", http.MethodGet, "/dbs/db/colls/c", token, nil, "", 200)
	check("read a document", http.MethodGet, "/dbs/db/colls/c/docs/d1", token, pk, "", 200)
	// The JavaScript SDK sends no x-ms-date with a resource token: the token has its own expiry.
	check("no x-ms-date", http.MethodGet, "/dbs/db/colls/c/docs/d1", token, map[string]string{"x-ms-documentdb-partitionkey": `["p1"]`, "x-ms-date": ""}, "", 200)
	check("a stale x-ms-date", http.MethodGet, "/dbs/db/colls/c/docs/d1", token, map[string]string{"x-ms-documentdb-partitionkey": `["p1"]`, "x-ms-date": time.Now().Add(-time.Hour).UTC().Format(http.TimeFormat)}, "", http.StatusForbidden)
	check("read feed", http.MethodGet, "/dbs/db/colls/c/docs", token, nil, "", 200)
	check("query", http.MethodPost, "/dbs/db/colls/c/docs", token, map[string]string{"Content-Type": "application/query+json", "x-ms-documentdb-isquery": "true", "x-ms-documentdb-partitionkey": `["p1"]`}, `{"query":"SELECT * FROM c"}`, 200)
	check("delete a document with Read", http.MethodDelete, "/dbs/db/colls/c/docs/d1", token, pk, "", http.StatusForbidden)
	check("create with Read", http.MethodPost, "/dbs/db/colls/c/docs", token, pk, `{"id":"x","pk":"p1"}`, http.StatusForbidden)
	check("delete the container", http.MethodDelete, "/dbs/db/colls/c", token, nil, "", http.StatusForbidden)
	check("another container", http.MethodGet, "/dbs/db/colls/other/docs", token, nil, "", http.StatusForbidden)
	check("list users", http.MethodGet, "/dbs/db/users", token, nil, "", http.StatusForbidden)
	dbTok := mustCreate(t, e, "/dbs/db/users/u/permissions", `{"id":"db","permissionMode":"All","resource":"dbs/db"}`)["_token"].(string)
	check("a database token on users", http.MethodGet, "/dbs/db/users/u/permissions", dbTok, nil, "", http.StatusForbidden)
	check("a database token on a container", http.MethodGet, "/dbs/db/colls/other", dbTok, nil, "", 200)
	check("a forged token", http.MethodGet, "/dbs/db/colls/c", token+"x", nil, "", http.StatusUnauthorized)

	// All on one logical partition of the container.
	// The mode is kept as given and compared without case (the Python SDK sends "all").
	all := mustCreate(t, e, "/dbs/db/users/u/permissions", `{"id":"all","permissionMode":"all","resource":"dbs/db/colls/c","resourcePartitionKey":["p1"]}`)
	if all["permissionMode"] != "all" {
		t.Fatalf("permissionMode %v, want it as given (all)", all["permissionMode"])
	}
	allTok := all["_token"].(string)
	check("create in the permitted partition", http.MethodPost, "/dbs/db/colls/c/docs", allTok, pk, `{"id":"x","pk":"p1"}`, http.StatusCreated)
	check("create in another partition", http.MethodPost, "/dbs/db/colls/c/docs", allTok, map[string]string{"x-ms-documentdb-partitionkey": `["p2"]`}, `{"id":"y","pk":"p2"}`, http.StatusForbidden)

	// A document permission: that document, and reads of its container's definition.
	dperm := mustCreate(t, e, "/dbs/db/users/u/permissions", `{"id":"doc","permissionMode":"All","resource":"dbs/db/colls/c/docs/d1"}`)
	docTok := dperm["_token"].(string)
	check("read the container with a document's token", http.MethodGet, "/dbs/db/colls/c", docTok, nil, "", 200)
	check("partition key ranges with a document's token", http.MethodGet, "/dbs/db/colls/c/pkranges", docTok, nil, "", 200)
	check("another document with a document's token", http.MethodGet, "/dbs/db/colls/c/docs/x", docTok, pk, "", http.StatusForbidden)
	check("delete the permitted document", http.MethodDelete, "/dbs/db/colls/c/docs/d1", docTok, pk, "", http.StatusNoContent)

	// Deleting the permission revokes its tokens.
	if resp, _ := rawRequest(t, e, http.MethodDelete, "/dbs/db/users/u/permissions/read", nil, ""); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("delete permission: %d", resp.StatusCode)
	}
	check("a deleted permission's token", http.MethodGet, "/dbs/db/colls/c", token, nil, "", http.StatusUnauthorized)
}
