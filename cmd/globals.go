package cmd

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/cfp-dev/cfp/internal/cosmos"
	"github.com/cfp-dev/cfp/internal/render"
)

// globalOptions are the flags every command accepts (docs/cli/cfp.md lists them). Values from
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
	Wide                  bool
	PreferredRegions      []string
	CAFile                string
	// RequestTimeout bounds each attempt of each request to Cosmos DB.
	RequestTimeout time.Duration
	// MaxRetries is how often a throttled (429) or unavailable (503) request is retried.
	MaxRetries int
	// Priority is --priority: "low" or "high" (priority-based execution), "" for none.
	Priority string
	// ThroughputBucket is --throughput-bucket, 1 to 5, 0 for none.
	ThroughputBucket int

	// Context is --context (env CFP_CONTEXT): the saved context to use (contexts.go).
	Context string

	// sources says where each global flag's value came from: "flag", the environment
	// variable's name, "context NAME", or "" for the default.
	sources map[string]string
	// contextName is the context in use ("" for none).
	contextName string
	// contextErr is a context whose key or connection string variable is unset: the error of
	// every command that needs the account.
	contextErr error
	// keySource says where the context's key comes from (cfp config); ignoreEnvKey says that
	// the context's endpoint does not take COSMOS_KEY.
	keySource    string
	ignoreEnvKey bool
	// leaseKey is the lease account's key from the context (its --lease-key-env variable);
	// leaseKeySource says where the context's lease key comes from, ignoreEnvLeaseKey that the
	// context's lease endpoint does not take CFP_LEASE_KEY.
	leaseKey          string
	leaseKeySource    string
	ignoreEnvLeaseKey bool
	// leaseContextErr is a context whose lease key variable is unset: the error of every
	// command that needs the lease account.
	leaseContextErr error
	// flags is the set addFlags defined the global flags on: applyEnv sets a global through it
	// when a command's deprecated spelling has the same name (process --max-retries).
	flags *pflag.FlagSet
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
	{"priority", "CFP_PRIORITY"},
	{"throughput-bucket", "CFP_THROUGHPUT_BUCKET"},
	{"context", "CFP_CONTEXT"},
}

const defaultLocalDir = ".cfp"

func (g *globalOptions) addFlags(fs *pflag.FlagSet) {
	g.flags = fs
	fs.StringVar(&g.Endpoint, "endpoint", "", "account endpoint `URL` (env COSMOS_ENDPOINT)")
	fs.StringVar(&g.KeyFile, "key-file", "", "read the account key from `FILE` (env COSMOS_KEY holds the key itself)")
	fs.StringVar(&g.Key, "key", "", "account `KEY` (avoid: it leaks into shell history and ps; use --key-file or COSMOS_KEY)")
	fs.StringVar(&g.ConnectionString, "connection-string", "", "account connection `STRING`: AccountEndpoint=...;AccountKey=...; (avoid: it leaks into shell history and ps; use --connection-string-file or env COSMOS_CONNECTION_STRING)")
	fs.StringVar(&g.ConnectionStringFile, "connection-string-file", "", "read the account connection string from `FILE`")
	enumFlag(fs, &g.Auth, "auth", "", "", "authentication: key (default when a key is given) or entra (Microsoft Entra ID)", "key", "entra")
	fs.StringVar(&g.Local, "local", "", "use the embedded emulator on `DIR`, in process (default .cfp; env CFP_LOCAL)")
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
	fs.BoolVar(&g.Wide, "wide", false, "show tables whole on a terminal: lease tokens and ranges unabbreviated, every column")
	fs.StringVar(&g.CAFile, "ca-file", "", "also trust the PEM certificates in `FILE` for https endpoints (e.g. cfp emulator's emulator.pem; env CFP_CA_FILE)")
	fs.StringSliceVar(&g.PreferredRegions, "preferred-regions", nil, "`REGIONS` to read from, in order (e.g. \"West Europe,North Europe\")")
	fs.DurationVar(&g.RequestTimeout, "request-timeout", cosmos.DefaultRequestTimeout, "give up on one request to Cosmos DB after `DURATION` without an answer (env CFP_REQUEST_TIMEOUT)")
	fs.IntVar(&g.MaxRetries, "max-retries", cosmos.DefaultMaxRetries, "retry a throttled (429) or unavailable (503) request up to `N` times, waiting the service's retry-after or a growing backoff (env CFP_MAX_RETRIES)")
	enumFlag(fs, &g.Priority, "priority", "", "", "priority level of every request (priority-based execution: low is throttled first when the account is over its RU/s; env CFP_PRIORITY)", "low", "high")
	fs.StringVar(&g.Context, "context", "", "use the saved context `NAME` (env CFP_CONTEXT; default: cfp config use-context)")
	fs.IntVar(&g.ThroughputBucket, "throughput-bucket", 0, "throughput bucket `N` (1-5) of every request, which caps the share of the account's RU/s they may use (0: none; env CFP_THROUGHPUT_BUCKET)")
}

