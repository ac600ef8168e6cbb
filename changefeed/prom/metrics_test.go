package prom

import (
	"testing"

	"github.com/cfp-dev/cfp/changefeed"
	"github.com/cfp-dev/cfp/internal/promtest"
)

// TestProcessMetrics_SeriesOfAReleasedLeaseGo: the per-lease series of a lease this host
// released or lost are removed; those of the leases it still holds stay.
func TestProcessMetrics_SeriesOfAReleasedLeaseGo(t *testing.T) {
	t.Parallel()
	m := NewMetrics(Options{Processor: "p", Database: "d", Container: "c", Instance: "host-a", StuckAfter: 3})
	for _, l := range []string{"0", "1"} {
		m.OnEvent(changefeed.Event{Type: changefeed.EventAcquired, Lease: l})
		m.OnEvent(changefeed.Event{Type: changefeed.EventBatch, Lease: l, Items: 2})
		m.OnRequestCharge(changefeed.ChargeChangeFeed, l, 1)
		m.OnBatchEnd(changefeed.Batch{LeaseToken: l, LatestLSN: 9, Continuation: `"5"`}, nil)
	}
	m.OnEvent(changefeed.Event{Type: changefeed.EventReleased, Lease: "0"})
	for _, name := range []string{"cfp_process_batches_total", "cfp_process_items_total", "cfp_process_lease_request_units_total", "cfp_process_lease_lag"} {
		if got := promtest.LeaseSeries(t, m.Registry(), name); got["0"] || !got["1"] {
			t.Errorf("%s has series for leases %v, want only 1 (0 was released)", name, got)
		}
	}
}
