package cmd

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cfp-dev/cfp/internal/render"
)

type configOptions struct {
	f     *factory
	check bool
}

// configView is the JSON of `cfp config -o json`, a public contract (docs/scripting.md). It
// never holds a key: KeySource says where the key comes from.
type configView struct {
	Account string `json:"account"`
	// Context is the saved context in use (--context, CFP_CONTEXT, use-context).
	Context          string   `json:"context,omitempty"`
	Endpoint         string   `json:"endpoint,omitempty"`
	LocalDir         string   `json:"local_dir,omitempty"`
	Auth             string   `json:"auth,omitempty"`
	KeySource        string   `json:"key_source,omitempty"`
	PreferredRegions []string `json:"preferred_regions,omitempty"`
	Database         string   `json:"database,omitempty"`
	Container        string   `json:"container,omitempty"`
	// LeaseAccount is the separate account of the lease container; absent when the lease
	// container is in the monitored account.
	LeaseAccount   *leaseAccountView `json:"lease_account,omitempty"`
	LeaseDatabase  string            `json:"lease_database,omitempty"`
	LeaseContainer string            `json:"lease_container"`
	Processor      string            `json:"processor,omitempty"`
	LeaseIDPrefix  string            `json:"lease_id_prefix,omitempty"`
	// Checks are the results of --check, in order.
	Checks []configCheck `json:"checks,omitempty"`
	// Missing names what a command would still need, with how to set it ("account: ...");
	// absent when nothing is missing.
	Missing []string `json:"missing,omitempty"`
}

// Settings that are not set, with how to set them, in `cfp config`.
const (
	missingAccount   = "COSMOS_ENDPOINT (+ COSMOS_KEY), COSMOS_CONNECTION_STRING or --local"
	missingDatabase  = "-d/--database or COSMOS_DATABASE"
	missingContainer = "-c/--container or COSMOS_CONTAINER"
	missingProcessor = "-p/--processor or CFP_PROCESSOR (lease commands)"
)

// leaseAccountView is the lease account in configView: like the monitored account's fields,
// never the key.
type leaseAccountView struct {
	Account   string `json:"account"`
	Endpoint  string `json:"endpoint,omitempty"`
	Auth      string `json:"auth,omitempty"`
	KeySource string `json:"key_source,omitempty"`
}

// configCheck is one result of `cfp config --check`.
type configCheck struct {
	Check  string `json:"check"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

func newConfigCmd(f *factory) *cobra.Command {
	opts := &configOptions{f: f}
	c := &cobra.Command{
		Use:   "config",
		Short: "Show the account, container and processor cfp would use",
		Long: `Show the configuration cfp resolves from flags, the environment and the saved context
(set-context, use-context, get-contexts, delete-context; flags win over variables, which win
over the context): which account
(endpoint, connection string or local data directory), how it authenticates, where the key
comes from (never the key itself), the lease account when the lease container lives in
another account (--lease-endpoint, --lease-connection-string), and the monitored container,
lease container and processor. Each value says where it came from. Nothing is contacted
unless --check is given.

--check also opens the account (and the lease account) and reads the monitored container
(its partition key and physical partitions) and the lease container, when they are named; the first failure is
reported with its exit code (1, or 4 when credentials or permissions are refused).

Use it to check a shell's COSMOS_* and CFP_* variables before running a command.`,
		Example: `  # What cfp will use, from the flags and the environment
  cfp config

  # An account given by its connection string
  COSMOS_CONNECTION_STRING="AccountEndpoint=...;AccountKey=...;" cfp config -d shop -c orders

  # One setting, for a script
  cfp config -o json --jq .endpoint

  # Also check that the account and the container answer
  cfp --local config --check -d shop -c orders`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return runConfig(c.Context(), opts)
		},
	}
	c.Flags().BoolVar(&opts.check, "check", false, "open the account and read the named containers")
	c.AddCommand(newContextCmds(f)...)
	return c
}

