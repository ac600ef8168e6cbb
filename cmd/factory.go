package cmd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/cfp-dev/cfp/internal/cosmos"
	"github.com/cfp-dev/cfp/internal/emulator"
	"github.com/cfp-dev/cfp/internal/emulator/auth"
	"github.com/cfp-dev/cfp/internal/render"
)

// factory is what every command gets: the IO streams, the logger, the global options, and the
// account as a function, so that help, completion and flag errors never dial or authenticate.
// It is built once per run in MainWithIO.
type factory struct {
	IO     *render.IOStreams
	Log    *slog.Logger
	Global *globalOptions
	// Getenv reads the environment (os.Getenv in Main, a map in tests).
	Getenv func(string) string
	// Now is the clock for ages and time specs.
	Now func() time.Time
	// Account opens the configured account on first use and returns the same account on
	// later calls; MainWithIO closes it when the command returns. Tests may replace it.
	Account func(ctx context.Context) (*cosmos.Account, error)

	accountMu sync.Mutex
	account   *cosmos.Account

	// leaseAcct is the separate lease account (--lease-endpoint, --lease-connection-string),
	// opened on first use by leaseAccount; nil when the lease container is in the monitored
	// account.
	leaseMu   sync.Mutex
	leaseAcct *cosmos.Account

	queryOnce sync.Once
	query     *render.Query
	queryErr  error

	// secrets are the values that must never be printed (account keys, connection strings);
	// filled when the account configuration is resolved.
	secretsMu sync.Mutex
	secrets   []string
}

// globalOptions are the flags every command accepts (spec/commands.md, "Global"). Values from
// the environment are applied after parsing, for flags the user did not set.
type globalOptions struct {
	Endpoint         string
	KeyFile          string
	Key              string
	ConnectionString string
	// ConnectionStringFile and LeaseConnectionStringFile name files that hold the connection
	// strings (setup reads them into ConnectionString and LeaseConnectionString).
	ConnectionStringFile      string
	LeaseConnectionStringFile string
	Auth                      string
	Local                     string
	Database                  string
	Container                 string
	LeaseContainer            string
	LeaseDatabase             string
	// The lease account, when the lease container lives in another account than the
	// monitored container (empty: the monitored account).
	LeaseEndpoint         string
	LeaseKeyFile          string
	LeaseConnectionString string
	LeaseAuth             string
	Processor             string
	LeaseIDPrefix         string
	Output                string
	JQ                    string
	LogLevel              string
	LogFormat             string
	NoColor               bool
	PreferredRegions      []string
	CAFile                string
	// RequestTimeout bounds each attempt of each request to Cosmos DB.
	RequestTimeout time.Duration
	// MaxRetries is how often a throttled (429) or unavailable (503) request is retried.
	MaxRetries int

	// sources says where each global flag's value came from: "flag", the environment
	// variable's name, or "" for the default.
	sources map[string]string
}

// source returns where the value of the global flag name came from: "flag", an environment
// variable's name, or "default".
func (g *globalOptions) source(name string) string {
	if s := g.sources[name]; s != "" {
		return s
	}
	return "default"
}

// origin names where the value of the global flag name came from for an error message: the
// flag ("--endpoint"), its environment variable, or a file flag.
func (g *globalOptions) origin(name string) string {
	switch s := g.source(name); s {
	case "flag", "default":
		return "--" + name
	default:
		return s
	}
}

// Flag names and the environment variables behind them.
var globalEnv = []struct{ flag, env string }{
	{"endpoint", "COSMOS_ENDPOINT"},
	{"connection-string", "COSMOS_CONNECTION_STRING"},
	{"local", "CFP_LOCAL"},
	{"database", "COSMOS_DATABASE"},
	{"container", "COSMOS_CONTAINER"},
	{"lease-container", "CFP_LEASE_CONTAINER"},
	{"lease-database", "CFP_LEASE_DATABASE"},
	{"lease-endpoint", "CFP_LEASE_ENDPOINT"},
	{"lease-connection-string", "CFP_LEASE_CONNECTION_STRING"},
	{"processor", "CFP_PROCESSOR"},
	{"log-level", "CFP_LOG_LEVEL"},
	{"ca-file", "CFP_CA_FILE"},
	{"request-timeout", "CFP_REQUEST_TIMEOUT"},
	{"max-retries", "CFP_MAX_RETRIES"},
}

