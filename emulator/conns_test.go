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

	"github.com/cfp-dev/cfp/emulator/auth"
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
	e.timeouts = serveTimeouts{readHeader: 200 * time.Millisecond, read: 300 * time.Millisecond, idle: 300 * time.Millisecond}
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

// TestServe_HostileFloodKeepsServingSignedRequests holds 2,000 hostile connections open on a
// port served as `cfp emulator` serves it (TLS or plain, sniffed), more than the connection cap:
// silent ones, which never send a byte, and slow-body ones, which send unsigned headers and a
// trickle of a large body and never the rest. The server's header and body deadlines are an hour,
// so only the server's policy can free their slots: a refused request is not drained for longer
// than a second, a connection not serving a signed request is closed to make room, and closing
// one never waits on its protocol sniffing. A signed client must then be served while every
// hostile connection is still held open by its client. Time is reported, not asserted.
func TestServe_HostileFloodKeepsServingSignedRequests(t *testing.T) {
	// Not parallel: it holds thousands of file descriptors.
	silent, slow := 800, 1200
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if need := uint64(2*(silent+slow) + 500); lim.Cur < need {
		// Each connection costs two descriptors here (client and server side).
		scale := float64(lim.Cur-500) / float64(need-500)
		silent, slow = int(float64(silent)*scale), int(float64(slow)*scale)
		t.Logf("file-descriptor limit %d: %d silent and %d slow-body connections", lim.Cur, silent, slow)
	}
	e, err := Open(Options{Dir: t.TempDir(), Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	e.timeouts.readHeader, e.timeouts.read = time.Hour, time.Hour
	maxConns := e.opts.MaxConns // the default, 1024, unless the flood was scaled down
	if slow <= maxConns {
		maxConns = slow * 5 / 6
	}
	e.opts.MaxConns = maxConns
	cfg, err := e.TLSConfig()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Serve(ctx, NewTLSOrPlainListener(ln, cfg)) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()

	var held []net.Conn
	defer func() {
		for _, c := range held {
			_ = c.Close()
		}
	}()
	dial := func() net.Conn {
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			t.Fatalf("hostile connection %d: %v", len(held), err)
		}
		held = append(held, c)
		return c
	}
	for range silent {
		dial()
	}
	date := time.Now().UTC().Format(http.TimeFormat)
	head := fmt.Sprintf("POST /dbs HTTP/1.1\r\nHost: %s\r\nx-ms-date: %s\r\nAuthorization: type%%3Dmaster%%26ver%%3D1.0%%26sig%%3DAAAA\r\nContent-Length: 200000\r\n\r\n{\"id\":", addr, date)
	slowConns := make([]net.Conn, 0, slow)
	for range slow {
		c := dial()
		if _, err := io.WriteString(c, head); err != nil {
			t.Fatal(err)
		}
		slowConns = append(slowConns, c)
	}
	// Each slow-body connection has its 401 (or was closed to make room): from now on it holds
	// its slot only as long as the server lets it.
	for i, c := range slowConns {
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		line, err := bufio.NewReader(c).ReadString('\n')
		if err == nil && !strings.HasPrefix(line, "HTTP/1.1 401") {
			t.Fatalf("slow-body connection %d: %q, want a 401", i, line)
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("slow-body connection %d: no answer in 30 s", i)
		}
	}

	cred, _ := azcosmos.NewKeyCredential(auth.WellKnownKey)
	c, err := azcosmos.NewClientWithKey("http://"+addr+"/", cred, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rctx, rcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer rcancel()
	start := time.Now()
	if _, err := c.CreateDatabase(rctx, azcosmos.DatabaseProperties{ID: "flooded"}, nil); err != nil {
		t.Fatalf("signed request while %d silent and %d slow-body connections are held: %v", silent, slow, err)
	}
	first := time.Since(start)
	start = time.Now()
	db, _ := c.NewDatabase("flooded")
	if _, err := db.Read(rctx, nil); err != nil {
		t.Fatalf("second signed request: %v", err)
	}
	// Reported, not asserted: what a signed client waits while the flood is held.
	t.Logf("cap %d, %d silent + %d slow-body connections held: first signed request %s, next %s",
		maxConns, silent, slow, first.Round(time.Microsecond), time.Since(start).Round(time.Microsecond))
}

// TestServe_RefusedSlowBodyLosesItsConnection sends an unsigned request announcing a large body
// and sends only its start: the server answers 401 and must close the connection soon after,
// not drain the body for as long as a signed request's body may take (an hour here).
func TestServe_RefusedSlowBodyLosesItsConnection(t *testing.T) {
	t.Parallel()
	e, err := Open(Options{Dir: t.TempDir(), Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	e.timeouts.read = time.Hour
	addr := serveForTest(t, e)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	date := time.Now().UTC().Format(http.TimeFormat)
	fmt.Fprintf(c, "POST /dbs HTTP/1.1\r\nHost: %s\r\nx-ms-date: %s\r\nAuthorization: type%%3Dmaster%%26ver%%3D1.0%%26sig%%3DAAAA\r\nContent-Length: 200000\r\n\r\n{\"id\":", addr, date)
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 401") {
		t.Fatalf("unsigned request: %q %v, want a 401", line, err)
	}
	waitClosed(t, c, "a refused request whose body never comes")
}

// TestServe_FloodNeverClosesASignedRequestInProgress starts a signed request whose body is
// still coming on a connection that already served a signed request, floods the server with
// more silent connections than its cap, then sends the rest of the body: the connection must not
// have been closed to make room (the flood's own connections are closed instead).
func TestServe_FloodNeverClosesASignedRequestInProgress(t *testing.T) {
	t.Parallel()
	e, err := Open(Options{Dir: t.TempDir(), Partitions: 1, MaxConns: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	e.timeouts.readHeader = time.Hour
	addr := serveForTest(t, e)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	signed := func(method, path, body string) (*http.Request, string) {
		t.Helper()
		req, _ := http.NewRequest(method, "http://"+addr+path, strings.NewReader(body))
		if err := SignRequest(req, ""); err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n", method, path, addr, len(body))
		for k := range req.Header {
			fmt.Fprintf(&b, "%s: %s\r\n", k, req.Header.Get(k))
		}
		b.WriteString("\r\n")
		return req, b.String()
	}
	// A first signed request: the connection has shown it has the key.
	req, head := signed(http.MethodGet, "/", "")
	if _, err := io.WriteString(c, head); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()

	const body = `{"id":"during-the-flood"}`
	req, head = signed(http.MethodPost, "/dbs", body)
	if _, err := io.WriteString(c, head+body[:5]); err != nil {
		t.Fatal(err)
	}
	var flood []net.Conn
	defer func() {
		for _, f := range flood {
			_ = f.Close()
		}
	}()
	for range 64 {
		f, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		flood = append(flood, f)
	}
	// A later connection is accepted after the flood's (one listener, in order): once it is
	// answered, the flood has been accepted and room made for it.
	r, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
	if err := SignRequest(r, ""); err != nil {
		t.Fatal(err)
	}
	r.Close = true
	if resp, err := http.DefaultClient.Do(r); err != nil {
		t.Fatal(err)
	} else {
		_ = resp.Body.Close()
	}
	if _, err := io.WriteString(c, body[5:]); err != nil {
		t.Fatalf("the signed request in progress lost its connection to the flood: %v", err)
	}
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err = http.ReadResponse(br, req)
	if err != nil {
		t.Fatalf("the signed request in progress lost its connection to the flood: %v", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Errorf("signed request during the flood: %d, want 201", resp.StatusCode)
	}
}

// fakeConn is a connection from a given remote address that records its closing.
type fakeConn struct {
	net.Conn
	remote net.Addr
	closed bool
}

func (c *fakeConn) RemoteAddr() net.Addr { return c.remote }
func (c *fakeConn) Close() error         { c.closed = true; return nil }

// TestConnLimiter_AddressBeyondItsSharePaysWithItsOwnConnections floods a limiter from one LAN
// address: once the limiter is full, each of its new connections closes one of its own, as it
// holds more than its share (an eighth of the cap), so another address's waiting connection,
// the longest waiting of all, survives the flood. Loopback
// addresses have no share: every local client is 127.0.0.1.
func TestConnLimiter_AddressBeyondItsSharePaysWithItsOwnConnections(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		flooder, other string
		otherSurvives  bool
	}{
		{"10.0.0.1", "10.0.0.2", true},
		{"127.0.0.1", "127.0.0.1", false}, // one address: the longest waiting goes first
	} {
		lim := newConnLimiter(16)
		conn := func(ip string) *fakeConn {
			c := &fakeConn{remote: &net.TCPAddr{IP: net.ParseIP(ip), Port: 40000}}
			if !lim.makeRoom(c) {
				t.Fatalf("%s: no room made", ip)
			}
			lim.track(c, http.StateNew)
			return c
		}
		other := conn(tc.other)
		var flood []*fakeConn
		for range 100 {
			flood = append(flood, conn(tc.flooder))
		}
		if other.closed == tc.otherSurvives {
			t.Errorf("flood from %s: the waiting connection of %s closed = %v, want %v", tc.flooder, tc.other, other.closed, !tc.otherSurvives)
		}
		open := 0
		for _, c := range flood {
			if !c.closed {
				open++
			}
		}
		if want := 16 - 1; tc.otherSurvives && open != want {
			t.Errorf("flood from %s: %d of its connections open, want %d", tc.flooder, open, want)
		}
	}
}

// TestSniff_SilentConnectionClosedAfterSniffTimeout checks that the wait for a connection's
// first byte has its own deadline, shorter than the server's header deadline (an hour here).
func TestSniff_SilentConnectionClosedAfterSniffTimeout(t *testing.T) {
	t.Parallel()
	e, err := Open(Options{Dir: t.TempDir(), Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	e.timeouts.readHeader = time.Hour
	cfg, err := e.TLSConfig()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sl := NewTLSOrPlainListener(ln, cfg)
	sl.(*sniffListener).timeout = 200 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Serve(ctx, sl) }()
	defer func() { cancel(); <-done }()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	waitClosed(t, c, "a silent connection past the sniff timeout")
}
