package emulator

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cfp-dev/cfp/internal/emulator/auth"
)

// serveForTest serves e on a loopback port until the test ends and returns the address.
func serveForTest(t *testing.T, e *Emulator) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return ln.Addr().String()
}

// TestServe_IdleFloodKeepsServingSignedRequests holds 10,000 silent loopback connections open
// and checks that a signed request is still served while they are held. The file-descriptor
// limit is lowered for the test to the flood plus 1,000, as on a machine with a small limit:
// without a connection cap the server's side of the flood alone would exhaust it and the signed
// request would hang.
func TestServe_IdleFloodKeepsServingSignedRequests(t *testing.T) {
	// Not parallel: it changes the process's file-descriptor limit.
	flood := 10000
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	const spare = 1000
	if lim.Max < uint64(flood+spare) {
		// A machine whose hard limit cannot hold the flood on the client side: scale it down.
		flood = int(lim.Max) - spare
		t.Logf("hard file-descriptor limit %d: flooding with %d connections", lim.Max, flood)
		if flood < 1000 {
			t.Skipf("hard file-descriptor limit %d is too small for a flood", lim.Max)
		}
	}
	small := syscall.Rlimit{Cur: uint64(flood + spare), Max: lim.Max}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &small); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim) }()

	e, err := Open(Options{Dir: t.TempDir(), Partitions: 1, MaxConns: 256})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	addr := serveForTest(t, e)

	held := make([]net.Conn, 0, flood)
	defer func() {
		for _, c := range held {
			_ = c.Close()
		}
	}()
	for len(held) < flood {
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			t.Fatalf("flood connection %d: %v", len(held), err)
		}
		held = append(held, c)
	}

	cred, _ := azcosmos.NewKeyCredential(auth.WellKnownKey)
	c, err := azcosmos.NewClientWithKey("http://"+addr+"/", cred, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	if _, err := c.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "flooded"}, nil); err != nil {
		t.Fatalf("signed request while %d idle connections are held: %v", flood, err)
	}
	// Reported, not asserted: the time a signed client needs while the flood is held.
	t.Logf("signed request served in %s while %d idle connections are held", time.Since(start).Round(time.Millisecond), flood)
}

// waitClosed reads from c until the server closes it; it fails the test when that takes more
// than a generous deadline.
func waitClosed(t *testing.T, c net.Conn, what string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("%s: the server kept the connection open", what)
	}
}

func TestServe_ClosesSilentAndSlowConnections(t *testing.T) {
	t.Parallel()
	e, err := Open(Options{Dir: t.TempDir(), Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	e.timeouts = serveTimeouts{ReadHeader: 200 * time.Millisecond, Read: 300 * time.Millisecond, Idle: 300 * time.Millisecond}
	addr := serveForTest(t, e)

	t.Run("idle keep-alive", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
		if err := SignRequest(req, ""); err != nil {
			t.Fatal(err)
		}
		if err := req.Write(c); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /: %d", resp.StatusCode)
		}
		waitClosed(t, c, "idle after a request")
	})
	t.Run("body never sent", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/dbs", nil)
		if err := SignRequest(req, ""); err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		fmt.Fprintf(&b, "POST /dbs HTTP/1.1\r\nHost: %s\r\nContent-Length: 100\r\n", addr)
		for k := range req.Header {
			fmt.Fprintf(&b, "%s: %s\r\n", k, req.Header.Get(k))
		}
		b.WriteString("\r\n{\"id\":")
		if _, err := io.WriteString(c, b.String()); err != nil {
			t.Fatal(err)
		}
		waitClosed(t, c, "a signed request whose body never comes")
	})
}

func TestServe_ClosesConnectionAfter401(t *testing.T) {
	t.Parallel()
	e, err := Open(Options{Dir: t.TempDir(), Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	addr := serveForTest(t, e)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/dbs", nil)
	req.Header.Set("x-ms-date", time.Now().UTC().Format(http.TimeFormat))
	req.Header.Set("Authorization", "type%3Dmaster%26ver%3D1.0%26sig%3DAAAA")
	if err := req.Write(c); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("bad signature: %d, want 401", resp.StatusCode)
	}
	waitClosed(t, c, "after a 401")
}
