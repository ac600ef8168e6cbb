package cmd

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/cfp-dev/cfp/emulator/auth"
	"github.com/cfp-dev/cfp/internal/cosmos"
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

// accountInputs are one account's settings as the flags, files and environment gave them:
// the monitored account's (--local, --connection-string, --endpoint, --key-file, --key,
// COSMOS_KEY, --auth) or the lease account's (the same flags with a "lease-" prefix and
// CFP_LEASE_KEY; no --local, no --lease-key).
type accountInputs struct {
	// lease is true for the lease account: its flags are named "lease-...", and messages say
	// "lease account".
	lease            bool
	Local            string
	ConnectionString string
	Endpoint         string
	KeyFile          string
	Key              string
	// EnvKey is the value of the key variable (COSMOS_KEY, CFP_LEASE_KEY).
	EnvKey string
	Auth   string
}

// flag returns the name of this account's flag for setting name ("endpoint" -> "lease-endpoint").
func (in accountInputs) flag(name string) string {
	if in.lease {
		return "lease-" + name
	}
	return name
}

// keyEnv names this account's key variable.
func (in accountInputs) keyEnv() string {
	if in.lease {
		return "CFP_LEASE_KEY"
	}
	return "COSMOS_KEY"
}

// monitoredInputs returns the monitored account's settings.
func (f *factory) monitoredInputs() accountInputs {
	g := f.Global
	envKey := strings.TrimSpace(f.Getenv("COSMOS_KEY"))
	if g.ignoreEnvKey {
		envKey = ""
	}
	return accountInputs{Local: g.Local, ConnectionString: g.ConnectionString, Endpoint: g.Endpoint,
		KeyFile: g.KeyFile, Key: g.Key, EnvKey: envKey, Auth: g.Auth}
}

// leaseInputs returns the lease account's settings.
func (f *factory) leaseInputs() accountInputs {
	g := f.Global
	envKey := strings.TrimSpace(f.Getenv("CFP_LEASE_KEY"))
	if g.ignoreEnvLeaseKey {
		envKey = ""
	}
	return accountInputs{lease: true, ConnectionString: g.LeaseConnectionString, Endpoint: g.LeaseEndpoint,
		KeyFile: g.LeaseKeyFile, Key: g.leaseKey, EnvKey: envKey, Auth: g.LeaseAuth}
}

// resolvedAccount is an account configuration as resolved once per run.
type resolvedAccount struct {
	cfg      accountConfig
	separate bool
	err      error
}

// accountConfig resolves which account to use, once per run (later calls return the first
// answer). Flags win over the environment; within each, --local, --connection-string and
// --endpoint exclude one another. It reads --key-file but dials nothing.
func (f *factory) accountConfig() (accountConfig, error) {
	f.resolvedMu.Lock()
	defer f.resolvedMu.Unlock()
	if f.monitored == nil && f.Global.contextErr != nil {
		f.monitored = &resolvedAccount{err: f.Global.contextErr}
	}
	if f.monitored == nil {
		cfg, err := f.resolveAccount(f.monitoredInputs())
		cfg.PreferredRegions = f.Global.PreferredRegions
		cfg.CAFile = f.Global.CAFile
		f.monitored = &resolvedAccount{cfg: cfg, err: err}
	}
	return f.monitored.cfg, f.monitored.err
}

// leaseAccountConfig resolves the lease account, once per run: --lease-endpoint or
// --lease-connection-string (or their variables), by the monitored account's rules
// (resolveAccount). separate is false when neither is set: the lease container is in the
// monitored account, and a lease key or --lease-auth without a lease account is a usage error
// rather than silently unused. It reads --lease-key-file but dials nothing.
func (f *factory) leaseAccountConfig() (cfg accountConfig, separate bool, err error) {
	f.resolvedMu.Lock()
	defer f.resolvedMu.Unlock()
	if f.lease == nil && f.Global.leaseContextErr != nil {
		f.lease = &resolvedAccount{separate: true, err: f.Global.leaseContextErr}
	}
	if f.lease == nil {
		cfg, separate, err := f.resolveLeaseAccount()
		f.lease = &resolvedAccount{cfg: cfg, separate: separate, err: err}
	}
	return f.lease.cfg, f.lease.separate, f.lease.err
}

func (f *factory) resolveLeaseAccount() (cfg accountConfig, separate bool, err error) {
	in := f.leaseInputs()
	if in.Endpoint == "" && in.ConnectionString == "" {
		switch {
		case in.KeyFile != "":
			return cfg, false, briefUsageErrorf("--lease-key-file needs a lease account: set --lease-endpoint (CFP_LEASE_ENDPOINT)")
		case in.EnvKey != "":
			return cfg, false, briefUsageErrorf("CFP_LEASE_KEY is set but no lease account is: set CFP_LEASE_ENDPOINT, or unset CFP_LEASE_KEY to keep the leases in the monitored account")
		case in.Auth != "":
			return cfg, false, briefUsageErrorf("--lease-auth needs a lease account: set --lease-endpoint (CFP_LEASE_ENDPOINT)")
		}
		return cfg, false, nil
	}
	cfg, err = f.resolveAccount(in)
	return cfg, true, err
}

