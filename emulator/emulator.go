// Package emulator is cfp's embedded Cosmos DB NoSQL gateway: a bbolt-backed store (one file per
// data directory, durable across restarts) behind an http.Handler that speaks the REST subset
// described in docs/protocol-gateway.md — account, databases, containers, partition key ranges,
// items, patch and batch, the change feed in both modes, a SQL subset, time to live and
// master-key signatures — over several physical partitions routed by the effective partition
// key, with splits, merges and fault injection for tests. The rest of cfp reaches it only through azcosmos, either over a socket
// (Serve) or in process (Transport).
package emulator

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/cfp-dev/cfp/emulator/auth"
)

// File names inside a data directory.
const (
	dbFileName     = "cfp-emulator.db"
	holderFileName = "cfp-emulator.holder"
)

// ThroughputPerPartition is the provisioned throughput (RU/s) one physical partition serves:
// a new container gets one physical partition per ThroughputPerPartition of its throughput (its
// manual throughput, or its autoscale maximum), at least one, as the service gives it, unless
// Options.Partitions forces a count.
const ThroughputPerPartition = 10000

// maxPartitions bounds Options.Partitions.
const maxPartitions = 256

// lockTimeout is how long Open waits for the data directory's file lock.
const lockTimeout = 300 * time.Millisecond

// Options configures an Emulator. The zero value of every field except Dir is usable.
type Options struct {
	// Dir is the data directory; it is created if missing. Required.
	Dir string
	// Key is the base64 account key that request signatures are checked against.
	// Default: the well-known emulator key.
	Key string
	// Partitions, when set (1..256), forces the number of physical partitions of every new
	// container. Default (0): each new container gets the partitions the service would give
	// it, one per ThroughputPerPartition RU/s of its provisioned throughput (a container created
	// with 400 RU/s, or in a database with shared throughput, has one; with 40,000 RU/s, four).
	Partitions int
	// Logger receives request and storage logs. Default: a logger that discards everything.
	Logger *slog.Logger
	// Now is the clock used for _ts, If-Modified-Since and time-to-live expiry. Default: time.Now.
	// A request's x-ms-date is checked against the real clock, which its client signs with.
	Now func() time.Time
	// Fsync makes every acknowledged write wait for fsync, so it survives a power loss too.
	// Without it a write is acknowledged once the operating system holds it: it survives the
	// emulator process being killed (kill -9), not a machine crash. Default: false, which is
	// an order of magnitude faster for bulk loads.
	Fsync bool
	// DefaultConsistency is the account's default consistency level, as the account read
	// reports it (Strong, BoundedStaleness, Session, ConsistentPrefix or Eventual). The emulator
	// is one replica, so every level reads the latest write. Default: Session.
	DefaultConsistency string
	// AcceptEmulatorTokens makes the gateway accept Microsoft Entra ID emulator tokens: a JWT
	// with an exp, signed with HMAC-SHA256 under the account key, or, with the well-known key
	// only, the SDKs' emulator credentials' JWT signed with the key's text
	// (auth.VerifyEmulatorToken). Default: false; `cfp emulator` turns it on for loopback with
	// the well-known key.
	AcceptEmulatorTokens bool
	// TTLSweepInterval is how often a background sweeper deletes the items whose time to live
	// has passed (expired items are hidden from reads at once either way); negative turns the
	// sweeper off. Default: DefaultTTLSweepInterval.
	TTLSweepInterval time.Duration
	// MaxConns is the number of connections Serve keeps open at once; beyond it, the connections
	// that wait longest without a request in progress are closed. Default: DefaultMaxConns.
	MaxConns int
	// MaxOrderByItems bounds the results an ORDER BY query keeps in memory for one page: the
	// page's offset plus its size. A page deeper than that is refused with a 400. Default:
	// DefaultMaxOrderByItems.
	MaxOrderByItems int
	// LogRetention is how long the operation log keeps each operation for the all-versions
	// feed; the sweeper compacts older records (see CompactLog), and an all-versions read from
	// before them is refused. Negative keeps the log for ever. Default: DefaultLogRetention.
	LogRetention time.Duration
	// ScriptTimeout is how long a stored procedure or trigger may run; one that runs longer is
	// interrupted, its writes rolled back, and its request answered 408. Default:
	// DefaultScriptTimeout (the service's 5 seconds).
	ScriptTimeout time.Duration

	// simulateDiskFull makes Open meet a full disk (tests): the data file cannot be
	// initialised and the holder file is created but not written.
	simulateDiskFull bool
}

