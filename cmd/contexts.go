package cmd

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/cfp-dev/cfp/internal/render"
)

// A context is a named account (and optionally a database, container and processor) saved in
// the config file, so that a shell needs no COSMOS_* variables: `cfp config set-context`,
// `use-context`, `get-contexts`, `delete-context`, and --context/CFP_CONTEXT to pick one.
//
// Precedence, per setting: a flag wins over its environment variable, which wins over the
// context. The account is taken whole from the first of the three that names one (--local,
// --connection-string[-file] or --endpoint; CFP_LOCAL, COSMOS_CONNECTION_STRING or
// COSMOS_ENDPOINT; the context), so an account flag overrides an exported variable of another
// kind instead of clashing with it.
//
// Keys are stored by reference only: the name of an environment variable, a key file, or
// Microsoft Entra ID. --key-inline stores the key itself, with a warning.

// contextFile is the config file, $XDG_CONFIG_HOME/cfp/config.json (~/.config/cfp/config.json).
type contextFile struct {
	CurrentContext string       `json:"current_context,omitempty"`
	Contexts       []cfpContext `json:"contexts"`
}

// cfpContext is one saved context. At most one of Endpoint, Local and ConnectionStringEnv is
// set; the key fields go with Endpoint.
type cfpContext struct {
	Name                string `json:"name"`
	Endpoint            string `json:"endpoint,omitempty"`
	Local               string `json:"local,omitempty"`
	ConnectionStringEnv string `json:"connection_string_env,omitempty"`
	KeyEnv              string `json:"key_env,omitempty"`
	KeyFile             string `json:"key_file,omitempty"`
	// Auth is "entra" for Microsoft Entra ID, else "".
	Auth string `json:"auth,omitempty"`
	// Key is the key itself, only with --key-inline.
	Key       string `json:"key,omitempty"`
	Database  string `json:"database,omitempty"`
	Container string `json:"container,omitempty"`
	Processor string `json:"processor,omitempty"`

	// The lease account, when the lease container lives in another account: its endpoint
	// and its key by reference (an environment variable, a key file, or Entra ID).
	LeaseEndpoint string `json:"lease_endpoint,omitempty"`
	LeaseKeyEnv   string `json:"lease_key_env,omitempty"`
	LeaseKeyFile  string `json:"lease_key_file,omitempty"`
	// LeaseAuth is "entra" for Microsoft Entra ID, else "".
	LeaseAuth string `json:"lease_auth,omitempty"`
	// LeaseDatabase and LeaseContainer name the lease container (default: the database, and
	// "leases").
	LeaseDatabase  string `json:"lease_database,omitempty"`
	LeaseContainer string `json:"lease_container,omitempty"`
}

// configFilePath returns the config file's path from XDG_CONFIG_HOME or HOME.
func configFilePath(getenv func(string) string) (string, error) {
	if d := getenv("XDG_CONFIG_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "cfp", "config.json"), nil
	}
	if h := getenv("HOME"); h != "" {
		return filepath.Join(h, ".config", "cfp", "config.json"), nil
	}
	return "", errors.New("no config directory: set XDG_CONFIG_HOME or HOME")
}

// loadContexts reads the config file; a missing file is an empty one.
func loadContexts(path string) (*contextFile, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &contextFile{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read config file: %w", err)
	}
	var cf contextFile
	if err := json.Unmarshal(b, &cf); err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	return &cf, nil
}

// save writes the config file with mode 0600 (it may name key files, or hold an inline key),
// through a temporary file so a reader never sees half of it.
func (cf *contextFile) save(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("write config file: %w", err)
	}
	b, err := json.MarshalIndent(cf, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".config-*.json")
	if err != nil {
		return fmt.Errorf("write config file: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("write config file: %w", err)
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("write config file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write config file: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write config file: %w", err)
	}
	return nil
}

func (cf *contextFile) find(name string) (int, *cfpContext) {
	for i := range cf.Contexts {
		if cf.Contexts[i].Name == name {
			return i, &cf.Contexts[i]
		}
	}
	return -1, nil
}

