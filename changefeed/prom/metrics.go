package prom

import (
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/cfp-dev/cfp/changefeed"
	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/leases"
)

// Labels are the labels every lag and processor metric of `cfp process` and `cfp
// estimate` carries, with the same names in both: the processor name and the monitored
// database and container, never resource ids (docs/scripting.md). Per-lease metrics add
// "lease" (the lease token).
func Labels(processor, database, container string) prometheus.Labels {
	return prometheus.Labels{"processor": processor, "database": database, "container": container}
}

// Metrics are the Prometheus metrics of a processor host, those of `cfp process
// --metrics-addr`: their names and labels are a public contract (docs/scripting.md). It is a
// changefeed.Hook (events, batches, acquire cycles, request charges) and keeps the host's
// Health. A nil *Metrics records nothing.
type Metrics struct {
	registry *prometheus.Registry
	batches  *prometheus.CounterVec
	items    *prometheus.CounterVec
	errors   *prometheus.CounterVec
	owned    prometheus.Gauge
	failingG prometheus.Gauge
	moves    *prometheus.CounterVec
	lag      *prometheus.GaugeVec
	state    *prometheus.GaugeVec
	ru       *prometheus.CounterVec
	leaseRU  *prometheus.CounterVec

	instance   string
	stuckAfter int
	now        func() time.Time
	health     *Health

	// mu guards progress, the stuck detection's view of the leases this host holds.
	mu       sync.Mutex
	progress map[string]*ownedProgress
}

// ownedProgress is what the host knows of the progress of a lease it holds.
type ownedProgress struct {
	continuation string
	lag          int64
	measured     bool
	track        feed.LeaseTrack
}

// Options say whose metrics a Metrics are. Zero fields take the defaults given.
type Options struct {
	// Processor, Database and Container are the labels of every metric: the processor name
	// and the monitored database and container names. Instance is the "owner" label: the
	// host's instance name.
	Processor, Database, Container, Instance string
	// StuckAfter is how many acquire cycles a held lease's batch may stay pending with the
	// same checkpoint before cfp_process_lease_state calls it stuck (default 3, as
	// `cfp process --stuck-after`).
	StuckAfter int
	// StallAfter is how long /healthz waits for an acquire cycle before it calls the host
	// wedged (0: never; New uses StallAfter(AcquireInterval)).
	StallAfter time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// DefaultStuckAfter is the default Options.StuckAfter.
const DefaultStuckAfter = feed.DefaultStuckAfter

// New returns the metrics of the processor cfg configures, to add to its hooks in one line:
//
//	m := prom.New(cfg)
//	cfg.Hooks = append(cfg.Hooks, m)
//	go http.ListenAndServe(":9464", m.Handler())
func New(cfg changefeed.Config) *Metrics {
	acquire := cfg.AcquireInterval
	if acquire == 0 {
		acquire = feed.DefaultAcquireInterval
	}
	return NewMetrics(Options{
		Processor: cfg.Processor, Database: cfg.Monitored.Database, Container: cfg.Monitored.Name,
		Instance: cfg.Instance, StallAfter: StallAfter(acquire),
	})
}

// StallAfter is how long /healthz of a processor waits for an acquire cycle before it calls the
// host wedged: five acquire intervals, plus two minutes for the SDK's retries of an unreachable
// account (a cycle that fails still reports, so this is a hang, not an outage).
func StallAfter(acquire time.Duration) time.Duration {
	return 5*acquire + 2*time.Minute
}

// NewMetrics returns the metrics of one host, registered in their own registry (Registry).
func NewMetrics(o Options) *Metrics {
	if o.StuckAfter <= 0 {
		o.StuckAfter = DefaultStuckAfter
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	processor, database, container, instance, stuckAfter := o.Processor, o.Database, o.Container, o.Instance, o.StuckAfter
	labels := Labels(processor, database, container)
	labels["owner"] = instance
	m := &Metrics{
		registry: prometheus.NewRegistry(),
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
		failingG: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cfp_process_failing_leases", Help: "Leases this host holds whose change-feed reads fail permanently (an error retrying does not fix); updated every acquire cycle.", ConstLabels: labels,
		}),
		moves: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cfp_process_lease_moves_total", Help: "Leases this host acquired, released or lost, by event.", ConstLabels: labels,
		}, []string{"event"}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name:        "cfp_process_lease_lag",
			Help:        "Changes (LSNs) between a lease's last processed batch and its partition's latest LSN when the batch was read.",
			ConstLabels: labels,
		}, []string{"lease"}),
		state: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name:        "cfp_process_lease_state",
			Help:        "1 for the progress state (idle, active, stuck) of each lease this host holds, 0 for the others; updated every acquire cycle.",
			ConstLabels: labels,
		}, []string{"lease", "state"}),
		ru: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name:        "cfp_process_request_units_total",
			Help:        "Request units (RU) this host spent, by kind of request: change-feed reads and the lease container's reads, lists, renews, checkpoints, acquires, releases and presence records.",
			ConstLabels: labels,
		}, []string{"kind"}),
		leaseRU: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name:        "cfp_process_lease_request_units_total",
			Help:        "Request units (RU) this host spent for one lease, by kind: its change-feed reads and its lease document's reads and writes.",
			ConstLabels: labels,
		}, []string{"lease", "kind"}),
		instance:   instance,
		stuckAfter: stuckAfter,
		now:        o.Now,
		health:     NewHealth(o.Now, o.StallAfter),
		progress:   map[string]*ownedProgress{},
	}
	m.registry.MustRegister(m.Collectors()...)
	// Both causes and every move exist from the start, so rate() works before the first one.
	m.errors.WithLabelValues(string(feed.CauseUser))
	m.errors.WithLabelValues(string(feed.CauseInfra))
	for _, e := range []feed.EventType{feed.EventAcquired, feed.EventReleased, feed.EventLost} {
		m.moves.WithLabelValues(string(e))
	}
	for _, k := range leases.ChargeKinds {
		m.ru.WithLabelValues(string(k))
	}
	return m
}

