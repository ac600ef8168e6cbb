package emulator

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/internal/emulator/epk"
)

// BenchmarkStore_ChangeFeed measures latest-version change-feed reads served by the storage
// layer alone: 20,000 documents (each updated once, so half the log is superseded versions),
// read from the beginning in pages of 1,000 on a single-partition container.
func BenchmarkStore_ChangeFeed(b *testing.B) {
	const docs = 20000
	e, err := Open(Options{Dir: b.TempDir(), Partitions: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	s := e.store
	if _, err := s.createDatabase("db"); err != nil {
		b.Fatal(err)
	}
	if _, err := s.createContainer("db", []byte(`{"id":"c","partitionKey":{"paths":["/pk"]}}`)); err != nil {
		b.Fatal(err)
	}
	s.db.NoSync = true // setup only: durability is not what is measured here
	for v := 1; v <= 2; v++ {
		for i := range docs {
			comps := []any{fmt.Sprintf("p%d", i%101)}
			id := fmt.Sprintf("d%d", i)
			body := map[string]json.RawMessage{"id": json.RawMessage(`"` + id + `"`), "pk": json.RawMessage(`"` + comps[0].(string) + `"`), "v": json.RawMessage(fmt.Sprint(v))}
			if _, err := s.writeItem("db", "c", itemWrite{Op: opUpsert, ID: id, PK: epk.Canonical(comps), EPK: epk.HashV2(comps), Body: body}); err != nil {
				b.Fatal(err)
			}
		}
	}
	s.db.NoSync = false
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	items := 0
	for b.Loop() {
		var since uint64
		for {
			page, err := s.changeFeed("db", "c", feedRequest{RangeID: "0", Since: since, Max: 1000})
			if err != nil {
				b.Fatal(err)
			}
			if len(page.Docs) == 0 {
				break
			}
			items += len(page.Docs)
			since = page.Etag
		}
	}
	if items != docs*b.N {
		b.Fatalf("read %d items, want %d", items, docs*b.N)
	}
	b.ReportMetric(float64(items)/time.Since(start).Seconds(), "items/s")
}
