// Package cmd is cfp's command layer: cobra adapters that turn flags into options and call the
// engine. Main is the whole program: it builds the IO streams, the logger and a context
// cancelled on SIGINT/SIGTERM, runs the command, prints any error as one line and returns the
// exit code. main.go only exits with its result.
//
// Each command lives in a file named after it (tail.go, leases_reset.go, emulator_split.go, ...)
// with an options struct, a newXCmd(f *factory) constructor, and a runX function that tests call
// without cobra; two small subcommands share their sibling's file (leases import in
// leases_export.go, leases release in leases_delete.go). addCommands in root.go builds the
// command tree from the constructors.
package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/cfp-dev/cfp/internal/leases"
	"github.com/cfp-dev/cfp/internal/render"
)

// secondSignalAfter is how long after the first stop signal a second one ends cfp at once.
const secondSignalAfter = time.Second

// Main runs cfp with args and the process's own streams, environment and signals, and returns
// the process exit code.
func Main(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// After the first signal, restore the default handling: a second Ctrl-C ends cfp at once
	// if a graceful shutdown hangs. Signals within secondSignalAfter of the first are the same
	// stop: timeout(1) and process-group kills deliver one signal twice, and ending there would
	// skip the shutdown (a tail's state and summary, a host's lease release).
	go func() {
		<-ctx.Done()
		time.Sleep(secondSignalAfter)
		stop()
	}()
	return MainWithIO(ctx, args, render.System(os.Getenv), os.Getenv)
}

// MainWithIO runs cfp in process with injected streams and environment (getenv; nil means
// os.Getenv) and returns the exit code. Cancelling ctx is an interruption: the command stops
// and cfp exits 130 unless the command chose its own code.
func MainWithIO(ctx context.Context, args []string, ios *render.IOStreams, getenv func(string) string) int {
	if getenv == nil {
		getenv = os.Getenv
	}
	f := &factory{
		IO:     ios,
		Global: &globalOptions{},
		Getenv: getenv,
		Now:    time.Now,
	}
	f.Log = f.newLogger()
	f.Account = f.openAccount

	root := newRootCmd(f)
	args, err := localWithSpace(root, args)
	if err != nil {
		printError(ios.ErrOut, err, f.redact)
		return exitCode(err, false)
	}
	root.SetArgs(relativeArgs(root, args))
	root.SetIn(ios.In)
	root.SetOut(ios.Out)
	root.SetErr(ios.ErrOut)

	c, err := root.ExecuteContextC(ctx)
	interrupted := ctx.Err() != nil
	if cerr := f.closeAccount(); cerr != nil && err == nil {
		err = fmt.Errorf("close account: %w", cerr)
	}
	err = suggestCommand(asUsageError(err), c)
	printError(ios.ErrOut, err, f.redact)

	var usage *UsageError
	if errors.As(err, &usage) && !usage.Brief && c != nil && !interrupted {
		io.WriteString(ios.ErrOut, shortUsage(c))
	}
	return exitCode(err, interrupted)
}

// relativeArgs moves arguments that are negative durations ("-2h": a position that long
// ago) behind "--", so that `cfp replay-from -2h` reads -2h as its argument rather than as
// the flags -2 and -h. No cfp flag is a digit, so such an argument can only be a position;
// one that follows a flag taking a value (--from -2h) is that flag's value and stays.
func relativeArgs(root *cobra.Command, args []string) []string {
	var moved, rest []string
	for i, a := range args {
		if a == "--" {
			rest = append(rest, args[i:]...)
			break
		}
		if isNegativeDuration(a) && (i == 0 || !takesValue(root, args[i-1])) {
			moved = append(moved, a)
			continue
		}
		rest = append(rest, a)
	}
	if len(moved) == 0 {
		return args
	}
	out := rest
	if i := slices.Index(rest, "--"); i >= 0 {
		out = slices.Concat(rest[:i+1], moved, rest[i+1:])
	} else {
		out = slices.Concat(rest, []string{"--"}, moved)
	}
	return out
}

// isNegativeDuration reports whether a is "-" and a positive Go duration ("-2h", "-90m").
func isNegativeDuration(a string) bool {
	if len(a) < 3 || a[0] != '-' || a[1] < '0' || a[1] > '9' {
		return false
	}
	d, err := time.ParseDuration(a[1:])
	return err == nil && d > 0
}

