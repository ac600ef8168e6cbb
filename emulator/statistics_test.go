package emulator_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/cfp-dev/cfp/emulator"
)

// A container read with x-ms-documentdb-populatepartitionstatistics (the Python SDK's
// populate_partition_key_range_statistics) carries "statistics": one entry per partition key
// range, with the documents it holds. Without the header there are none.
func TestContainerRead_PartitionStatistics(t *testing.T) {
	t.Parallel()
	e := openEmu(t, emulator.Options{Partitions: 3})
	cc := setupContainer(t, newClient(t, e, ""), "db", "c")
	for i := range 30 {
		upsert(t, cc, doc{ID: fmt.Sprintf("d%d", i), PK: fmt.Sprintf("p%d", i)})
	}
	read := func(hdr map[string]string) (stats []struct {
		ID            string
		DocumentCount int
		SizeInKB      int
	}, present bool) {
		resp, body := rawRequest(t, e, http.MethodGet, "/dbs/db/colls/c", hdr, "")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("read container: %d %s", resp.StatusCode, body)
		}
		var props map[string]json.RawMessage
		if err := json.Unmarshal(body, &props); err != nil {
			t.Fatal(err)
		}
		raw, ok := props["statistics"]
		if ok {
			if err := json.Unmarshal(raw, &stats); err != nil {
				t.Fatalf("statistics %s: %v", raw, err)
			}
		}
		return stats, ok
	}
	stats, ok := read(map[string]string{"x-ms-documentdb-populatepartitionstatistics": "true"})
	total, ids := 0, map[string]bool{}
	for _, s := range stats {
		total += s.DocumentCount
		ids[s.ID] = true
		if s.DocumentCount > 0 && s.SizeInKB < 1 {
			t.Errorf("range %s holds %d documents in %d KB", s.ID, s.DocumentCount, s.SizeInKB)
		}
	}
	if !ok || len(stats) != 3 || len(ids) != 3 || total != 30 {
		t.Errorf("statistics: %+v (present %v), want 3 ranges holding the 30 documents", stats, ok)
	}
	if _, ok := read(nil); ok {
		t.Error("a read without the header has statistics")
	}
}
