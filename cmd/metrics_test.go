package cmd

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/changefeed/prom"
	"github.com/cfp-dev/cfp/internal/connlimit"
)

// keptAliveGet sends GET path on c (HTTP/1.1, kept alive) and reads the answer; it waits at most
// wait for it.
func keptAliveGet(c net.Conn, r *bufio.Reader, host, path string, wait time.Duration) (int, error) {
	_ = c.SetDeadline(time.Now().Add(wait))
	defer func() { _ = c.SetDeadline(time.Time{}) }()
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, host); err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// TestProcess_MetricsServerSurvivesIdleKeptAliveConnections runs `cfp process --metrics-addr`
// with at most 200 file descriptors (soft and hard limit: Go raises the soft one to the hard one), as a container with a small limit gives it, and holds 400 kept-alive
// connections to its metrics server, each after one /healthz: /healthz must still answer on
// every new connection. Without a connection cap the idle connections used up the process's file
// descriptors, the server could not accept any more, and /healthz stopped answering (Kubernetes
// restarts a healthy host).
func TestProcess_MetricsServerSurvivesIdleKeptAliveConnections(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	procSeed(t, dir, 4)
	addr := freeAddr(t)
	c := exec.Command("sh", "-c", `ulimit -Sn 200 && ulimit -Hn 200 && exec cfp "$@"`, "sh",
		"--local="+dir, "process", "-d", "shop", "-c", "orders", "-p", "fdp", "--instance", "h1",
		"--create-lease-container", "--events", "none", "--metrics-addr", addr)
	var stderr bytes.Buffer
	c.Stdout, c.Stderr = io.Discard, &stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- c.Wait() }()
	defer func() {
		_ = c.Process.Kill()
		<-exited
	}()
	waitProbe(t, "started", "http://"+addr+"/healthz", http.StatusOK, exited)

	const flood = 400
	held := make([]net.Conn, 0, flood)
	defer func() {
		for _, conn := range held {
			_ = conn.Close()
		}
	}()
	for i := range flood {
		conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		held = append(held, conn)
		// The bound only ends a test that fails: a server out of descriptors never answers.
		if code, err := keptAliveGet(conn, bufio.NewReader(conn), addr, "/healthz", 10*time.Second); err != nil || code != http.StatusOK {
			errs := stderr.String()
			t.Fatalf("/healthz on connection %d, with %d idle kept-alive connections held: %d, %v\nstderr ends:\n%s", i+1, i, code, err, errs[max(0, len(errs)-300):])
		}
	}
	if code, body := probe(t, "http://"+addr+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz with %d idle kept-alive connections held: %d %q, want 200", flood, code, body)
	}
}

// TestServeMetrics_ClosesIdleConnections checks that a kept-alive connection to the metrics
// server is closed once it has been idle for the idle timeout (shortened here), so that
// clients that keep connections open without using them do not hold the server's descriptors
// for ever. Without an idle timeout the server kept it open.
func TestServeMetrics_ClosesIdleConnections(t *testing.T) {
	t.Parallel()
	lim := serverLimits{timeouts: connlimit.Timeouts{ReadHeader: 200 * time.Millisecond, Read: time.Second, Idle: 200 * time.Millisecond}, maxConns: metricsMaxConns}
	h := prom.NewHealth(time.Now, 0)
	addr, stop, err := serveMetricsLimited(context.Background(), "127.0.0.1:0", newMetricsRegistry(), h, nil, lim)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r := bufio.NewReader(conn)
	if code, err := keptAliveGet(conn, r, addr, "/healthz", 10*time.Second); err != nil || code != http.StatusOK {
		t.Fatalf("/healthz: %d, %v", code, err)
	}
	// Idle now: the server closes the connection after 200 ms; 20 s means it never did.
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, err = io.Copy(io.Discard, r)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("the metrics server kept an idle kept-alive connection open")
	}
}

// TestServeMetrics_CapsConnections checks the cap itself: with more idle kept-alive
// connections than metricsMaxConns, the server closes the oldest and still answers a new one.
func TestServeMetrics_CapsConnections(t *testing.T) {
	t.Parallel()
	addr, stop, err := serveMetrics(context.Background(), "127.0.0.1:0", newMetricsRegistry(), prom.NewHealth(time.Now, 0), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	const extra = 10
	var held []net.Conn
	defer func() {
		for _, c := range held {
			_ = c.Close()
		}
	}()
	readers := map[net.Conn]*bufio.Reader{}
	for i := range metricsMaxConns + extra {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		readers[c] = bufio.NewReader(c)
		if code, err := keptAliveGet(c, readers[c], addr, "/healthz", 10*time.Second); err != nil || code != http.StatusOK {
			t.Fatalf("/healthz on connection %d: %d, %v", i+1, code, err)
		}
	}
	// The oldest extra connections were closed to make room: reading them ends at once.
	for i, c := range held[:extra] {
		_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
		_, err := readers[c].ReadByte()
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() || err == nil {
			t.Fatalf("connection %d of %d is still open, want the %d oldest closed (cap %d)", i+1, len(held), extra, metricsMaxConns)
		}
	}
	if code, body := probe(t, "http://"+addr+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz: %d %q, want 200", code, body)
	}
}