// takesValue reports whether arg is a flag of some command under root that takes a value
// in the next argument ("--from", "-n"; not "--from=x", a boolean, or --local).
func takesValue(root *cobra.Command, arg string) bool {
	if len(arg) < 2 || arg[0] != '-' || strings.Contains(arg, "=") {
		return false
	}
	var fl *pflag.Flag
	found := false
	walk(root, func(c *cobra.Command) {
		if found {
			return
		}
		for _, fs := range []*pflag.FlagSet{c.Flags(), c.PersistentFlags()} {
			if strings.HasPrefix(arg, "--") {
				fl = fs.Lookup(arg[2:])
			} else {
				fl = fs.ShorthandLookup(arg[len(arg)-1:])
			}
			if fl != nil {
				found = true
				return
			}
		}
	})
	return found && fl.NoOptDefVal == ""
}

// localWithSpace reads "--local DIR" as "--local=DIR" where that is the only sensible reading
// (--local takes an optional value, so pflag leaves DIR to be read as a command or argument):
// when DIR is an existing directory, or when the command takes no argument that DIR could be.
// "--local tail" keeps the default directory before a command. Where DIR could also be the
// command's argument (import FILE) and is no directory, a DIR that looks like a path is a
// one-line usage error that shows --local=DIR; anything else stays an argument.
func localWithSpace(root *cobra.Command, args []string) ([]string, error) {
	for i := 0; i+1 < len(args) && args[i] != "--"; i++ {
		dir := args[i+1]
		if args[i] != "--local" || strings.HasPrefix(dir, "-") || isCommand(root, dir) {
			continue
		}
		c, _, err := root.Find(args)
		takesArg := err == nil && c != nil && (c.Args == nil || c.Args(c, []string{dir}) == nil)
		if st, serr := os.Stat(dir); serr == nil && st.IsDir() || !takesArg {
			return slices.Concat(args[:i], []string{"--local=" + dir}, args[i+2:]), nil
		}
		if _, serr := os.Stat(dir); serr != nil && (strings.Contains(dir, "/") || strings.HasPrefix(dir, ".")) {
			return nil, briefUsageErrorf("--local %s: no such directory, and %s would be read as the command's argument: write --local=%s", dir, dir, dir)
		}
	}
	return args, nil
}

// isCommand reports whether name is a top-level command of root (or an alias of one).
func isCommand(root *cobra.Command, name string) bool {
	for _, c := range root.Commands() {
		if c.Name() == name || c.HasAlias(name) {
			return true
		}
	}
	return false
}

var (
	unknownCommandRE = regexp.MustCompile(`^unknown command "(.*)" for "(.*)"$`)
	unknownFlagRE    = regexp.MustCompile(`^unknown flag: --([^\s=]+)$`)
)

// suggestCommand adds cobra's suggestions to an unknown-command error of c (`unknown command
// "tial" for "cfp": did you mean tail?`) and the nearest flag of c to an unknown flag
// (`unknown flag: --form: did you mean --from?`).
func suggestCommand(err error, c *cobra.Command) error {
	var usage *UsageError
	if !errors.As(err, &usage) || c == nil {
		return err
	}
	if m := unknownFlagRE.FindStringSubmatch(err.Error()); m != nil {
		var names []string
		c.Flags().VisitAll(func(fl *pflag.Flag) {
			if !fl.Hidden {
				names = append(names, fl.Name)
			}
		})
		if s, ok := leases.Suggest(m[1], names); ok {
			return &UsageError{Err: fmt.Errorf("%w: did you mean --%s?", usage.Err, s)}
		}
		return err
	}
	m := unknownCommandRE.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	if c.SuggestionsMinimumDistance <= 0 {
		c.SuggestionsMinimumDistance = 2 // cobra's default, which it applies only in its own errors
	}
	sugg := c.SuggestionsFor(m[1])
	if len(sugg) == 0 {
		return err
	}
	return &UsageError{Err: fmt.Errorf("%w: did you mean %s?", usage.Err, strings.Join(sugg, " or "))}
}

// shortUsage is what follows a usage error: the command's usage line, its subcommands or its
// own flags (not the global ones), and where to read more.
func shortUsage(c *cobra.Command) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nUsage: %s\n", c.UseLine())
	if c.HasAvailableSubCommands() {
		b.WriteString("\nCommands:\n")
		for _, sub := range c.Commands() {
			if sub.IsAvailableCommand() {
				fmt.Fprintf(&b, "  %-12s %s\n", sub.Name(), sub.Short)
			}
		}
	} else if c.HasParent() {
		own := pflag.NewFlagSet(c.Name(), pflag.ContinueOnError)
		c.LocalNonPersistentFlags().VisitAll(func(fl *pflag.Flag) {
			if fl.Name != "help" {
				own.AddFlag(fl)
			}
		})
		if own.HasAvailableFlags() {
			b.WriteString("\nFlags:\n")
			b.WriteString(own.FlagUsages())
		}
	}
	fmt.Fprintf(&b, "\nRun '%s --help' for more.\n", c.CommandPath())
	return b.String()
}