// writeToFullDisk does what os.WriteFile does on a full disk: it creates the file and fails
// to write it.
func writeToFullDisk(name string, _ []byte, perm os.FileMode) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	_ = f.Close()
	return &os.PathError{Op: "write", Path: name, Err: syscall.ENOSPC}
}

// DefaultMaxOrderByItems is Options.MaxOrderByItems when zero.
const DefaultMaxOrderByItems = 100000

// withDefaults returns a copy of o with the documented defaults applied.
func (o Options) withDefaults() Options {
	if o.Key == "" {
		o.Key = auth.WellKnownKey
	}
	if o.DefaultConsistency == "" {
		o.DefaultConsistency = "Session"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.TTLSweepInterval == 0 {
		o.TTLSweepInterval = DefaultTTLSweepInterval
	}
	if o.MaxConns == 0 {
		o.MaxConns = DefaultMaxConns
	}
	if o.LogRetention == 0 {
		o.LogRetention = DefaultLogRetention
	}
	if o.MaxOrderByItems == 0 {
		o.MaxOrderByItems = DefaultMaxOrderByItems
	}
	return o
}

// Validate reports whether the options can open an emulator. It never echoes the key.
func (o Options) Validate() error {
	if o.Dir == "" {
		return errors.New("emulator options: data directory is required")
	}
	if o.MaxConns < 0 {
		return fmt.Errorf("emulator options: max connections must not be negative, got %d", o.MaxConns)
	}
	if o.Partitions < 0 || o.Partitions > maxPartitions {
		return fmt.Errorf("emulator options: partitions must be between 1 and %d, got %d", maxPartitions, o.Partitions)
	}
	if o.DefaultConsistency != "" && !consistencyLevels[o.DefaultConsistency] {
		return fmt.Errorf("emulator options: unknown consistency level %q (want Strong, BoundedStaleness, Session, ConsistentPrefix or Eventual)", o.DefaultConsistency)
	}
	if o.Key != "" {
		if _, err := decodeKey(o.Key); err != nil {
			return err
		}
	}
	return nil
}

// consistencyLevels are the account consistency levels of Options.DefaultConsistency.
var consistencyLevels = map[string]bool{"Strong": true, "BoundedStaleness": true, "Session": true, "ConsistentPrefix": true, "Eventual": true}

// LockedError reports that another process holds the data directory.
type LockedError struct {
	Dir  string
	PID  int    // 0 when unknown
	Addr string // the address the holder serves on, "" when it does not serve
}

func (e *LockedError) Error() string {
	holder := "another process"
	if e.PID > 0 {
		holder = fmt.Sprintf("process %d", e.PID)
	}
	if e.Addr != "" {
		return fmt.Sprintf("data directory %s is held by %s serving on %s: connect to it with --endpoint http://%s/ instead of opening the directory", e.Dir, holder, e.Addr, e.Addr)
	}
	return fmt.Sprintf("data directory %s is held by %s: to share it, run `cfp emulator --data %s` once and connect the other commands with --endpoint", e.Dir, holder, e.Dir)
}

// holderInfo is the content of the holder file.
type holderInfo struct {
	PID  int    `json:"pid"`
	Addr string `json:"addr,omitempty"`
}

// Emulator is an open data directory with its gateway. It is safe for concurrent use.
type Emulator struct {
	opts   Options
	key    []byte
	db     *bolt.DB
	store  *store
	log    *slog.Logger
	faults faultInjector
	mux    *http.ServeMux // the routing table (routes.go)
	// timeouts are Serve's connection timeouts (tests shorten them).
	timeouts serveTimeouts

	mu     sync.Mutex
	addr   string
	closed bool

	certMu sync.Mutex
	cert   *tls.Certificate // the TLS certificate, loaded on first use

	stopSweep context.CancelFunc // nil when the sweeper is off
	sweeping  sync.WaitGroup
}

// Open opens (creating if needed) the data directory opts.Dir and takes its lock. When another
// process holds the directory it returns a *LockedError.
func Open(opts Options) (*Emulator, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	key, err := decodeKey(opts.Key)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("create data directory: %w", err)
	}
	path := filepath.Join(opts.Dir, dbFileName)
	if err := checkDataFile(opts.Dir, path); err != nil {
		return nil, err
	}
	db, st, err := openStore(opts, path)
	if err != nil {
		return nil, err
	}
	e := &Emulator{opts: opts, key: key, db: db, store: st, log: opts.Logger, timeouts: defaultServeTimeouts}
	e.mux = e.routes()
	e.faults.init()
	if err := e.writeHolder(); err != nil {
		if !st.readOnly {
			_ = db.Close()
			return nil, err
		}
		e.log.Warn("serving read-only without a holder file", "err", err)
	}
	if st.readOnly {
		e.log.Warn("the disk holding the data directory is full: serving it read-only", "dir", opts.Dir)
	}
	if opts.TTLSweepInterval > 0 && !st.readOnly {
		ctx, cancel := context.WithCancel(context.Background())
		e.stopSweep = cancel
		e.sweeping.Go(func() { e.sweep(ctx, opts.TTLSweepInterval) })
	}
	return e, nil
}

