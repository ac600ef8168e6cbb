package cmd

import (
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/changefeed"
	"github.com/cfp-dev/cfp/emulator"
	"github.com/cfp-dev/cfp/internal/render"
)

// probe GETs url and returns the status code and body (0 when nothing answers).
func probe(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// freeAddr returns a loopback address with a port nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func waitProbe(t *testing.T, what, url string, code int, done <-chan error) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, body := probe(t, url)
		if got == code {
			return body
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s answers %d %q, want %d", what, url, got, body, code)
		}
		select {
		case err := <-done:
			t.Fatalf("%s: the command ended: %v", what, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func TestProcess_HealthEndpoints(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	procSeed(t, dir, 8)
	ios, _, _, errOut := render.Test()
	f := &factory{
		IO:     ios,
		Global: &globalOptions{Local: dir, Database: "shop", Container: "orders", LeaseContainer: "leases", Processor: "healthp"},
		Getenv: func(string) string { return "" },
		Now:    time.Now,
	}
	f.Log = f.newLogger()
	f.Account = f.openAccount
	defer f.closeAccount()
	addr := freeAddr(t)
	base := "http://" + addr

	type answer struct{ live, ready int }
	beforeRun := make(chan answer, 1)
	o := &processOptions{
		f: f, Instance: "h1", AcquireInterval: 50 * time.Millisecond, RenewInterval: 100 * time.Millisecond,
		Expiration: 5 * time.Second, PollInterval: 20 * time.Millisecond, StartFrom: "beginning", Mode: "latest",
		Events: eventsNone, CreateLeaseContainer: true, MetricsAddr: addr, ShutdownTimeout: 2 * time.Second,
		started: func(*changefeed.Processor) {
			// Bootstrapped, not running: no acquire cycle has finished.
			live, _ := probe(t, base+"/healthz")
			ready, _ := probe(t, base+"/readyz")
			beforeRun <- answer{live, ready}
		},
	}
	o.delegate.OnError, o.delegate.Timeout = "skip", time.Minute
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	if err := o.resolve(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- runProcess(ctx, o) }()

	select {
	case a := <-beforeRun:
		if a.live != http.StatusOK || a.ready != http.StatusServiceUnavailable {
			t.Errorf("before the first acquire cycle: /healthz %d, /readyz %d; want 200, 503", a.live, a.ready)
		}
	case err := <-done:
		t.Fatalf("process ended before it ran: %v\n%s", err, errOut)
	case <-time.After(30 * time.Second):
		t.Fatal("process did not bootstrap")
	}
	waitProbe(t, "running", base+"/readyz", http.StatusOK, done)
	if code, body := probe(t, base+"/healthz"); code != http.StatusOK {
		t.Errorf("running: /healthz %d %q, want 200", code, body)
	}

	// The account stops answering: every data-plane request fails with 503.
	acct, err := f.Account(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := acct.Emulator().InjectFaults(emulator.FaultRule{Status: http.StatusServiceUnavailable}); err != nil {
		t.Fatal(err)
	}
	body := waitProbe(t, "account unreachable", base+"/readyz", http.StatusServiceUnavailable, done)
	if !strings.Contains(body, "account unreachable") {
		t.Errorf("/readyz says %q, want it to name the unreachable account", body)
	}
	if code, _ := probe(t, base+"/healthz"); code != http.StatusOK {
		t.Errorf("account unreachable: /healthz %d, want 200 (the loop still runs)", code)
	}
	acct.Emulator().ClearFaults()
	waitProbe(t, "account back", base+"/readyz", http.StatusOK, done)

	cancel()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("process did not stop")
	}
	if code, _ := probe(t, base+"/readyz"); code != 0 {
		t.Errorf("/readyz answers %d after the command returned", code)
	}
}

// TestProcess_MetricsReportAStuckLease: a delegate that never finishes keeps its lease owned
// and renewed, but the lease's checkpoint does not move: after --stuck-after acquire cycles the
// host reports the lease stuck, and the others (nothing to read) idle.
func TestProcess_MetricsReportAStuckLease(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	procSeed(t, dir, 8)
	addr := freeAddr(t)
	// Lease 0's batch hangs; the other leases' batches succeed.
	r := procStart(t, "", append([]string{"--local=" + dir, "process", "-d", "shop", "-c", "orders", "-p", "stuckp",
		"--instance", "s1", "--create-lease-container", "--from", "beginning", "--metrics-addr", addr,
		"--events", "none", "--stuck-after", "3", "--shutdown-timeout", "200ms",
		"--exec", `if [ "$CFP_LEASE_TOKEN" = 0 ]; then sleep 30; fi; cat > /dev/null`}, procFastLeases...)...)
	var body string
	stuck := `cfp_process_lease_state{container="orders",database="shop",lease="0",owner="s1",processor="stuckp",state="stuck"} 1`
	procWaitFor(t, "lease 0 stuck", func() bool {
		_, body = probe(t, "http://"+addr+"/metrics")
		return strings.Contains(body, stuck)
	}, r)
	for _, lease := range []string{"1", "2", "3"} {
		idle := `cfp_process_lease_state{container="orders",database="shop",lease="` + lease + `",owner="s1",processor="stuckp",state="idle"} 1`
		if !strings.Contains(body, idle) {
			t.Errorf("metrics lack %q:\n%s", idle, body)
		}
	}
	r.stop(t)
}
