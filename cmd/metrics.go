package cmd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/cfp-dev/cfp/changefeed/prom"
	"github.com/cfp-dev/cfp/internal/connlimit"
)

// newMetricsRegistry returns an empty Prometheus registry for a command's collectors (no Go
// runtime metrics: the endpoint shows what the command measures).
func newMetricsRegistry() *prometheus.Registry { return prometheus.NewRegistry() }

// metricsMaxConns is how many connections the metrics server keeps open at once: a scraper
// and the probes need a few; beyond it, the connections waiting longest without a request are
// closed, so idle keep-alive connections cannot use up the process's file descriptors and
// starve /healthz (Kubernetes would restart a healthy host).
const metricsMaxConns = 64

// metricsLimits are the connection limits of the metrics server: the emulator's timeouts (10 s
// for a request's headers, a minute for the request, two minutes between requests) and
// metricsMaxConns.
var metricsLimits = serverLimits{timeouts: connlimit.DefaultTimeouts, maxConns: metricsMaxConns}

// serverLimits bound an HTTP server's connections (tests shorten them).
type serverLimits struct {
	timeouts connlimit.Timeouts
	maxConns int
}

// serveMetrics serves reg at http://<addr>/metrics, and h at /healthz and /readyz, for a
// command's lifetime (`cfp estimate --metrics-addr`, `cfp process --metrics-addr`). It returns once the listener is open, so a port
// already in use is reported at once, with the address actually listened on (the port is chosen
// when addr ends in ":0"). The server stops when ctx ends or stop is called; stop waits for it
// and may be called more than once. Serving errors after the start are logged to log.
// Connections are bounded by metricsLimits.
func serveMetrics(ctx context.Context, addr string, reg *prometheus.Registry, h *prom.Health, log *slog.Logger) (listening string, stop func(), err error) {
	return serveMetricsLimited(ctx, addr, reg, h, log, metricsLimits)
}

// serveMetricsLimited is serveMetrics with the connection limits lim.
func serveMetricsLimited(ctx context.Context, addr string, reg *prometheus.Registry, h *prom.Health, log *slog.Logger, lim serverLimits) (listening string, stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, withHint(fmt.Errorf("serve metrics on %s: %w", addr, err), "pick a free address with --metrics-addr, e.g. localhost:9464")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/healthz", h.ServeLive)
	mux.HandleFunc("/readyz", h.ServeReady)
	conns := connlimit.New(lim.maxConns)
	srv := &http.Server{Handler: mux, ConnState: conns.Track}
	lim.timeouts.Apply(srv)
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := srv.Serve(conns.Listener(ln)); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server stopped", "addr", ln.Addr().String(), "err", err)
		}
	}()
	var once sync.Once
	shutdown := func() {
		once.Do(func() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
			<-served
		})
	}
	watchDone := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			shutdown()
		case <-watchDone:
		}
	}()
	return ln.Addr().String(), func() { shutdown(); closeOnce(watchDone) }, nil
}

// closeOnce closes ch unless it is already closed.
func closeOnce(ch chan struct{}) {
	select {
	case <-ch:
	default:
		close(ch)
	}
}
