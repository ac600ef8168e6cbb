package emulator_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cfp-dev/cfp/emulator"
	"github.com/cfp-dev/cfp/emulator/auth"
)

// ridRequest sends GET path signed as the SDKs sign a request addressed by resource ids: the
// link is link (the addressed resource's rid, lower-cased), not the path.
func ridRequest(t *testing.T, e *emulator.Emulator, path, typ, link string) (int, []byte) {
	t.Helper()
	return ridDo(t, e, http.MethodGet, path, typ, link, nil, "")
}

// ridDo sends method path with the headers hdr and body, signed as the SDKs sign a request
// addressed by resource ids: over link (the addressed resource's rid, lower-cased).
func ridDo(t *testing.T, e *emulator.Emulator, method, path, typ, link string, hdr map[string]string, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, "http://raw.test"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	key, _ := base64.StdEncoding.DecodeString(auth.WellKnownKey)
	date := time.Now().UTC().Format(http.TimeFormat)
	req.Header.Set("x-ms-date", date)
	req.Header.Set("Authorization", url.QueryEscape("type=master&ver=1.0&sig="+auth.Sign(key, method, typ, link, date)))
	resp, err := emulator.Transport{Handler: e.Handler()}.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// The Java SDK reads a container's partition key ranges by resource ids
// (GET dbs/<db rid>/colls/<container rid>/pkranges), signed over the container's rid in lower
// case; it got 401 and its Change Feed Processor could not start.
func TestRIDAddressed_PartitionKeyRanges(t *testing.T) {
	t.Parallel()
	e := openEmu(t, emulator.Options{Partitions: 4})
	c := newClient(t, e, "")
	cc := setupContainer(t, c, "shop", "orders")
	ctx := context.Background()
	cresp, err := cc.Read(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := c.NewDatabase("shop")
	dresp, err := d.Read(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	dbRID, collRID := dresp.DatabaseProperties.ResourceID, cresp.ContainerProperties.ResourceID

	path := "/dbs/" + dbRID + "/colls/" + collRID + "/pkranges"
	status, body := ridRequest(t, e, path, "pkranges", strings.ToLower(collRID))
	if status != http.StatusOK {
		t.Fatalf("GET %s: %d %s, want 200", path, status, body)
	}
	var ranges struct {
		RID    string `json:"_rid"`
		Ranges []struct {
			ID string `json:"id"`
		} `json:"PartitionKeyRanges"`
	}
	if err := json.Unmarshal(body, &ranges); err != nil {
		t.Fatal(err)
	}
	if ranges.RID != collRID || len(ranges.Ranges) != 4 {
		t.Errorf("GET %s: rid %q and %d ranges, want %q and 4", path, ranges.RID, len(ranges.Ranges), collRID)
	}

	// The container itself, by rid, signed over its rid.
	if status, body := ridRequest(t, e, "/dbs/"+dbRID+"/colls/"+collRID, "colls", strings.ToLower(collRID)); status != http.StatusOK {
		t.Errorf("GET the container by rids: %d %s, want 200", status, body)
	}
	// A signature over the path (the name-based rule) does not serve a rid-based request, as in
	// the service.
	if status, _ := ridRequest(t, e, path, "pkranges", "dbs/"+dbRID+"/colls/"+collRID); status != http.StatusUnauthorized {
		t.Errorf("GET %s signed over the path: %d, want 401", path, status)
	}
	// An unknown rid is not rewritten: it stays a name, and is not found.
	if status, _ := ridRequest(t, e, "/dbs/"+dbRID+"/colls/AAAAAAAAAAA=/pkranges", "pkranges", "dbs/"+dbRID+"/colls/AAAAAAAAAAA="); status != http.StatusNotFound {
		t.Errorf("GET the ranges of an unknown container rid: %d, want 404", status)
	}
}

// A container's read (and create, replace) names its owner's path in x-ms-alt-content-path, as
// the service does. The Java SDK builds the container's name-based link from that header
// (PathsHelper.generatePathForNameBased: owner + "/colls/" + id); without it the link was null
// and every change-feed read of its Change Feed Processor failed with "Argument
// 'collectionLink' must not be null".
func TestContainerRead_NamesItsOwnerPath(t *testing.T) {
	t.Parallel()
	e := openEmu(t, emulator.Options{Partitions: 1})
	c := newClient(t, e, "")
	setupContainer(t, c, "shop", "orders")
	resp, body := rawRequest(t, e, http.MethodGet, "/dbs/shop/colls/orders", nil, "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("read container: %d %s", resp.StatusCode, body)
	}
	if got := resp.Header.Get("x-ms-alt-content-path"); got != "dbs/shop" {
		t.Errorf("x-ms-alt-content-path = %q, want %q", got, "dbs/shop")
	}
}

// Documents addressed by their _self links (dbs/<rid>/colls/<rid>/docs/<rid>), signed over the
// document's rid in lower case, as the Python SDK addresses a document it was given as a dict:
// every operation the name path serves. Before, the path was not rewritten and the signature
// was checked over the path: 401 for each of them (the Python suite's test_document_crud).
func TestRIDAddressed_Documents(t *testing.T) {
	t.Parallel()
	e := openEmu(t, emulator.Options{Partitions: 4})
	c := newClient(t, e, "")
	cc := setupContainer(t, c, "shop", "orders")
	ctx := context.Background()
	cresp, err := cc.Read(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := c.NewDatabase("shop")
	dresp, err := d.Read(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	dbRID, collRID := dresp.DatabaseProperties.ResourceID, cresp.ContainerProperties.ResourceID
	coll := "/dbs/" + dbRID + "/colls/" + collRID
	pkA := map[string]string{"x-ms-documentdb-partitionkey": `["a"]`, "content-type": "application/json"}

	// Create under the container addressed by rids, signed over the container's rid.
	status, body := ridDo(t, e, http.MethodPost, coll+"/docs", "docs", strings.ToLower(collRID), pkA, `{"id":"d1","pk":"a","v":1}`)
	if status != http.StatusCreated {
		t.Fatalf("create by rids: %d %s", status, body)
	}
	var doc struct {
		ID   string `json:"id"`
		V    int    `json:"v"`
		RID  string `json:"_rid"`
		Self string `json:"_self"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Self != "dbs/"+dbRID+"/colls/"+collRID+"/docs/"+doc.RID+"/" {
		t.Fatalf("_self %q does not name the rids", doc.Self)
	}
	self := "/" + strings.TrimSuffix(doc.Self, "/")
	link := strings.ToLower(doc.RID)

	if status, body := ridDo(t, e, http.MethodGet, self, "docs", link, pkA, ""); status != http.StatusOK || !strings.Contains(string(body), `"id":"d1"`) {
		t.Fatalf("read by _self: %d %s, want 200 and d1", status, body)
	}
	if status, body := ridDo(t, e, http.MethodPut, self, "docs", link, pkA, `{"id":"d1","pk":"a","v":2}`); status != http.StatusOK {
		t.Fatalf("replace by _self: %d %s", status, body)
	}
	patch := `{"operations":[{"op":"set","path":"/v","value":3}]}`
	if status, body := ridDo(t, e, http.MethodPatch, self, "docs", link, pkA, patch); status != http.StatusOK || !strings.Contains(string(body), `"v":3`) {
		t.Fatalf("patch by _self: %d %s", status, body)
	}
	// The name path sees what the rid path wrote.
	got, err := cc.ReadItem(ctx, azcosmos.NewPartitionKeyString("a"), "d1", nil)
	if err != nil || !strings.Contains(string(got.Value), `"v":3`) {
		t.Fatalf("read by name after the rid-addressed writes: %v %s", err, got.Value)
	}
	// A query and a read feed under the container by rids.
	q := map[string]string{"content-type": "application/query+json", "x-ms-documentdb-isquery": "true", "x-ms-documentdb-query-enablecrosspartition": "true"}
	if status, body := ridDo(t, e, http.MethodPost, coll+"/docs", "docs", strings.ToLower(collRID), q, `{"query":"SELECT * FROM c"}`); status != http.StatusOK || !strings.Contains(string(body), `"id":"d1"`) {
		t.Fatalf("query by rids: %d %s", status, body)
	}
	// Signed over the path instead of the rid: refused, as in the service.
	if status, _ := ridDo(t, e, http.MethodGet, self, "docs", strings.TrimPrefix(self, "/"), pkA, ""); status != http.StatusUnauthorized {
		t.Errorf("read by _self signed over the path: %d, want 401", status)
	}
	if status, body := ridDo(t, e, http.MethodDelete, self, "docs", link, pkA, ""); status != http.StatusNoContent {
		t.Fatalf("delete by _self: %d %s", status, body)
	}
	// Gone: the rid names no document any more.
	if status, _ := ridDo(t, e, http.MethodGet, self, "docs", link, pkA, ""); status != http.StatusNotFound {
		t.Errorf("read of a deleted document by _self: %d, want 404", status)
	}
}
