package emulator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cfp-dev/cfp/emulator"
	"github.com/cfp-dev/cfp/emulator/auth"
)

// body returns a document of about size bytes with props properties besides id and pk.
func body(id string, props, size int) []byte {
	d := map[string]any{"id": id, "pk": "p"}
	pad := size / max(1, props)
	for i := range props {
		d[fmt.Sprintf("p%d", i)] = strings.Repeat("x", max(1, pad-12))
	}
	b, _ := json.Marshal(d)
	return b
}

func TestCharge_PointReadGrowsWithSize(t *testing.T) {
	t.Parallel()
	cc := setupContainer(t, newClient(t, openEmu(t, emulator.Options{}), ""), "db", "c")
	ctx := context.Background()
	pk := azcosmos.NewPartitionKeyString("p")
	for _, c := range []struct {
		size     int
		min, max float32
	}{{500, 1, 1}, {40 << 10, 2.3, 3.5}, {300 << 10, 21, 30}} {
		id := fmt.Sprintf("d%d", c.size)
		if _, err := cc.CreateItem(ctx, pk, body(id, 4, c.size), nil); err != nil {
			t.Fatal(err)
		}
		r, err := cc.ReadItem(ctx, pk, id, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r.RequestCharge < c.min || r.RequestCharge > c.max {
			t.Errorf("read of a %d-byte document: %v RU, want %v to %v", c.size, r.RequestCharge, c.min, c.max)
		}
	}
}

func TestCharge_WritesBySizeIndexedPropertiesAndKind(t *testing.T) {
	t.Parallel()
	c := newClient(t, openEmu(t, emulator.Options{}), "")
	cc := setupContainer(t, c, "db", "c")
	ctx := context.Background()
	pk := azcosmos.NewPartitionKeyString("p")
	create := func(cc *azcosmos.ContainerClient, id string, b []byte) float32 {
		t.Helper()
		r, err := cc.CreateItem(ctx, pk, b, nil)
		if err != nil {
			t.Fatal(err)
		}
		return r.RequestCharge
	}
	few := create(cc, "few", body("few", 4, 800))
	many := create(cc, "many", body("many", 120, 800))
	big := create(cc, "big", body("big", 4, 64<<10))
	if !(few < many) {
		t.Errorf("create of 4 properties %v RU, of 120 (same size) %v RU: want more indexed properties to cost more", few, many)
	}
	if big < 4*few {
		t.Errorf("create of 64 KB %v RU, of 800 B %v RU: want a write to grow with size", big, few)
	}
	r, err := cc.ReplaceItem(ctx, pk, "few", body("few", 4, 800), nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.RequestCharge <= few {
		t.Errorf("replace %v RU, create %v RU: want a replace to cost more than a create", r.RequestCharge, few)
	}

	// A container that indexes nothing pays less for the same document.
	d, _ := c.NewDatabase("db")
	none := azcosmos.ContainerProperties{ID: "none", PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/pk"}},
		IndexingPolicy: &azcosmos.IndexingPolicy{IndexingMode: azcosmos.IndexingModeNone, Automatic: false}}
	if _, err := d.CreateContainer(ctx, none, nil); err != nil {
		t.Fatal(err)
	}
	nc, _ := c.NewContainer("db", "none")
	if got := create(nc, "many", body("many", 120, 800)); got >= many {
		t.Errorf("create in a container without indexing %v RU, with the default policy %v RU: want less", got, many)
	}
}

func TestCharge_QueryAndChangeFeedPagesByDocuments(t *testing.T) {
	t.Parallel()
	cc := setupContainer(t, newClient(t, openEmu(t, emulator.Options{}), ""), "db", "c")
	ctx := context.Background()
	pk := azcosmos.NewPartitionKeyString("p")
	query := func() float32 {
		t.Helper()
		var charge float32
		pager := cc.NewQueryItemsPager("SELECT * FROM c", pk, nil)
		for pager.More() {
			p, err := pager.NextPage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			charge += p.RequestCharge
		}
		return charge
	}
	for i := range 10 {
		upsert(t, cc, doc{ID: fmt.Sprintf("a%d", i), PK: "p"})
	}
	ten := query()
	for i := range 90 {
		upsert(t, cc, doc{ID: fmt.Sprintf("b%d", i), PK: "p"})
	}
	hundred := query()
	if !(ten < hundred) {
		t.Errorf("query of 10 documents %v RU, of 100 %v RU: want the charge to grow with the documents loaded", ten, hundred)
	}
	fr := azcosmos.FeedRange{MinInclusive: "", MaxExclusive: "FF"}
	first, err := cc.ReadChangeFeed(ctx, &azcosmos.ChangeFeedOptions{FeedRange: &fr, MaxItemCount: 10})
	if err != nil {
		t.Fatal(err)
	}
	all, err := cc.ReadChangeFeed(ctx, &azcosmos.ChangeFeedOptions{FeedRange: &fr, MaxItemCount: 100})
	if err != nil {
		t.Fatal(err)
	}
	if first.Count != 10 || all.Count != 100 || !(first.RequestCharge < all.RequestCharge) {
		t.Errorf("change-feed pages: %d documents %v RU, %d documents %v RU: want the charge to grow with the documents", first.Count, first.RequestCharge, all.Count, all.RequestCharge)
	}
}

func TestPriorityAndThroughputBucket_AcceptedAndEchoed(t *testing.T) {
	t.Parallel()
	e := openEmu(t, emulator.Options{})
	cred, err := azcosmos.NewKeyCredential(auth.WellKnownKey)
	if err != nil {
		t.Fatal(err)
	}
	low, bucket := azcosmos.PriorityLevelLow, int32(3)
	c, err := azcosmos.NewClientWithKey(fmt.Sprintf("http://emu-%d.test/", hostSeq.Add(1)), cred, &azcosmos.ClientOptions{
		ClientOptions: azcore.ClientOptions{Transport: emulator.Transport{Handler: e.Handler()}, Retry: policy.RetryOptions{MaxRetries: -1}},
		PriorityLevel: &low, ThroughputBucket: &bucket,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cc := setupContainer(t, c, "db", "c")
	upsert(t, cc, doc{ID: "a", PK: "p"})
	r, err := cc.ReadItem(context.Background(), azcosmos.NewPartitionKeyString("p"), "a", nil)
	if err != nil {
		t.Fatal(err)
	}
	h := r.RawResponse.Header
	if h.Get("x-ms-cosmos-priority-level") != "Low" || h.Get("x-ms-cosmos-throughput-bucket") != "3" {
		t.Errorf("echoed priority %q, bucket %q; want Low, 3", h.Get("x-ms-cosmos-priority-level"), h.Get("x-ms-cosmos-throughput-bucket"))
	}

	for _, hdr := range []map[string]string{{"x-ms-cosmos-priority-level": "Urgent"}, {"x-ms-cosmos-throughput-bucket": "9"}} {
		resp, b := rawRequest(t, e, http.MethodGet, "/dbs/db/colls/c", hdr, "")
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%v: status %d (%s), want 400", hdr, resp.StatusCode, b)
		}
	}
}
