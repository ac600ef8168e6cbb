package cmd

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/cfp-dev/cfp/internal/render"
)

// helpTopics are the pages of `cfp help <topic>`: reference for scripts and operators that
// belongs to no single command.
var helpTopics = []struct {
	name, short, long string
}{
	{"exit-codes", "Exit codes and what they mean", helpExitCodes},
	{"environment", "Environment variables cfp reads", helpEnvironment},
	{"formatting", "Output formats, --jq, tables, times and colour", helpFormatting},
}

const helpExitCodes = `cfp exits with one of these codes, so scripts and health checks can tell outcomes apart:

  0    success; also 'cfp process' stopped by SIGINT or SIGTERM once its shutdown was
       clean (batches in flight finished and checkpointed, every lease released), so a
       supervisor (systemd Restart=on-failure, Kubernetes) sees a deliberate stop
  1    error: the operation failed (the message says what, and a "Try:" line says how to
       fix it when the cause is known); also a --timeout that ran out, a request with no
       answer within --request-timeout, and throttling (429) or unavailability (503) that
       outlasted --max-retries
  2    usage: a bad flag or argument, conflicting options, or no account or container
       configured; nothing was done
  3    threshold crossed or partial failure: 'cfp estimate --max-lag N' found more lag,
       'cfp leases list --check' found problems, or some of many operations failed
  4    authentication or authorization: the key, token or RBAC role was refused
       (401/403), or no credential could be obtained
  5    no such lease set: the processor (-p) or --lease-id-prefix has no leases in the
       lease container ('cfp estimate', 'cfp leases list/export/reset/delete/release');
       the message names the processors that are there, nearest first
  6    gone: 'cfp process' stopped because the monitored container (or its database), or
       its lease set ('cfp leases delete --force'), was deleted while it ran
  130  interrupted by SIGINT (Ctrl-C) or SIGTERM ('cfp tail', 'cfp estimate --watch', ...);
       'cfp process' exits 0 instead once it has stopped gracefully

Errors are printed to stderr as one line, "cfp: <what failed>", optionally followed by
"Try: <hint>". Usage errors (2) about flags and arguments also print the command's usage.`

const helpEnvironment = `Every global flag that names an account, a container or a processor can come from the
environment instead, or from a saved context (cfp config set-context). A flag on the command
line wins over its variable, which wins over the context; the account is taken whole from the
first of the three that names one, so --endpoint wins over an exported CFP_LOCAL.

  COSMOS_ENDPOINT            account endpoint URL (--endpoint)
  COSMOS_KEY                 account key (--key-file reads it from a file instead)
  COSMOS_CONNECTION_STRING   AccountEndpoint=...;AccountKey=...; (--connection-string)
  CFP_LOCAL                  data directory of the embedded emulator (--local)
  CFP_CONTEXT                the saved context to use (--context; default: cfp config use-context)
  COSMOS_DATABASE            database of the monitored container (-d, --database)
  COSMOS_CONTAINER           the monitored container (-c, --container)
  CFP_LEASE_CONTAINER        lease container, default "leases" (--lease-container)
  CFP_LEASE_DATABASE         database of the lease container, default the monitored one
                             (--lease-database)
  CFP_LEASE_ENDPOINT         endpoint of a separate lease account (--lease-endpoint)
  CFP_LEASE_KEY              its key (--lease-key-file reads it from a file instead)
  CFP_LEASE_CONNECTION_STRING  its connection string (--lease-connection-string)
  CFP_PROCESSOR              processor name, the lease prefix (-p, --processor)
  CFP_LOG_LEVEL              debug, info, warn (default) or error (--log-level)
  CFP_CA_FILE                extra PEM certificates to trust for https endpoints, e.g.
                             cfp emulator's emulator.pem (--ca-file)
  NO_COLOR                   any value turns colour off (--no-color)
  CLICOLOR=0                 turns colour off
  CLICOLOR_FORCE=1           turns colour on, even in a pipe

Exactly one account source may be set: an endpoint (with COSMOS_KEY for key auth, or
alone for Microsoft Entra ID through DefaultAzureCredential, whose own AZURE_* variables
apply; a loopback endpoint alone gets the well-known emulator key), a connection string, or
a local data directory.

The lease container lives in the monitored account unless a lease account is set, with the
same rules: CFP_LEASE_ENDPOINT (with CFP_LEASE_KEY, or alone for Microsoft Entra ID, or alone
for a loopback emulator; --lease-auth key|entra as --auth) or CFP_LEASE_CONNECTION_STRING.
COSMOS_KEY is never used for the lease account. Lease ids still embed the monitored account's
host, so a processor finds the same leases whichever account holds them.

Account keys are never printed, logged or included in errors, and COSMOS_KEY,
COSMOS_CONNECTION_STRING, CFP_LEASE_KEY and CFP_LEASE_CONNECTION_STRING, and the Entra ID
secrets AZURE_CLIENT_SECRET, AZURE_CLIENT_CERTIFICATE_PASSWORD, AZURE_PASSWORD, IDENTITY_HEADER
and MSI_SECRET, are removed from the environment of --exec and --exec-lines delegates. Prefer COSMOS_KEY or --key-file to --key, which leaks into shell history and the
process list.`

