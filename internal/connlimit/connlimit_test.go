package connlimit

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// serve serves ok at 127.0.0.1 with lim's cap and t's timeouts until the test ends.
func serve(tb testing.TB, lim *Limiter, t Timeouts) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }), ConnState: lim.Track}
	t.Apply(srv)
	go func() { _ = srv.Serve(lim.Listener(ln)) }()
	tb.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// get sends one kept-alive GET on c and reads the answer.
func get(c net.Conn, r *bufio.Reader, host string) error {
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	defer func() { _ = c.SetDeadline(time.Time{}) }()
	if _, err := fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", host); err != nil {
		return err
	}
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.Body.Close()
}

// closedByServer reports whether the server closed c (reading ends), waiting at most 20 s.
func closedByServer(c net.Conn, r *bufio.Reader) bool {
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, err := r.ReadByte()
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// TestLimiter_ClosesTheLongestIdleFirst: with a cap of 3, a fourth kept-alive connection closes
// the one idle longest; the others stay open and a request on each is still served.
func TestLimiter_ClosesTheLongestIdleFirst(t *testing.T) {
	t.Parallel()
	addr := serve(t, New(3), DefaultTimeouts)
	type conn struct {
		c net.Conn
		r *bufio.Reader
	}
	var conns []conn
	for i := range 4 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, conn{c, bufio.NewReader(c)})
		if err := get(c, conns[i].r, addr); err != nil {
			t.Fatalf("request on connection %d: %v", i+1, err)
		}
	}
	if !closedByServer(conns[0].c, conns[0].r) {
		t.Fatal("the connection idle longest is still open with 4 connections and a cap of 3")
	}
	for i, c := range conns[1:] {
		if err := get(c.c, c.r, addr); err != nil {
			t.Errorf("connection %d was closed too: %v", i+2, err)
		}
	}
}

// TestTimeouts_CloseAnIdleConnection: a kept-alive connection idle for the idle timeout is
// closed.
func TestTimeouts_CloseAnIdleConnection(t *testing.T) {
	t.Parallel()
	addr := serve(t, New(8), Timeouts{ReadHeader: 200 * time.Millisecond, Read: time.Second, Idle: 200 * time.Millisecond})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	if err := get(c, r, addr); err != nil {
		t.Fatal(err)
	}
	if !closedByServer(c, r) {
		t.Fatal("an idle kept-alive connection is still open after the idle timeout")
	}
}

// TestLimiter_OrdersIdleConnectionsByTheirLastRequest: the server reports a connection idle
// only after it wrote the answer, and on a busy machine that report can arrive after the client
// read the answer and used a second connection. The first connection is still the one idle
// longest, and it is the one closed. (Before, it was stamped when the late report came, and the
// second connection was closed: TestServeMetrics_CapsConnections failed under load that way.)
func TestLimiter_OrdersIdleConnectionsByTheirLastRequest(t *testing.T) {
	l := New(2)
	tick := time.Unix(0, 0)
	l.now = func() time.Time { tick = tick.Add(time.Second); return tick }
	a, aPeer := net.Pipe()
	b, bPeer := net.Pipe()
	defer aPeer.Close()
	defer bPeer.Close()
	l.Track(a, http.StateNew)
	l.Track(a, http.StateActive)
	l.Track(b, http.StateNew)
	l.Track(b, http.StateActive)
	l.Track(b, http.StateIdle)
	l.Track(a, http.StateIdle) // the late report
	if !l.makeRoom() {
		t.Fatal("no room made with two idle connections")
	}
	closed := func(c net.Conn) bool { return c.SetDeadline(time.Time{}) != nil }
	if !closed(a) || closed(b) {
		t.Fatalf("closed a=%v b=%v, want only a (its request came first)", closed(a), closed(b))
	}
}