const defaultLocalDir = ".cfp"

func (g *globalOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&g.Endpoint, "endpoint", "", "account endpoint `URL` (env COSMOS_ENDPOINT)")
	fs.StringVar(&g.KeyFile, "key-file", "", "read the account key from `FILE` (env COSMOS_KEY holds the key itself)")
	fs.StringVar(&g.Key, "key", "", "account `KEY` (avoid: it leaks into shell history and ps; use --key-file or COSMOS_KEY)")
	fs.StringVar(&g.ConnectionString, "connection-string", "", "account connection `STRING`: AccountEndpoint=...;AccountKey=...; (avoid: it leaks into shell history and ps; use --connection-string-file or env COSMOS_CONNECTION_STRING)")
	fs.StringVar(&g.ConnectionStringFile, "connection-string-file", "", "read the account connection string from `FILE`")
	enumFlag(fs, &g.Auth, "auth", "", "", "authentication: key (default when a key is given) or entra (Microsoft Entra ID)", "key", "entra")
	fs.StringVar(&g.Local, "local", "", "use the embedded emulator on `DIR`, in process (default .cfp; env CFP_LOCAL); write --local=DIR")
	fs.Lookup("local").NoOptDefVal = defaultLocalDir
	fs.StringVarP(&g.Database, "database", "d", "", "`DATABASE` of the monitored container (env COSMOS_DATABASE)")
	fs.StringVarP(&g.Container, "container", "c", "", "monitored `CONTAINER` (env COSMOS_CONTAINER)")
	fs.StringVar(&g.LeaseContainer, "lease-container", "leases", "lease `CONTAINER` (env CFP_LEASE_CONTAINER)")
	fs.StringVar(&g.LeaseDatabase, "lease-database", "", "`DATABASE` of the lease container (default: --database; env CFP_LEASE_DATABASE)")
	fs.StringVar(&g.LeaseEndpoint, "lease-endpoint", "", "endpoint `URL` of a separate lease account (default: the monitored account; env CFP_LEASE_ENDPOINT)")
	fs.StringVar(&g.LeaseKeyFile, "lease-key-file", "", "read the lease account's key from `FILE` (env CFP_LEASE_KEY holds the key itself)")
	fs.StringVar(&g.LeaseConnectionString, "lease-connection-string", "", "connection `STRING` of a separate lease account (avoid: it leaks into shell history and ps; use --lease-connection-string-file or env CFP_LEASE_CONNECTION_STRING)")
	fs.StringVar(&g.LeaseConnectionStringFile, "lease-connection-string-file", "", "read the connection string of a separate lease account from `FILE`")
	enumFlag(fs, &g.LeaseAuth, "lease-auth", "", "", "lease account authentication: key (default when a lease key is given) or entra", "key", "entra")
	fs.StringVarP(&g.Processor, "processor", "p", "", "processor `NAME`, the lease prefix (env CFP_PROCESSOR)")
	fs.StringVar(&g.LeaseIDPrefix, "lease-id-prefix", "", "the whole lease id `PREFIX` before \"..\", for leases written through another host name")
	enumFlag(fs, &g.Output, "output", "o", "", "output `FORMAT`: table on a terminal, JSON in a pipe", render.FormatNames...)
	fs.StringVar(&g.JQ, "jq", "", "filter JSON output with a jq `EXPRESSION`")
	enumFlag(fs, &g.LogLevel, "log-level", "", "warn", "log `LEVEL` on stderr (env CFP_LOG_LEVEL)", "debug", "info", "warn", "error")
	enumFlag(fs, &g.LogFormat, "log-format", "", "text", "log `FORMAT` on stderr", "text", "json")
	fs.BoolVar(&g.NoColor, "no-color", false, "disable colour (env NO_COLOR)")
	fs.StringVar(&g.CAFile, "ca-file", "", "also trust the PEM certificates in `FILE` for https endpoints (e.g. cfp emulator's emulator.pem; env CFP_CA_FILE)")
	fs.StringSliceVar(&g.PreferredRegions, "preferred-regions", nil, "`REGIONS` to read from, in order (e.g. \"West Europe,North Europe\")")
	fs.DurationVar(&g.RequestTimeout, "request-timeout", cosmos.DefaultRequestTimeout, "give up on one request to Cosmos DB after `DURATION` without an answer (env CFP_REQUEST_TIMEOUT)")
	fs.IntVar(&g.MaxRetries, "max-retries", cosmos.DefaultMaxRetries, "retry a throttled (429) or unavailable (503) request up to `N` times, waiting the service's retry-after or a growing backoff (env CFP_MAX_RETRIES)")
}

