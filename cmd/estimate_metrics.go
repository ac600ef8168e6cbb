package cmd

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cfp-dev/cfp/changefeed"
	"github.com/cfp-dev/cfp/changefeed/prom"
	"github.com/cfp-dev/cfp/internal/leases"
)

// estimateStates are the values of the state label of cfp_estimate_lease_state: the ownership
// states, then the progress states.
var estimateStates = append([]string{leases.StateOwned, leases.StateExpired, leases.StateUnowned}, changefeed.Progresses...)

// estimateGauges are the Prometheus metrics of `cfp estimate --metrics-addr` (names and labels
// are a public contract, documented in docs/scripting.md).
type estimateGauges struct {
	lag        *prometheus.GaugeVec
	timeLag    *prometheus.GaugeVec
	stuck      *prometheus.GaugeVec
	state      *prometheus.GaugeVec
	verdict    *prometheus.GaugeVec
	moves      *prometheus.CounterVec
	totalLag   prometheus.Gauge
	leases     prometheus.Gauge
	liveOwners prometheus.Gauge
	charge     prometheus.Counter
	errors     prometheus.Counter

	owners map[string]string // by lease, as of the last estimate
}

func newEstimateGauges(reg *prometheus.Registry, processor, database, container string) *estimateGauges {
	labels := prom.Labels(processor, database, container)
	g := &estimateGauges{
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "cfp_estimate_lease_lag", Help: "Estimated lag of a lease in LSNs (the .NET estimator's number, or Java's with --formula java).", ConstLabels: labels,
		}, []string{"lease"}),
		timeLag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "cfp_estimate_lease_time_lag_seconds", Help: "Age of the oldest change a lease has not processed (0 when none).", ConstLabels: labels,
		}, []string{"lease"}),
		stuck: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "cfp_estimate_lease_stuck_seconds", Help: "How long a stuck lease's continuation has not moved (0 unless stuck).", ConstLabels: labels,
		}, []string{"lease"}),
		state: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "cfp_estimate_lease_state", Help: "1 for a lease's ownership state (owned, expired, unowned) and progress state (idle, active, stuck, waiting), 0 for the others.", ConstLabels: labels,
		}, []string{"lease", "state"}),
		verdict: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "cfp_estimate_lease_verdict", Help: "1 for a lease's verdict (ok, lagging, stuck, stalled, rewound, idle, failing), 0 for the others.", ConstLabels: labels,
		}, []string{"lease", "verdict"}),
		moves: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cfp_estimate_lease_moves_total", Help: "Owner changes of a lease seen between two estimates.", ConstLabels: labels,
		}, []string{"lease"}),
		totalLag: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cfp_estimate_total_lag", Help: "Sum of the leases' estimated lag in LSNs (1 when there are no leases).", ConstLabels: labels,
		}),
		leases: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cfp_estimate_leases", Help: "Number of leases estimated.", ConstLabels: labels,
		}),
		liveOwners: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cfp_estimate_live_owners", Help: "Distinct live owners of the leases.", ConstLabels: labels,
		}),
		charge: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cfp_estimate_request_charge_total", Help: "Request units the estimates cost.", ConstLabels: labels,
		}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cfp_estimate_errors_total", Help: "Estimates that failed (the account or lease container did not answer).", ConstLabels: labels,
		}),
	}
	reg.MustRegister(g.collectors()...)
	return g
}

// collectors are the metrics registered.
func (g *estimateGauges) collectors() []prometheus.Collector {
	return []prometheus.Collector{g.lag, g.timeLag, g.stuck, g.state, g.verdict, g.moves, g.totalLag, g.leases, g.liveOwners, g.charge, g.errors}
}

func (g *estimateGauges) set(v estimateView) {
	if g == nil {
		return
	}
	g.lag.Reset()
	g.timeLag.Reset()
	g.stuck.Reset()
	g.state.Reset()
	g.verdict.Reset()
	owners := make(map[string]string, len(v.Leases))
	for _, l := range v.Leases {
		g.lag.WithLabelValues(l.Lease).Set(float64(l.Lag))
		tl := 0.0
		if l.TimeLagSeconds != nil {
			tl = *l.TimeLagSeconds
		}
		g.timeLag.WithLabelValues(l.Lease).Set(tl)
		st := 0.0
		if l.StuckSeconds != nil {
			st = *l.StuckSeconds
		}
		g.stuck.WithLabelValues(l.Lease).Set(st)
		for _, s := range estimateStates {
			on := 0.0
			if s == l.State || s == l.Progress {
				on = 1
			}
			g.state.WithLabelValues(l.Lease, s).Set(on)
		}
		for _, s := range changefeed.Verdicts {
			on := 0.0
			if s == l.Verdict {
				on = 1
			}
			g.verdict.WithLabelValues(l.Lease, s).Set(on)
		}
		owner := ""
		if l.Owner != nil {
			owner = *l.Owner
		}
		owners[l.Lease] = owner
		if prev, ok := g.owners[l.Lease]; ok && !strings.EqualFold(prev, owner) {
			g.moves.WithLabelValues(l.Lease).Inc()
		} else {
			g.moves.WithLabelValues(l.Lease)
		}
	}
	// A lease gone from the set (split into children, merged, deleted) has no moves to count
	// any more: its series goes, as its lag and state series do above.
	for lease := range g.owners {
		if _, ok := owners[lease]; !ok {
			g.moves.DeleteLabelValues(lease)
		}
	}
	g.owners = owners
	g.totalLag.Set(float64(v.Summary.TotalLag))
	g.leases.Set(float64(v.Summary.Leases))
	g.liveOwners.Set(float64(v.Summary.LiveOwners))
	g.charge.Add(v.Summary.RequestCharge)
}

// failed counts a failed estimate.
func (g *estimateGauges) failed() {
	if g != nil {
		g.errors.Inc()
	}
}
