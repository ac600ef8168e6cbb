package cosmos

import (
	"context"
	"testing"

	"github.com/cfp-dev/cfp/internal/feed"
)

// BenchmarkReadPage reads a 1000-document partition from the beginning in pages of 100, end to
// end through azcosmos and the in-process emulator, and reports items/s.
func BenchmarkReadPage(b *testing.B) {
	a := openLocal(b, 1)
	c := newFeedContainer(b, a)
	const docs = 1000
	upsert(b, c, somePKs, 0, docs)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	items := 0
	for b.Loop() {
		req := feed.ReadRequest{PartitionID: "0", Start: feed.StartFrom{Kind: feed.StartBeginning}, MaxItems: 100}
		for {
			page, err := c.ReadPage(ctx, req)
			if err != nil {
				b.Fatal(err)
			}
			items += len(page.Items)
			if page.NotModified {
				break
			}
			req.Start = feed.StartFrom{Kind: feed.StartContinuation, Continuation: page.Continuation}
		}
	}
	b.ReportMetric(float64(items)/b.Elapsed().Seconds(), "items/s")
}
