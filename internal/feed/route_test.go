package feed_test

import (
	"errors"
	"testing"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/leases"
)

func TestRoute(t *testing.T) {
	t.Parallel()
	r := func(min, max string) leases.Range { return leases.Range{Min: min, Max: max} }
	// Partition 0 split into 1 and 2; then 2 and 3 (the old top half) merged into 4.
	parts := []feed.Partition{
		{ID: "1", Range: r("", "40")},
		{ID: "4", Range: r("40", "FF"), Parents: []string{"2", "3"}},
	}
	noRange, err := leases.Decode(leases.Document{ID: "p..x", Body: []byte(`{"id":"p..x","LeaseToken":"x","version":1,"Owner":null,"ContinuationToken":null,"properties":{}}`)})
	if err != nil {
		t.Fatal(err)
	}
	rangeless, err := leases.Decode(leases.Document{ID: "p..4", Body: []byte(`{"id":"p..4","LeaseToken":"4","version":0,"Owner":null,"ContinuationToken":null,"properties":{}}`)})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		lease     *leases.Lease
		wantID    string
		wantRange leases.Range
		wantGone  bool // errors: IsRangeGone (a split or merge to handle first)
		wantOver  int
		wantErr   bool
	}{
		{"v0 of a live partition", leases.NewDotNetV0("p", "1", r("", "40"), ""), "1", leases.Range{}, false, 0, false},
		{"v0 without FeedRange of a live partition", rangeless, "4", leases.Range{}, false, 0, false},
		{"v0 of a split partition", leases.NewDotNetV0("p", "0", leases.FullRange, ""), "", leases.Range{}, true, 2, true},
		{"v0 of a merged partition", leases.NewDotNetV0("p", "3", r("80", "FF"), ""), "", leases.Range{}, true, 1, true},
		{"v1 equal to a partition", leases.NewDotNetV1("p", r("", "40"), "", ""), "1", leases.Range{}, false, 0, false},
		{"v1 equal with padded boundaries", leases.NewDotNetV1("p", r("400", "FF"), "", ""), "4", leases.Range{}, false, 0, false},
		{"v1 inside a partition", leases.NewDotNetV1("p", r("80", "FF"), "", ""), "4", r("80", "FF"), false, 0, false},
		{"v1 over two partitions", leases.NewDotNetV1("p", r("20", "80"), "", ""), "", leases.Range{}, true, 2, true},
		// The copies in cmd read the token of a v1 lease without a range as a partition id.
		{"v1 without a range", noRange, "", leases.Range{}, false, 0, true},
	}
	for _, tt := range tests {
		rt, err := feed.Route(tt.lease, parts)
		if tt.wantErr {
			var rerr *feed.RouteError
			if !errors.As(err, &rerr) || feed.IsRangeGone(err) != tt.wantGone || len(rerr.Over) != tt.wantOver {
				t.Errorf("%s: Route = %+v, %v; want a RouteError (gone %v, %d partitions)", tt.name, rt, err, tt.wantGone, tt.wantOver)
			}
			continue
		}
		if err != nil || rt.Partition.ID != tt.wantID || rt.Range != tt.wantRange {
			t.Errorf("%s: Route = %+v, %v; want partition %s range %v", tt.name, rt, err, tt.wantID, tt.wantRange)
		}
		if req := rt.Request(); req.PartitionID != tt.wantID || req.Range != tt.wantRange {
			t.Errorf("%s: Request() = %+v", tt.name, req)
		}
	}
}
