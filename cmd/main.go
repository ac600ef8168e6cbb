// Package cmd is cfp's command layer: cobra adapters that turn flags into options and call the
// engine. Main is the whole program: it builds the IO streams, the logger and a context
// cancelled on SIGINT/SIGTERM, runs the command, prints any error as one line and returns the
// exit code. main.go only exits with its result.
//
// Each top-level command lives in its own file (tail.go, leases_reset.go, ...) with an options
// struct, a newXCmd(f *factory) constructor, and a runX function that tests call without
// cobra; addCommands in root.go builds the command tree from the constructors.
package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/cfp-dev/cfp/internal/render"
)

// Main runs cfp with args and the process's own streams, environment and signals, and returns
// the process exit code.
func Main(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// After the first signal, restore the default handling: a second Ctrl-C ends cfp at once
	// if a graceful shutdown hangs.
	go func() {
		<-ctx.Done()
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
	root.SetArgs(args)
	root.SetIn(ios.In)
	root.SetOut(ios.Out)
	root.SetErr(ios.ErrOut)

	c, err := root.ExecuteContextC(ctx)
	interrupted := ctx.Err() != nil
	if cerr := f.closeAccount(); cerr != nil && err == nil {
		err = fmt.Errorf("close account: %w", cerr)
	}
	err = hintLocalWithSpace(asUsageError(err), root, args)
	printError(ios.ErrOut, err, f.redact)

	var usage *UsageError
	if errors.As(err, &usage) && !usage.Brief && c != nil && !interrupted {
		io.WriteString(ios.ErrOut, shortUsage(c))
	}
	return exitCode(err, interrupted)
}

// hintLocalWithSpace adds a hint to a usage error when args hold "--local DIR": --local takes
// an optional value, so DIR was read as the command and what followed failed to parse.
func hintLocalWithSpace(err error, root *cobra.Command, args []string) error {
	var usage *UsageError
	if !errors.As(err, &usage) {
		return err
	}
	for i := 0; i+1 < len(args) && args[i] != "--"; i++ {
		next := args[i+1]
		if args[i] != "--local" || strings.HasPrefix(next, "-") {
			continue
		}
		for _, c := range root.Commands() {
			if c.Name() == next || c.HasAlias(next) {
				return err // --local before a command: the default directory
			}
		}
		return withHint(err, fmt.Sprintf("write --local=%s: with a space, %s is read as a command", next, next))
	}
	return err
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
