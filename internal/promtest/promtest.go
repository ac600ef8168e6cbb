// Package promtest holds helpers for tests that read back Prometheus metrics.
package promtest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// LeaseSeries returns the leases that metric name has a series for in reg (the values of
// their "lease" label).
func LeaseSeries(t testing.TB, reg prometheus.Gatherer, name string) map[string]bool {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "lease" {
					out[lp.GetValue()] = true
				}
			}
		}
	}
	return out
}