// openStore opens the bbolt file at path and its store. A file bbolt cannot read gives a
// *CorruptError, never a panic.
func openStore(opts Options, path string) (db *bolt.DB, st *store, err error) {
	defer func() {
		if err != nil && db != nil {
			_ = db.Close()
		}
	}()
	defer catchCorrupt(opts.Dir, &err)()
	db, err = bolt.Open(path, 0o600, &bolt.Options{
		Timeout:      lockTimeout,
		FreelistType: bolt.FreelistMapType,
		NoSync:       !opts.Fsync,
	})
	if errors.Is(err, berrors.ErrTimeout) {
		le := &LockedError{Dir: opts.Dir}
		if h, herr := readHolder(opts.Dir); herr == nil {
			le.PID, le.Addr = h.PID, h.Addr
		}
		return nil, nil, le
	}
	if errors.Is(err, berrors.ErrInvalid) || errors.Is(err, berrors.ErrChecksum) || errors.Is(err, berrors.ErrVersionMismatch) {
		return nil, nil, &CorruptError{Dir: opts.Dir, Reason: fmt.Sprintf("%s: %v", path, err)}
	}
	if errors.Is(err, syscall.ENOSPC) {
		if fi, serr := os.Stat(path); serr == nil && fi.Size() == 0 {
			_ = os.Remove(path) // created by this Open, never written: leave nothing behind
		}
		return nil, nil, fmt.Errorf("open emulator data %s: the disk is full, and a new data file cannot be created: %w", opts.Dir, err)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("open emulator data %s: %w", opts.Dir, err)
	}
	if opts.simulateDiskFull {
		err = fmt.Errorf("initialise emulator data: %w", syscall.ENOSPC)
	} else {
		st, err = newStore(db, opts.Dir, opts.Now)
	}
	if errors.Is(err, syscall.ENOSPC) {
		// A full disk: serve what is there, read-only.
		_ = db.Close()
		db = nil
		db, err = bolt.Open(path, 0o600, &bolt.Options{Timeout: lockTimeout, ReadOnly: true, FreelistType: bolt.FreelistMapType})
		if err != nil {
			return nil, nil, fmt.Errorf("open emulator data %s read-only: %w", opts.Dir, err)
		}
		st, err = openReadOnlyStore(db, opts.Dir, opts.Now)
	}
	if st != nil {
		st.logRetention = opts.LogRetention
	}
	return db, st, err
}

// errDiskFull is the answer to a write on an emulator that serves read-only because its disk
// is full, or that runs out of space while serving.
func errDiskFull(dir string) error {
	return &forbiddenError{msg: fmt.Sprintf("the cfp emulator cannot write to %s: its disk is full (it serves reads only); free some space and restart it", dir)}
}

// forbiddenError is answered with 403 Forbidden (substatus 0, which the SDKs do not retry).
type forbiddenError struct{ msg string }

func (e *forbiddenError) Error() string { return e.msg }

// ReadOnly reports whether the emulator serves its data read-only, because its disk was full
// when it opened: reads are served, writes answer 403.
func (e *Emulator) ReadOnly() bool { return e.store.readOnly }

// Dir returns the data directory.
func (e *Emulator) Dir() string { return e.opts.Dir }

// Close releases the data directory. Requests served after Close fail.
func (e *Emulator) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	e.mu.Unlock()
	if e.stopSweep != nil {
		e.stopSweep()
		e.sweeping.Wait()
	}
	_ = os.Remove(filepath.Join(e.opts.Dir, holderFileName))
	if err := e.db.Close(); err != nil {
		return fmt.Errorf("close emulator data: %w", err)
	}
	return nil
}

// SetServingAddr records the address (host:port) the emulator is served on, so that a second
// process opening the same directory is told where to connect. "" clears it.
func (e *Emulator) SetServingAddr(addr string) {
	e.mu.Lock()
	e.addr = addr
	e.mu.Unlock()
	if err := e.writeHolder(); err != nil {
		e.log.Warn("write holder file", "err", err)
	}
}

// ServingAddr returns the address recorded by SetServingAddr.
func (e *Emulator) ServingAddr() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.addr
}