// Registry is the registry of the metrics (no Go runtime metrics: the endpoint shows what the
// host measures).
func (m *Metrics) Registry() *prometheus.Registry { return m.registry }

// Health is the host's liveness and readiness, fed by OnCycleDone.
func (m *Metrics) Health() *Health { return m.health }

// Handler serves the metrics at /metrics and the probes at /healthz and /readyz.
func (m *Metrics) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{Registry: m.registry}))
	mux.HandleFunc("/healthz", m.health.ServeLive)
	mux.HandleFunc("/readyz", m.health.ServeReady)
	return mux
}

// Stop says the host stopped: the probes answer 503 from now on.
func (m *Metrics) Stop() {
	if m != nil {
		m.health.Stop()
	}
}

// Collectors are the metrics registered.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.batches, m.items, m.errors, m.owned, m.failingG, m.moves, m.lag, m.state, m.ru, m.leaseRU}
}

// OnRequestCharge records the RU of one request, of kind, for lease ("" when it was for none).
func (m *Metrics) OnRequestCharge(kind changefeed.ChargeKind, lease string, ru float64) {
	if m == nil {
		return
	}
	m.ru.WithLabelValues(string(kind)).Add(ru)
	if lease != "" {
		m.leaseRU.WithLabelValues(lease, string(kind)).Add(ru)
	}
}

// OnCycleDone records the end of an acquire cycle: the health's round, the progress state of
// every lease this host holds and the leases whose reads fail permanently. err must hold no
// secret: /readyz shows it.
func (m *Metrics) OnCycleDone(err error) {
	if m == nil {
		return
	}
	rf, _ := errors.AsType[*changefeed.ReadsFailingError](err)
	m.health.Round(err)
	m.cycle(m.now())
	m.failing(rf)
}

// failing records, at the end of an acquire cycle, the leases whose reads fail permanently
// (rf nil: none).
func (m *Metrics) failing(rf *feed.ReadsFailingError) {
	if m == nil {
		return
	}
	n := 0
	if rf != nil {
		n = len(rf.Leases)
	}
	m.failingG.Set(float64(n))
}

// processStates are the progress states a host reports for its own leases (it holds them, so
// never waiting).
var processStates = []string{feed.ProgressIdle, feed.ProgressActive, feed.ProgressStuck}

