package emulator

import (
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// Connection limits of a served emulator (Serve). An idle or silent connection costs a file
// descriptor and nothing else, so the limits bound how long one is kept and how many are kept at
// once; a client that sends requests is never cut off by either.
const (
	// DefaultMaxConns is the number of connections Serve keeps open at once when
	// Options.MaxConns is zero.
	DefaultMaxConns = 1024
)

// serveTimeouts are the connection timeouts of Serve, one per phase of a request.
type serveTimeouts struct {
	// readHeader is how long a connection has to send a request's headers (the first request's
	// from the moment it is accepted, TLS handshake included).
	readHeader time.Duration
	// read bounds reading a request's body, from the end of its headers (bodies are at most
	// 2 MB). Once the body is read, no read deadline runs while the request is served.
	read time.Duration
	// refused is how long the body of a refused request (401, 403) is drained before its
	// connection is closed: enough for a client that sent it whole to read its answer, not
	// for one that sends it slowly to hold its connection.
	refused time.Duration
	// idle is how long a keep-alive connection may wait for its next request.
	idle time.Duration
}

var defaultServeTimeouts = serveTimeouts{readHeader: 10 * time.Second, read: time.Minute, refused: time.Second, idle: 2 * time.Minute}

// connLimiter keeps at most max connections of one http.Server open. It learns each connection's
// state from the server's ConnState hook, and from the handler whether the connection has sent
// a signed request (trusted) and whether its current request is signed. When a new connection
// would exceed max, it closes a connection that has not earned its place: one that waits without
// a request in progress (a new one that has not sent its headers yet, an idle keep-alive one) or
// whose request is not (yet) known to be signed (refused, or an admin request whose body is still
// coming), those that never sent a signed request first, the longest waiting first. A connection
// serving a signed request is never closed for another, so that a flood of silent, slow or
// unauthenticated connections cannot lock out a client that has the key. When every connection
// is serving a signed request, the new connection is closed instead.
//
// Each address that is not loopback has a share of max (max/8): when the limiter is full, a new
// connection from an address that holds more than its share closes one of that address's own
// connections, when it has one to close, rather than another client's. Every local client comes from 127.0.0.1 (or ::1), so
// the share means nothing there; the preference for trusted connections is what protects a
// local client with the key from a local flood.
//
// It also tells whether any request is in flight (shutdown). Its mutex guards its fields; it is
// never held while closing a connection.
type connLimiter struct {
	max   int
	share int

	mu     sync.Mutex
	conns  map[net.Conn]*connEntry
	addrs  map[string]int // open connections by remote IP
	active int
}

type connEntry struct {
	state    http.ConnState
	since    time.Time // when it was accepted, or its last request started
	addr     string    // remote IP
	trusted  bool      // it has sent a request with a valid signature
	verified bool      // its current request has a valid signature
}

func newConnLimiter(n int) *connLimiter {
	return &connLimiter{max: n, share: max(n/8, 1), conns: map[net.Conn]*connEntry{}, addrs: map[string]int{}}
}

// remoteIP is the IP of c's peer, or its whole address when it has no host part.
func remoteIP(c net.Conn) string {
	a := c.RemoteAddr()
	if a == nil {
		return ""
	}
	if host, _, err := net.SplitHostPort(a.String()); err == nil {
		return host
	}
	return a.String()
}

// track is the http.Server's ConnState hook.
func (l *connLimiter) track(c net.Conn, s http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.conns[c]
	if !ok {
		if s != http.StateNew {
			return // closed by makeRoom, which forgot it
		}
		e = &connEntry{addr: remoteIP(c)}
		l.conns[c] = e
		l.addrs[e.addr]++
	}
	wasActive := e.state == http.StateActive
	if wasActive {
		l.active--
	}
	switch s {
	case http.StateClosed, http.StateHijacked:
		l.forget(c, e)
		return
	case http.StateActive:
		l.active++
		e.verified = false
	}
	if s == http.StateIdle && wasActive {
		// Idle counts from the request's start, as in internal/connlimit: the server's Idle
		// report can come after the client read the answer and opened another connection.
		e.state = s
		return
	}
	e.state, e.since = s, time.Now()
}

// forget drops c; l.mu is held.
func (l *connLimiter) forget(c net.Conn, e *connEntry) {
	delete(l.conns, c)
	if l.addrs[e.addr]--; l.addrs[e.addr] <= 0 {
		delete(l.addrs, e.addr)
	}
}

// verdict records whether c's current request carried a valid signature: a connection serving
// a signed request is never closed to make room.
func (l *connLimiter) verdict(c net.Conn, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, found := l.conns[c]; found {
		e.trusted = e.trusted || ok
		e.verified = ok
	}
}

// busy reports whether a request is in flight.
func (l *connLimiter) busy() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.active > 0
}