// applyEnv fills the options the user did not set on the command line from the environment.
// Invalid values from the environment are usage errors naming the variable.
func (g *globalOptions) applyEnv(fs *pflag.FlagSet, getenv func(string) string) error {
	g.sources = map[string]string{}
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Changed {
			g.sources[f.Name] = "flag"
		}
	})
	for _, fe := range globalEnv {
		f := fs.Lookup(fe.flag)
		if f == nil || f.Changed {
			continue
		}
		v := strings.TrimSpace(getenv(fe.env))
		if v == "" {
			continue
		}
		if err := f.Value.Set(v); err != nil {
			return briefUsageErrorf("invalid %s %q: %w", fe.env, v, err)
		}
		g.sources[fe.flag] = fe.env
	}
	if g.sources["key-file"] == "" && g.sources["key"] == "" && strings.TrimSpace(getenv("COSMOS_KEY")) != "" {
		g.sources["key"] = "COSMOS_KEY"
	}
	if g.sources["lease-key-file"] == "" && strings.TrimSpace(getenv("CFP_LEASE_KEY")) != "" {
		g.sources["lease-key"] = "CFP_LEASE_KEY"
	}
	if getenv("NO_COLOR") != "" {
		g.NoColor = true
	}
	return nil
}

// requireContainer checks that -d/--database and -c/--container are known (from flags or env).
func (f *factory) requireContainer() error {
	var missing []string
	if f.Global.Database == "" {
		missing = append(missing, "-d/--database (COSMOS_DATABASE)")
	}
	if f.Global.Container == "" {
		missing = append(missing, "-c/--container (COSMOS_CONTAINER)")
	}
	if len(missing) > 0 {
		return briefUsageErrorf("no container given: set %s", strings.Join(missing, " and "))
	}
	return nil
}

// requireProcessor checks that -p/--processor (or --lease-id-prefix) is known.
func (f *factory) requireProcessor() error {
	if f.Global.Processor == "" && f.Global.LeaseIDPrefix == "" {
		return briefUsageErrorf("no processor given: set -p/--processor (CFP_PROCESSOR) or --lease-id-prefix")
	}
	return nil
}

// leaseDatabase returns the lease container's database: --lease-database, else --database.
func (f *factory) leaseDatabase() string {
	if f.Global.LeaseDatabase != "" {
		return f.Global.LeaseDatabase
	}
	return f.Global.Database
}

// accountConfig is how to reach the account, resolved from flags, files and the environment.
// Exactly one of LocalDir, ConnectionString and Endpoint is set.
type accountConfig struct {
	Endpoint         string
	Key              string
	ConnectionString string
	// Auth is "key" or "entra" (Endpoint only).
	Auth             string
	LocalDir         string
	PreferredRegions []string
	// CAFile holds extra PEM certificates to trust ("" for the system's only).
	CAFile string
}

// openAccount is the default factory.Account: it resolves the configuration and opens the
// account once.
func (f *factory) openAccount(ctx context.Context) (*cosmos.Account, error) {
	f.accountMu.Lock()
	defer f.accountMu.Unlock()
	if f.account != nil {
		return f.account, nil
	}
	cfg, err := f.accountConfig()
	if err != nil {
		return nil, err
	}
	acct, err := f.open(ctx, cfg, false)
	if err != nil {
		return nil, err
	}
	f.account = acct
	return acct, nil
}

// leaseAccount returns the account of the lease container: the lease account when one is
// configured (--lease-endpoint, --lease-connection-string), opened on first use, else the
// monitored account (f.Account), with no second client.
func (f *factory) leaseAccount(ctx context.Context) (*cosmos.Account, error) {
	cfg, separate, err := f.leaseAccountConfig()
	if err != nil {
		return nil, err
	}
	if !separate {
		return f.Account(ctx)
	}
	f.leaseMu.Lock()
	defer f.leaseMu.Unlock()
	if f.leaseAcct != nil {
		return f.leaseAcct, nil
	}
	acct, err := f.open(ctx, cfg, true)
	if err != nil {
		return nil, fmt.Errorf("lease account: %w", err)
	}
	f.leaseAcct = acct
	return acct, nil
}