const helpFormatting = `Output goes to stdout; logs, progress and notifications go to stderr.

  -o table   aligned columns with upper-case headers on a terminal, "-" for an empty
             cell, ages such as "3m ago"; in a pipe, tab-separated values with one
             header line and RFC 3339 times (UTC)
  -o json    one JSON document (an array for lists)
  -o jsonl   one JSON object per line; streams (tail, process events) use it in a pipe

Without -o, commands print a table on a terminal and JSON or JSON lines in a pipe, so
'cfp ... | jq' just works. JSON field names are a public contract: fields are added,
never renamed (see docs/scripting.md).

--jq EXPR filters JSON output through a jq expression (gojq) and implies JSON output.
String results print raw, like jq -r; other results print as compact JSON, one per line.
With -o jsonl the expression runs on each line's object. The expression cannot read the
environment. A bad expression is a usage error (exit 2).

  cfp leases list -d shop -c orders -p orders-proj -o json --jq '.[] | select(.owner == null) | .lease'
  cfp tail -d shop -c orders --from beginning -e --jq '.id'

Colour is used only on a terminal, and never when NO_COLOR is set, CLICOLOR=0 or
--no-color is given; CLICOLOR_FORCE=1 forces it.`

func addHelpTopics(root *cobra.Command) {
	for _, t := range helpTopics {
		c := &cobra.Command{
			Use:   t.name,
			Short: t.short,
			Long:  t.long,
		}
		c.SetHelpFunc(func(c *cobra.Command, _ []string) {
			fmt.Fprintln(c.OutOrStdout(), c.Long)
		})
		c.SetUsageFunc(func(c *cobra.Command) error {
			fmt.Fprintln(c.OutOrStderr(), c.Long)
			return nil
		})
		root.AddCommand(c)
	}
	// Built from the flags of the finished tree: call addHelpTopics after every command.
	flags := &cobra.Command{Use: "flags", Short: "Global flags, grouped: account, containers, requests, output, logging", Long: helpFlags(root, render.DefaultWidth)}
	flags.SetHelpFunc(func(c *cobra.Command, _ []string) { fmt.Fprintln(c.OutOrStdout(), c.Long) })
	flags.SetUsageFunc(func(c *cobra.Command) error {
		fmt.Fprintln(c.OutOrStderr(), c.Long)
		return nil
	})
	root.AddCommand(flags)
	dep := &cobra.Command{Use: "deprecated", Short: "Old flag spellings that still work, and what replaces them", Long: helpDeprecated(root)}
	dep.SetHelpFunc(func(c *cobra.Command, _ []string) { fmt.Fprintln(c.OutOrStdout(), c.Long) })
	dep.SetUsageFunc(func(c *cobra.Command) error {
		fmt.Fprintln(c.OutOrStderr(), c.Long)
		return nil
	})
	root.AddCommand(dep)
}
