package cmd

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cfp-dev/cfp/internal/feed"
)

// processMetrics are the Prometheus metrics of `cfp process --metrics-addr`: their names and
// labels are a public contract (docs/scripting.md). A nil *processMetrics records nothing.
type processMetrics struct {
	registry *prometheus.Registry
	batches  *prometheus.CounterVec
	items    *prometheus.CounterVec
	errors   *prometheus.CounterVec
	owned    prometheus.Gauge
	lag      *prometheus.GaugeVec
}

func newProcessMetrics(processor, instance string) *processMetrics {
	labels := prometheus.Labels{"processor": processor, "instance": instance}
	m := &processMetrics{
		registry: newMetricsRegistry(),
		batches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cfp_process_batches_total", Help: "Batches the delegate processed, by lease.", ConstLabels: labels,
		}, []string{"lease"}),
		items: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cfp_process_items_total", Help: "Changed documents the delegate processed, by lease.", ConstLabels: labels,
		}, []string{"lease"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cfp_process_errors_total", Help: "Failures by cause: user (the delegate) or infra (the service).", ConstLabels: labels,
		}, []string{"cause"}),
		owned: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cfp_process_owned_leases", Help: "Leases this host holds.", ConstLabels: labels,
		}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name:        "cfp_process_lease_lag",
			Help:        "Changes (LSNs) between a lease's last processed batch and its partition's latest LSN when the batch was read.",
			ConstLabels: labels,
		}, []string{"lease"}),
	}
	m.registry.MustRegister(m.batches, m.items, m.errors, m.owned, m.lag)
	// Both causes exist from the start, so rate() works before the first error.
	m.errors.WithLabelValues(string(feed.CauseUser))
	m.errors.WithLabelValues(string(feed.CauseInfra))
	return m
}

// observe records one engine event.
func (m *processMetrics) observe(e feed.Event) {
	if m == nil {
		return
	}
	switch e.Type {
	case feed.EventBatch:
		m.batches.WithLabelValues(e.Lease).Inc()
		m.items.WithLabelValues(e.Lease).Add(float64(e.Items))
	case feed.EventAcquired:
		m.owned.Inc()
	case feed.EventReleased, feed.EventLost:
		m.owned.Dec()
		m.lag.DeleteLabelValues(e.Lease)
	case feed.EventError:
		if e.Cause != "" {
			m.errors.WithLabelValues(string(e.Cause)).Inc()
		}
	}
}

// batchDone records the lag left behind a processed batch.
func (m *processMetrics) batchDone(b feed.Batch) {
	if m == nil || b.LatestLSN <= 0 {
		return
	}
	lsn, ok := feed.ContinuationLSN(b.Continuation)
	if !ok {
		return
	}
	m.lag.WithLabelValues(b.LeaseToken).Set(float64(max(0, b.LatestLSN-lsn)))
}