// monitoredHost returns the host name of the monitored account, which lease id prefixes embed
// (spec/leases.md §2) wherever the lease container lives. It opens the monitored account
// (no I/O for a remote one).
func (f *factory) monitoredHost(ctx context.Context) (string, error) {
	acct, err := f.Account(ctx)
	if err != nil {
		return "", err
	}
	return acct.Host(), nil
}

// open opens the account cfg describes, turning the errors a user can fix into usage errors
// and hints.
func (f *factory) open(ctx context.Context, cfg accountConfig, leasesOnly bool) (*cosmos.Account, error) {
	acct, err := cosmos.Open(ctx, cosmos.Config{
		LeasesOnly:       leasesOnly,
		Endpoint:         cfg.Endpoint,
		Key:              cfg.Key,
		ConnectionString: cfg.ConnectionString,
		Auth:             cfg.Auth,
		LocalDir:         cfg.LocalDir,
		PreferredRegions: cfg.PreferredRegions,
		CAFile:           cfg.CAFile,
		RequestTimeout:   f.Global.RequestTimeout,
		Retry:            cosmos.RetryOptions{MaxRetries: retriesOption(f.Global.MaxRetries)},
		Logger:           f.Log,
	})
	if err != nil {
		if errors.Is(err, cosmos.ErrNoAccount) {
			return nil, &UsageError{Err: errNoAccount, Brief: true}
		}
		var corrupt *emulator.CorruptError
		if errors.As(err, &corrupt) {
			return nil, corrupt
		}
		var locked *emulator.LockedError
		if errors.As(err, &locked) {
			if locked.Addr != "" {
				// A running `cfp emulator` serves it: say where to connect.
				return nil, &heldDirError{LockedError: locked}
			}
			return nil, withHint(err, "stop the other cfp, or serve the directory with `cfp emulator --data "+locked.Dir+"` and connect with --endpoint")
		}
		return nil, err
	}
	return acct, nil
}

// closeAccount closes the accounts that were opened (the monitored one and the lease account).
func (f *factory) closeAccount() error {
	f.leaseMu.Lock()
	var lerr error
	if f.leaseAcct != nil {
		lerr = f.leaseAcct.Close()
		f.leaseAcct = nil
	}
	f.leaseMu.Unlock()
	f.accountMu.Lock()
	defer f.accountMu.Unlock()
	if f.account == nil {
		return lerr
	}
	err := f.account.Close()
	f.account = nil
	return errors.Join(err, lerr)
}

// errNoAccount is the one-line usage error for a run with no account configured.
var errNoAccount = errors.New("no Cosmos DB account configured: set COSMOS_ENDPOINT (+ COSMOS_KEY) or COSMOS_CONNECTION_STRING, " +
	"pass --endpoint (+ --key-file) or --connection-string, or use --local for the embedded emulator")

