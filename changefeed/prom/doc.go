// Package prom gives a changefeed.Processor the Prometheus metrics, the stuck-lease verdicts and
// the /healthz and /readyz probes of `cfp process --metrics-addr`, as a changefeed.Hook any Go
// host adds in one line:
//
//	m := prom.New(cfg)
//	cfg.Hooks = append(cfg.Hooks, m)
//	go http.ListenAndServe(":9464", m.Handler())
//
// The metric names and labels are those docs/scripting.md ("Metrics and health") documents;
// cfp's Grafana dashboard reads them. The package is apart from changefeed so that a program
// that does not want Prometheus does not link it.
package prom
