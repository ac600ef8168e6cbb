package feed_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/feed/feedtest"
	"github.com/cfp-dev/cfp/internal/leases"
)

// javaEPK decodes a Java EPK lease document over r whose Base64 state resumes after token
// ("" for a lease without a continuation).
func javaEPK(t *testing.T, r leases.Range, token, owner string, ts time.Time) *leases.Lease {
	t.Helper()
	doc := map[string]any{
		"id": "javaproc.." + r.String(), "LeaseToken": r.String(), "Owner": owner,
		"timestamp": leases.FormatJavaTime(ts), "version": 1,
		"feedRange": map[string]any{"Range": map[string]any{"min": r.Min, "max": r.Max, "isMinInclusive": true, "isMaxInclusive": false}},
	}
	if token != "" {
		state, err := leases.EncodeJavaState(leases.NewJavaState("k5lnAPDiLsw=", "", r, token))
		if err != nil {
			t.Fatal(err)
		}
		doc["ContinuationToken"] = state
	}
	body, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	l, err := leases.Decode(leases.Document{ID: doc["id"].(string), Body: body})
	if err != nil {
		t.Fatal(err)
	}
	if l.Family != leases.FamilyJavaEPK || l.Continuation != token {
		t.Fatalf("decoded %s lease with continuation %q, want a Java EPK lease at %q", l.Family, l.Continuation, token)
	}
	return l
}