func (e *Emulator) writeHolder() error {
	e.mu.Lock()
	h := holderInfo{PID: os.Getpid(), Addr: e.addr}
	e.mu.Unlock()
	b, err := json.Marshal(h)
	if err != nil {
		return fmt.Errorf("encode holder file: %w", err)
	}
	path := filepath.Join(e.opts.Dir, holderFileName)
	tmp := path + ".tmp"
	write := os.WriteFile
	if e.opts.simulateDiskFull {
		write = writeToFullDisk
	}
	if err := write(tmp, b, 0o644); err != nil {
		_ = os.Remove(tmp) // a full disk leaves the file created and empty
		return fmt.Errorf("write holder file: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write holder file: %w", err)
	}
	return nil
}

// decodeKey decodes a base64 account key; the error never contains the key.
func decodeKey(key string) ([]byte, error) {
	k, err := base64.StdEncoding.DecodeString(key)
	if err != nil || len(k) == 0 {
		return nil, errors.New("account key is not valid base64")
	}
	return k, nil
}

func readHolder(dir string) (holderInfo, error) {
	var h holderInfo
	b, err := os.ReadFile(filepath.Join(dir, holderFileName))
	if err != nil {
		return h, err
	}
	err = json.Unmarshal(b, &h)
	return h, err
}

// ShutdownGrace is how long requests in flight get to finish when Serve's context ends.
const ShutdownGrace = 5 * time.Second

// Serve serves the gateway on ln until ctx ends, recording ln's address as the serving address
// (for the data directory's holder file). A connection gets 10 s to send a request's headers,
// a minute more to send its body, a second to finish sending the body of a refused (401, 403)
// request, and two minutes between requests; at most Options.MaxConns are kept open, the
// longest-waiting silent, idle or refused ones closed first, never one serving a signed request
// (see connLimiter). At shutdown it stops accepting, waits for the requests in flight (at most
// ShutdownGrace) — not for idle or fresh connections, which http.Server would wait on for up to
// 5 s — then closes every connection.
func (e *Emulator) Serve(ctx context.Context, ln net.Listener) error {
	lim := newConnLimiter(e.opts.MaxConns)
	srv := &http.Server{
		Handler:           e.Handler(),
		ReadHeaderTimeout: e.timeouts.readHeader, // the body's deadline is set by bodyPhase
		IdleTimeout:       e.timeouts.idle,
		ErrorLog:          slog.NewLogLogger(e.log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
		ConnState:         lim.track,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(context.WithValue(ctx, connKey{}, c), limiterKey{}, lim)
		},
	}
	e.SetServingAddr(ln.Addr().String())
	defer e.SetServingAddr("")

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(&limitListener{Listener: ln, lim: lim}) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve emulator: %w", err)
	case <-ctx.Done():
	}

	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownGrace)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- srv.Shutdown(shutdownCtx) }()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var err error
wait:
	for {
		select {
		case err = <-done:
			break wait
		case <-tick.C:
			if !lim.busy() {
				cancel()
			}
		}
	}
	if err != nil && lim.busy() {
		e.log.Warn("requests still in flight at shutdown were cut off", "grace", ShutdownGrace)
	}
	_ = srv.Close()
	<-errc
	return nil
}

// Split replaces the live partition rangeID of container coll in database db by two children
// split at the midpoint of its EPK range, and returns the children's ids. The children inherit
// the parent's LSN, so the parent's change-feed continuation stays valid on both.
func (e *Emulator) Split(db, coll, rangeID string) ([]string, error) {
	children, err := e.store.split(db, coll, rangeID)
	if err != nil {
		return nil, fmt.Errorf("split range %s of %s/%s: %w", rangeID, db, coll, err)
	}
	e.log.Info("split partition", "db", db, "coll", coll, "range", rangeID, "children", children)
	return children, nil
}

// Merge replaces the adjacent live partitions rangeIDs (two or more) of container coll in
// database db by one new partition over their union, and returns its id. The new partition's
// parents are the merged ones and its LSN starts at the highest of theirs; items keep their
// LSNs, so a merged partition's continuation, read on the new partition with that partition's
// EPK range (x-ms-start-epk/x-ms-end-epk), returns exactly the changes it had not delivered.
// Readers of a merged partition get "partition gone" (410/1002).
func (e *Emulator) Merge(db, coll string, rangeIDs []string) (string, error) {
	merged, err := e.store.merge(db, coll, rangeIDs)
	if err != nil {
		return "", fmt.Errorf("merge ranges %s of %s/%s: %w", strings.Join(rangeIDs, ","), db, coll, err)
	}
	e.log.Info("merged partitions", "db", db, "coll", coll, "ranges", rangeIDs, "merged", merged)
	return merged, nil
}