// accountFlags are the flags that name the monitored account, and their variables.
var accountFlags = []string{"local", "connection-string", "connection-string-file", "endpoint"}

// applyContext fills what the flags and the environment left unset from the context named by
// --context, CFP_CONTEXT or the config file's current context (see the precedence above).
// accountFromEnv says whether the environment named an account.
func (g *globalOptions) applyContext(getenv func(string) string, accountFromFlag, accountFromEnv bool) error {
	name := g.Context
	explicit := name != ""
	path, err := configFilePath(getenv)
	if err != nil {
		if explicit {
			return briefUsageErrorf("context %s: %w", name, err)
		}
		return nil
	}
	if !explicit {
		if _, err := os.Stat(path); err != nil {
			return nil
		}
	}
	cf, err := loadContexts(path)
	if err != nil {
		return briefUsageErrorf("%w", err)
	}
	if !explicit {
		name = cf.CurrentContext
		if name == "" {
			return nil
		}
		g.sources["context"] = "cfp config use-context"
	}
	_, c := cf.find(name)
	if c == nil {
		return briefUsageErrorf("no context %q in %s: 'cfp config get-contexts' lists them", name, path)
	}
	g.contextName = c.Name
	src := "context " + c.Name
	set := func(flag string, dst *string, v string) {
		if v != "" && *dst == "" && g.sources[flag] == "" {
			*dst = v
			g.sources[flag] = src
		}
	}
	set("database", &g.Database, c.Database)
	set("container", &g.Container, c.Container)
	set("processor", &g.Processor, c.Processor)
	set("lease-database", &g.LeaseDatabase, c.LeaseDatabase)
	if c.LeaseContainer != "" && g.sources["lease-container"] == "" {
		g.LeaseContainer, g.sources["lease-container"] = c.LeaseContainer, src // over the default
	}
	g.applyContextLease(getenv, c, src)
	if accountFromFlag || accountFromEnv {
		return nil
	}
	switch {
	case c.Local != "":
		set("local", &g.Local, c.Local)
	case c.ConnectionStringEnv != "":
		v := strings.TrimSpace(getenv(c.ConnectionStringEnv))
		if v == "" {
			g.contextErr = briefUsageErrorf("context %s: %s (its connection string) is not set", c.Name, c.ConnectionStringEnv)
			return nil
		}
		g.ConnectionString = v
		g.sources["connection-string"] = src + " (" + c.ConnectionStringEnv + ")"
	case c.Endpoint != "":
		set("endpoint", &g.Endpoint, c.Endpoint)
		if g.sources["auth"] == "" && c.Auth != "" {
			g.Auth, g.sources["auth"] = c.Auth, src
		}
		if g.sources["key"] != "" && g.sources["key"] != "COSMOS_KEY" || g.sources["key-file"] != "" {
			return nil // --key or --key-file wins over the context's key
		}
		// The context's key goes with its endpoint: COSMOS_KEY, exported for another
		// account, does not replace it.
		switch {
		case c.KeyFile != "":
			g.KeyFile, g.sources["key-file"] = c.KeyFile, src
			g.keySource = src + ": key file " + c.KeyFile
			g.ignoreEnvKey = true
		case c.KeyEnv != "":
			v := strings.TrimSpace(getenv(c.KeyEnv))
			if v == "" {
				g.contextErr = briefUsageErrorf("context %s: %s (its account key) is not set", c.Name, c.KeyEnv)
				return nil
			}
			g.Key, g.keySource, g.ignoreEnvKey = v, src+": "+c.KeyEnv, true
		case c.Key != "":
			g.Key, g.keySource, g.ignoreEnvKey = c.Key, src+": inline key", true
		case c.Auth == "entra":
			g.ignoreEnvKey = true
		}
	}
	return nil
}

