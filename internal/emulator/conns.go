package emulator

import "github.com/cfp-dev/cfp/internal/connlimit"

// Connection limits of a served emulator (Serve): package connlimit, shared with cfp's metrics
// server.
const (
	// DefaultMaxConns is the number of connections Serve keeps open at once when
	// Options.MaxConns is zero.
	DefaultMaxConns = 1024
)

// serveTimeouts are the http.Server timeouts of Serve.
type serveTimeouts = connlimit.Timeouts

var defaultServeTimeouts = connlimit.DefaultTimeouts
