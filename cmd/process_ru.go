package cmd

import (
	"sync"

	"github.com/cfp-dev/cfp/changefeed"
	"github.com/cfp-dev/cfp/changefeed/prom"
	"github.com/cfp-dev/cfp/internal/leases"
)

// requestUnits tallies the request units (RU) `cfp process` spends, by kind of request
// (leases.ChargeKind): the summary's request_units and request_charge, and, with
// --metrics-addr, the RU counters. It is safe for concurrent use.
type requestUnits struct {
	metrics *prom.Metrics // nil without --metrics-addr

	mu     sync.Mutex
	byKind map[leases.ChargeKind]float64
}

var _ changefeed.HookRequestCharge = (*requestUnits)(nil)

func newRequestUnits(m *prom.Metrics) *requestUnits {
	return &requestUnits{metrics: m, byKind: map[leases.ChargeKind]float64{}}
}

// OnRequestCharge is the processor's request-charge hook (changefeed.HookRequestCharge).
func (r *requestUnits) OnRequestCharge(kind leases.ChargeKind, lease string, ru float64) {
	r.mu.Lock()
	r.byKind[kind] += ru
	r.mu.Unlock()
	r.metrics.OnRequestCharge(kind, lease, ru)
}

// totals returns the RU by kind, every kind present (0 when none was spent), and their sum.
func (r *requestUnits) totals() (map[string]float64, float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]float64, len(leases.ChargeKinds))
	var sum float64
	for _, k := range leases.ChargeKinds {
		out[string(k)] = r.byKind[k]
		sum += r.byKind[k]
	}
	return out, sum
}