// applyContextLease takes the context's lease account unless a flag or a variable names one
// (--lease-endpoint, --lease-connection-string[-file] or their variables): the account whole,
// its key with it. --lease-key-file and --lease-auth on the command line or in the environment
// still win over the context's key; CFP_LEASE_KEY, exported for another account, does not
// replace it.
func (g *globalOptions) applyContextLease(getenv func(string) string, c *cfpContext, src string) {
	if c.LeaseEndpoint == "" {
		return
	}
	for _, flag := range []string{"lease-endpoint", "lease-connection-string", "lease-connection-string-file"} {
		if g.sources[flag] != "" {
			return
		}
	}
	g.LeaseEndpoint, g.sources["lease-endpoint"] = c.LeaseEndpoint, src
	if g.sources["lease-auth"] == "" && c.LeaseAuth != "" {
		g.LeaseAuth, g.sources["lease-auth"] = c.LeaseAuth, src
	}
	if g.sources["lease-key-file"] != "" {
		return
	}
	switch {
	case c.LeaseKeyFile != "":
		g.LeaseKeyFile, g.sources["lease-key-file"] = c.LeaseKeyFile, src
		g.leaseKeySource = src + ": key file " + c.LeaseKeyFile
		g.ignoreEnvLeaseKey = true
	case c.LeaseKeyEnv != "":
		v := strings.TrimSpace(getenv(c.LeaseKeyEnv))
		if v == "" {
			g.leaseContextErr = briefUsageErrorf("context %s: %s (its lease account key) is not set", c.Name, c.LeaseKeyEnv)
			return
		}
		g.leaseKey, g.leaseKeySource, g.ignoreEnvLeaseKey = v, src+": "+c.LeaseKeyEnv, true
	case c.LeaseAuth == "entra":
		g.ignoreEnvLeaseKey = true
	}
}

// anyChanged reports whether one of the named flags was set on the command line.
func anyChanged(fs *pflag.FlagSet, names ...string) bool {
	for _, n := range names {
		if f := fs.Lookup(n); f != nil && f.Changed {
			return true
		}
	}
	return false
}

// contextView is one context in `cfp config get-contexts -o json`, a public contract
// (docs/scripting.md). It never holds a key.
type contextView struct {
	Name      string `json:"name"`
	Current   bool   `json:"current"`
	Account   string `json:"account"`
	Endpoint  string `json:"endpoint,omitempty"`
	LocalDir  string `json:"local_dir,omitempty"`
	Auth      string `json:"auth,omitempty"`
	KeySource string `json:"key_source,omitempty"`
	Database  string `json:"database,omitempty"`
	Container string `json:"container,omitempty"`
	Processor string `json:"processor,omitempty"`
	// The lease account (absent: the monitored account) and the lease container's names.
	LeaseEndpoint  string `json:"lease_endpoint,omitempty"`
	LeaseAuth      string `json:"lease_auth,omitempty"`
	LeaseKeySource string `json:"lease_key_source,omitempty"`
	LeaseDatabase  string `json:"lease_database,omitempty"`
	LeaseContainer string `json:"lease_container,omitempty"`
}

func newContextView(c cfpContext, current string) contextView {
	v := contextView{Name: c.Name, Current: c.Name == current, Database: c.Database, Container: c.Container, Processor: c.Processor,
		LeaseEndpoint: c.LeaseEndpoint, LeaseDatabase: c.LeaseDatabase, LeaseContainer: c.LeaseContainer}
	if c.LeaseEndpoint != "" {
		switch {
		case c.LeaseKeyFile != "":
			v.LeaseAuth, v.LeaseKeySource = "key", c.LeaseKeyFile
		case c.LeaseKeyEnv != "":
			v.LeaseAuth, v.LeaseKeySource = "key", "$"+c.LeaseKeyEnv
		case c.LeaseAuth == "entra":
			v.LeaseAuth = "entra"
		}
	}
	switch {
	case c.Local != "":
		v.Account, v.LocalDir = "local", c.Local
	case c.ConnectionStringEnv != "":
		v.Account, v.Auth, v.KeySource = "connection-string", "key", "$"+c.ConnectionStringEnv
	default:
		v.Account, v.Endpoint, v.Auth = "endpoint", c.Endpoint, "key"
		switch {
		case c.KeyFile != "":
			v.KeySource = c.KeyFile
		case c.KeyEnv != "":
			v.KeySource = "$" + c.KeyEnv
		case c.Key != "":
			v.KeySource = "inline"
		case c.Auth == "entra":
			v.Auth = "entra"
		default:
			v.Auth = ""
		}
	}
	return v
}