// accountConfig resolves which account to use. Flags win over the environment; within each,
// --local, --connection-string and --endpoint exclude one another. It reads --key-file but
// dials nothing.
func (f *factory) accountConfig() (accountConfig, error) {
	g := f.Global
	var cfg accountConfig
	cfg.PreferredRegions = g.PreferredRegions
	cfg.CAFile = g.CAFile

	// Which source: the first of local, connection string, endpoint that is set (flags were
	// already checked for exclusivity by cobra; env values were applied for unset flags).
	var sources []string
	if g.Local != "" {
		sources = append(sources, "--local/CFP_LOCAL")
	}
	if g.ConnectionString != "" {
		sources = append(sources, "--connection-string/COSMOS_CONNECTION_STRING")
	}
	if g.Endpoint != "" {
		sources = append(sources, "--endpoint/COSMOS_ENDPOINT")
	}
	if len(sources) == 0 {
		return cfg, &UsageError{Err: errNoAccount, Brief: true}
	}
	if len(sources) > 1 {
		return cfg, briefUsageErrorf("more than one account configured (%s): use one", strings.Join(sources, ", "))
	}
	switch {
	case g.Local != "":
		cfg.LocalDir = g.Local
		return cfg, nil
	case g.ConnectionString != "":
		cfg.ConnectionString = g.ConnectionString
		f.addSecret(cfg.ConnectionString)
		if k := connectionStringKey(cfg.ConnectionString); k != "" {
			f.addSecret(k)
		}
		if _, err := cosmos.ParseConnectionString(cfg.ConnectionString); err != nil {
			return cfg, briefUsageErrorf("%s: %w", g.origin("connection-string"), err)
		}
		cfg.Auth = "key"
		return cfg, nil
	}
	if err := cosmos.CheckEndpoint(g.Endpoint); err != nil {
		return cfg, briefUsageErrorf("%s: %w", g.origin("endpoint"), err)
	}
	cfg.Endpoint = g.Endpoint
	key, err := f.accountKey()
	if err != nil {
		return cfg, err
	}
	cfg.Key = key
	switch {
	case g.Auth == "entra" && key != "":
		return cfg, briefUsageErrorf("--auth entra does not use an account key: drop --auth or the key")
	case g.Auth == "key" && key == "":
		return cfg, briefUsageErrorf("--auth key needs a key: set COSMOS_KEY or pass --key-file")
	case key != "":
		cfg.Auth = "key"
	case g.Auth == "" && loopbackEndpoint(cfg.Endpoint):
		// A local emulator (cfp emulator, or Microsoft's): it takes the well-known key, and
		// Entra ID would only fail slowly.
		cfg.Key, cfg.Auth = auth.WellKnownKey, "key"
		f.Log.Debug("no key given for a loopback endpoint: using the well-known emulator key")
	default:
		cfg.Auth = "entra"
	}
	return cfg, nil
}

// leaseAccountConfig resolves the lease account: --lease-endpoint or
// --lease-connection-string (or their variables), with the main account's rules (a flag wins
// over its variable; a loopback endpoint without a key takes the emulator's key; --lease-auth
// as --auth). separate is false when neither is set: the lease container is in the monitored
// account, and a lease key or --lease-auth without a lease account is a usage error rather
// than silently unused. It reads --lease-key-file but dials nothing.
func (f *factory) leaseAccountConfig() (cfg accountConfig, separate bool, err error) {
	g := f.Global
	envKey := strings.TrimSpace(f.Getenv("CFP_LEASE_KEY"))
	if g.LeaseEndpoint == "" && g.LeaseConnectionString == "" {
		switch {
		case g.LeaseKeyFile != "":
			return cfg, false, briefUsageErrorf("--lease-key-file needs a lease account: set --lease-endpoint (CFP_LEASE_ENDPOINT)")
		case envKey != "":
			return cfg, false, briefUsageErrorf("CFP_LEASE_KEY is set but no lease account is: set CFP_LEASE_ENDPOINT, or unset CFP_LEASE_KEY to keep the leases in the monitored account")
		case g.LeaseAuth != "":
			return cfg, false, briefUsageErrorf("--lease-auth needs a lease account: set --lease-endpoint (CFP_LEASE_ENDPOINT)")
		}
		return cfg, false, nil
	}
	if g.LeaseEndpoint != "" && g.LeaseConnectionString != "" {
		return cfg, true, briefUsageErrorf("more than one lease account configured (--lease-endpoint/CFP_LEASE_ENDPOINT, --lease-connection-string/CFP_LEASE_CONNECTION_STRING): use one")
	}
	if g.LeaseConnectionString != "" {
		switch {
		case g.LeaseKeyFile != "" || envKey != "":
			return cfg, true, briefUsageErrorf("--lease-connection-string holds the lease account's key: drop --lease-key-file or CFP_LEASE_KEY")
		case g.LeaseAuth == "entra":
			return cfg, true, briefUsageErrorf("--lease-auth entra does not use a connection string: use --lease-endpoint")
		}
		cfg.ConnectionString, cfg.Auth = g.LeaseConnectionString, "key"
		f.addSecret(cfg.ConnectionString)
		f.addSecret(connectionStringKey(cfg.ConnectionString))
		if _, err := cosmos.ParseConnectionString(cfg.ConnectionString); err != nil {
			return cfg, true, briefUsageErrorf("%s: %w", g.origin("lease-connection-string"), err)
		}
		return cfg, true, nil
	}
	if err := cosmos.CheckEndpoint(g.LeaseEndpoint); err != nil {
		return cfg, true, briefUsageErrorf("%s: %w", g.origin("lease-endpoint"), err)
	}
	cfg.Endpoint = g.LeaseEndpoint
	key := envKey
	if g.LeaseKeyFile != "" {
		b, err := os.ReadFile(g.LeaseKeyFile)
		if err != nil {
			return cfg, true, withHint(fmt.Errorf("read --lease-key-file: %w", err), "pass a file that holds only the lease account's key")
		}
		if key = strings.TrimSpace(string(b)); key == "" {
			return cfg, true, briefUsageErrorf("--lease-key-file %s is empty", g.LeaseKeyFile)
		}
	}
	f.addSecret(key)
	cfg.Key = key
	switch {
	case g.LeaseAuth == "entra" && key != "":
		return cfg, true, briefUsageErrorf("--lease-auth entra does not use a key: drop --lease-auth or the lease key")
	case g.LeaseAuth == "key" && key == "":
		return cfg, true, briefUsageErrorf("--lease-auth key needs a key: set CFP_LEASE_KEY or pass --lease-key-file")
	case key != "":
		cfg.Auth = "key"
	case g.LeaseAuth == "" && loopbackEndpoint(cfg.Endpoint):
		cfg.Key, cfg.Auth = auth.WellKnownKey, "key"
		f.Log.Debug("no key given for a loopback lease endpoint: using the well-known emulator key")
	default:
		cfg.Auth = "entra"
	}
	return cfg, true, nil
}

