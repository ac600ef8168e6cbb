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

	"github.com/cfp-dev/cfp/emulator"
	"github.com/cfp-dev/cfp/emulator/auth"
)

// ridRequest sends GET path signed as the SDKs sign a request addressed by resource ids: the
// link is link (the addressed resource's rid, lower-cased), not the path.
func ridRequest(t *testing.T, e *emulator.Emulator, path, typ, link string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://raw.test"+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := base64.StdEncoding.DecodeString(auth.WellKnownKey)
	date := time.Now().UTC().Format(http.TimeFormat)
	req.Header.Set("x-ms-date", date)
	req.Header.Set("Authorization", url.QueryEscape("type=master&ver=1.0&sig="+auth.Sign(key, "GET", typ, link, date)))
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