// configSubcommand marks the context commands: setup applies no context for them, so a broken
// current context can still be replaced or deleted.
const configSubcommand = "cfp/context-command"

func newContextCmds(f *factory) []*cobra.Command {
	ann := map[string]string{configSubcommand: "true"}
	var csEnv, keyEnv, leaseKeyEnv string
	var entra, keyInline bool
	set := &cobra.Command{
		Use:   "set-context NAME",
		Short: "Save an account (and database, container, processor) as a named context",
		Long: `Save a named context in the config file ($XDG_CONFIG_HOME/cfp/config.json, or
~/.config/cfp/config.json; mode 0600). A context names one account: --endpoint URL,
--local[=DIR] or --connection-string-env VAR, and optionally -d, -c and -p. A lease container
in another account is saved with --lease-endpoint URL and its key (--lease-key-env VAR,
--lease-key-file FILE or --lease-auth entra), and its names with --lease-database and
--lease-container. Keys are stored
by reference only: --key-env VAR (read when a command runs), --key-file FILE, or --entra
(Microsoft Entra ID); a loopback endpoint without one takes the emulator's key. --key-inline
stores the key from COSMOS_KEY in the file itself (avoid it).

An existing context of the same name is replaced. 'cfp config use-context NAME' makes it the
default; --context NAME or CFP_CONTEXT picks one for a run. Flags and environment variables
win over the context.`,
		Example: `  # The embedded emulator, as the default context
  cfp config set-context dev --local .cfp -d shop -c orders
  cfp config use-context dev

  # An Azure account whose key is read from $PROD_COSMOS_KEY when a command runs
  cfp config set-context prod --endpoint https://myacct.documents.azure.com:443/ --key-env PROD_COSMOS_KEY
  cfp --context prod config`,
		Args:        cobra.ExactArgs(1),
		Annotations: ann,
		RunE: func(c *cobra.Command, args []string) error {
			fl := c.Flags()
			g := f.Global
			ctx := cfpContext{Name: args[0]}
			if strings.TrimSpace(ctx.Name) == "" {
				return briefUsageErrorf("a context needs a name")
			}
			var kinds []string
			if fl.Changed("local") {
				ctx.Local, kinds = g.Local, append(kinds, "--local")
			}
			if fl.Changed("endpoint") {
				ctx.Endpoint, kinds = g.Endpoint, append(kinds, "--endpoint")
			}
			if csEnv != "" {
				ctx.ConnectionStringEnv, kinds = csEnv, append(kinds, "--connection-string-env")
			}
			if len(kinds) != 1 {
				return briefUsageErrorf("a context needs one account: --endpoint URL, --local[=DIR] or --connection-string-env VAR")
			}
			if anyChanged(fl, "key", "connection-string", "connection-string-file", "auth") {
				return briefUsageErrorf("set-context stores keys by reference: use --key-env VAR, --key-file FILE or --entra (--key-inline to store COSMOS_KEY itself)")
			}
			var keys []string
			if keyEnv != "" {
				ctx.KeyEnv, keys = keyEnv, append(keys, "--key-env")
			}
			if fl.Changed("key-file") {
				abs, err := filepath.Abs(g.KeyFile)
				if err != nil {
					return err
				}
				ctx.KeyFile, keys = abs, append(keys, "--key-file")
			}
			if entra {
				ctx.Auth, keys = "entra", append(keys, "--entra")
			}
			if keyInline {
				k := strings.TrimSpace(f.Getenv("COSMOS_KEY"))
				if k == "" {
					return briefUsageErrorf("--key-inline stores the key in COSMOS_KEY, which is not set")
				}
				ctx.Key, keys = k, append(keys, "--key-inline")
			}
			if len(keys) > 1 {
				return briefUsageErrorf("give one of %s", strings.Join(keys, ", "))
			}
			if len(keys) == 1 && ctx.Endpoint == "" {
				return briefUsageErrorf("%s goes with --endpoint", keys[0])
			}
			if ctx.Local != "" {
				abs, err := filepath.Abs(ctx.Local)
				if err != nil {
					return err
				}
				ctx.Local = abs
			}
			if fl.Changed("database") {
				ctx.Database = g.Database
			}
			if fl.Changed("container") {
				ctx.Container = g.Container
			}
			if fl.Changed("processor") {
				ctx.Processor = g.Processor
			}
			if err := setContextLease(fl, g, &ctx, leaseKeyEnv); err != nil {
				return err
			}
			path, err := configFilePath(f.Getenv)
			if err != nil {
				return briefUsageErrorf("%w", err)
			}
			cf, err := loadContexts(path)
			if err != nil {
				return err
			}
			verb := "created"
			if i, _ := cf.find(ctx.Name); i >= 0 {
				cf.Contexts[i], verb = ctx, "updated"
			} else {
				cf.Contexts = append(cf.Contexts, ctx)
			}
			if err := cf.save(path); err != nil {
				return err
			}
			if keyInline {
				f.warnf("the account key is stored in clear text in %s (mode 0600); prefer --key-env or --key-file", path)
			}
			fmt.Fprintf(f.IO.ErrOut, "context %s %s in %s\n", ctx.Name, verb, path)
			return nil
		},
	}
	set.Flags().StringVar(&csEnv, "connection-string-env", "", "read the connection string from environment variable `VAR` when a command runs")
	set.Flags().StringVar(&keyEnv, "key-env", "", "read the account key from environment variable `VAR` when a command runs")
	set.Flags().BoolVar(&entra, "entra", false, "authenticate with Microsoft Entra ID")
	set.Flags().StringVar(&leaseKeyEnv, "lease-key-env", "", "read the lease account's key from environment variable `VAR` when a command runs")
	set.Flags().BoolVar(&keyInline, "key-inline", false, "store the key in COSMOS_KEY in the config file itself (avoid: prefer --key-env or --key-file)")

	use := &cobra.Command{
		Use:         "use-context NAME",
		Short:       "Make a saved context the default",
		Example:     "  cfp config set-context dev --local\n  cfp config use-context dev",
		Args:        cobra.ExactArgs(1),
		Annotations: ann,
		RunE: func(c *cobra.Command, args []string) error {
			return editContexts(f, func(cf *contextFile, path string) error {
				if _, ctx := cf.find(args[0]); ctx == nil {
					return briefUsageErrorf("no context %q in %s: 'cfp config get-contexts' lists them", args[0], path)
				}
				cf.CurrentContext = args[0]
				fmt.Fprintf(f.IO.ErrOut, "switched to context %s\n", args[0])
				return nil
			})
		},
	}
	del := &cobra.Command{
		Use:         "delete-context NAME",
		Short:       "Delete a saved context",
		Example:     "  cfp config set-context old --local\n  cfp config delete-context old",
		Args:        cobra.ExactArgs(1),
		Annotations: ann,
		RunE: func(c *cobra.Command, args []string) error {
			return editContexts(f, func(cf *contextFile, path string) error {
				i, _ := cf.find(args[0])
				if i < 0 {
					return briefUsageErrorf("no context %q in %s", args[0], path)
				}
				cf.Contexts = slices.Delete(cf.Contexts, i, i+1)
				if cf.CurrentContext == args[0] {
					cf.CurrentContext = ""
				}
				fmt.Fprintf(f.IO.ErrOut, "context %s deleted\n", args[0])
				return nil
			})
		},
	}
	get := &cobra.Command{
		Use:   "get-contexts",
		Short: "List the saved contexts",
		Long: `List the saved contexts: a table on a terminal, a JSON array in a pipe (never a key;
key_source says where the key comes from). CURRENT marks the default context.`,
		Example:     "  cfp config get-contexts\n\n  # The default context's name\n  cfp config get-contexts -o json --jq '.[] | select(.current) | .name'",
		Args:        cobra.NoArgs,
		Annotations: ann,
		RunE: func(c *cobra.Command, _ []string) error {
			path, err := configFilePath(f.Getenv)
			if err != nil {
				return briefUsageErrorf("%w", err)
			}
			cf, err := loadContexts(path)
			if err != nil {
				return err
			}
			views := make([]contextView, 0, len(cf.Contexts))
			for _, ctx := range cf.Contexts {
				views = append(views, newContextView(ctx, cf.CurrentContext))
			}
			p, err := f.printer(render.FormatJSON)
			if err != nil {
				return err
			}
			return p.Print(c.Context(), views, func(t *render.Table) {
				*t = *render.NewTable(f.IO, "current", "name", "account", "auth", "key", "database", "container", "processor")
				for _, v := range views {
					cur := ""
					if v.Current {
						cur = "*"
					}
					acct := v.Endpoint + v.LocalDir
					if v.Account == "connection-string" {
						acct = "connection string"
					}
					t.Row(cur, v.Name, acct, v.Auth, v.KeySource, v.Database, v.Container, v.Processor)
				}
			})
		},
	}
	return []*cobra.Command{set, use, get, del}
}

