package cosmos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cfp-dev/cfp/internal/feed"
)

// avOps renders all-versions items as "op id@lsn", checking the wire shape on the way.
func avOps(t *testing.T, items []json.RawMessage) string {
	t.Helper()
	var out []string
	for _, raw := range items {
		var v struct {
			Current  map[string]any  `json:"current"`
			Previous map[string]any  `json:"previous"`
			Metadata map[string]any  `json:"metadata"`
			Extra    json.RawMessage `json:"_lsn"`
		}
		if err := json.Unmarshal(raw, &v); err != nil || v.Metadata == nil || v.Extra != nil {
			t.Fatalf("item %s is not an all-versions change (%v)", raw, err)
		}
		id, _ := v.Current["id"].(string)
		if id == "" {
			id, _ = v.Metadata["id"].(string)
		}
		out = append(out, fmt.Sprintf("%s %s@%v", v.Metadata["operationType"], id, v.Metadata["lsn"]))
	}
	return strings.Join(out, ", ")
}

func TestContainer_ReadPage_AllVersionsAndDeletes(t *testing.T) {
	t.Parallel()
	a := openLocal(t, 1)
	c := newFeedContainer(t, a)
	ctx := context.Background()
	upsert(t, c, []string{"alpha"}, 0, 1) // before "now": not delivered

	part := partitions(t, c)[0]
	req := feed.ReadRequest{PartitionID: part.ID, Mode: feed.AllVersionsAndDeletes, Start: feed.StartFrom{Kind: feed.StartNow}}
	page, err := c.ReadPage(ctx, req)
	if err != nil || !page.NotModified || page.Continuation != `"1"` {
		t.Fatalf("ReadPage(now) = %+v, %v; want not modified at \"1\"", page, err)
	}
	req.Start = feed.StartFrom{Kind: feed.StartContinuation, Continuation: page.Continuation}

	upsert(t, c, []string{"alpha"}, 1, 1)
	if err := c.UpsertItem(ctx, "alpha", []byte(`{"id":"doc-0001","pk":"alpha","n":2}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.client.DeleteItem(ctx, azcosmos.NewPartitionKeyString("alpha"), "doc-0001", nil); err != nil {
		t.Fatal(err)
	}
	page, err = c.ReadPage(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := avOps(t, page.Items), "create doc-0001@2, replace doc-0001@3, delete doc-0001@4"; got != want {
		t.Fatalf("all-versions page: %s, want %s", got, want)
	}
	if page.Continuation != `"4"` || page.LatestLSN != 4 || page.NotModified {
		t.Errorf("page continuation %s latest LSN %d not modified %v, want \"4\", 4, false", page.Continuation, page.LatestLSN, page.NotModified)
	}
	// The same partition read in latest-version mode sees neither the old versions nor the delete.
	latest := req
	latest.Mode = feed.LatestVersion
	if page, err := c.ReadPage(ctx, latest); err != nil || !page.NotModified {
		t.Errorf("latest-version page after the delete: %d items, %v; want none", len(page.Items), err)
	}
	// A partition-key scoped read, and a lease never checkpointed (empty continuation: now).
	pkReq := feed.ReadRequest{PartitionKey: json.RawMessage(`["alpha"]`), Mode: feed.AllVersionsAndDeletes,
		Start: feed.StartFrom{Kind: feed.StartContinuation, Continuation: `"2"`}}
	if page, err := c.ReadPage(ctx, pkReq); err != nil || avOps(t, page.Items) != "replace doc-0001@3, delete doc-0001@4" {
		t.Errorf("pk-scoped read after 2: %s, %v", avOps(t, page.Items), err)
	}
	req.Start = feed.StartFrom{Kind: feed.StartContinuation}
	if page, err := c.ReadPage(ctx, req); err != nil || !page.NotModified || page.Continuation != `"4"` {
		t.Errorf("empty continuation: %+v, %v; want not modified at \"4\" (now)", page, err)
	}
	for _, start := range []feed.StartFrom{{Kind: feed.StartBeginning}, {Kind: feed.StartTime, Time: time.Now().Add(-time.Hour)}} {
		req.Start = start
		if _, err := c.ReadPage(ctx, req); !errors.Is(err, feed.ErrAllVersionsStart) {
			t.Errorf("all-versions read from %s: %v, want ErrAllVersionsStart", feed.FormatStart(start), err)
		}
	}
}
