package emulator

import (
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

// serveTimeouts are the http.Server timeouts of Serve.
type serveTimeouts struct {
	// readHeader is how long a connection has to send a request's headers (the first request's
	// from the moment it is accepted).
	readHeader time.Duration
	// read bounds reading a whole request, body included (bodies are at most 2 MB).
	read time.Duration
	// idle is how long a keep-alive connection may wait for its next request.
	idle time.Duration
}

var defaultServeTimeouts = serveTimeouts{readHeader: 10 * time.Second, read: time.Minute, idle: 2 * time.Minute}

// connLimiter keeps at most max connections of one http.Server open. It learns each connection's
// state from the server's ConnState hook; when a new connection would exceed max, it closes the
// connections that have been waiting longest without a request in progress (new ones that have
// not sent their headers yet, idle keep-alive ones), so that a flood of silent connections cannot
// lock out a client that sends requests. When every connection is serving a request, the new
// connection is closed instead. It also tells whether any request is in flight (shutdown).
//
// Its mutex guards conns and active; it is never held while closing a connection.
type connLimiter struct {
	max int

	mu     sync.Mutex
	conns  map[net.Conn]connEntry
	active int
}

type connEntry struct {
	state http.ConnState
	since time.Time // when the connection entered state
}

func newConnLimiter(max int) *connLimiter {
	return &connLimiter{max: max, conns: map[net.Conn]connEntry{}}
}

// track is the http.Server's ConnState hook.
func (l *connLimiter) track(c net.Conn, s http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if old, ok := l.conns[c]; ok && old.state == http.StateActive {
		l.active--
	}
	switch s {
	case http.StateClosed, http.StateHijacked:
		delete(l.conns, c)
		return
	case http.StateActive:
		l.active++
	}
	l.conns[c] = connEntry{state: s, since: time.Now()}
}

// busy reports whether a request is in flight.
func (l *connLimiter) busy() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.active > 0
}

// makeRoom closes waiting connections, longest waiting first, until one more connection fits. It
// reports false when every open connection is serving a request.
func (l *connLimiter) makeRoom() bool {
	l.mu.Lock()
	excess := len(l.conns) + 1 - l.max
	if excess <= 0 {
		l.mu.Unlock()
		return true
	}
	type waiting struct {
		c     net.Conn
		since time.Time
	}
	var idle []waiting
	for c, e := range l.conns {
		if e.state == http.StateNew || e.state == http.StateIdle {
			idle = append(idle, waiting{c, e.since})
		}
	}
	// Only the excess oldest are needed: a partial selection keeps a flood of accepts cheap.
	n := min(excess, len(idle))
	for i := range n {
		oldest := i
		for j := i + 1; j < len(idle); j++ {
			if idle[j].since.Before(idle[oldest].since) {
				oldest = j
			}
		}
		idle[i], idle[oldest] = idle[oldest], idle[i]
		// Forget it now: its StateClosed arrives later, and the next accept must not count it.
		delete(l.conns, idle[i].c)
	}
	l.mu.Unlock()
	for _, w := range idle[:n] {
		_ = w.c.Close()
	}
	return n == excess
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
		if ln.lim.makeRoom() {
			return c, nil
		}
		_ = c.Close()
	}
}
