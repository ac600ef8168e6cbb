package cmd

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cfp-dev/cfp/emulator"
	"github.com/cfp-dev/cfp/emulator/auth"
	"github.com/cfp-dev/cfp/internal/render"
)

// Defaults of `cfp emulator`.
const (
	defaultEmulatorAddr = "localhost:8081"
)

type emulatorOptions struct {
	f          *factory
	Data       string
	Addr       string
	Partitions int
	Fsync      bool

	// Consistency is the account's default consistency level ("" is Session).
	Consistency string
	// AcceptEmulatorTokens accepts the SDKs' Entra ID emulator tokens beyond loopback with the
	// well-known key.
	AcceptEmulatorTokens bool
	// Retention is how long the operation log keeps operations; 0 keeps them for ever.
	Retention time.Duration
	// MaxOrderBy bounds the results an ORDER BY page keeps in memory.
	MaxOrderBy int
	// AllowWellKnownKey lets the gateway serve a non-loopback address with the well-known key.
	AllowWellKnownKey bool

	// Key is the account key the gateway checks signatures against; "" is the well-known key.
	Key string
	// KeyFile is the --key-file the key came from ("" when it did not).
	KeyFile string

	// ready, when set, is called once the gateway is serving (tests).
	ready func(emulatorView)
	// listen, when set, replaces net.Listen (tests: a name that resolves to another interface).
	listen func(network, addr string) (net.Listener, error)
}

// emulatorView is what `cfp emulator` prints once it serves: a public contract
// (docs/scripting.md). A custom key is never printed: Key and ConnectionString are set only for
// the well-known emulator key, KeySource says where a custom key comes from.
type emulatorView struct {
	Type             string `json:"type"`
	Endpoint         string `json:"endpoint"`
	TLSEndpoint      string `json:"tls_endpoint"`
	CertFile         string `json:"cert_file"`
	Key              string `json:"key,omitempty"`
	KeySource        string `json:"key_source"`
	ConnectionString string `json:"connection_string,omitempty"`
	DataDir          string `json:"data_dir"`
	Partitions       int    `json:"partitions"`
	PID              int    `json:"pid"`
	// DataBytes is the size of the data directory's files when serving starts.
	DataBytes int64 `json:"data_bytes"`
	// Retention is how long the operation log keeps operations (all-versions feed), or
	// "forever".
	Retention string `json:"retention"`
	// ReadOnly is true when the disk was full at start: reads are served, writes answer 403.
	ReadOnly bool `json:"read_only"`
}

const emulatorLong = `Serve the embedded Cosmos DB emulator on a socket, so that several cfp processes (and any
Cosmos DB SDK) can share one data directory.

cfp emulator opens DIR (--data, default .cfp), binds --addr (default localhost:8081; use
127.0.0.1:0 for any free port), prints the endpoint, the key and a connection string, and
serves until interrupted (Ctrl-C or SIGTERM), then shuts down cleanly and exits 0.

[details]

The port answers both http:// and https:// (a connection that starts with a TLS handshake gets
TLS), so the official emulator's connection string works unchanged. The TLS certificate is
self-signed for localhost, 127.0.0.1 and ::1, generated once and kept in DIR as emulator.pem;
trust it in your client ('cfp emulator cert' prints it; GET /_explorer/emulator.pem serves it).

Output: a table on a terminal; in a pipe one JSON line of type "serving" with the fields
endpoint, tls_endpoint, cert_file, key, key_source, connection_string, data_dir, partitions
and pid.

The key is the well-known Cosmos DB emulator key unless --key-file (or --key) gives another;
a custom key is never printed, only where it comes from. A custom key must be at least 64
bytes once decoded, like a Cosmos DB account key (make one with
'head -c 64 /dev/urandom | base64 -w0'). COSMOS_KEY is ignored here, so that the key of a real
account in your environment never becomes the emulator's (and is never printed).

The gateway binds loopback by default. Binding another address with the well-known key, which
is public, is refused unless --allow-well-known-key says so (the address actually bound and the
decoded key decide); with any key it prints a warning, because anyone who can reach it and
knows the key can read and write the data.

While it runs, the data directory is locked: other commands reach the data with
--endpoint http://ADDR/ (or the connection string), not with --local=DIR. A new container gets the
physical partitions the service would give it, one per 10,000 RU/s of its throughput (one for
a small container), or --partitions N of them; split them with 'cfp emulator split' and merge
adjacent ones with 'cfp emulator merge'.`

