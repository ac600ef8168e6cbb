package feed_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/feed/feedtest"
	"github.com/cfp-dev/cfp/internal/leases"
)

func TestPositionAt_Targets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := feedtest.NewClock(t0)
	src := feedtest.NewMemSource(1, feedtest.WithClock(clock.Now))
	for i := range 3 {
		if _, err := src.Write("pk", fmt.Appendf(nil, `{"id":"a%d","pk":"pk"}`, i)); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(time.Hour)
	t1 := clock.Now()
	for i := range 2 {
		if _, err := src.Write("pk", fmt.Appendf(nil, `{"id":"b%d","pk":"pk"}`, i)); err != nil {
			t.Fatal(err)
		}
	}
	parts, err := src.Partitions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lease := leases.NewDotNetV0("p", parts[0].ID, parts[0].Range, "")

	tests := []struct {
		name  string
		start feed.StartFrom
		want  string
	}{
		{"beginning", feed.StartFrom{Kind: feed.StartBeginning}, `"0"`},
		{"now", feed.StartFrom{Kind: feed.StartNow}, `"5"`},
		{"time of the second batch", feed.StartFrom{Kind: feed.StartTime, Time: t1}, `"3"`},
		{"time before every change", feed.StartFrom{Kind: feed.StartTime, Time: t0.Add(-time.Hour)}, `"0"`},
		{"time after every change", feed.StartFrom{Kind: feed.StartTime, Time: t1.Add(time.Hour)}, `"5"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := feed.PositionAt(ctx, src, lease, parts, tt.start)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("PositionAt = %s, want %s", got, tt.want)
			}
		})
	}
}

// TestPositionsAt_KeepsOrderAndRoutesEachLease: every lease gets its own position, in the order
// given, and a lease that no single partition serves (the parent of a split) gets Route's
// error while the others are positioned.
func TestPositionsAt_KeepsOrderAndRoutesEachLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := feedtest.NewMemSource(1)
	parent, err := src.Partitions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := src.Split(parent[0].ID); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if _, err := src.Write(fmt.Sprintf("pk%d", i), fmt.Appendf(nil, `{"id":"d%d","pk":"pk%d"}`, i, i)); err != nil {
			t.Fatal(err)
		}
	}
	parts, err := src.Partitions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ls := []*leases.Lease{
		leases.NewDotNetV0("p", parts[1].ID, parts[1].Range, ""),
		leases.NewDotNetV0("p", parent[0].ID, parent[0].Range, ""),
		leases.NewDotNetV0("p", parts[0].ID, parts[0].Range, ""),
	}
	got := feed.PositionsAt(ctx, src, ls, parts, feed.StartFrom{Kind: feed.StartBeginning}, 2)
	if len(got) != len(ls) {
		t.Fatalf("%d positions for %d leases", len(got), len(ls))
	}
	for i, p := range got {
		if p.Lease != ls[i] {
			t.Errorf("position %d is of lease %s, want %s", i, p.Lease.Token, ls[i].Token)
		}
	}
	var rerr *feed.RouteError
	if !errors.As(got[1].Err, &rerr) || !rerr.Gone {
		t.Errorf("the split parent: %q, %v; want a RouteError saying it is gone", got[1].Continuation, got[1].Err)
	}
	for _, i := range []int{0, 2} {
		if got[i].Err != nil || got[i].Continuation != `"0"` {
			t.Errorf("lease %s: %q, %v; want the beginning, \"0\"", ls[i].Token, got[i].Continuation, got[i].Err)
		}
	}
}