// applyEnv fills the options the user did not set on the command line from the environment.
// Invalid values from the environment are usage errors naming the variable.
//
// Then the saved context (--context, CFP_CONTEXT, or the current one) fills what is still
// unset, unless applyContexts is false (the context commands themselves).
func (g *globalOptions) applyEnv(fs *pflag.FlagSet, getenv func(string) string, applyContexts bool) error {
	g.sources = map[string]string{}
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Changed {
			g.sources[f.Name] = "flag"
		}
	})
	// An account flag wins over every account variable, not only its own: --endpoint with
	// CFP_LOCAL exported is the endpoint, not two accounts.
	accountFromFlag := anyChanged(fs, accountFlags...)
	accountFromEnv := false
	for _, fe := range globalEnv {
		f := fs.Lookup(fe.flag)
		if f != nil && g.flags != nil {
			if _, old := f.Value.(*oldFlag); old {
				f = g.flags.Lookup(fe.flag)
			}
		}
		if f == nil || f.Changed {
			continue
		}
		v := strings.TrimSpace(getenv(fe.env))
		if v == "" {
			continue
		}
		if slices.Contains(accountFlags, fe.flag) {
			if accountFromFlag {
				continue
			}
			accountFromEnv = true
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
	if !applyContexts {
		return nil
	}
	return g.applyContext(getenv, accountFromFlag, accountFromEnv)
}

// setup runs before every command: it applies the environment to unset flags, builds the
// logger and warns about keys on the command line.
func (f *factory) setup(c *cobra.Command) error {
	if err := f.Global.applyEnv(c.Flags(), f.Getenv, c.Annotations[configSubcommand] == ""); err != nil {
		return err
	}
	if f.Global.NoColor {
		f.IO.ColorEnabled, f.IO.StderrColorEnabled = false, false
	}
	f.IO.Wide = f.Global.Wide
	f.Log = f.newLogger()
	if f.Global.RequestTimeout <= 0 {
		return briefUsageErrorf("--request-timeout must be positive, got %s", f.Global.RequestTimeout)
	}
	if f.Global.MaxRetries < 0 {
		return briefUsageErrorf("--max-retries must not be negative, got %d", f.Global.MaxRetries)
	}
	if b := f.Global.ThroughputBucket; b < 0 || b > 5 {
		return briefUsageErrorf("--throughput-bucket must be 1 to 5 (0: none), got %d", b)
	}
	if fl := c.Flags().Lookup("key"); fl != nil && fl.Changed {
		f.addSecret(f.Global.Key)
		f.warnf("--key puts the account key in shell history and the process list; use --key-file or COSMOS_KEY")
	}
	for _, cs := range []struct {
		flag, file, env string
		value, path     *string
	}{
		{"connection-string", "connection-string-file", "COSMOS_CONNECTION_STRING", &f.Global.ConnectionString, &f.Global.ConnectionStringFile},
		{"lease-connection-string", "lease-connection-string-file", "CFP_LEASE_CONNECTION_STRING", &f.Global.LeaseConnectionString, &f.Global.LeaseConnectionStringFile},
	} {
		if fl := c.Flags().Lookup(cs.flag); fl != nil && fl.Changed {
			f.addSecret(*cs.value)
			f.addSecret(connectionStringKey(*cs.value))
			f.warnf("--%s puts the account key in shell history and the process list; use --%s or %s", cs.flag, cs.file, cs.env)
		}
		if *cs.path == "" {
			continue
		}
		b, err := os.ReadFile(*cs.path)
		if err != nil {
			return withHint(fmt.Errorf("read --%s: %w", cs.file, err), "pass a file that holds only the connection string")
		}
		v := strings.TrimSpace(string(b))
		if v == "" {
			return briefUsageErrorf("--%s %s is empty", cs.file, *cs.path)
		}
		f.addSecret(v)
		f.addSecret(connectionStringKey(v))
		// The file wins over the variable (a flag wins over its variable).
		*cs.value = v
		f.Global.sources[cs.flag] = "--" + cs.file + " " + *cs.path
	}
	return nil
}
