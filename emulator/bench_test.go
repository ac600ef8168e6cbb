package emulator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cfp-dev/cfp/emulator"
)

// benchUpserts upserts b.N documents through azcosmos in process with the given number of
// concurrent writers, each write committed (fsync) before it is acknowledged.
func benchUpserts(b *testing.B, writers int) {
	e := openEmu(b, emulator.Options{})
	c := newClient(b, e, "")
	cc := setupContainer(b, c, "db", "bench")
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	per := (b.N + writers - 1) / writers
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				pk := fmt.Sprintf("p%d", i%64)
				body, _ := json.Marshal(doc{ID: fmt.Sprintf("w%d-%d", w, i), PK: pk, V: i})
				if _, err := cc.UpsertItem(ctx, azcosmos.NewPartitionKeyString(pk), body, nil); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(per*writers)/b.Elapsed().Seconds(), "upserts/s")
}

func BenchmarkUpsert_1Writer(b *testing.B)  { benchUpserts(b, 1) }
func BenchmarkUpsert_4Writers(b *testing.B) { benchUpserts(b, 4) }

// BenchmarkChangeFeed_EndToEnd reads a 2,000-document container from the beginning through
// azcosmos ReadChangeFeed (pages of 1,000, one feed range per physical partition).
func BenchmarkChangeFeed_EndToEnd(b *testing.B) {
	const docs = 2000
	e := openEmu(b, emulator.Options{})
	c := newClient(b, e, "")
	cc := setupContainer(b, c, "db", "feed")
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < docs; i += 8 {
				pk := fmt.Sprintf("p%d", i%97)
				body, _ := json.Marshal(doc{ID: fmt.Sprintf("d%d", i), PK: pk, V: i})
				if _, err := cc.UpsertItem(ctx, azcosmos.NewPartitionKeyString(pk), body, nil); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	frs, err := cc.ReadFeedRanges(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	items := 0
	for b.Loop() {
		for i := range frs {
			got, _ := drainRange(b, cc, &frs[i], "", 1000)
			items += len(got)
		}
	}
	if items != docs*b.N {
		b.Fatalf("read %d items, want %d", items, docs*b.N)
	}
	b.ReportMetric(float64(items)/b.Elapsed().Seconds(), "items/s")
}
