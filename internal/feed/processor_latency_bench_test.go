package feed_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/feed/feedtest"
	"github.com/cfp-dev/cfp/internal/leases"
)

// slowSource waits delay before each page it reads, as a service's round trip does.
type slowSource struct {
	feed.Source
	delay time.Duration
}

func (s slowSource) ReadPage(ctx context.Context, req feed.ReadRequest) (feed.Page, error) {
	time.Sleep(s.delay)
	return s.Source.ReadPage(ctx, req)
}

// BenchmarkProcessor_SlowReadsAndHandler measures documents per second through one host
// holding one lease when each page read takes 2ms and the handler 2ms per batch (100-item
// pages): a worker that reads a page only after the batch before it was handled and
// checkpointed needs both per page, one that reads ahead about the longer of the two.
func BenchmarkProcessor_SlowReadsAndHandler(b *testing.B) {
	b.ReportAllocs()
	const perOp = 100
	mem := feedtest.NewMemSource(1)
	total := int64(b.N * perOp)
	writeDocs(b, mem, 0, int(total))
	var n atomic.Int64
	var once sync.Once
	done := make(chan struct{})
	h := feed.HandlerFunc(func(_ context.Context, bt feed.Batch) error {
		time.Sleep(2 * time.Millisecond)
		if n.Add(int64(len(bt.Items))) >= total {
			once.Do(func() { close(done) })
		}
		return nil
	})
	opts := fastOptions("bench")
	opts.MaxItems = perOp
	b.ResetTimer()
	startHost(b, slowSource{Source: mem, delay: 2 * time.Millisecond}, leases.NewMemDocuments("/id"), h, opts)
	<-done
	b.StopTimer()
	b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "docs/s")
}
