package emulator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cfp-dev/cfp/emulator"
)

// bigItems writes n items of about 1.5 MB each in partition key "p", returns their ids.
func bigItems(t *testing.T, cc *azcosmos.ContainerClient, n int) []string {
	t.Helper()
	pad := strings.Repeat("x", 1500<<10)
	var ids []string
	for i := range n {
		id := fmt.Sprintf("big%d", i)
		b, _ := json.Marshal(map[string]any{"id": id, "pk": "p", "v": i, "pad": pad})
		if _, err := cc.UpsertItem(context.Background(), azcosmos.NewPartitionKeyString("p"), b, nil); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// pageIDs checks that a page body is within the service's 4 MB response limit and returns the
// ids of its documents.
func pageIDs(t *testing.T, what string, body []byte) []string {
	t.Helper()
	if len(body) > 4<<20 {
		t.Errorf("%s: a page of %d bytes, over the 4 MB response limit", what, len(body))
	}
	var page struct{ Documents []json.RawMessage }
	if err := json.Unmarshal(body, &page); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	var ids []string
	for _, d := range page.Documents {
		var v struct {
			ID       string
			Current  *struct{ ID string }
			Metadata *struct{ OperationType string }
		}
		_ = json.Unmarshal(d, &v)
		if v.Current != nil {
			v.ID = v.Current.ID
		}
		ids = append(ids, v.ID)
	}
	return ids
}

// TestPages_BoundedByTheResponseLimit reads five items of 1.5 MB through every kind of page
// (change feed in both modes, unordered and ORDER BY queries) with a page size of 100: each page
// must fit in the service's 4 MB response limit, and every item must come exactly once.
func TestPages_BoundedByTheResponseLimit(t *testing.T) {
	t.Parallel()
	e := openEmu(t, emulator.Options{Partitions: 1})
	cc := setupContainer(t, newClient(t, e, ""), "db", "c")
	feed := func(aim string, etag string) (int, []byte, string) {
		hdr := map[string]string{"A-IM": aim, "x-ms-documentdb-partitionkeyrangeid": "0", "x-ms-max-item-count": "100"}
		if aim == "Full-Fidelity Feed" {
			hdr["x-ms-cosmos-changefeed-wire-format-version"] = "2021-09-15"
		}
		if etag != "" {
			hdr["If-None-Match"] = etag
		}
		resp, body := rawRequest(t, e, http.MethodGet, "/dbs/db/colls/c/docs", hdr, "")
		return resp.StatusCode, body, resp.Header.Get("etag")
	}
	_, _, now := feed("Full-Fidelity Feed", "*")
	want := bigItems(t, cc, 5)

	drainFeed := func(aim, etag string) {
		t.Helper()
		var got []string
		for pages := 0; ; pages++ {
			code, body, next := feed(aim, etag)
			if code == http.StatusNotModified {
				break
			}
			if code != http.StatusOK || pages > 10 {
				t.Fatalf("%s page %d: %d", aim, pages, code)
			}
			got = append(got, pageIDs(t, aim, body)...)
			etag = next
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", aim, got, want)
		}
	}
	drainFeed("Incremental Feed", "")
	drainFeed("Full-Fidelity Feed", now)

	for _, q := range []string{"SELECT * FROM c", "SELECT * FROM c ORDER BY c.v"} {
		var got []string
		cont := ""
		for pages := 0; ; pages++ {
			hdr := map[string]string{"Content-Type": "application/query+json", "x-ms-documentdb-isquery": "true",
				"x-ms-documentdb-partitionkey": `["p"]`, "x-ms-max-item-count": "100"}
			if cont != "" {
				hdr["x-ms-continuation"] = cont
			}
			resp, body := rawRequest(t, e, http.MethodPost, "/dbs/db/colls/c/docs", hdr, `{"query":"`+q+`"}`)
			if resp.StatusCode != http.StatusOK || pages > 10 {
				t.Fatalf("%s page %d: %d", q, pages, resp.StatusCode)
			}
			got = append(got, pageIDs(t, q, body)...)
			if cont = resp.Header.Get("x-ms-continuation"); cont == "" {
				break
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", q, got, want)
		}
	}
}

// TestItems_PatchCannotGrowAnItemBeyondTheLimit patches a 1.5 MB item with 1 MB more: the item
// would be over the service's 2 MB item limit, so the patch is refused with the service's 413 and
// the item unchanged; so is a new item over the limit (a 400 before, where the service says 413).
func TestItems_PatchCannotGrowAnItemBeyondTheLimit(t *testing.T) {
	t.Parallel()
	e := openEmu(t, emulator.Options{Partitions: 1})
	cc := setupContainer(t, newClient(t, e, ""), "db", "c")
	bigItems(t, cc, 1)
	ops := azcosmos.PatchOperations{}
	ops.AppendAdd("/more", strings.Repeat("y", 1<<20))
	_, err := cc.PatchItem(context.Background(), azcosmos.NewPartitionKeyString("p"), "big0", ops, nil)
	if statusOf(err) != http.StatusRequestEntityTooLarge || !strings.Contains(err.Error(), "RequestEntityTooLarge") {
		t.Errorf("patch to 2.5 MB: %v, want 413 RequestEntityTooLarge", err)
	}
	huge := []byte(`{"id":"huge","pk":"p","s":"` + strings.Repeat("z", 2<<20) + `"}`)
	if _, err := cc.CreateItem(context.Background(), azcosmos.NewPartitionKeyString("p"), huge, nil); statusOf(err) != http.StatusRequestEntityTooLarge {
		t.Errorf("create of a 2 MB item: %v, want 413", err)
	}
	resp, err := cc.ReadItem(context.Background(), azcosmos.NewPartitionKeyString("p"), "big0", nil)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(resp.Value), `"more"`) {
		t.Error("the refused patch was applied")
	}
}