// loopbackEndpoint reports whether an endpoint URL names this machine (localhost, 127.0.0.0/8, ::1).
func loopbackEndpoint(endpoint string) bool {
	u, err := url.Parse(endpoint)
	if err != nil || u.Hostname() == "" {
		return false
	}
	return isLoopbackHost(u.Hostname())
}

// accountKey returns the key from --key-file, --key or COSMOS_KEY, in that order.
func (f *factory) accountKey() (string, error) {
	g := f.Global
	var key string
	switch {
	case g.KeyFile != "":
		b, err := os.ReadFile(g.KeyFile)
		if err != nil {
			return "", withHint(fmt.Errorf("read --key-file: %w", err), "pass a file that holds only the account key")
		}
		key = strings.TrimSpace(string(b))
		if key == "" {
			return "", briefUsageErrorf("--key-file %s is empty", g.KeyFile)
		}
	case g.Key != "":
		key = g.Key
	default:
		key = strings.TrimSpace(f.Getenv("COSMOS_KEY"))
	}
	f.addSecret(key)
	return key, nil
}

// retriesOption turns --max-retries into cosmos.RetryOptions.MaxRetries (where 0 means the
// default and -1 none).
func retriesOption(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

func connectionStringKey(cs string) string { return connectionStringField(cs, "AccountKey") }

// connectionStringField returns the value of name in an "A=...;B=...;" connection string.
func connectionStringField(cs, name string) string {
	for part := range strings.SplitSeq(cs, ";") {
		k, v, ok := strings.Cut(part, "=")
		if ok && strings.EqualFold(strings.TrimSpace(k), name) {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func (f *factory) addSecret(s string) {
	if len(s) < 4 {
		return
	}
	f.secretsMu.Lock()
	defer f.secretsMu.Unlock()
	f.secrets = append(f.secrets, s)
}

// redact masks every known secret in s, and whatever follows "AccountKey=" (up to a ';',
// a quote or a blank), known or not: a malformed connection string must not leak its key
// through a field that was parsed wrongly.
func (f *factory) redact(s string) string {
	f.secretsMu.Lock()
	defer f.secretsMu.Unlock()
	for _, sec := range f.secrets {
		s = strings.ReplaceAll(s, sec, "[REDACTED]")
	}
	return redactAccountKey(s)
}

var accountKeyParam = regexp.MustCompile(`(?i)(AccountKey\s*=)[^;"'\s]*`)

// redactAccountKey masks the value of every "AccountKey=" in s.
func redactAccountKey(s string) string {
	if !strings.Contains(strings.ToLower(s), "accountkey") {
		return s
	}
	return accountKeyParam.ReplaceAllString(s, "${1}[REDACTED]")
}

// outputFormat resolves -o for a command whose default off a terminal is pipe (usually
// render.FormatJSON or render.FormatJSONL). --jq implies JSON output (pipe, or FormatJSON when
// pipe is a table) and refuses -o table.
func (f *factory) outputFormat(pipe render.Format) (render.Format, error) {
	fmtv, err := render.ParseFormat(f.Global.Output)
	if err != nil {
		return "", usageErrorf("%w", err)
	}
	if f.Global.JQ != "" {
		switch fmtv {
		case render.FormatTable:
			return "", usageErrorf("--jq filters JSON output: drop -o table or --jq")
		case render.FormatAuto:
			if pipe == render.FormatTable {
				return render.FormatJSON, nil
			}
			return pipe, nil
		}
	}
	return fmtv.Resolve(f.IO.IsStdoutTTY, pipe), nil
}

// jqQuery returns the compiled --jq expression (nil without --jq), compiled once.
func (f *factory) jqQuery() (*render.Query, error) {
	f.queryOnce.Do(func() {
		if f.Global.JQ == "" {
			return
		}
		f.query, f.queryErr = render.CompileQuery(f.Global.JQ)
		if f.queryErr != nil {
			f.queryErr = &UsageError{Err: f.queryErr, Brief: true}
		}
	})
	return f.query, f.queryErr
}

// printer returns a printer for this run's -o and --jq, with pipe as the default format off a
// terminal.
func (f *factory) printer(pipe render.Format) (*render.Printer, error) {
	format, err := f.outputFormat(pipe)
	if err != nil {
		return nil, err
	}
	q, err := f.jqQuery()
	if err != nil {
		return nil, err
	}
	return render.NewPrinter(f.IO, format, q), nil
}

// warnf writes a warning line to stderr: "cfp: warning: ...".
func (f *factory) warnf(format string, args ...any) {
	msg := f.redact(fmt.Sprintf(format, args...))
	fmt.Fprintf(f.IO.ErrOut, "cfp: warning: %s\n", f.IO.StderrStyles().Warning.Render(render.Safe(oneLine(msg))))
}

// newLogger builds the run's logger on stderr from --log-level and --log-format. Attribute
// values that contain a secret are masked.
func (f *factory) newLogger() *slog.Logger {
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.Global.LogLevel)); err != nil {
		level = slog.LevelWarn
	}
	opts := &slog.HandlerOptions{
		Level: level,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Value.Kind() == slog.KindString {
				if s := a.Value.String(); s != "" {
					if r := f.redact(s); r != s {
						a.Value = slog.StringValue(r)
					}
				}
			}
			return a
		},
	}
	if f.Global.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(f.IO.ErrOut, opts))
	}
	return slog.New(slog.NewTextHandler(f.IO.ErrOut, opts))
}