const emulatorExample = `  # Serve .cfp on localhost:8081 with the well-known key
  cfp emulator

  # In another terminal: import sample data and tail it
  export COSMOS_ENDPOINT=http://localhost:8081/
  cfp import -d shop -c orders --create --partition-key-path /customerId < orders.jsonl
  cfp tail -d shop -c orders --from beginning

  # Any free port, a custom key, the connection string for a script
  cfp emulator --addr 127.0.0.1:0 --data /tmp/emu --key-file emu.key -o json`

func newEmulatorCmd(f *factory) *cobra.Command {
	opts := &emulatorOptions{f: f}
	c := &cobra.Command{
		Use:     "emulator [flags]",
		Short:   "Serve the embedded Cosmos DB emulator on a socket",
		Long:    emulatorLong,
		Example: emulatorExample,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if opts.Partitions < 0 || opts.Partitions > 256 {
				return usageErrorf("--partitions must be between 1 and 256 (0: per throughput), got %d", opts.Partitions)
			}
			if opts.Retention < 0 {
				return usageErrorf("--retention must not be negative, got %s", opts.Retention)
			}
			if opts.MaxOrderBy < 1 {
				return usageErrorf("--max-order-by must be at least 1, got %d", opts.MaxOrderBy)
			}
			if opts.Data == "" {
				return usageErrorf("--data must name a directory")
			}
			if err := opts.resolveKey(); err != nil {
				return err
			}
			if err := checkExposure(listenHost(opts.Addr), opts.Key == "", opts.AllowWellKnownKey); err != nil {
				return err
			}
			return runEmulator(contextOf(c), opts)
		},
	}
	fs := c.Flags()
	fs.StringVar(&opts.Data, "data", defaultLocalDir, "data `DIR` to serve (created if missing)")
	fs.StringVar(&opts.Addr, "addr", defaultEmulatorAddr, "`HOST:PORT` to listen on (port 0: any free port)")
	fs.IntVar(&opts.Partitions, "partitions", 0, "force `N` physical partitions (1-256) on every new container; 0: the service's count, one per 10,000 RU/s of the container's throughput (one for a small container)")
	fs.DurationVar(&opts.Retention, "retention", emulator.DefaultLogRetention, "how long the operation log keeps every operation for the all-versions feed (`DURATION`; 0: for ever); older ones are compacted away")
	fs.IntVar(&opts.MaxOrderBy, "max-order-by", emulator.DefaultMaxOrderByItems, "most results an ORDER BY query keeps in memory for one page (its offset plus its size, `N`), and matches of a DISTINCT query, groups of a GROUP BY, results of an OFFSET's first page; beyond, a 400")
	fs.BoolVar(&opts.AllowWellKnownKey, "allow-well-known-key", false, "serve a non-loopback --addr with the well-known emulator key (anyone who reaches it can read and write the data)")
	fs.BoolVar(&opts.Fsync, "fsync", false, "fsync every write before acknowledging it (survives a power loss; without it writes survive kill -9, and bulk loads are ~20x faster)")
	enumFlag(fs, &opts.Consistency, "consistency", "", "Session", "the account's default consistency `LEVEL` as reads of the account report it (every level reads the latest write)", "Strong", "BoundedStaleness", "Session", "ConsistentPrefix", "Eventual")
	fs.BoolVar(&opts.AcceptEmulatorTokens, "accept-emulator-tokens", false, "accept Microsoft Entra ID emulator tokens (a JWT with an exp, HMAC-SHA256 signed under the key; with the well-known key also the SDKs' emulator credential) with a custom key or beyond loopback too; on by default for loopback with the well-known key")
	c.AddCommand(newEmulatorCertCmd(f), newEmulatorSplitCmd(f), newEmulatorMergeCmd(f), newEmulatorFaultsCmd(f))
	return c
}

