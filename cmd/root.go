package cmd

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cfp-dev/cfp/internal/buildinfo"
	"github.com/cfp-dev/cfp/internal/render"
)

// Command groups in the root help.
const (
	groupFeed   = "feed"
	groupLeases = "leases"
	groupLocal  = "local"
)

func init() {
	// Run the root's persistent pre-run (env, logger, warnings) even when a command has its own.
	cobra.EnableTraverseRunHooks = true
}

const rootLong = `cfp inspects and drives Azure Cosmos DB change feeds from a terminal or script.

Choose the account once, with the environment or flags:

  COSMOS_ENDPOINT + COSMOS_KEY    an account endpoint and key (--endpoint, --key-file)
  COSMOS_ENDPOINT alone           Microsoft Entra ID (az login, managed identity, ...)
  COSMOS_CONNECTION_STRING        AccountEndpoint=...;AccountKey=...; (--connection-string)
  --local[=DIR] or CFP_LOCAL=DIR  the embedded emulator on DIR (default .cfp), in process

Then name the monitored container (-d/--database, -c/--container) and, for lease commands,
the processor (-p/--processor, the lease prefix of a .NET or Java processor). A lease
container in another account takes --lease-endpoint (CFP_LEASE_ENDPOINT + CFP_LEASE_KEY) or
--lease-connection-string.

[details]

It tails a container's changes, runs a change feed processor host, estimates lag, and
inspects and repairs lease containers written by the .NET and Java Change Feed Processor
libraries, which it reads and writes field for field. An embedded Cosmos DB emulator lets
every command run locally, with no account.

Data goes to stdout (a table on a terminal, JSON in a pipe); logs, progress and
notifications go to stderr. See 'cfp help environment', 'cfp help formatting' and
'cfp help exit-codes'.`

const rootExample = `  # Watch changes to a container on the embedded emulator
  cfp --local tail -d shop -c orders

[details]

  # Lag of every lease of processor "orders-proj", exit 3 above 1000 changes
  export COSMOS_ENDPOINT=https://myacct.documents.azure.com:443/ COSMOS_KEY=...
  cfp estimate -d shop -c orders -p orders-proj --max-lag 1000

  # Lease table of a processor, as JSON for a script
  cfp leases list -d shop -c orders -p orders-proj -o json | jq '.[] | select(.owner == null)'`

func newRootCmd(f *factory) *cobra.Command {
	root := &cobra.Command{
		Use:           "cfp <command> [flags]",
		Short:         "Inspect and drive Azure Cosmos DB change feeds",
		Long:          rootLong,
		Example:       rootExample,
		Version:       versionString(buildinfo.Info()),
		SilenceErrors: true,
		SilenceUsage:  true,
		// Running cfp with no command shows help.
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return c.Help()
		},
		PersistentPreRunE: func(c *cobra.Command, _ []string) error {
			return f.setup(c)
		},
	}
	root.SetVersionTemplate("cfp {{.Version}}\n")
	f.Global.addFlags(root.PersistentFlags())
	root.PersistentFlags().SortFlags = false
	groupGlobalFlags(root.PersistentFlags())
	root.SetUsageFunc(func(c *cobra.Command) error {
		usage(c.OutOrStderr(), c, f.IO.Width, true)
		return nil
	})
	// --help fits one screen; 'cfp help COMMAND' shows the details too, as 'git help' does.
	fullHelp := false
	root.SetHelpFunc(func(c *cobra.Command, _ []string) {
		help(c.OutOrStdout(), c, f.IO.Width, fullHelp)
	})
	root.MarkFlagsMutuallyExclusive("local", "connection-string", "endpoint")
	root.MarkFlagsMutuallyExclusive("key", "key-file")
	root.MarkFlagsMutuallyExclusive("local", "key")
	root.MarkFlagsMutuallyExclusive("local", "key-file")
	root.MarkFlagsMutuallyExclusive("connection-string", "key")
	root.MarkFlagsMutuallyExclusive("connection-string", "key-file")
	root.MarkFlagsMutuallyExclusive("lease-endpoint", "lease-connection-string")
	root.MarkFlagsMutuallyExclusive("lease-key-file", "lease-connection-string")
	for _, other := range []string{"connection-string", "endpoint", "local", "key", "key-file"} {
		root.MarkFlagsMutuallyExclusive("connection-string-file", other)
	}
	for _, other := range []string{"lease-connection-string", "lease-endpoint", "lease-key-file"} {
		root.MarkFlagsMutuallyExclusive("lease-connection-string-file", other)
	}
	_ = root.PersistentFlags().MarkHidden("key")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &UsageError{Err: err}
	})

	addCommands(root, f)
	addHelpTopics(root)
	root.InitDefaultHelpCmd() // after the commands: cobra adds it only to a root with some
	for _, c := range root.Commands() {
		if c.Name() == "help" {
			run := c.Run
			c.Run = func(c *cobra.Command, args []string) {
				fullHelp = true
				run(c, args)
			}
		}
	}
	root.SetHelpCommandGroupID("")
	root.SetCompletionCommandGroupID("")

	walk(root, func(c *cobra.Command) {
		wrapArgs(c)
		completeEnums(c)
		registerPositionCompletion(c)
		c.Flags().SortFlags = false
	})
	registerAccountCompletion(root, f)
	return root
}

