package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/leases"
	"github.com/cfp-dev/cfp/internal/render"
)

// seedEstimate writes 20 orders into shop/orders of the emulator on dir and one lease per
// partition under prefix, checkpointed at LSN 0 (so each lease's lag is its partition's change
// count). It returns each lease token's partition change count.
func seedEstimate(t *testing.T, dir, prefix string) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	acct := openLocal(t, dir, 4)
	defer acct.Close()
	c := createContainer(t, acct, "shop", "orders", "/id")
	createContainer(t, acct, "shop", "leases", "/id")
	writeOrders(t, c, 20)
	parts, err := c.Partitions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	store := leases.NewStore(acct.LeaseDocuments("shop", "leases"), prefix, leases.StoreOptions{})
	want := map[string]int64{}
	for _, p := range parts {
		l := leases.NewDotNetV0(prefix, p.ID, p.Range, "")
		l.Continuation = leases.FormatLSN(0)
		if _, err := store.Create(ctx, l); err != nil {
			t.Fatal(err)
		}
		page, err := c.ReadPage(ctx, feedReadAll(p.ID))
		if err != nil {
			t.Fatal(err)
		}
		want[p.ID] = int64(len(page.Items))
	}
	return want
}

func TestEstimate_MetricsEndpoint(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const prefix = "metricslocalhost_k5lnAA==_k5lnAPDiLsw="
	want := seedEstimate(t, dir, prefix)

	ios, _, out, errOut := render.Test()
	f := &factory{
		IO:     ios,
		Global: &globalOptions{Local: dir, Database: "shop", Container: "orders", LeaseContainer: "leases", LeaseIDPrefix: prefix},
		Getenv: func(string) string { return "" },
		Now:    time.Now,
	}
	f.Log = f.newLogger()
	f.Account = f.openAccount
	defer f.closeAccount()

	ready := make(chan string, 1)
	opts := &estimateOptions{
		f: f, watching: true, Watch: 20 * time.Millisecond, MetricsAddr: "127.0.0.1:0",
		Concurrency: 4, Expiration: leases.DefaultExpiration,
		metricsReady: func(addr string) { ready <- addr },
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runEstimate(ctx, opts) }()

	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatalf("estimate ended before serving metrics: %v\n%s", err, errOut)
	case <-time.After(30 * time.Second):
		t.Fatal("metrics server did not start")
	}
	var total int64
	var lines []string
	for tok, n := range want {
		total += n
		lines = append(lines, fmt.Sprintf(`cfp_estimate_lease_lag{container="orders",database="shop",lease=%q,processor=""} %d`, tok, n))
	}
	lines = append(lines,
		fmt.Sprintf(`cfp_estimate_total_lag{container="orders",database="shop",processor=""} %d`, total),
		fmt.Sprintf(`cfp_estimate_leases{container="orders",database="shop",processor=""} %d`, len(want)))
	var body string
	deadline := time.Now().Add(30 * time.Second)
	for {
		body = scrape(t, "http://"+addr+"/metrics")
		if containsAll(body, lines) || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, l := range lines {
		if !strings.Contains(body, l) {
			t.Errorf("metrics lack %q", l)
		}
	}
	if !strings.Contains(body, `cfp_estimate_lease_time_lag_seconds{container="orders",database="shop",lease="0"`) {
		t.Errorf("metrics lack the time lag of lease 0:\n%s", body)
	}
	if total != 20 {
		t.Errorf("the partitions hold %d changes, want 20", total)
	}

	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("estimate ended with %v, want context.Canceled", err)
	}
	// In a pipe every interval is one JSON line.
	for i, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if !strings.HasPrefix(line, `{"time":`) || !strings.Contains(line, fmt.Sprintf(`"total_lag":%d`, total)) {
			t.Fatalf("line %d is not an estimate: %s", i+1, line)
		}
	}
	if _, err := http.Get("http://" + addr + "/metrics"); err == nil {
		t.Error("the metrics server still answers after the command returned")
	}
}

func TestServeMetrics_PortInUse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	addr, stop, err := serveMetrics(ctx, "127.0.0.1:0", newMetricsRegistry(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	_, _, err = serveMetrics(ctx, addr, newMetricsRegistry(), nil, nil)
	if err == nil || !strings.Contains(err.Error(), "serve metrics on "+addr) || hintOf(err) == "" {
		t.Fatalf("second server on %s: %v (hint %q), want an error with a hint", addr, err, hintOf(err))
	}
	stop()
	stop() // idempotent
}

func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

func feedReadAll(partitionID string) feed.ReadRequest {
	return feed.ReadRequest{PartitionID: partitionID, Start: feed.StartFrom{Kind: feed.StartBeginning}}
}