// enumValue is a string flag restricted to a set of values; a bad value is a flag error (exit 2)
// that lists the allowed ones.
type enumValue struct {
	p       *string
	allowed []string
}

func (e *enumValue) String() string { return *e.p }
func (e *enumValue) Type() string   { return "string" }
func (e *enumValue) Set(s string) error {
	for _, a := range e.allowed {
		if strings.EqualFold(s, a) {
			*e.p = a
			return nil
		}
	}
	return fmt.Errorf("want one of %s", strings.Join(e.allowed, ", "))
}

// enumFlag defines a string flag that accepts only allowed (case-insensitive), lists them in its
// help, and completes them.
func enumFlag(fs *pflag.FlagSet, p *string, name, short, def, usage string, allowed ...string) {
	*p = def
	usage = fmt.Sprintf("%s {%s}", usage, strings.Join(allowed, "|"))
	fs.VarP(&enumValue{p: p, allowed: allowed}, name, short, usage)
}

// completeEnums registers shell completion for every enum flag of c (local and persistent).
func completeEnums(c *cobra.Command) {
	register := func(fl *pflag.Flag) {
		if ev, ok := fl.Value.(*enumValue); ok {
			vals := ev.allowed
			_ = c.RegisterFlagCompletionFunc(fl.Name, func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
				return vals, cobra.ShellCompDirectiveNoFileComp
			})
		}
	}
	c.LocalFlags().VisitAll(register)
	c.PersistentFlags().VisitAll(register)
}

// contextOf returns the command's context (never nil).
func contextOf(c *cobra.Command) context.Context {
	if ctx := c.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}
