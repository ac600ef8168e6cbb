// Package connlimit owns the connection limits of the metrics and probe server of `cfp process`
// and `cfp estimate` (--metrics-addr); the emulator's gateway has its own limiter, which also
// knows which connections sent signed requests. An idle or silent connection costs a file
// descriptor and nothing else, so the limits bound how long one is kept (Timeouts) and how many
// are kept at once (Limiter); a client that sends requests is never cut off by either.
package connlimit

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// Timeouts are the http.Server timeouts of a served connection.
type Timeouts struct {
	// ReadHeader is how long a connection has to send a request's headers (the first request's
	// from the moment it is accepted).
	ReadHeader time.Duration
	// Read bounds reading a whole request, body included.
	Read time.Duration
	// Idle is how long a keep-alive connection may wait for its next request.
	Idle time.Duration
}

// DefaultTimeouts give a connection 10 s to send a request's headers, a minute to send the
// whole request, and two minutes between requests.
var DefaultTimeouts = Timeouts{ReadHeader: 10 * time.Second, Read: time.Minute, Idle: 2 * time.Minute}

// Apply sets srv's ReadHeaderTimeout, ReadTimeout and IdleTimeout.
func (t Timeouts) Apply(srv *http.Server) {
	srv.ReadHeaderTimeout, srv.ReadTimeout, srv.IdleTimeout = t.ReadHeader, t.Read, t.Idle
}

// Limiter keeps at most max connections of one http.Server open. It learns each connection's
// state from the server's ConnState hook (Track); when a new connection would exceed max, its
// listener (Listener) closes the connections that have been waiting longest without a request in
// progress (new ones that have not sent their headers yet, idle keep-alive ones), so that a flood
// of silent connections cannot lock out a client that sends requests. When every connection is
// serving a request, the new connection is closed instead. It also tells whether any request is
// in flight (Busy, for a shutdown).
//
// Its mutex guards conns and active; it is never held while closing a connection.
type Limiter struct {
	max int

	now func() time.Time // time.Now; a test's clock

	mu     sync.Mutex
	conns  map[net.Conn]connEntry
	active int
}

type connEntry struct {
	state http.ConnState
	// since is when the connection began to wait: its accept for a new one, and for an idle one
	// the start of its last request (see Track).
	since time.Time
}

// New returns a Limiter of max connections (at least 1).
func New(max int) *Limiter {
	if max < 1 {
		max = 1
	}
	return &Limiter{max: max, now: time.Now, conns: map[net.Conn]connEntry{}}
}

// Track is the http.Server's ConnState hook.
func (l *Limiter) Track(c net.Conn, s http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	old, ok := l.conns[c]
	if ok && old.state == http.StateActive {
		l.active--
	}
	switch s {
	case http.StateClosed, http.StateHijacked:
		delete(l.conns, c)
		return
	case http.StateActive:
		l.active++
	}
	since := l.now()
	if s == http.StateIdle && ok && old.state == http.StateActive {
		// The server reports Idle after it wrote the answer, and on a busy machine that report can
		// come after the client read the answer and opened its next connection, which would then
		// look idle longer than this one. The request's start was stamped before any answer left.
		since = old.since
	}
	l.conns[c] = connEntry{state: s, since: since}
}

// Busy reports whether a request is in flight.
func (l *Limiter) Busy() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.active > 0
}

// makeRoom closes waiting connections, longest waiting first, until one more connection fits. It
// reports false when every open connection is serving a request.
func (l *Limiter) makeRoom() bool {
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

// Listener returns ln with an Accept that makes room in l for each connection it returns. Serve
// it with a server whose ConnState is l.Track.
func (l *Limiter) Listener(ln net.Listener) net.Listener {
	return &limitListener{Listener: ln, lim: l}
}

// limitListener is a net.Listener whose Accept makes room in its Limiter for each connection
// it returns.
type limitListener struct {
	net.Listener
	lim *Limiter
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