// setContextLease stores the lease account and the lease container's names of set-context:
// --lease-endpoint with its key by reference (--lease-key-env VAR, --lease-key-file FILE or
// --lease-auth entra), --lease-database, --lease-container. A lease connection string is
// refused: it holds the key.
func setContextLease(fl *pflag.FlagSet, g *globalOptions, ctx *cfpContext, keyEnv string) error {
	if anyChanged(fl, "lease-connection-string", "lease-connection-string-file") {
		return briefUsageErrorf("set-context stores keys by reference: give the lease account as --lease-endpoint URL with --lease-key-env VAR, --lease-key-file FILE or --lease-auth entra")
	}
	if fl.Changed("lease-endpoint") {
		ctx.LeaseEndpoint = g.LeaseEndpoint
	}
	var keys []string
	if keyEnv != "" {
		ctx.LeaseKeyEnv, keys = keyEnv, append(keys, "--lease-key-env")
	}
	if fl.Changed("lease-key-file") {
		abs, err := filepath.Abs(g.LeaseKeyFile)
		if err != nil {
			return err
		}
		ctx.LeaseKeyFile, keys = abs, append(keys, "--lease-key-file")
	}
	if fl.Changed("lease-auth") {
		if g.LeaseAuth != "entra" {
			return briefUsageErrorf("--lease-auth key: give the key by reference with --lease-key-env VAR or --lease-key-file FILE")
		}
		ctx.LeaseAuth, keys = "entra", append(keys, "--lease-auth entra")
	}
	if len(keys) > 1 {
		return briefUsageErrorf("give one of %s", strings.Join(keys, ", "))
	}
	if len(keys) == 1 && ctx.LeaseEndpoint == "" {
		return briefUsageErrorf("%s goes with --lease-endpoint", keys[0])
	}
	if fl.Changed("lease-database") {
		ctx.LeaseDatabase = g.LeaseDatabase
	}
	if fl.Changed("lease-container") {
		ctx.LeaseContainer = g.LeaseContainer
	}
	return nil
}

// editContexts loads the config file, lets fn change it, and saves it.
func editContexts(f *factory, fn func(cf *contextFile, path string) error) error {
	path, err := configFilePath(f.Getenv)
	if err != nil {
		return briefUsageErrorf("%w", err)
	}
	cf, err := loadContexts(path)
	if err != nil {
		return err
	}
	if err := fn(cf, path); err != nil {
		return err
	}
	return cf.save(path)
}