// resolveKey sets the gateway's key from --key-file or --key (never COSMOS_KEY) and checks it.
func (o *emulatorOptions) resolveKey() error {
	g := o.f.Global
	switch {
	case g.KeyFile != "":
		b, err := os.ReadFile(g.KeyFile)
		if err != nil {
			return withHint(fmt.Errorf("read --key-file: %w", err), "pass a file that holds only the emulator's base64 key")
		}
		o.Key, o.KeyFile = strings.TrimSpace(string(b)), g.KeyFile
		if o.Key == "" {
			return briefUsageErrorf("--key-file %s is empty", g.KeyFile)
		}
	case g.Key != "":
		o.Key = g.Key
	}
	// The decoded key decides: base64 wrapped over lines (a key file from base64 without -w0)
	// decodes to the same key as the one-line text.
	if isWellKnownKey(o.Key) {
		o.Key, o.KeyFile = "", ""
	}
	if o.Key == "" {
		return nil
	}
	o.f.addSecret(o.Key)
	if err := (emulator.Options{Dir: o.Data, Key: o.Key}).Validate(); err != nil {
		return briefUsageErrorf("the emulator key must be base64 (like a Cosmos DB account key): %w", err)
	}
	if n := decodedLen(o.Key); n < minEmulatorKeyBytes {
		return withHint(briefUsageErrorf("the emulator key is %d bytes decoded; a key must be at least %d, like a Cosmos DB account key", n, minEmulatorKeyBytes),
			"make one with: head -c 64 /dev/urandom | base64 -w0")
	}
	return nil
}

// minEmulatorKeyBytes is the decoded length of a Cosmos DB account key, the shortest custom key
// the gateway serves with.
const minEmulatorKeyBytes = 64

// decodedLen is the length of a valid base64 key once decoded.
func decodedLen(key string) int {
	b, err := base64.StdEncoding.DecodeString(key)
	if err != nil {
		return 0
	}
	return len(b)
}

// isWellKnownKey reports whether the base64 key decodes to the well-known emulator key, however
// it is spelled (line breaks included).
func isWellKnownKey(key string) bool {
	if key == auth.WellKnownKey {
		return true
	}
	b, err := base64.StdEncoding.DecodeString(key)
	wk, _ := base64.StdEncoding.DecodeString(auth.WellKnownKey)
	return err == nil && bytes.Equal(b, wk)
}

// checkExposure refuses to serve a non-loopback host with the well-known key, which anyone can
// look up, unless allowed.
func checkExposure(host string, wellKnown, allowed bool) error {
	if !wellKnown || allowed || isLoopbackHost(host) {
		return nil
	}
	shown := host
	if shown == "" {
		shown = "every interface"
	}
	return withHint(briefUsageErrorf("refusing to serve %s with the well-known emulator key: anyone who reaches it could read and write the data", shown),
		"give a key of your own with --key-file, bind a loopback address, or pass --allow-well-known-key")
}

// keySource says where the gateway's key comes from, for the view.
func (o *emulatorOptions) keySource() string {
	switch {
	case o.KeyFile != "":
		return "--key-file " + o.KeyFile
	case o.Key != "":
		return "--key"
	}
	return "well-known"
}

