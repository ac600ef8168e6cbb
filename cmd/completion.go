package cmd

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cfp-dev/cfp/internal/leases"
)

// completionTimeout bounds the account requests behind one TAB (databases, containers,
// processors): a slow or unreachable account completes nothing rather than hanging the shell.
const completionTimeout = 2 * time.Second

func newCompletionCmd(f *factory) *cobra.Command {
	c := &cobra.Command{
		Use:   "completion bash|zsh|fish|powershell",
		Short: "Generate the shell completion script",
		Long: `Generate the completion script for your shell. Completion covers commands, flags, the
values of enum flags (-o, --auth, --log-level, ...) and of positions (--from), and the
databases (-d), containers (-c, --lease-container) and processors (-p) of the configured
account, asked with a short timeout; an account that does not answer completes nothing.

The bash script works with or without the bash-completion package.`,
		Example: `  # bash, current shell
  source <(cfp completion bash)
  # bash, permanently (Linux)
  cfp completion bash > /etc/bash_completion.d/cfp
  # zsh
  cfp completion zsh > "${fpath[1]}/_cfp"
  # fish
  cfp completion fish > ~/.config/fish/completions/cfp.fish
  # PowerShell
  cfp completion powershell | Out-String | Invoke-Expression`,
		ValidArgs:             []string{"bash", "zsh", "fish", "powershell"},
		Args:                  cobra.MatchAll(cobra.ExactArgs(1), cobra.OnlyValidArgs),
		DisableFlagsInUseLine: true,
		RunE: func(c *cobra.Command, args []string) error {
			out := f.IO.Out
			root := c.Root()
			switch args[0] {
			case "bash":
				return genBashCompletion(root, out)
			case "zsh":
				return root.GenZshCompletion(out)
			case "fish":
				return root.GenFishCompletion(out, true)
			default:
				return root.GenPowerShellCompletionWithDesc(out)
			}
		},
	}
	return c
}

// bashCompletionShim stands in for the two functions of the bash-completion package that
// cobra's bash script calls, _get_comp_words_by_ref and _filedir: without that package (a
// plain bash, macOS, a container) every TAB printed "command not found". With it, its own
// functions are used.
const bashCompletionShim = `
# cfp: stand-ins for bash-completion's _get_comp_words_by_ref and _filedir, used only when
# that package is not loaded.
__cfp_get_comp_words_by_ref()
{
    if declare -F _get_comp_words_by_ref >/dev/null 2>&1; then
        _get_comp_words_by_ref "$@" cur prev words cword
        return
    fi
    # The words up to the cursor, split on blanks only, so --flag=value stays one word.
    local line=${COMP_LINE:0:COMP_POINT}
    read -ra words <<< "$line"
    if [[ -z $line || $line == *[[:blank:]] ]]; then
        words+=("")
    fi
    cword=$(( ${#words[@]} - 1 ))
    cur=${words[cword]}
    prev=
    if (( cword > 0 )); then
        prev=${words[cword-1]}
    fi
}

__cfp_filedir()
{
    if declare -F _filedir >/dev/null 2>&1; then
        _filedir "$@"
        return
    fi
    local IFS=$'\n'
    if [[ ${1-} == -d ]]; then
        COMPREPLY=($(compgen -d -- "$cur"))
    else
        COMPREPLY=($(compgen -f -- "$cur"))
    fi
}
`

// genBashCompletion writes cobra's bash completion (v2) with bashCompletionShim.
func genBashCompletion(root *cobra.Command, out io.Writer) error {
	var b bytes.Buffer
	if err := root.GenBashCompletionV2(&b, true); err != nil {
		return err
	}
	script := b.String()
	script = strings.ReplaceAll(script, `_get_comp_words_by_ref "$@" cur prev words cword`, `__cfp_get_comp_words_by_ref "$@"`)
	script = strings.ReplaceAll(script, "_filedir", "__cfp_filedir")
	if _, err := io.WriteString(out, script); err != nil {
		return err
	}
	_, err := io.WriteString(out, bashCompletionShim)
	return err
}

// positionCompletions are the values offered for --from, --start-from and --to; @FILE completes
// the state files of the working directory.
var positionCompletions = []string{"now", "beginning", "-1h", "-15m", "@"}

