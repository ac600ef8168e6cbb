package cosmos

import (
	"context"
	"net/http"
	"sync"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cfp-dev/cfp/emulator"
	"github.com/cfp-dev/cfp/emulator/auth"
)

// TestNewClientOptions_PriorityAndThroughputBucket: the client options of --priority and
// --throughput-bucket send both headers with reads (items, queries, change feed), and the
// emulator accepts and echoes them.
func TestNewClientOptions_PriorityAndThroughputBucket(t *testing.T) {
	t.Parallel()
	emu, err := emulator.Open(emulator.Options{Dir: t.TempDir(), Key: auth.WellKnownKey})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = emu.Close() })
	var mu sync.Mutex
	seen := map[string][2]string{} // by method and path: the two headers sent
	inner := emu.Handler()
	opts := NewClientOptions(ClientSettings{Priority: "low", ThroughputBucket: 2})
	opts.Transport = &emulator.Transport{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Method+" "+r.URL.Path] = [2]string{r.Header.Get("x-ms-cosmos-priority-level"), r.Header.Get("x-ms-cosmos-throughput-bucket")}
		mu.Unlock()
		inner.ServeHTTP(w, r)
	})}
	cred, _ := azcosmos.NewKeyCredential(auth.WellKnownKey)
	c, err := azcosmos.NewClientWithKey("http://localhost:1/", cred, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "db"}, nil); err != nil {
		t.Fatal(err)
	}
	d, _ := c.NewDatabase("db")
	if _, err := d.CreateContainer(ctx, azcosmos.ContainerProperties{ID: "c", PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/id"}}}, nil); err != nil {
		t.Fatal(err)
	}
	cc, _ := c.NewContainer("db", "c")
	pk := azcosmos.NewPartitionKeyString("a")
	if _, err := cc.UpsertItem(ctx, pk, []byte(`{"id":"a"}`), nil); err != nil {
		t.Fatal(err)
	}
	r, err := cc.ReadItem(ctx, pk, "a", nil)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	got := seen["GET /dbs/db/colls/c/docs/a"]
	mu.Unlock()
	if got != [2]string{"Low", "2"} {
		t.Errorf("item read sent priority %q, bucket %q; want Low, 2", got[0], got[1])
	}
	if h := r.RawResponse.Header; h.Get("x-ms-cosmos-priority-level") != "Low" || h.Get("x-ms-cosmos-throughput-bucket") != "2" {
		t.Errorf("the emulator echoed priority %q, bucket %q; want Low, 2", h.Get("x-ms-cosmos-priority-level"), h.Get("x-ms-cosmos-throughput-bucket"))
	}
}