func runEmulator(ctx context.Context, opts *emulatorOptions) error {
	f := opts.f
	p, err := f.printer(render.FormatJSONL)
	if err != nil {
		return err
	}
	dir, err := filepath.Abs(opts.Data)
	if err != nil {
		return fmt.Errorf("data directory %s: %w", opts.Data, err)
	}
	listen := net.Listen
	if opts.listen != nil {
		listen = opts.listen
	}
	ln, err := listen("tcp", opts.Addr)
	if err != nil {
		return withHint(fmt.Errorf("listen: %w", err), "choose another address with --addr (127.0.0.1:0 picks a free port)")
	}
	defer ln.Close()
	// The address actually bound decides, not its name: a *.localhost name may resolve to
	// another interface.
	loopback := isLoopbackAddr(ln.Addr())
	if !loopback && opts.Key == "" && !opts.AllowWellKnownKey {
		return withHint(briefUsageErrorf("refusing to serve %s, bound to %s, with the well-known emulator key: anyone who reaches it could read and write the data", opts.Addr, ln.Addr()),
			"give a key of your own with --key-file, bind a loopback address, or pass --allow-well-known-key")
	}
	emu, err := emulator.Open(emulator.Options{Dir: dir, Key: opts.Key, Partitions: opts.Partitions, Logger: f.Log, Fsync: opts.Fsync,
		DefaultConsistency: opts.Consistency, MaxOrderByItems: opts.MaxOrderBy, LogRetention: logRetention(opts.Retention),
		// The SDKs' emulator credentials prove only that the client knows the key: accept them
		// where the well-known key is the point (loopback), or when asked.
		AcceptEmulatorTokens: opts.AcceptEmulatorTokens || (opts.Key == "" && loopback)})
	if err != nil {
		return explainLocked(fmt.Errorf("open emulator: %w", err))
	}
	defer emu.Close()
	tlsCfg, err := emu.TLSConfig()
	if err != nil {
		return err
	}
	// One port answers https:// and http:// alike, as the official emulator's clients expect TLS.
	ln = emulator.NewTLSOrPlainListener(ln, tlsCfg)
	host := listenHost(opts.Addr)
	if !loopback {
		f.warnf("serving on %s, which is not a loopback address: anyone who reaches it and knows the key can read and write the data", ln.Addr())
	}

	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	hostPort := net.JoinHostPort(endpointHost(host), port)
	v := emulatorView{
		Type:        "serving",
		Endpoint:    "http://" + hostPort + "/",
		TLSEndpoint: "https://" + hostPort + "/",
		CertFile:    emulator.CertPath(dir),
		KeySource:   opts.keySource(),
		DataDir:     dir,
		Partitions:  opts.Partitions,
		PID:         os.Getpid(),
		DataBytes:   dirBytes(dir),
		Retention:   retentionString(opts.Retention),
		ReadOnly:    emu.ReadOnly(),
	}
	if v.ReadOnly {
		f.warnf("the disk holding %s is full: serving it read-only (writes answer 403); free some space and restart", dir)
	}
	if opts.Key == "" {
		v.Key = auth.WellKnownKey
		v.ConnectionString = "AccountEndpoint=" + v.Endpoint + ";AccountKey=" + v.Key + ";"
	}
	if err := p.Print(ctx, v, func(t *render.Table) { fillEmulatorTable(t, f.IO, v, opts) }); err != nil {
		return err
	}
	if f.IO.IsStderrTTY {
		fmt.Fprintln(f.IO.ErrOut, "Serving; press Ctrl-C to stop.")
	}
	if opts.ready != nil {
		opts.ready(v)
	}

	f.Log.Info("emulator serving", "addr", ln.Addr().String(), "dir", dir)
	if err := emu.Serve(ctx, ln); err != nil {
		return err
	}
	if err := emu.Close(); err != nil {
		return err
	}
	fmt.Fprintf(f.IO.ErrOut, "cfp: emulator stopped; %s is free again\n", dir)
	// Stopping a server with Ctrl-C or SIGTERM is how it ends normally: exit 0, not 130.
	return &ExitError{Code: exitOK}
}

func fillEmulatorTable(t *render.Table, ios *render.IOStreams, v emulatorView, opts *emulatorOptions) {
	*t = *render.NewTable(ios, "setting", "value")
	t.Row("endpoint", v.Endpoint)
	t.Row("tls endpoint", v.TLSEndpoint+" (trust "+v.CertFile+")")
	switch {
	case v.Key != "":
		t.Row("key", v.Key)
		t.Row("connection string", v.ConnectionString)
	case opts.KeyFile != "":
		t.Row("key", "in "+opts.KeyFile)
		t.Row("connect with", "--endpoint "+v.Endpoint+" --key-file "+opts.KeyFile)
	default:
		t.Row("key", "as given with --key")
	}
	t.Row("data directory", v.DataDir)
	if v.Partitions == 0 {
		t.Row("partitions", "one per 10,000 RU/s of a new container's throughput")
	} else {
		t.Row("partitions", strconv.Itoa(v.Partitions))
	}
	t.Row("data size", humanBytes(v.DataBytes))
	t.Row("all-versions retention", v.Retention)
}

// logRetention maps --retention (0: for ever) to emulator.Options.LogRetention (negative: for
// ever).
func logRetention(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

func retentionString(d time.Duration) string {
	if d == 0 {
		return "forever"
	}
	return d.String()
}

// dirBytes is the total size of the regular files directly in dir (0 when unreadable).
func dirBytes(dir string) int64 {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	var n int64
	for _, en := range entries {
		if fi, err := en.Info(); err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
	}
	return n
}

// humanBytes renders a size for a terminal: 512 B, 1.5 MB (powers of 1024).
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %cB", float64(n)/float64(div), "KMGTPE"[exp])
}
