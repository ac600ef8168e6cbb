package emulator_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cfp-dev/cfp/emulator"
)

// TestItemIDs_RoutingGatewayRules: every id can be created; ids the routing gateway cannot
// address by URL are then 401 (trailing whitespace, / \ # %) or 400 (control characters) to
// read, replace and delete, as the SDK's own emulator tests pin.
func TestItemIDs_RoutingGatewayRules(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := openEmu(t, emulator.Options{Partitions: 1})
	cc := setupContainer(t, newClient(t, e, ""), "db", "c")
	pk := azcosmos.NewPartitionKeyString("a")
	for id, want := range map[string]int{
		"This is a test": 200, " Test": 200, "Disallowed?Chars": 200, "WithUnicode鱀": 200, "a,=.:~+-@()^${}[]!_b": 200,
		"Test ": 401, "x%20": 401, "Disallowed/Chars": 401, `Disallowed\Chars`: 401, "Disallowed#Chars": 401,
		"With\tTab": 400, "With\nLineFeed": 400,
	} {
		if _, err := cc.CreateItem(ctx, pk, []byte(`{"id":`+jsonString(id)+`,"pk":"a"}`), nil); err != nil {
			t.Errorf("create %q: %v", id, err)
			continue
		}
		_, err := cc.ReadItem(ctx, pk, id, nil)
		got := http.StatusOK
		if err != nil {
			got = statusOf(err)
		}
		if got != want {
			t.Errorf("read %q: %d (%v), want %d", id, got, err, want)
		}
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestItemIDs_QuestionMarkLeftInTheURLIsPartOfTheID: the JavaScript SDK escapes an item's link
// with encodeURI, which leaves '?': the id "Disallowed?Chars" arrives as the path
// .../docs/Disallowed and the query Chars, signed as the whole id. The service serves it; before,
// the signature did not match (401) and the JavaScript SDK's RGW_idWithDisallowedCharQuestionMark
// failed.
func TestItemIDs_QuestionMarkLeftInTheURLIsPartOfTheID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := openEmu(t, emulator.Options{Partitions: 1})
	cc := setupContainer(t, newClient(t, e, ""), "db", "c")
	const id = "Disallowed?Chars and=more"
	if _, err := cc.CreateItem(ctx, azcosmos.NewPartitionKeyString("a"), []byte(`{"id":`+jsonString(id)+`,"pk":"a"}`), nil); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		method string
		body   string
		want   int
	}{
		{http.MethodGet, "", http.StatusOK},
		{http.MethodPut, `{"id":` + jsonString(id) + `,"pk":"a","v":2}`, http.StatusOK},
		{http.MethodDelete, "", http.StatusNoContent},
	} {
		// As encodeURI writes it: the '?' stays, the space is %20.
		req, err := http.NewRequest(c.method, "http://raw.test/dbs/db/colls/c/docs/Disallowed?Chars%20and=more", strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		signed := *req.URL
		signed.Path, signed.RawQuery = "/dbs/db/colls/c/docs/"+id, ""
		sign := &http.Request{Method: c.method, URL: &signed, Header: req.Header}
		if err := emulator.SignRequest(sign, ""); err != nil {
			t.Fatal(err)
		}
		req.Header.Set("x-ms-documentdb-partitionkey", `["a"]`)
		resp, err := emulator.Transport{Handler: e.Handler()}.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s of %q with the '?' left in the URL: %d %s, want %d", c.method, id, resp.StatusCode, body, c.want)
			continue
		}
		if c.method != http.MethodDelete {
			var got doc
			if err := json.Unmarshal(body, &got); err != nil || got.ID != id {
				t.Errorf("%s returned %s, want the item %q", c.method, body, id)
			}
		}
	}
}

// TestItemIDs_ControlCharacterInTheURLIsTheFrontEndsHTML400: the service's front end refuses a URL
// with an escaped control character before Cosmos DB sees it, with an HTML page; the JavaScript
// SDK, which parses every error body as JSON, then fails without a status code, which its tests
// RGW_idWithCarriageReturn, RGW_idWithTab and RGW_idWithLineFeed expect (a Cosmos DB JSON error
// failed them). The status stays 400, which the Go SDK's tests pin.
func TestItemIDs_ControlCharacterInTheURLIsTheFrontEndsHTML400(t *testing.T) {
	t.Parallel()
	e := openEmu(t, emulator.Options{Partitions: 1})
	setupContainer(t, newClient(t, e, ""), "db", "c")
	for _, esc := range []string{"%09", "%0D", "%0A"} {
		resp, body := rawRequest(t, e, http.MethodGet, "/dbs/db/colls/c/docs/With"+esc+"Char", map[string]string{"x-ms-documentdb-partitionkey": `["a"]`}, "")
		if resp.StatusCode != http.StatusBadRequest || json.Valid(body) || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
			t.Errorf("an id with %s: %d %q %s, want 400 with an HTML page", esc, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
	}
}
