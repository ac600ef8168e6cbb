package cmd

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cfp-dev/cfp/changefeed/prom"
)

// registeredMetrics returns the names of the metrics `cfp process` and `cfp estimate` register,
// with the label names each may carry, from the collectors themselves.
func registeredMetrics(t *testing.T) map[string][]string {
	t.Helper()
	var cs []prometheus.Collector
	cs = append(cs, prom.NewMetrics(prom.Options{Processor: "p", Database: "d", Container: "c", Instance: "i", StuckAfter: 1}).Collectors()...)
	cs = append(cs, newEstimateGauges(newMetricsRegistry(), "p", "d", "c").collectors()...)
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	labelsRe := regexp.MustCompile(`(?:constLabels|variableLabels): \{([^}]*)\}`)
	names := map[string][]string{}
	for _, c := range cs {
		ch := make(chan *prometheus.Desc, 4)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			s := d.String()
			m := fq.FindStringSubmatch(s)
			if m == nil {
				t.Fatalf("no name in %s", s)
			}
			var labels []string
			for _, lm := range labelsRe.FindAllStringSubmatch(s, -1) {
				for _, kv := range strings.Split(lm[1], ",") {
					if k, _, _ := strings.Cut(strings.TrimSpace(kv), "="); k != "" {
						labels = append(labels, strings.Trim(k, `"`))
					}
				}
			}
			names[m[1]] = labels
		}
	}
	if len(names) < 10 {
		t.Fatalf("only %d metrics registered: %v", len(names), names)
	}
	return names
}

// TestGrafanaDashboard_QueriesNameExportedMetrics loads the dashboard that deploy/kubernetes
// provisions and checks that every query names at least one metric, that each metric it names
// is one cfp registers, and that it filters only on labels that metric carries.
func TestGrafanaDashboard_QueriesNameExportedMetrics(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../deploy/kubernetes/base/grafana/cfp-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	registered := registeredMetrics(t)
	metricRe := regexp.MustCompile(`\bcfp_[a-z0-9_]+`)
	// A selector: metric{label="v", ...}; "by (a, b)" groupings are checked too.
	selectorRe := regexp.MustCompile(`(cfp_[a-z0-9_]+)\{([^}]*)\}`)
	matcherRe := regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)`)
	byRe := regexp.MustCompile(`by \(([^)]*)\)\s*\((?:rate|increase)?\(?\s*(cfp_[a-z0-9_]+)`)
	var exprs []string
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if v.Definition != "" {
			exprs = append(exprs, v.Definition)
		}
	}
	if len(exprs) < 10 {
		t.Fatalf("only %d queries in the dashboard", len(exprs))
	}
	for _, e := range exprs {
		names := metricRe.FindAllString(e, -1)
		if len(names) == 0 {
			t.Errorf("query names no cfp metric: %s", e)
		}
		for _, n := range names {
			if _, ok := registered[n]; !ok {
				t.Errorf("query names %s, which cfp does not export: %s", n, e)
			}
		}
		check := func(metric, label string) {
			if !slices.Contains(registered[metric], label) {
				t.Errorf("query uses label %q, which %s does not carry (%v): %s", label, metric, registered[metric], e)
			}
		}
		for _, m := range selectorRe.FindAllStringSubmatch(e, -1) {
			for _, lm := range matcherRe.FindAllStringSubmatch(m[2], -1) {
				check(m[1], lm[1])
			}
		}
		for _, m := range byRe.FindAllStringSubmatch(e, -1) {
			for _, l := range strings.Split(m[1], ",") {
				check(m[2], strings.TrimSpace(l))
			}
		}
	}
}
