package cmd

import (
	"context"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/changefeed"
	"github.com/cfp-dev/cfp/emulator"
	"github.com/cfp-dev/cfp/internal/leases"
)

// benchLeases is the lease count of BenchmarkEstimate, and benchLatency the latency the
// emulator adds to every change-feed read.
const (
	benchLeases  = 1000
	benchLatency = 5 * time.Millisecond
)

// BenchmarkEstimate estimates 1000 leases on the embedded emulator with 5 ms of injected
// latency per change-feed read, sequentially (one read in flight) and in parallel (the
// command's default --concurrency). The parallel run reports its speed-up over the sequential
// one as "x-speedup" (goal: at least 10). Run with: go test ./cmd -run '^$' -bench Estimate -benchtime 1x
func BenchmarkEstimate(b *testing.B) {
	ctx := context.Background()
	acct := openLocal(b, b.TempDir(), 4)
	b.Cleanup(func() { _ = acct.Close() })
	c := createContainer(b, acct, "shop", "orders", "/id")
	writeOrders(b, c, 40)
	parts, err := c.Partitions(ctx)
	if err != nil {
		b.Fatal(err)
	}
	ls := make([]*leases.Lease, benchLeases)
	for i := range ls {
		p := parts[i%len(parts)]
		l := leases.NewDotNetV0("bench", p.ID, p.Range, "")
		l.Continuation = leases.FormatLSN(0)
		ls[i] = l
	}
	if err := acct.Emulator().InjectFaults(emulator.FaultRule{Latency: benchLatency, ChangeFeedOnly: true}); err != nil {
		b.Fatal(err)
	}

	run := func(b *testing.B, concurrency int) time.Duration {
		b.ReportAllocs()
		start := time.Now()
		for b.Loop() {
			lags, sum, err := changefeed.EstimateLeases(ctx, c, ls, changefeed.EstimateOptions{Concurrency: concurrency, Partitions: parts})
			if err != nil {
				b.Fatal(err)
			}
			if len(lags) != benchLeases || sum.TotalLag != int64(benchLeases/len(parts)*40) {
				b.Fatalf("estimate: %d leases, total lag %d", len(lags), sum.TotalLag)
			}
		}
		return time.Since(start) / time.Duration(b.N)
	}
	var sequential time.Duration
	b.Run("sequential", func(b *testing.B) { sequential = run(b, 1) })
	b.Run("parallel", func(b *testing.B) {
		parallel := run(b, changefeed.DefaultEstimateConcurrency)
		if sequential > 0 && parallel > 0 {
			b.ReportMetric(float64(sequential)/float64(parallel), "x-speedup")
		}
	})
}
