package emulator_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cfp-dev/cfp/emulator"
)

// queryAll drains a query and returns the raw results and the number of pages.
func queryAll(t *testing.T, cc *azcosmos.ContainerClient, sql string, pk azcosmos.PartitionKey, opts *azcosmos.QueryOptions) ([]string, int, error) {
	t.Helper()
	pager := cc.NewQueryItemsPager(sql, pk, opts)
	var out []string
	pages := 0
	for pager.More() {
		page, err := pager.NextPage(context.Background())
		if err != nil {
			return nil, pages, err
		}
		pages++
		if page.QueryMetrics == nil || !strings.Contains(*page.QueryMetrics, "retrievedDocumentCount=") {
			t.Errorf("page %d of %q has no query metrics", pages, sql)
		}
		if opts != nil && opts.PopulateIndexMetrics != (page.IndexMetrics != nil) {
			t.Errorf("page %d of %q: index metrics %v, requested %v", pages, sql, page.IndexMetrics != nil, opts.PopulateIndexMetrics)
		}
		for _, it := range page.Items {
			out = append(out, string(it))
		}
	}
	return out, pages, nil
}

func ids(t *testing.T, raw []string) string {
	t.Helper()
	var out []string
	for _, r := range raw {
		var d doc
		if err := json.Unmarshal([]byte(r), &d); err != nil {
			t.Fatal(err)
		}
		out = append(out, d.ID)
	}
	return strings.Join(out, ",")
}

// sampleItems creates ids 0-9 in pk "1" and 10-19 in pk "2", alternating, as the SDK's own
// emulator tests do.
func sampleItems(t *testing.T, cc *azcosmos.ContainerClient) {
	t.Helper()
	for i := range 10 {
		for p := range 2 {
			upsert(t, cc, doc{ID: fmt.Sprint(i + 10*p), PK: fmt.Sprint(p + 1), V: i})
		}
	}
}