// resolveAccount is the one set of rules for reaching an account, the monitored one or the
// lease account:
//   - exactly one of local, connection string and endpoint (a flag wins over its variable,
//     which applyEnv already did);
//   - a connection string holds the key: --auth entra is refused with it, and so is a lease
//     key (--lease-key-file, CFP_LEASE_KEY), which names only the lease account; COSMOS_KEY,
//     which other tools share, is ignored beside a connection string (--key and --key-file
//     are refused by the root's flag groups);
//   - an endpoint takes the key from the key file, --key or the key variable, in that order;
//     --auth entra refuses a key, --auth key needs one, a key means key auth, a loopback
//     endpoint without a key or --auth takes the emulator's well-known key, and anything else
//     is Microsoft Entra ID.
//
// It records the keys as secrets and dials nothing.
func (f *factory) resolveAccount(in accountInputs) (accountConfig, error) {
	g := f.Global
	var cfg accountConfig
	var sources []string
	for _, s := range []struct{ value, flag string }{
		{in.Local, "local"}, {in.ConnectionString, "connection-string"}, {in.Endpoint, "endpoint"},
	} {
		if s.value != "" {
			sources = append(sources, "--"+in.flag(s.flag)+"/"+envOf(in.flag(s.flag)))
		}
	}
	noun := "account"
	if in.lease {
		noun = "lease account"
	}
	if len(sources) == 0 {
		return cfg, &UsageError{Err: errNoAccount, Brief: true}
	}
	if len(sources) > 1 {
		return cfg, briefUsageErrorf("more than one %s configured (%s): use one", noun, strings.Join(sources, ", "))
	}
	switch {
	case in.Local != "":
		cfg.LocalDir = in.Local
		return cfg, nil
	case in.ConnectionString != "":
		switch {
		case in.lease && (in.KeyFile != "" || in.EnvKey != ""):
			return cfg, briefUsageErrorf("--lease-connection-string holds the lease account's key: drop --lease-key-file or CFP_LEASE_KEY")
		case in.Auth == "entra":
			return cfg, briefUsageErrorf("--%s entra does not use a connection string: use --%s", in.flag("auth"), in.flag("endpoint"))
		}
		cfg.ConnectionString, cfg.Auth = in.ConnectionString, "key"
		f.addSecret(cfg.ConnectionString)
		f.addSecret(connectionStringKey(cfg.ConnectionString))
		if _, err := cosmos.ParseConnectionString(cfg.ConnectionString); err != nil {
			return cfg, briefUsageErrorf("%s: %w", g.origin(in.flag("connection-string")), err)
		}
		return cfg, nil
	}
	if err := cosmos.CheckEndpoint(in.Endpoint); err != nil {
		return cfg, briefUsageErrorf("%s: %w", g.origin(in.flag("endpoint")), err)
	}
	cfg.Endpoint = in.Endpoint
	key, err := readKey(in)
	if err != nil {
		return cfg, err
	}
	f.addSecret(key)
	cfg.Key = key
	switch {
	case in.Auth == "entra" && key != "":
		if in.lease {
			return cfg, briefUsageErrorf("--lease-auth entra does not use a key: drop --lease-auth or the lease key")
		}
		return cfg, briefUsageErrorf("--auth entra does not use an account key: drop --auth or the key")
	case in.Auth == "key" && key == "":
		return cfg, briefUsageErrorf("--%s key needs a key: set %s or pass --%s", in.flag("auth"), in.keyEnv(), in.flag("key-file"))
	case key != "":
		cfg.Auth = "key"
	case in.Auth == "" && loopbackEndpoint(cfg.Endpoint):
		// A local emulator (cfp emulator, or Microsoft's): it takes the well-known key, and
		// Entra ID would only fail slowly.
		cfg.Key, cfg.Auth = auth.WellKnownKey, "key"
		f.Log.Debug("no key given for a loopback endpoint: using the well-known emulator key", "account", noun)
	default:
		cfg.Auth = "entra"
	}
	return cfg, nil
}

// readKey returns an account's key: from its key file, --key, or its key variable, in that
// order ("" for none).
func readKey(in accountInputs) (string, error) {
	switch {
	case in.KeyFile != "":
		b, err := os.ReadFile(in.KeyFile)
		if err != nil {
			whose := "the account key"
			if in.lease {
				whose = "the lease account's key"
			}
			return "", withHint(fmt.Errorf("read --%s: %w", in.flag("key-file"), err), "pass a file that holds only "+whose)
		}
		key := strings.TrimSpace(string(b))
		if key == "" {
			return "", briefUsageErrorf("--%s %s is empty", in.flag("key-file"), in.KeyFile)
		}
		return key, nil
	case in.Key != "":
		return in.Key, nil
	default:
		return in.EnvKey, nil
	}
}

// envOf returns the environment variable behind a global flag ("" for none).
func envOf(flag string) string {
	for _, fe := range globalEnv {
		if fe.flag == flag {
			return fe.env
		}
	}
	return ""
}

// loopbackEndpoint reports whether an endpoint URL names this machine (localhost, 127.0.0.0/8, ::1).
func loopbackEndpoint(endpoint string) bool {
	u, err := url.Parse(endpoint)
	if err != nil || u.Hostname() == "" {
		return false
	}
	return isLoopbackHost(u.Hostname())
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
