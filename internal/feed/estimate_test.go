package feed_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/feed/feedtest"
	"github.com/cfp-dev/cfp/internal/leases"
)

func v0(token, continuation, owner string, ts time.Time) *leases.Lease {
	return &leases.Lease{Token: token, Continuation: continuation, Owner: owner, Timestamp: ts, Family: leases.FamilyDotNetV0}
}

func v1(r leases.Range, continuation, owner string, ts time.Time) *leases.Lease {
	return &leases.Lease{Token: r.String(), Range: r, Continuation: continuation, Owner: owner, Timestamp: ts, Family: leases.FamilyDotNetV1}
}

// writeEvery writes n items to one partition key, advancing the clock a second per write.
func writeEvery(t *testing.T, src *feedtest.MemSource, clock *feedtest.Clock, pk string, n int) {
	t.Helper()
	for i := range n {
		write(t, src, pk, fmt.Sprintf("%s-%d", pk, i))
		clock.Advance(time.Second)
	}
}

func TestEstimate_PKRangeLeases(t *testing.T) {
	t.Parallel()
	clock := feedtest.NewClock(t0)
	src := feedtest.NewMemSource(1, feedtest.WithClock(clock.Now))
	writeEvery(t, src, clock, "a", 10) // LSNs 1..10 at t0, t0+1s, ...
	clock.Advance(time.Minute)
	now := clock.Now()
	ls := []*leases.Lease{
		v0("0", `"5"`, "host-1", now.Add(-10*time.Second)), // behind by 5 (LSNs 6..10)
		v0("0", `"10"`, "host-2", now.Add(-2*time.Minute)), // caught up, owner expired
		v0("0", "", "", time.Time{}),                       // never checkpointed
		v0("7", `"3"`, "host-1", now.Add(-30*time.Second)), // a partition that does not exist
	}
	reads := src.Reads()
	lags, sum, err := feed.Estimate(context.Background(), src, ls, feed.EstimateOptions{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	if got := src.Reads() - reads; got != 3 {
		t.Errorf("reads = %d, want 3 (none for the lease without a continuation)", got)
	}
	behind := lags[0]
	if behind.Lag != 5 || behind.Latest != 10 || behind.Checkpoint != 5 || !behind.HasCheckpoint || behind.Sentinel != "" {
		t.Errorf("behind = %+v", behind)
	}
	// The oldest pending change is LSN 6, written at t0+5s.
	if want := now.Sub(t0.Add(5 * time.Second)); behind.TimeLag != want || behind.Age != 10*time.Second {
		t.Errorf("behind: time lag %s (want %s), age %s", behind.TimeLag, want, behind.Age)
	}
	if behind.State != leases.StateOwned || behind.Owner != "host-1" || behind.PartitionID != "0" || behind.Range != leases.FullRange {
		t.Errorf("behind facts = %+v", behind)
	}
	if c := lags[1]; c.Lag != 0 || c.TimeLag != 0 || c.State != leases.StateExpired {
		t.Errorf("caught up = %+v", c)
	}
	if n := lags[2]; n.Lag != 1 || n.Sentinel != feed.SentinelNoContinuation || n.HasCheckpoint || n.State != leases.StateUnowned {
		t.Errorf("no continuation = %+v", n)
	}
	if g := lags[3]; g.Lag != 1 || g.Sentinel != feed.SentinelRangeGone {
		t.Errorf("gone = %+v", g)
	}
	if sum.TotalLag != 7 || sum.Leases != 4 || sum.Owned != 2 || sum.LiveOwners != 1 {
		t.Errorf("summary = %+v", sum)
	}
}

func TestEstimate_ReadFromBeginning(t *testing.T) {
	t.Parallel()
	clock := feedtest.NewClock(t0)
	src := feedtest.NewMemSource(1, feedtest.WithClock(clock.Now))
	writeEvery(t, src, clock, "a", 4)
	lags, _, err := feed.Estimate(context.Background(), src, []*leases.Lease{v0("0", "", "", time.Time{})},
		feed.EstimateOptions{Now: clock.Now, ReadFromBeginning: true})
	if err != nil {
		t.Fatal(err)
	}
	if lags[0].Lag != 4 || lags[0].Sentinel != "" || lags[0].TimeLag != 4*time.Second {
		t.Fatalf("lag = %+v", lags[0])
	}
}

func TestEstimate_EPKLeasesAcrossSplit(t *testing.T) {
	t.Parallel()
	clock := feedtest.NewClock(t0)
	src := feedtest.NewMemSource(1, feedtest.WithClock(clock.Now))
	for i := range 40 {
		write(t, src, fmt.Sprintf("pk%d", i), fmt.Sprintf("d%d", i))
	}
	parent := v1(leases.FullRange, `"30"`, "h", t0)
	children, err := src.Split("0")
	if err != nil {
		t.Fatal(err)
	}
	parts, _ := src.Partitions(context.Background())
	left := v1(parts[0].Range, `"30"`, "h", t0)
	// A sub-range of the right child holding exactly one written key.
	var sub leases.Range
	var subLSN int64 // pk<i> was written at LSN i+1
	for i := 30; i < 40; i++ {
		if epk := feedtest.EPK(fmt.Sprintf("pk%d", i)); parts[1].Range.Contains(epk) {
			sub, subLSN = leases.Range{Min: epk, Max: epk + "01"}, int64(i+1)
			break
		}
	}
	if sub.Max == "" {
		t.Skip("no key after LSN 30 in the right child")
	}
	right := v1(sub, `"30"`, "h", t0)

	lags, _, err := feed.Estimate(context.Background(), src, []*leases.Lease{parent, left, right}, feed.EstimateOptions{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	if lags[0].Lag != 1 || lags[0].Sentinel != feed.SentinelSpansPartitions {
		t.Errorf("parent range = %+v", lags[0])
	}
	// Children inherit LSN 40: the lag counts LSNs from the first pending change in the range.
	var firstLeft int64
	for i := 31; i <= 40; i++ {
		if parts[0].Range.Contains(feedtest.EPK(fmt.Sprintf("pk%d", i-1))) {
			firstLeft = int64(i)
			break
		}
	}
	if want := 40 - firstLeft + 1; lags[1].Lag != want || lags[1].PartitionID != children[0] {
		t.Errorf("left child = %+v, want lag %d", lags[1], want)
	}
	// The session LSN is partition-wide: writes to the rest of the child count too.
	if want := 40 - subLSN + 1; lags[2].PartitionID != children[1] || lags[2].Lag != want || lags[2].Sentinel != "" {
		t.Errorf("sub-range = %+v, want lag %d", lags[2], want)
	}
}

// oneItemSource answers every read with one fixed item.
type oneItemSource struct{ item string }

func (s oneItemSource) Partitions(context.Context) ([]feed.Partition, error) {
	return []feed.Partition{{ID: "0", Range: leases.FullRange}}, nil
}

func (s oneItemSource) ReadPage(context.Context, feed.ReadRequest) (feed.Page, error) {
	return feed.Page{Items: []json.RawMessage{json.RawMessage(s.item)}, LatestLSN: 50, Continuation: `"50"`}, nil
}

func TestEstimate_ItemLSNForms(t *testing.T) {
	t.Parallel()
	tests := []struct {
		item     string
		want     int64
		sentinel string
	}{
		{`{"id":"a","_lsn":41}`, 10, ""},
		{`{"id":"a","_lsn":"41"}`, 10, ""},
		{`{"id":"a","_LSN":41}`, 10, ""},
		{`{"id":"a"}`, 1, feed.SentinelMissingLSN},
		{`{"id":"a","_lsn":"x"}`, 1, feed.SentinelMissingLSN},
	}
	for _, tt := range tests {
		lags, _, err := feed.Estimate(context.Background(), oneItemSource{tt.item}, []*leases.Lease{v0("0", `"40"`, "", time.Time{})}, feed.EstimateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if lags[0].Lag != tt.want || lags[0].Sentinel != tt.sentinel {
			t.Errorf("%s: lag %d (%q), want %d (%q)", tt.item, lags[0].Lag, lags[0].Sentinel, tt.want, tt.sentinel)
		}
	}
}

func TestEstimate_NoLeases(t *testing.T) {
	t.Parallel()
	lags, sum, err := feed.Estimate(context.Background(), feedtest.NewMemSource(1), nil, feed.EstimateOptions{})
	if err != nil || len(lags) != 0 || sum.TotalLag != 1 {
		t.Fatalf("lags %v, summary %+v, err %v", lags, sum, err)
	}
}

func TestEstimate_Errors(t *testing.T) {
	t.Parallel()
	clock := feedtest.NewClock(t0)
	src := feedtest.NewMemSource(1, feedtest.WithClock(clock.Now))
	writeEvery(t, src, clock, "a", 3)
	ls := []*leases.Lease{v0("0", `"1"`, "", time.Time{})}

	src.Fail(2, &feed.ThrottledError{Status: 429, RetryAfter: time.Second})
	lags, _, err := feed.Estimate(context.Background(), src, ls, feed.EstimateOptions{Now: clock.Now, Reader: feed.ReaderOptions{Sleep: clock.Sleep}})
	if err != nil || lags[0].Lag != 2 {
		t.Fatalf("after throttling: %+v, %v", lags, err)
	}
	if len(clock.Sleeps()) != 2 {
		t.Fatalf("sleeps = %v", clock.Sleeps())
	}

	boom := errors.New("service unavailable")
	src.Fail(1, boom)
	if _, _, err := feed.Estimate(context.Background(), src, ls, feed.EstimateOptions{}); !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
}

// TestEstimate_GoneSentinelOnlyFor1002: .NET's estimator reports 1 for a lease whose read
// answers 410/1002 and fails on 410/1007 (ChangeFeedEstimatorIterator.cs, lines 322-329).
func TestEstimate_GoneSentinelOnlyFor1002(t *testing.T) {
	t.Parallel()
	clock := feedtest.NewClock(t0)
	src := feedtest.NewMemSource(1, feedtest.WithClock(clock.Now))
	writeEvery(t, src, clock, "a", 3)
	ls := []*leases.Lease{v0("0", `"1"`, "", time.Time{})}

	src.Fail(1, &feed.RangeGoneError{PartitionID: "0", Substatus: 1002})
	lags, _, err := feed.Estimate(context.Background(), src, ls, feed.EstimateOptions{Now: clock.Now})
	if err != nil || lags[0].Lag != 1 || lags[0].Sentinel != feed.SentinelRangeGone {
		t.Fatalf("410/1002: %+v, %v; want the range-gone sentinel, lag 1", lags, err)
	}
	src.Fail(1, &feed.RangeGoneError{PartitionID: "0", Substatus: 1007})
	if lags, _, err := feed.Estimate(context.Background(), src, ls, feed.EstimateOptions{Now: clock.Now}); !feed.IsRangeGone(err) {
		t.Fatalf("410/1007: %+v, %v; want the estimate to fail with the gone error, as .NET's", lags, err)
	}
}

func TestEstimate_ConcurrencyBound(t *testing.T) {
	t.Parallel()
	mem := feedtest.NewMemSource(1)
	write(t, mem, "a", "x")
	src := &countingSource{Source: mem}
	var ls []*leases.Lease
	for range 20 {
		ls = append(ls, v0("0", `"0"`, "", time.Time{}))
	}
	lags, sum, err := feed.Estimate(context.Background(), src, ls, feed.EstimateOptions{Concurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	if p := src.peak.Load(); p > 4 {
		t.Fatalf("peak reads in flight = %d, want <= 4", p)
	}
	if len(lags) != 20 || sum.TotalLag != 20 {
		t.Fatalf("summary = %+v", sum)
	}
}
