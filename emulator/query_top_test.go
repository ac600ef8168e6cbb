package emulator_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cfp-dev/cfp/emulator"
)

// The Java Change Feed Processor (epkversion LeaseStoreManagerImpl.getTopLeases, at start)
// queries the lease container across partitions with
// SELECT TOP @Top * FROM c WHERE STARTSWITH(c.id, @PartitionLeasePrefix) AND c.ContinuationToken <> null;
// the emulator refused TOP with a parameter (400) and the processor could not start.
func TestQuery_TopWithAParameter(t *testing.T) {
	t.Parallel()
	e := openEmu(t, emulator.Options{Partitions: 4})
	c := newClient(t, e, "")
	cc := setupContainer(t, c, "db", "leases")
	ctx := context.Background()
	for i := range 6 {
		body := fmt.Sprintf(`{"id":"p..%d","pk":"k%d","ContinuationToken":"\"%d\""}`, i, i, i)
		if _, err := cc.UpsertItem(ctx, azcosmos.NewPartitionKeyString(fmt.Sprintf("k%d", i)), []byte(body), nil); err != nil {
			t.Fatal(err)
		}
	}
	const java = "SELECT TOP @Top * FROM c WHERE STARTSWITH(c.id, @PartitionLeasePrefix) AND c.ContinuationToken <> null"
	const sql = "SELECT TOP @Top * FROM c WHERE STARTSWITH(c.id, @PartitionLeasePrefix)"
	count := func(sql string, top any) (int, error) {
		pager := cc.NewQueryItemsPager(sql, azcosmos.NewPartitionKey(), &azcosmos.QueryOptions{QueryParameters: []azcosmos.QueryParameter{
			{Name: "@Top", Value: top}, {Name: "@PartitionLeasePrefix", Value: "p.."},
		}})
		n := 0
		for pager.More() {
			page, err := pager.NextPage(ctx)
			if err != nil {
				return n, err
			}
			n += len(page.Items)
		}
		return n, nil
	}
	for _, top := range []int{1, 4, 10} {
		n, err := count(sql, top)
		if err != nil {
			t.Fatalf("TOP @Top = %d: %v", top, err)
		}
		if want := min(top, 6); n != want {
			t.Errorf("TOP @Top = %d returned %d documents, want %d", top, n, want)
		}
	}
	// Java's own query is served. It matches nothing: a string compared with null is
	// undefined (the documented rule of equality and comparison operators across types).
	if n, err := count(java, 1); err != nil || n != 0 {
		t.Errorf("Java's query: %d documents, %v; want 0 and no error", n, err)
	}
	// A value the service refuses is a 400, not a silent full result.
	for _, top := range []any{1.5, -1, "2"} {
		if _, err := count(sql, top); statusOf(err) != http.StatusBadRequest {
			t.Errorf("TOP @Top = %v: %v, want 400", top, err)
		}
	}
}
