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
)

// newMetricsRegistry returns an empty Prometheus registry for a command's collectors (no Go
// runtime metrics: the endpoint shows what the command measures).
func newMetricsRegistry() *prometheus.Registry { return prometheus.NewRegistry() }

// serveMetrics serves reg at http://<addr>/metrics, and h at /healthz and /readyz, for a
// command's lifetime (`cfp estimate --metrics-addr`, `cfp process --metrics-addr`). It returns once the listener is open, so a port
// already in use is reported at once, with the address actually listened on (the port is chosen
// when addr ends in ":0"). The server stops when ctx ends or stop is called; stop waits for it
// and may be called more than once. Serving errors after the start are logged to log.
func serveMetrics(ctx context.Context, addr string, reg *prometheus.Registry, h *health, log *slog.Logger) (listening string, stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, withHint(fmt.Errorf("serve metrics on %s: %w", addr, err), "pick a free address with --metrics-addr, e.g. localhost:9464")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/healthz", h.serveLive)
	mux.HandleFunc("/readyz", h.serveReady)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
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