func TestJavaLag(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, latest, lease string
		want                int64
		ok                  bool
	}{
		{"behind", `"10"`, `"4"`, 6, true},
		{"caught up", `"10"`, `"10"`, 0, true},
		{"quotes optional", `10`, `4`, 6, true},
		{"no continuation", `"10"`, "", 9, true},
		{"blank continuation", `"10"`, "  ", 9, true},
		{"empty partition without continuation", `"0"`, "", -1, true},
		{"lease ahead is not clamped", `"3"`, `"5"`, -2, true},
		{"unparsable lease", `"10"`, `"abc"`, -1, false},
		{"unparsable latest", `"x"`, `"4"`, -1, false},
		{"no latest", "", `"4"`, -1, false},
		{"weak etag is not an LSN", `"10"`, `W/"4"`, -1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := feed.JavaLag(tt.latest, tt.lease)
			if got != tt.want || ok != tt.ok {
				t.Errorf("JavaLag(%q, %q) = %d, %v; want %d, %v", tt.latest, tt.lease, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestParseFormula(t *testing.T) {
	t.Parallel()
	for _, f := range []feed.Formula{feed.FormulaDotNet, feed.FormulaJava} {
		if got, err := feed.ParseFormula(f.String()); err != nil || got != f {
			t.Errorf("ParseFormula(%q) = %v, %v", f, got, err)
		}
	}
	if _, err := feed.ParseFormula("kotlin"); err == nil {
		t.Error("ParseFormula(kotlin) succeeded")
	}
	if _, _, err := feed.Estimate(context.Background(), feedtest.NewMemSource(1), nil, feed.EstimateOptions{Formula: 7}); err == nil {
		t.Error("Estimate with an unknown formula succeeded")
	}
}

// TestEstimate_Formulas estimates the same Java EPK and .NET leases with both formulas: they
// agree while changes are pending in a lease's own range, and differ by design for a caught-up
// sub-range (Java counts the partition's later writes), a lease without a continuation (Java
// reports latest-1, .NET the sentinel 1) and an unparsable continuation (Java's -1).
func TestEstimate_Formulas(t *testing.T) {
	t.Parallel()
	clock := feedtest.NewClock(t0)
	src := feedtest.NewMemSource(1, feedtest.WithClock(clock.Now))
	writeEvery(t, src, clock, "a", 6) // LSNs 1..6
	writeEvery(t, src, clock, "b", 4) // LSNs 7..10
	epkA := feedtest.EPK("a")
	rangeA := leases.Range{Min: epkA, Max: epkA + "01"}
	if rangeA.Contains(feedtest.EPK("b")) {
		t.Fatal("key b falls in a's sub-range")
	}
	now := clock.Now()
	ls := []*leases.Lease{
		javaEPK(t, rangeA, `"4"`, "java-1", now), // a's LSNs 5 and 6 pending
		javaEPK(t, rangeA, `"6"`, "java-1", now), // caught up in its range; b wrote 7..10
		javaEPK(t, leases.FullRange, "", "", time.Time{}),
		v0("0", `"8"`, "dotnet-1", now), // LSNs 9 and 10 pending
		v0("7", `"3"`, "dotnet-1", now), // a partition that does not exist
	}
	type want struct {
		lag      int64
		sentinel string
	}
	tests := []struct {
		formula feed.Formula
		want    []want
		total   int64
	}{
		{feed.FormulaDotNet, []want{{6, ""}, {0, ""}, {1, feed.SentinelNoContinuation}, {2, ""}, {1, feed.SentinelRangeGone}}, 10},
		{feed.FormulaJava, []want{{6, ""}, {4, ""}, {9, ""}, {2, ""}, {1, feed.SentinelRangeGone}}, 22},
	}
	for _, tt := range tests {
		t.Run(tt.formula.String(), func(t *testing.T) {
			t.Parallel()
			lags, sum, err := feed.Estimate(context.Background(), src, ls, feed.EstimateOptions{Now: clock.Now, Formula: tt.formula})
			if err != nil {
				t.Fatal(err)
			}
			for i, w := range tt.want {
				if lags[i].Lag != w.lag || lags[i].Sentinel != w.sentinel {
					t.Errorf("lease %d (%s at %q): lag %d (%q), want %d (%q)", i, lags[i].Token, ls[i].Continuation, lags[i].Lag, lags[i].Sentinel, w.lag, w.sentinel)
				}
			}
			read := []int{0, 1, 3} // .NET does not read a lease without a continuation
			if tt.formula == feed.FormulaJava {
				read = append(read, 2)
			}
			for _, i := range read {
				if lags[i].Latest != 10 || lags[i].PartitionID != "0" {
					t.Errorf("lease %d read partition %q at latest %d, want partition 0 at 10", i, lags[i].PartitionID, lags[i].Latest)
				}
			}
			if sum.TotalLag != tt.total {
				t.Errorf("total lag %d, want %d", sum.TotalLag, tt.total)
			}
			if tt.formula == feed.FormulaJava && (lags[0].TimeLag != 0 || !lags[0].OldestPending.IsZero()) {
				t.Errorf("java formula read pending changes: %+v", lags[0])
			}
		})
	}
}

// A lease whose continuation is not an LSN is Java's -1, reported as a sentinel and left out
// of the total.
func TestEstimate_JavaUnparsableContinuation(t *testing.T) {
	t.Parallel()
	clock := feedtest.NewClock(t0)
	src := feedtest.NewMemSource(1, feedtest.WithClock(clock.Now))
	writeEvery(t, src, clock, "a", 5)
	ls := []*leases.Lease{
		javaEPK(t, leases.FullRange, `"not-an-lsn"`, "", time.Time{}),
		javaEPK(t, leases.FullRange, `"2"`, "", time.Time{}),
	}
	lags, sum, err := feed.Estimate(context.Background(), src, ls, feed.EstimateOptions{Now: clock.Now, Formula: feed.FormulaJava})
	if err != nil {
		t.Fatal(err)
	}
	if lags[0].Lag != -1 || lags[0].Sentinel != feed.SentinelUnparsableLSN || lags[0].HasCheckpoint {
		t.Errorf("unparsable = %+v", lags[0])
	}
	if lags[1].Lag != 3 || sum.TotalLag != 3 {
		t.Errorf("lag %d, total %d; want 3 and 3", lags[1].Lag, sum.TotalLag)
	}
}