// registerAccountCompletion makes -d, -c, --lease-database, --lease-container and -p complete
// from the account, and the position flags complete their forms. It is called once, on root.
func registerAccountCompletion(root *cobra.Command, f *factory) {
	pf := root.PersistentFlags()
	reg := func(name string, fn func(context.Context) ([]string, error)) {
		if pf.Lookup(name) == nil {
			return
		}
		_ = root.RegisterFlagCompletionFunc(name, func(c *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			return f.completeFromAccount(c, toComplete, fn)
		})
	}
	reg("database", f.completeDatabases)
	reg("lease-database", f.completeDatabases)
	reg("container", func(ctx context.Context) ([]string, error) { return f.completeContainers(ctx, f.Global.Database) })
	reg("lease-container", func(ctx context.Context) ([]string, error) { return f.completeContainers(ctx, f.leaseDatabase()) })
	reg("processor", f.completeProcessors)
}

// registerPositionCompletion completes the position flags of c (tail, process, leases reset).
func registerPositionCompletion(c *cobra.Command) {
	for _, name := range []string{"from", "start-from", "to"} {
		if c.LocalFlags().Lookup(name) == nil {
			continue
		}
		_ = c.RegisterFlagCompletionFunc(name, func(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			if strings.HasPrefix(toComplete, "@") {
				return stateFileCompletions(toComplete[1:]), cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
			}
			return positionCompletions, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
		})
	}
}

// stateFileCompletions returns "@"+name for the files and directories matching prefix.
func stateFileCompletions(prefix string) []string {
	names, _ := filepath.Glob(prefix + "*")
	out := make([]string, 0, len(names))
	for _, n := range names {
		if st, err := os.Stat(n); err == nil && st.IsDir() {
			n += string(filepath.Separator)
		}
		out = append(out, "@"+n)
	}
	return out
}

// completeFromAccount runs fn with the environment applied and a short timeout; any error
// completes nothing, silently (a TAB must not print).
func (f *factory) completeFromAccount(c *cobra.Command, toComplete string, fn func(context.Context) ([]string, error)) ([]string, cobra.ShellCompDirective) {
	f.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	f.IO.ErrOut = io.Discard
	if err := f.Global.applyEnv(c.Flags(), f.Getenv, true); err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	if dir := f.Global.Local; dir != "" {
		if _, err := os.Stat(dir); err != nil {
			// Opening the embedded emulator would create the directory: TAB only asks.
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
	}
	ctx, cancel := context.WithTimeout(contextOf(c), completionTimeout)
	defer cancel()
	type result struct {
		names []string
		err   error
	}
	done := make(chan result, 1)
	go func() {
		names, err := fn(ctx)
		done <- result{names, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []string
		for _, n := range r.names {
			if strings.HasPrefix(n, toComplete) {
				out = append(out, n)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	case <-ctx.Done():
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
}

func (f *factory) completeDatabases(ctx context.Context) ([]string, error) {
	acct, err := f.Account(ctx)
	if err != nil {
		return nil, err
	}
	return acct.Databases(ctx)
}

func (f *factory) completeContainers(ctx context.Context, db string) ([]string, error) {
	if db == "" {
		return nil, nil
	}
	acct, err := f.Account(ctx)
	if err != nil {
		return nil, err
	}
	return acct.Containers(ctx, db)
}

// completeProcessors returns the processor names found in the lease container.
func (f *factory) completeProcessors(ctx context.Context) ([]string, error) {
	if f.leaseDatabase() == "" {
		return nil, nil
	}
	t, err := f.openLeaseContainer(ctx)
	if err != nil {
		return nil, err
	}
	docs, err := t.docs.QueryPrefix(ctx, "")
	if err != nil {
		return nil, err
	}
	known := leases.Monitored{Database: f.Global.Database, Container: f.Global.Container}
	host := ""
	if t.monitored != nil {
		host = t.host
	} else if acct, err := f.Account(ctx); err == nil {
		host = acct.Host()
	}
	var names []string
	for _, in := range leases.Discover(docs, known) {
		if name, ok := processorName(in, host, known); ok {
			names = append(names, name)
		}
	}
	return names, nil
}