// addCommands adds cfp's commands to root, each under its help group: the whole command tree
// in one place.
func addCommands(root *cobra.Command, f *factory) {
	root.AddGroup(
		&cobra.Group{ID: groupFeed, Title: "Change feed commands:"},
		&cobra.Group{ID: groupLeases, Title: "Lease commands:"},
		&cobra.Group{ID: groupLocal, Title: "Local emulator commands:"},
	)
	add := func(group string, c *cobra.Command) {
		c.GroupID = group
		root.AddCommand(c)
	}
	add(groupFeed, addTimeoutFlag(f, newTailCmd(f), tailTimeoutRefusal))
	add(groupFeed, newProcessCmd(f))
	add(groupFeed, addTimeoutFlag(f, newEstimateCmd(f), estimateTimeoutRefusal))
	add(groupFeed, newReplayCmd(f))
	add(groupLeases, newLeasesCmd(f))
	add(groupLocal, newEmulatorCmd(f))
	add(groupLocal, newImportCmd(f))
	add(groupLocal, newDemoCmd(f))
	add("", addTimeoutFlag(f, newConfigCmd(f), nil))
	add("", newVersionCmd(f))
	add("", newCompletionCmd(f))
}

// walk calls fn on c and every command below it.
func walk(c *cobra.Command, fn func(*cobra.Command)) {
	fn(c)
	for _, sub := range c.Commands() {
		walk(sub, fn)
	}
}

// wrapArgs makes the argument validator of c return usage errors (exit 2, usage shown).
func wrapArgs(c *cobra.Command) {
	if c.Args == nil {
		return
	}
	args := c.Args
	c.Args = func(c *cobra.Command, a []string) error {
		if err := args(c, a); err != nil {
			var u *UsageError
			if errors.As(err, &u) {
				return err
			}
			return &UsageError{Err: err}
		}
		return nil
	}
}

// asUsageError turns cobra's own command-line errors (unknown commands, flag group violations)
// into usage errors.
func asUsageError(err error) error {
	if err == nil {
		return nil
	}
	var u *UsageError
	if errors.As(err, &u) {
		return err
	}
	msg := err.Error()
	for _, p := range []string{"unknown command ", "unknown flag", "unknown shorthand flag",
		"if any flags in the group ", "at least one of the flags in the group ", "required flag(s) ",
		"invalid argument "} {
		if strings.HasPrefix(msg, p) {
			return &UsageError{Err: err}
		}
	}
	return err
}

// versionString formats build information for humans: "v1.2.3 (abc1234, 2026-01-02)".
func versionString(version, commit, date string) string {
	var extra []string
	if commit != "" {
		if len(commit) > 7 {
			commit = commit[:7]
		}
		extra = append(extra, commit)
	}
	if date != "" {
		extra = append(extra, date)
	}
	if len(extra) == 0 {
		return version
	}
	return fmt.Sprintf("%s (%s)", version, strings.Join(extra, ", "))
}

// DocsRoot returns cfp's command tree for generating the reference documentation. It is built
// on test streams with an empty environment, so the result does not depend on the machine,
// and it never runs a command.
func DocsRoot() *cobra.Command {
	ios, _, _, _ := render.Test()
	f := &factory{IO: ios, Global: &globalOptions{}, Getenv: func(string) string { return "" }, Now: time.Now}
	f.Log = f.newLogger()
	f.Account = f.openAccount
	root := newRootCmd(f)
	root.Version = ""
	walk(root, func(c *cobra.Command) {
		c.DisableAutoGenTag = true
		c.Long = fullLong(c)
		c.Example = fullExample(c)
	})
	return root
}