// runChecks opens the account and reads the named containers. It returns the results so far
// and the first error.
func runChecks(ctx context.Context, f *factory) ([]configCheck, error) {
	var checks []configCheck
	acct, err := f.Account(ctx)
	if err != nil {
		return append(checks, configCheck{Check: "account", Detail: err.Error()}), err
	}
	checks = append(checks, configCheck{Check: "account", OK: true, Detail: "opened " + acct.Endpoint()})
	g := f.Global
	if g.Database != "" && g.Container != "" {
		what := "container " + g.Database + "/" + g.Container
		c := acct.Container(g.Database, g.Container)
		info, err := c.Info(ctx)
		if err != nil {
			return append(checks, configCheck{Check: what, Detail: err.Error()}), err
		}
		parts, err := c.Partitions(ctx)
		if err != nil {
			return append(checks, configCheck{Check: what, Detail: err.Error()}), err
		}
		checks = append(checks, configCheck{Check: what, OK: true,
			Detail: fmt.Sprintf("partition key %s, %d physical partitions", strings.Join(info.PartitionKeyPaths, ","), len(parts))})
	}
	lacct := acct
	if _, separate, _ := f.leaseAccountConfig(); separate {
		if lacct, err = f.leaseAccount(ctx); err != nil {
			return append(checks, configCheck{Check: "lease account", Detail: err.Error()}), err
		}
		checks = append(checks, configCheck{Check: "lease account", OK: true, Detail: "opened " + lacct.Endpoint()})
	}
	if db := f.leaseDatabase(); db != "" {
		what := "lease container " + db + "/" + g.LeaseContainer
		info, err := lacct.Container(db, g.LeaseContainer).Info(ctx)
		if err != nil {
			return append(checks, configCheck{Check: what, Detail: err.Error()}), err
		}
		checks = append(checks, configCheck{Check: what, OK: true,
			Detail: "partition key " + strings.Join(info.PartitionKeyPaths, ",")})
	}
	return checks, nil
}

