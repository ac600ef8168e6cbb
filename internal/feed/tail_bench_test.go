package feed_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/feed/feedtest"
)

// BenchmarkTail_Drain drains 20,000 changes of ~1 KB over 4 partitions in pages of 1,000 with a
// no-op emit: the tail's own work per change (metadata, positions, bookkeeping), without a
// gateway or an output.
func BenchmarkTail_Drain(b *testing.B) {
	src := feedtest.NewMemSource(4)
	const n = 20000
	body := strings.Repeat("x", 1000)
	for i := range n {
		doc := fmt.Appendf(nil, `{"id":"d%d","pk":"p%d","body":%q}`, i, i%64, body)
		if _, err := src.Write(fmt.Sprintf("p%d", i%64), doc); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	items := 0
	for b.Loop() {
		sum, err := feed.Tail(context.Background(), src, feed.TailOptions{
			Start: feed.StartFrom{Kind: feed.StartBeginning}, ExitAtEnd: true, PageSize: 1000,
		}, func(feed.Change) error { return nil })
		if err != nil {
			b.Fatal(err)
		}
		if sum.Items != n {
			b.Fatalf("drained %d changes, want %d", sum.Items, n)
		}
		items += int(sum.Items)
	}
	b.ReportMetric(float64(items)/b.Elapsed().Seconds(), "items/s")
}