// evictable reports whether e may be closed to make room for another connection.
func (e *connEntry) evictable() bool {
	return e.state == http.StateNew || e.state == http.StateIdle || (e.state == http.StateActive && !e.verified)
}

// before reports whether e should be closed before o: one that never sent a signed request
// first, then the longest waiting.
func (e *connEntry) before(o *connEntry) bool {
	if e.trusted != o.trusted {
		return !e.trusted
	}
	return e.since.Before(o.since)
}

// makeRoom closes connections that have not earned their place (see connLimiter) until the new
// connection c fits: first one of c's own address's when that address holds its share and is
// not loopback, then any (connEntry.before). It reports false when no connection can be closed.
func (l *connLimiter) makeRoom(c net.Conn) bool {
	addr := remoteIP(c)
	l.mu.Lock()
	var victims []net.Conn
	// oldest returns the evictable connection to close first (of addr, unless addr is "").
	oldest := func(addr string) (net.Conn, *connEntry) {
		var vc net.Conn
		var ve *connEntry
		for oc, e := range l.conns {
			if e.evictable() && (addr == "" || e.addr == addr) && (ve == nil || e.before(ve)) {
				vc, ve = oc, e
			}
		}
		return vc, ve
	}
	evict := func(vc net.Conn, ve *connEntry) {
		if ve.state == http.StateActive {
			l.active--
		}
		// Forget it now: its StateClosed arrives later, and the next accept must not count it.
		l.forget(vc, ve)
		victims = append(victims, vc)
	}
	if ip := net.ParseIP(addr); ip != nil && !ip.IsLoopback() && l.addrs[addr] >= l.share && len(l.conns)+1 > l.max {
		if vc, ve := oldest(addr); ve != nil {
			evict(vc, ve)
		}
	}
	ok := true
	for len(l.conns)+1 > l.max {
		vc, ve := oldest("")
		if ve == nil {
			ok = false
			break
		}
		evict(vc, ve)
	}
	l.mu.Unlock()
	for _, vc := range victims {
		abortConn(vc)
	}
	return ok
}

// abortConn closes c at once: a connection being closed for another must not hold up the accept
// loop (a TLS connection's Close would try to send close_notify, see sniffConn.Abort).
func abortConn(c net.Conn) {
	if a, ok := c.(interface{ Abort() error }); ok {
		_ = a.Abort()
		return
	}
	_ = c.Close()
}

// limitListener is a net.Listener whose Accept makes room in its connLimiter for each connection
// it returns.
type limitListener struct {
	net.Listener
	lim *connLimiter
}

func (ln *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := ln.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if ln.lim.makeRoom(c) {
			return c, nil
		}
		abortConn(c)
	}
}

// limiterKey is the request context key of the serving connLimiter (Serve's ConnContext).
type limiterKey struct{}

// bodyPhase starts the body phase of r: its body must arrive within timeouts.read, after which
// no read deadline runs while r is served (the server's background read of the connection must
// not cancel a long request). A request without a body has no body phase. It does nothing on a
// connection Serve does not serve (Transport).
func (e *Emulator) bodyPhase(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	if r.Body == nil || r.Body == http.NoBody {
		_ = rc.SetReadDeadline(time.Time{})
		return
	}
	if rc.SetReadDeadline(time.Now().Add(e.timeouts.read)) != nil {
		return
	}
	r.Body = &phaseBody{ReadCloser: r.Body, done: func() { _ = rc.SetReadDeadline(time.Time{}) }}
}

// phaseBody is a request body that calls done when it has been read to its end.
type phaseBody struct {
	io.ReadCloser
	done func()
}

func (b *phaseBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && b.done != nil {
		b.done()
		b.done = nil
	}
	return n, err
}

// verdict tells the connection limiter whether r carried a valid signature. A refused request
// (ok false) gets timeouts.refused more to send the rest of its body, which the server drains
// before closing the connection: a client that sent it whole reads its 401, one that sends it
// slowly does not hold its connection.
func (e *Emulator) verdict(w http.ResponseWriter, r *http.Request, ok bool) {
	c, _ := r.Context().Value(connKey{}).(net.Conn)
	lim, _ := r.Context().Value(limiterKey{}).(*connLimiter)
	if c != nil && lim != nil {
		lim.verdict(c, ok)
	}
	if !ok {
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(e.timeouts.refused))
	}
}
