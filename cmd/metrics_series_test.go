package cmd

import (
	"strings"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/internal/leases"
	"github.com/cfp-dev/cfp/internal/promtest"
	"github.com/cfp-dev/cfp/internal/render"
)

// TestEstimateGauges_MovesOfAGoneLeaseGo: once a lease is no longer in the set (its parent
// split into children), cfp_estimate_lease_moves_total has no series for it any more.
func TestEstimateGauges_MovesOfAGoneLeaseGo(t *testing.T) {
	t.Parallel()
	reg := newMetricsRegistry()
	g := newEstimateGauges(reg, "p", "d", "c")
	a, b := "host-a", "host-b"
	g.set(estimateView{Leases: []render.EstimateLease{{Lease: "0", Owner: &a}, {Lease: "1", Owner: &a}}})
	g.set(estimateView{Leases: []render.EstimateLease{{Lease: "0", Owner: &b}, {Lease: "1", Owner: &a}}})
	g.set(estimateView{Leases: []render.EstimateLease{{Lease: "1", Owner: &a}, {Lease: "2", Owner: &a}, {Lease: "3", Owner: &b}}})
	got := promtest.LeaseSeries(t, reg, "cfp_estimate_lease_moves_total")
	if got["0"] || !got["1"] || !got["2"] || !got["3"] {
		t.Errorf("moves series for leases %v, want 1, 2 and 3 (0 was split away)", got)
	}
}

// TestNewLeaseView_ReadFailure: leases list shows the read failure a live owner wrote into its
// lease, and not once the owner is gone.
func TestNewLeaseView_ReadFailure(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	l := &leases.Lease{Token: "0", Owner: "host-a", Timestamp: now.Add(-time.Second),
		Properties: map[string]string{"cfpReadFailure": "read change feed: HTTP 400"}}
	v := newLeaseView(l, now, time.Minute)
	if v.ReadFailure == nil || *v.ReadFailure != "read change feed: HTTP 400" || !strings.Contains(modeCell(v), "reads failing") {
		t.Errorf("owned lease with a read failure: %+v, mode cell %q", v, modeCell(v))
	}
	if v := newLeaseView(l, now.Add(time.Hour), time.Minute); v.ReadFailure != nil {
		t.Errorf("expired lease still shows the read failure %q", *v.ReadFailure)
	}
}