// OnEvent records one lifecycle event.
func (m *Metrics) OnEvent(e changefeed.Event) {
	if m == nil {
		return
	}
	switch e.Type {
	case feed.EventBatch:
		m.batches.WithLabelValues(e.Lease).Inc()
		m.items.WithLabelValues(e.Lease).Add(float64(e.Items))
	case feed.EventAcquired:
		m.owned.Inc()
		m.moves.WithLabelValues(string(e.Type)).Inc()
		m.mu.Lock()
		m.progress[e.Lease] = &ownedProgress{}
		m.mu.Unlock()
	case feed.EventReleased, feed.EventLost:
		m.owned.Dec()
		m.moves.WithLabelValues(string(e.Type)).Inc()
		// The series of a lease this host no longer holds go: the host that takes it over
		// reports it under its own owner label.
		m.lag.DeleteLabelValues(e.Lease)
		m.batches.DeleteLabelValues(e.Lease)
		m.items.DeleteLabelValues(e.Lease)
		m.leaseRU.DeletePartialMatch(prometheus.Labels{"lease": e.Lease})
		for _, s := range processStates {
			m.state.DeleteLabelValues(e.Lease, s)
		}
		m.mu.Lock()
		delete(m.progress, e.Lease)
		m.mu.Unlock()
	case feed.EventError:
		if e.Cause != "" {
			m.errors.WithLabelValues(string(e.Cause)).Inc()
		}
	}
}

// OnBatchStart records that a batch of b's lease is pending: its lease has changes to read
// from b.Checkpoint on, at least the batch's.
func (m *Metrics) OnBatchStart(b changefeed.Batch) {
	if m == nil {
		return
	}
	lag := int64(len(b.Items))
	if lsn, ok := feed.ContinuationLSN(b.Checkpoint); ok && b.LatestLSN > lsn {
		lag = max(lag, b.LatestLSN-lsn)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if p := m.progress[b.LeaseToken]; p != nil {
		p.continuation, p.lag, p.measured = b.Checkpoint, lag, lag > 0
	}
}

// OnBatchEnd records the lag left behind a processed batch (err nil or ErrNoCheckpoint); a
// failed batch changes nothing (its error event counts it).
func (m *Metrics) OnBatchEnd(b changefeed.Batch, err error) {
	if err == nil || errors.Is(err, changefeed.ErrNoCheckpoint) {
		m.batchDone(b)
	}
}

// batchDone records the lag left behind a processed batch.
func (m *Metrics) batchDone(b changefeed.Batch) {
	if m == nil || b.LatestLSN <= 0 {
		return
	}
	lsn, ok := feed.ContinuationLSN(b.Continuation)
	if !ok {
		return
	}
	lag := max(0, b.LatestLSN-lsn)
	m.lag.WithLabelValues(b.LeaseToken).Set(float64(lag))
	m.mu.Lock()
	defer m.mu.Unlock()
	if p := m.progress[b.LeaseToken]; p != nil {
		p.continuation, p.lag, p.measured = b.Continuation, lag, true
	}
}

// cycle updates the progress state of every lease this host holds (at the end of each
// acquire cycle, the host's estimate interval): a lease whose batch has been pending with the
// same checkpoint for stuckAfter cycles is stuck.
func (m *Metrics) cycle(now time.Time) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for token, p := range m.progress {
		var state string
		state, _, p.track = feed.TrackProgress(p.track, feed.LeaseSighting{
			State: leases.StateOwned, Owner: m.instance, Continuation: p.continuation,
			Lag: p.lag, Measured: p.measured, At: now,
		}, m.stuckAfter)
		for _, s := range processStates {
			v := 0.0
			if s == state {
				v = 1
			}
			m.state.WithLabelValues(token, s).Set(v)
		}
	}
}

var (
	_ changefeed.HookEvent         = (*Metrics)(nil)
	_ changefeed.HookBatchStart    = (*Metrics)(nil)
	_ changefeed.HookBatchEnd      = (*Metrics)(nil)
	_ changefeed.HookCycleDone     = (*Metrics)(nil)
	_ changefeed.HookRequestCharge = (*Metrics)(nil)
)
