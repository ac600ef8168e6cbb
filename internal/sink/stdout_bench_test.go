package sink

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/cfp-dev/cfp/internal/feed"
)

// BenchmarkStdout_Handle writes a batch of 1,000 changes of ~1 KB, the shape `cfp process`
// reads from a busy partition, with the stdout delegate.
func BenchmarkStdout_Handle(b *testing.B) {
	items := make([]json.RawMessage, 1000)
	for i := range items {
		items[i] = json.RawMessage(fmt.Sprintf(`{"id":"d%d","pk":"p%d","n":%d,"payload":"%s","_rid":"AAAAAAAAAAAAAAAAAAAAAA==","_self":"dbs/AAAAAA==/colls/AAAAAAAAAAA=/docs/AAAAAAAAAAAAAAAAAAAAAA==/","_etag":"\"00000000-0000-0000-0000-000000000000\"","_attachments":"attachments/","_ts":1764601200,"_lsn":%d}`,
			i, i%1000, i, strings.Repeat("x", 940), i+1))
	}
	bt := feed.Batch{LeaseToken: "0", Items: items, Continuation: `"1000"`, Attempt: 1}
	s := NewStdout(io.Discard)
	size := 0
	for _, it := range items {
		size += len(it)
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Handle(b.Context(), bt); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(items)), "ns/change")
}