func TestQuery_CreationOrderPagingAndMetrics(t *testing.T) {
	t.Parallel()
	e := openEmu(t, emulator.Options{Partitions: 1})
	cc := setupContainer(t, newClient(t, e, ""), "db", "c")
	sampleItems(t, cc)

	// Unordered: creation (_rid) order across logical partitions, not id order; a full page
	// carries a continuation, so 20 results in pages of 5 take 5 pages (the last one empty).
	got, pages, err := queryAll(t, cc, "SELECT * FROM c", azcosmos.NewPartitionKey(), &azcosmos.QueryOptions{PageSizeHint: 5})
	if err != nil {
		t.Fatal(err)
	}
	if want := "0,10,1,11,2,12,3,13,4,14,5,15,6,16,7,17,8,18,9,19"; ids(t, got) != want || pages != 5 {
		t.Errorf("cross-partition query: %s in %d pages, want %s in 5", ids(t, got), pages, want)
	}
	// ORDER BY in one partition: the last full page ends the query.
	got, pages, err = queryAll(t, cc, "SELECT * FROM c ORDER BY c.id DESC", azcosmos.NewPartitionKeyString("1"), &azcosmos.QueryOptions{PageSizeHint: 5, PopulateIndexMetrics: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := "9,8,7,6,5,4,3,2,1,0"; ids(t, got) != want || pages != 2 {
		t.Errorf("ORDER BY query: %s in %d pages, want %s in 2", ids(t, got), pages, want)
	}
	// A replaced item keeps its place.
	upsert(t, cc, doc{ID: "0", PK: "1", V: 100})
	got, _, _ = queryAll(t, cc, "SELECT * FROM c WHERE c.pk = '1'", azcosmos.NewPartitionKeyString("1"), nil)
	if !strings.HasPrefix(ids(t, got), "0,1,2") {
		t.Errorf("after replacing 0: %s, want 0 first", ids(t, got))
	}
}

func TestQuery_CrossPartitionRules(t *testing.T) {
	t.Parallel()
	e := openEmu(t, emulator.Options{Partitions: 1})
	cc := setupContainer(t, newClient(t, e, ""), "db", "c")
	sampleItems(t, cc)

	// A query that needs the query plan, with no partition key: 400 / 1004, even on one
	// physical partition.
	_, _, err := queryAll(t, cc, "SELECT * FROM c ORDER BY c.id", azcosmos.NewPartitionKey(), nil)
	var re *azcore.ResponseError
	if !asResponseError(err, &re) || re.StatusCode != 400 || re.RawResponse.Header.Get("x-ms-substatus") != "1004" ||
		!strings.Contains(err.Error(), "cross partition query can not be directly served by the gateway") {
		t.Errorf("ORDER BY without a partition key: %v, want 400/1004", err)
	}
	// ... unless the WHERE pins the partition key.
	got, _, err := queryAll(t, cc, "SELECT * FROM c WHERE c.pk = @pk ORDER BY c.id", azcosmos.NewPartitionKey(), &azcosmos.QueryOptions{
		QueryParameters: []azcosmos.QueryParameter{{Name: "@pk", Value: "2"}}})
	if err != nil || ids(t, got) != "10,11,12,13,14,15,16,17,18,19" {
		t.Errorf("ORDER BY with the partition key in the WHERE: %v %s", err, ids(t, got))
	}
	// Without enablecrosspartition and a partition key: 400.
	no := false
	_, _, err = queryAll(t, cc, "SELECT * FROM c", azcosmos.NewPartitionKey(), &azcosmos.QueryOptions{EnableCrossPartitionQuery: &no})
	if statusOf(err) != 400 || !strings.Contains(err.Error(), "Cross partition query is required but disabled") {
		t.Errorf("cross-partition query without enablecrosspartition: %v, want 400", err)
	}
	// A continuation that is not one of ours.
	bad := "garbage!"
	_, _, err = queryAll(t, cc, "SELECT * FROM c", azcosmos.NewPartitionKeyString("1"), &azcosmos.QueryOptions{ContinuationToken: &bad})
	if statusOf(err) != 400 || !strings.Contains(err.Error(), "Invalid Continuation Token") {
		t.Errorf("bad continuation: %v, want 400 Invalid Continuation Token", err)
	}
}

func TestQuery_SelectValueProjectionAndAggregates(t *testing.T) {
	t.Parallel()
	e := openEmu(t, emulator.Options{Partitions: 1})
	cc := setupContainer(t, newClient(t, e, ""), "db", "c")
	sampleItems(t, cc)
	pk1 := azcosmos.NewPartitionKeyString("1")
	for sql, want := range map[string]string{
		"SELECT VALUE c.id FROM c ORDER BY c.id":        `"0","1","2","3","4","5","6","7","8","9"`,
		"SELECT c.id, c.v AS n FROM c WHERE c.v < 2":    `{"id":"0","n":0},{"id":"1","n":1}`,
		"SELECT VALUE COUNT(1) FROM c":                  `10`,
		"SELECT VALUE SUM(c.v) FROM c":                  `45`,
		"SELECT VALUE AVG(c.v) FROM c":                  `4.5`,
		"SELECT VALUE MIN(c.id) FROM c":                 `"0"`,
		"SELECT VALUE MAX(c.v) FROM c":                  `9`,
		"SELECT VALUE MAX(c.v) FROM c WHERE c.v > 100":  ``,
		"SELECT VALUE COUNT(1) FROM c WHERE c.pk = '2'": `0`,
	} {
		got, _, err := queryAll(t, cc, sql, pk1, &azcosmos.QueryOptions{PageSizeHint: 100})
		if err != nil || strings.Join(got, ",") != want {
			t.Errorf("%s: %v %s, want %s", sql, err, strings.Join(got, ","), want)
		}
	}
}

func asResponseError(err error, re **azcore.ResponseError) bool { return errors.As(err, re) }
