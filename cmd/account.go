package cmd

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/cfp-dev/cfp/internal/cosmos"
	"github.com/cfp-dev/cfp/internal/emulator/auth"
)

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
