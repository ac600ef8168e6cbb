package cmd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/cfp-dev/cfp/emulator"
	"github.com/cfp-dev/cfp/internal/account"
	"github.com/cfp-dev/cfp/internal/cosmos"
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
	Account func(ctx context.Context) (*account.Account, error)

	accountMu sync.Mutex
	account   *account.Account

	// leaseAcct is the separate lease account (--lease-endpoint, --lease-connection-string),
	// opened on first use by leaseAccount; nil when the lease container is in the monitored
	// account.
	leaseMu   sync.Mutex
	leaseAcct *account.Account

	// resolved caches the account configurations, so that each is resolved (key files read,
	// rules checked) once per run whichever command asks: see accountConfig.
	resolvedMu sync.Mutex
	monitored  *resolvedAccount
	lease      *resolvedAccount

	queryOnce sync.Once
	query     *render.Query
	queryErr  error

	// secrets are the values that must never be printed (account keys, connection strings);
	// filled when the account configuration is resolved.
	secretsMu sync.Mutex
	secrets   []string
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

// openAccount is the default factory.Account: it resolves the configuration and opens the
// account once.
func (f *factory) openAccount(ctx context.Context) (*account.Account, error) {
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
func (f *factory) leaseAccount(ctx context.Context) (*account.Account, error) {
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
// wherever the lease container lives. It opens the monitored account
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
func (f *factory) open(ctx context.Context, cfg accountConfig, leasesOnly bool) (*account.Account, error) {
	acct, err := account.Open(ctx, account.Config{
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
		Priority:         f.Global.Priority,
		ThroughputBucket: f.Global.ThroughputBucket,
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
