package emulator

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/cfp-dev/cfp/internal/epk"
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
	if _, err := s.createContainer("db", []byte(`{"id":"c","partitionKey":{"paths":["/pk"]}}`), e.opts.Partitions); err != nil {
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

// BenchmarkLogRetention_DiskBytes measures the data file after 100,000 updates of 1,000 ids
// (~50-byte documents, 4 partitions), with the operation log kept for ever and with a
// retention the writes outlive (the clock moves a second per 1,000 writes, the window is 10 s,
// compaction runs every 1,000 writes as the sweeper would): bytes is the file's size, and
// log_records the records the log still holds. Run with -benchtime=1x.
func BenchmarkLogRetention_DiskBytes(b *testing.B) {
	const updates, ids = 100000, 1000
	for _, tc := range []struct {
		name      string
		retention time.Duration
	}{{"forever", -1}, {"10s", 10 * time.Second}} {
		b.Run(tc.name, func(b *testing.B) {
			for range b.N {
				dir := b.TempDir()
				now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
				e, err := Open(Options{Dir: dir, Partitions: 4, TTLSweepInterval: -1, LogRetention: tc.retention, Now: func() time.Time { return now }})
				if err != nil {
					b.Fatal(err)
				}
				s := e.store
				if _, err := s.createDatabase("db"); err != nil {
					b.Fatal(err)
				}
				if _, err := s.createContainer("db", []byte(`{"id":"c","partitionKey":{"paths":["/pk"]}}`), e.opts.Partitions); err != nil {
					b.Fatal(err)
				}
				for i := range updates {
					comps := []any{fmt.Sprintf("p%d", i%ids%97)}
					id := fmt.Sprintf("d%04d", i%ids)
					body := map[string]json.RawMessage{"id": json.RawMessage(`"` + id + `"`), "pk": json.RawMessage(`"` + comps[0].(string) + `"`), "v": json.RawMessage(fmt.Sprint(i))}
					if _, err := s.writeItem("db", "c", itemWrite{Op: opUpsert, ID: id, PK: epk.Canonical(comps), EPK: epk.HashV2(comps), Body: body}); err != nil {
						b.Fatal(err)
					}
					if i%1000 == 999 {
						now = now.Add(time.Second)
						if _, err := e.CompactLog(); err != nil {
							b.Fatal(err)
						}
					}
				}
				records := 0
				if err := s.db.View(func(tx *bolt.Tx) error {
					return tx.Bucket(bucketData).ForEachBucket(func(rid []byte) error {
						records += tx.Bucket(bucketData).Bucket(rid).Bucket(bucketLog).Stats().KeyN
						return nil
					})
				}); err != nil {
					b.Fatal(err)
				}
				if err := e.Close(); err != nil {
					b.Fatal(err)
				}
				fi, err := os.Stat(filepath.Join(dir, dbFileName))
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(fi.Size()), "bytes")
				b.ReportMetric(float64(records), "log_records")
			}
		})
	}
}
