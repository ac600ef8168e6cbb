package emulator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cfp-dev/cfp/emulator"
	"github.com/cfp-dev/cfp/internal/epk"
)

type pkRange struct {
	ID  string `json:"id"`
	Min string `json:"minInclusive"`
	Max string `json:"maxExclusive"`
}

func readPKRanges(t *testing.T, e *emulator.Emulator, coll string) []pkRange {
	t.Helper()
	resp, body := rawRequest(t, e, http.MethodGet, "/dbs/db/colls/"+coll+"/pkranges", nil, "")
	var page struct{ PartitionKeyRanges []pkRange }
	if err := json.Unmarshal(body, &page); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("pkranges: %d %s", resp.StatusCode, body)
	}
	return page.PartitionKeyRanges
}

func rangeHolding(rs []pkRange, k string) string {
	for _, r := range rs {
		if k >= r.Min && (r.Max == "FF" || k < r.Max) {
			return r.ID
		}
	}
	return ""
}

// A container created with partition key version 1 routes every item by its V1 EPK: each item
// is written to, read from, queried on and fed from the physical partition whose range holds
// its V1 EPK, before and after a split, and the container reports version 1.
func TestHashV1_ContainerRoutesByV1EPK(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := openEmu(t, emulator.Options{Partitions: 4})
	c := newClient(t, e, "")
	if _, err := c.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "db"}, nil); err != nil {
		t.Fatal(err)
	}
	d, _ := c.NewDatabase("db")
	cr, err := d.CreateContainer(ctx, azcosmos.ContainerProperties{ID: "v1", PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/pk"}, Version: 1}}, nil)
	if err != nil {
		t.Fatalf("create V1 container: %v", err)
	}
	if v := cr.ContainerProperties.PartitionKeyDefinition.Version; v != 1 {
		t.Errorf("created container reports partition key version %d, want 1", v)
	}
	cc, _ := c.NewContainer("db", "v1")
	if r, err := cc.Read(ctx, nil); err != nil || r.ContainerProperties.PartitionKeyDefinition.Version != 1 {
		t.Errorf("read container: version %v, %v; want 1", r.ContainerProperties, err)
	}

	ranges := readPKRanges(t, e, "v1")
	if len(ranges) != 4 || ranges[1].Min != epk.NumberEPK(1<<30) {
		t.Fatalf("V1 ranges %+v, want 4 starting at the hash EPKs 0, 2^30, 2^31, 3·2^30", ranges)
	}
	const n = 40
	used := map[string]bool{}
	for i := range n {
		d := doc{ID: fmt.Sprintf("d%d", i), PK: fmt.Sprintf("key-%d", i), V: i}
		b, _ := json.Marshal(d)
		resp, err := cc.CreateItem(ctx, azcosmos.NewPartitionKeyString(d.PK), b, nil)
		if err != nil {
			t.Fatalf("create %s: %v", d.ID, err)
		}
		want := rangeHolding(ranges, epk.HashV1([]any{d.PK}))
		if got := resp.RawResponse.Header.Get("x-ms-documentdb-partitionkeyrangeid"); got != want {
			t.Errorf("%s (V1 EPK %s) written to range %s, want %s", d.ID, epk.HashV1([]any{d.PK}), got, want)
		}
		used[want] = true
	}
	if len(used) < 3 {
		t.Errorf("40 keys landed on %d of 4 partitions: not routed by a hash", len(used))
	}

	// A split halves a range in hash space; the items stay reachable and move by their V1 EPK.
	if _, err := e.Split("db", "v1", "0"); err != nil {
		t.Fatalf("split: %v", err)
	}
	ranges = readPKRanges(t, e, "v1")
	if len(ranges) != 5 {
		t.Fatalf("ranges after a split: %+v", ranges)
	}
	for i := range n {
		id, pk := fmt.Sprintf("d%d", i), fmt.Sprintf("key-%d", i)
		resp, err := cc.ReadItem(ctx, azcosmos.NewPartitionKeyString(pk), id, nil)
		if err != nil {
			t.Fatalf("read %s: %v", id, err)
		}
		if got, want := resp.RawResponse.Header.Get("x-ms-documentdb-partitionkeyrangeid"), rangeHolding(ranges, epk.HashV1([]any{pk})); got != want {
			t.Errorf("%s read from range %s, want %s", id, got, want)
		}
		q := cc.NewQueryItemsPager("SELECT * FROM c WHERE c.id = @id", azcosmos.NewPartitionKeyString(pk), &azcosmos.QueryOptions{QueryParameters: []azcosmos.QueryParameter{{Name: "@id", Value: id}}})
		page, err := q.NextPage(ctx)
		if err != nil || len(page.Items) != 1 {
			t.Errorf("query %s in its partition: %d items, %v", id, len(page.Items), err)
		}
	}

	// Every range's change feed holds exactly the items whose V1 EPK it holds.
	want := map[string]int{}
	for i := range n {
		want[fmt.Sprintf("d%d", i)] = i
	}
	var all []doc
	for _, r := range ranges {
		resp, body := rawRequest(t, e, http.MethodGet, "/dbs/db/colls/v1/docs", map[string]string{"A-IM": "Incremental Feed", "x-ms-documentdb-partitionkeyrangeid": r.ID}, "")
		var page struct{ Documents []doc }
		if err := json.Unmarshal(body, &page); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("change feed of range %s: %d %s", r.ID, resp.StatusCode, body)
		}
		for _, d := range page.Documents {
			if got := rangeHolding(ranges, epk.HashV1([]any{d.PK})); got != r.ID {
				t.Errorf("%s on the change feed of range %s, its V1 EPK is in range %s", d.ID, r.ID, got)
			}
		}
		all = append(all, page.Documents...)
	}
	checkExactlyOnce(t, all, want)
}

func TestHashV1_RefusesV1HierarchicalAndOtherVersions(t *testing.T) {
	t.Parallel()
	e := openEmu(t, emulator.Options{Partitions: 1})
	if resp, body := rawRequest(t, e, http.MethodPost, "/dbs", nil, `{"id":"db"}`); resp.StatusCode != http.StatusCreated {
		t.Fatalf("create database: %d %s", resp.StatusCode, body)
	}
	for _, def := range []string{
		`{"id":"a","partitionKey":{"paths":["/a","/b"],"kind":"MultiHash","version":1}}`,
		`{"id":"b","partitionKey":{"paths":["/a"],"kind":"Hash","version":3}}`,
	} {
		if resp, body := rawRequest(t, e, http.MethodPost, "/dbs/db/colls", nil, def); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("create %s: %d %s, want 400", def, resp.StatusCode, body)
		}
	}
}