func runConfig(ctx context.Context, opts *configOptions) error {
	f := opts.f
	g := f.Global
	acct, err := f.accountConfig()
	noAccount := errors.Is(err, errNoAccount)
	if err != nil && !noAccount {
		return err
	}
	lease, separate, err := f.leaseAccountConfig()
	if err != nil {
		return err
	}
	v := configView{
		Context:          g.contextName,
		Auth:             acct.Auth,
		PreferredRegions: acct.PreferredRegions,
		Database:         g.Database,
		Container:        g.Container,
		LeaseDatabase:    f.leaseDatabase(),
		LeaseContainer:   g.LeaseContainer,
		Processor:        g.Processor,
		LeaseIDPrefix:    g.LeaseIDPrefix,
	}
	var accountSource string
	switch {
	case noAccount:
		// Nothing configured yet: show the table with what is missing instead of failing.
		v.Account, accountSource = "none", "not set: "+missingAccount
		v.Missing = append(v.Missing, "account: "+missingAccount)
	case acct.LocalDir != "":
		v.Account, v.LocalDir, accountSource = "local", acct.LocalDir, g.source("local")
	case acct.ConnectionString != "":
		v.Account, accountSource = "connection-string", g.source("connection-string")
		v.Endpoint = connectionStringField(acct.ConnectionString, "AccountEndpoint")
		v.KeySource = "connection string"
	default:
		v.Account, v.Endpoint, accountSource = "endpoint", acct.Endpoint, g.source("endpoint")
		if acct.Key != "" {
			switch {
			case g.keySource != "":
				v.KeySource = g.keySource
			case g.KeyFile != "":
				v.KeySource = "--key-file " + g.KeyFile
			case g.Key != "":
				v.KeySource = "--key"
			case strings.TrimSpace(f.Getenv("COSMOS_KEY")) != "":
				v.KeySource = "COSMOS_KEY"
			default: // a loopback endpoint without a key gets the emulator's key
				v.KeySource = "well-known"
			}
		}
	}

	var leaseSource string
	if separate {
		v.LeaseAccount, leaseSource = newLeaseAccountView(f, lease)
	}

	p, err := f.printer(render.FormatJSON)
	if err != nil {
		return err
	}
	for _, m := range []struct{ name, value, how string }{
		{"database", g.Database, missingDatabase},
		{"container", g.Container, missingContainer},
		{"processor", g.Processor + g.LeaseIDPrefix, missingProcessor},
	} {
		if m.value == "" {
			v.Missing = append(v.Missing, m.name+": "+m.how)
		}
	}
	var checkErr error
	if opts.check {
		v.Checks, checkErr = runChecks(ctx, f)
	}
	// unset is the source column of a setting that is not set: how to set it.
	unset := func(value, source, how string) string {
		if value == "" {
			return "not set: " + how
		}
		return source
	}
	// Nothing printed may hold a key, whatever a malformed setting put where.
	v.Endpoint = f.redact(v.Endpoint)
	if v.LeaseAccount != nil {
		v.LeaseAccount.Endpoint = f.redact(v.LeaseAccount.Endpoint)
	}
	for i := range v.Checks {
		v.Checks[i].Detail = f.redact(v.Checks[i].Detail)
	}
	err = p.Print(ctx, v, func(t *render.Table) {
		*t = *render.NewTable(f.IO, "setting", "value", "source")
		if v.Context != "" {
			t.Row("context", v.Context, g.source("context"))
		}
		t.Row("account", v.Account, accountSource)
		if v.LocalDir != "" {
			t.Row("local dir", v.LocalDir, accountSource)
		}
		if v.Endpoint != "" {
			t.Row("endpoint", v.Endpoint, accountSource)
		}
		if v.Auth != "" {
			t.Row("auth", v.Auth, "")
		}
		if v.KeySource != "" {
			t.Row("key", "(set)", v.KeySource)
		}
		if len(v.PreferredRegions) > 0 {
			t.Row("preferred regions", strings.Join(v.PreferredRegions, ", "), g.source("preferred-regions"))
		}
		t.Row("database", v.Database, unset(v.Database, g.source("database"), missingDatabase))
		t.Row("container", v.Container, unset(v.Container, g.source("container"), missingContainer))
		leaseDBSource := g.source("lease-database")
		if g.LeaseDatabase == "" && v.LeaseDatabase != "" {
			leaseDBSource = "--database"
		}
		if la := v.LeaseAccount; la != nil {
			t.Row("lease account", la.Account, leaseSource)
			if la.Endpoint != "" {
				t.Row("lease endpoint", la.Endpoint, leaseSource)
			}
			if la.Auth != "" {
				t.Row("lease auth", la.Auth, "")
			}
			if la.KeySource != "" {
				t.Row("lease key", "(set)", la.KeySource)
			}
		} else {
			t.Row("lease account", "same as account", "default")
		}
		t.Row("lease database", v.LeaseDatabase, leaseDBSource)
		t.Row("lease container", v.LeaseContainer, g.source("lease-container"))
		t.Row("processor", v.Processor, unset(v.Processor+v.LeaseIDPrefix, g.source("processor"), missingProcessor))
		if v.LeaseIDPrefix != "" {
			t.Row("lease id prefix", v.LeaseIDPrefix, g.source("lease-id-prefix"))
		}
		for _, c := range v.Checks {
			status := "ok"
			if !c.OK {
				status = "FAILED"
			}
			t.Row("check "+c.Check, status, c.Detail)
		}
	})
	if checkErr != nil {
		return checkErr
	}
	return err
}

// newLeaseAccountView describes the separate lease account cfg and returns where it was
// configured (a flag or a variable).
func newLeaseAccountView(f *factory, cfg accountConfig) (*leaseAccountView, string) {
	g := f.Global
	v := &leaseAccountView{Auth: cfg.Auth}
	if cfg.ConnectionString != "" {
		v.Account, v.KeySource = "connection-string", "connection string"
		v.Endpoint = connectionStringField(cfg.ConnectionString, "AccountEndpoint")
		return v, g.source("lease-connection-string")
	}
	v.Account, v.Endpoint = "endpoint", cfg.Endpoint
	if cfg.Key != "" {
		switch {
		case g.leaseKeySource != "":
			v.KeySource = g.leaseKeySource
		case g.LeaseKeyFile != "":
			v.KeySource = "--lease-key-file " + g.LeaseKeyFile
		case strings.TrimSpace(f.Getenv("CFP_LEASE_KEY")) != "":
			v.KeySource = "CFP_LEASE_KEY"
		default: // a loopback endpoint without a key gets the emulator's key
			v.KeySource = "well-known"
		}
	}
	return v, g.source("lease-endpoint")
}
