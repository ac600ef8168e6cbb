package cmd

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cfp-dev/cfp/emulator"
	"github.com/cfp-dev/cfp/emulator/auth"
)

// procServedOrders creates shop/orders (on /pk) with n documents in the served emulator.
func procServedOrders(t *testing.T, endpoint string, n int) {
	t.Helper()
	var in strings.Builder
	for i := range n {
		fmt.Fprintf(&in, `{"id":"doc-%d","pk":"key-%d"}`+"\n", i, i%7)
	}
	code, _, stderr := runCLI(t, context.Background(), in.String(), "--endpoint", endpoint, "import", "-d", "shop", "-c", "orders",
		"--create", "--partition-key-path", "/pk")
	if code != 0 {
		t.Fatalf("creating shop/orders: exit %d\n%s", code, stderr)
	}
}

// TestProcess_DeletedMonitoredContainerExitsSix: a host whose monitored container is deleted
// under it stops, releases its leases and exits 6 with one error line, instead of retrying the
// reads for ever while it looks healthy.
func TestProcess_DeletedMonitoredContainerExitsSix(t *testing.T) {
	t.Parallel()
	_, endpoint := serveEmulator(t)
	procServedOrders(t, endpoint, 8)
	r := procStart(t, "", append([]string{"--endpoint", endpoint, "process", "-d", "shop", "-c", "orders", "-p", "gone",
		"--instance", "g1", "--create-lease-container", "--from", "beginning", "--events", "jsonl"}, procFastLeases...)...)
	procWaitFor(t, "8 documents", func() bool { return procLines(r.out.String()) >= 8 }, r)

	cred, err := azcosmos.NewKeyCredential(auth.WellKnownKey)
	if err != nil {
		t.Fatal(err)
	}
	client, err := azcosmos.NewClientWithKey(endpoint, cred, nil)
	if err != nil {
		t.Fatal(err)
	}
	orders, _ := client.NewContainer("shop", "orders")
	if _, err := orders.Delete(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	var code int
	select {
	case code = <-r.code:
		r.code <- code // for the cleanup
	case <-time.After(30 * time.Second):
		t.Fatalf("cfp still runs 30s after its monitored container was deleted\nstderr:\n%s", r.err.String())
	}
	t.Logf("exited %s after the deletion", time.Since(deleted))
	if code != exitGone {
		t.Fatalf("exit code %d, want %d\nstderr:\n%s", code, exitGone, r.err.String())
	}
	stderr := r.err.String()
	var errLines []string
	for line := range strings.Lines(stderr) {
		if strings.HasPrefix(line, "cfp: ") {
			errLines = append(errLines, line)
		}
	}
	if len(errLines) != 1 || !strings.Contains(errLines[0], "monitored container is gone") {
		t.Errorf("want one error line saying the monitored container is gone, got %q\nstderr:\n%s", errLines, stderr)
	}
	evs := procEvents(t, strings.Join(filterEventLines(stderr), ""))
	if n := len(procEventsOf(evs, "released")); n == 0 || n != len(procEventsOf(evs, "acquired")) {
		t.Errorf("released %d of %d acquired leases", n, len(procEventsOf(evs, "acquired")))
	}
	permanent := false
	for _, e := range procEventsOf(evs, "error") {
		permanent = permanent || e.Permanent
	}
	if !permanent {
		t.Errorf("no error event marked permanent:\n%s", stderr)
	}
}

// filterEventLines keeps the events: not the logs (JSON too with --events jsonl), nor the error
// line cfp exits with.
func filterEventLines(stderr string) []string {
	var out []string
	for line := range strings.Lines(stderr) {
		if strings.HasPrefix(line, `{"type":`) {
			out = append(out, line)
		}
	}
	return out
}

// TestProcess_PermanentReadErrorsTurnReadyzRed: while every change-feed read answers 400 (a
// refused continuation), /readyz answers 503 saying which leases fail and
// cfp_process_failing_leases counts them; once reads work again, /readyz is 200.
func TestProcess_PermanentReadErrorsTurnReadyzRed(t *testing.T) {
	t.Parallel()
	emu, endpoint := serveEmulator(t)
	procServedOrders(t, endpoint, 8)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	r := procStart(t, "", append([]string{"--endpoint", endpoint, "process", "-d", "shop", "-c", "orders", "-p", "bad",
		"--instance", "b1", "--create-lease-container", "--from", "beginning", "--events", "none", "--metrics-addr", addr}, procFastLeases...)...)
	procWaitFor(t, "8 documents", func() bool { return procLines(r.out.String()) >= 8 }, r)
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	procWaitFor(t, "/readyz 200", func() bool { code, _ := get("/readyz"); return code == http.StatusOK }, r)

	if err := emu.InjectFaults(emulator.FaultRule{Status: http.StatusBadRequest, ChangeFeedOnly: true}); err != nil {
		t.Fatal(err)
	}
	var why string
	procWaitFor(t, "/readyz 503", func() bool {
		var code int
		code, why = get("/readyz")
		return code == http.StatusServiceUnavailable
	}, r)
	if !strings.Contains(why, "fail permanently") {
		t.Errorf("/readyz says %q, want the leases whose reads fail permanently", why)
	}
	if code, _ := get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz = %d, want 200: the host runs, it is not wedged", code)
	}
	procWaitFor(t, "cfp_process_failing_leases > 0", func() bool {
		_, body := get("/metrics")
		return procMetricSum(body, "cfp_process_failing_leases") > 0
	}, r)

	emu.ClearFaults()
	procWaitFor(t, "/readyz 200 again", func() bool { code, _ := get("/readyz"); return code == http.StatusOK }, r)
	if code := r.stop(t); code != exitOK {
		t.Fatalf("exit code %d, want 0\nstderr:\n%s", code, r.err.String())
	}
}
