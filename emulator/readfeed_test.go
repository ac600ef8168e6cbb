package emulator_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/cfp-dev/cfp/emulator"
)

// A read feed of a container's documents (GET .../docs, no query, no partition key), as the
// Python SDK's read_all_items sends it, lists the documents of every partition, as the gateway
// does; a query without a partition key still needs x-ms-documentdb-query-enablecrosspartition.
func TestReadFeed_DocumentsOfEveryPartitionWithoutCrossPartitionHeader(t *testing.T) {
	t.Parallel()
	e := openEmu(t, emulator.Options{Partitions: 4})
	cc := setupContainer(t, newClient(t, e, ""), "db", "c")
	want := map[string]bool{}
	for i := range 20 {
		d := doc{ID: fmt.Sprintf("d%02d", i), PK: fmt.Sprintf("p%d", i)}
		upsert(t, cc, d)
		want[d.ID] = true
	}
	got := map[string]bool{}
	cont := ""
	for pages := 0; ; pages++ {
		if pages > 20 {
			t.Fatal("the read feed does not end")
		}
		hdr := map[string]string{"x-ms-max-item-count": "7"}
		if cont != "" {
			hdr["x-ms-continuation"] = cont
		}
		resp, body := rawRequest(t, e, http.MethodGet, "/dbs/db/colls/c/docs", hdr, "")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("read feed of the documents: %d %s, want 200", resp.StatusCode, body)
		}
		var page struct{ Documents []doc }
		if err := json.Unmarshal(body, &page); err != nil {
			t.Fatal(err)
		}
		for _, d := range page.Documents {
			if got[d.ID] {
				t.Errorf("%s read twice", d.ID)
			}
			got[d.ID] = true
		}
		if cont = resp.Header.Get("x-ms-continuation"); cont == "" {
			break
		}
	}
	if len(got) != len(want) {
		t.Errorf("read feed listed %d documents, want the %d written", len(got), len(want))
	}
	resp, body := rawRequest(t, e, http.MethodPost, "/dbs/db/colls/c/docs",
		map[string]string{"x-ms-documentdb-isquery": "true", "Content-Type": "application/query+json"}, `{"query":"SELECT * FROM c"}`)
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a query without a partition key or enablecrosspartition: %d %s, want 400", resp.StatusCode, body)
	}
}
