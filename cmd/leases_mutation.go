package cmd

import (
	"bufio"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cfp-dev/cfp/internal/leases"
	"github.com/cfp-dev/cfp/internal/render"
)

// mutationFlags are the flags every writing lease command shares (kcl's `group seek`).
type mutationFlags struct {
	Execute bool
	Yes     bool
	Force   bool
}

func (m *mutationFlags) add(c *cobra.Command, what string) {
	c.Flags().BoolVar(&m.Execute, "execute", false, "apply the plan (without it, only show it)")
	c.Flags().BoolVarP(&m.Yes, "yes", "y", false, "do not ask for confirmation on a terminal")
	c.Flags().BoolVar(&m.Force, "force", false, what)
}

// confirm decides whether a planned mutation runs: only with --execute; on a terminal it asks
// unless --yes; off a terminal it never asks.
func confirm(ios *render.IOStreams, m mutationFlags, question string) (bool, error) {
	if !m.Execute {
		fmt.Fprintln(ios.ErrOut, "This is a plan; nothing was written. Run again with --execute to apply it.")
		return false, nil
	}
	if m.Yes || !ios.CanPrompt() {
		return true, nil
	}
	fmt.Fprintf(ios.ErrOut, "%s [y/N] ", question)
	line, err := bufio.NewReader(ios.In).ReadString('\n')
	if err != nil && line == "" {
		return false, fmt.Errorf("read confirmation: %w", err)
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true, nil
	}
	fmt.Fprintln(ios.ErrOut, "Nothing was written.")
	return false, nil
}

// mutation is what a writing lease command (reset, import, delete, release) does once its plan
// is printed: refuse leases with a live owner unless --force, ask, write each change, and
// report the writes that failed (kcl's `group seek`).
type mutation struct {
	f     *factory
	flags mutationFlags
	// held is "token (owner)" for each planned lease whose owner is alive; nameHeld names them in
	// the warning of a plan run without --execute.
	held     []string
	nameHeld bool
	// changes are the planned writes; each returns an error that says what it wrote.
	changes []func(context.Context) error
	// none is said when there is nothing to write, question is asked before writing, and done
	// reports the writes made ("%d" is their number).
	none, question, done string
}

// approve decides whether the changes are written: never while a lease has a live owner
// without --force (an error with --execute, a warning without), nor when there is nothing to
// write; otherwise as confirm says.
func (m *mutation) approve() (bool, error) {
	if len(m.held) > 0 && !m.flags.Force {
		if m.flags.Execute {
			return false, errLiveOwners(m.held)
		}
		if m.nameHeld {
			m.f.warnf("%d lease(s) have a live owner (%s); --execute refuses them without --force", len(m.held), strings.Join(m.held, ", "))
		} else {
			m.f.warnf("%d lease(s) have a live owner; --execute refuses them without --force", len(m.held))
		}
	}
	if len(m.changes) == 0 {
		fmt.Fprintln(m.f.IO.ErrOut, m.none)
		return false, nil
	}
	return confirm(m.f.IO, m.flags, m.question)
}

// apply writes every change, warning about each one that fails, and returns partialFailure.
func (m *mutation) apply(ctx context.Context) error {
	var first error
	failed := 0
	for _, change := range m.changes {
		if err := change(ctx); err != nil {
			failed++
			if first == nil {
				first = err
			}
			m.f.warnf("%v", err)
		}
	}
	fmt.Fprintf(m.f.IO.ErrOut, m.done+"\n", len(m.changes)-failed)
	return partialFailure(failed, len(m.changes), first)
}

// run applies the changes when approve allows it.
func (m *mutation) run(ctx context.Context) error {
	ok, err := m.approve()
	if err != nil || !ok {
		return err
	}
	return m.apply(ctx)
}

// errLiveOwners refuses a mutation of leases whose owners are alive.
func errLiveOwners(held []string) error {
	return withHint(fmt.Errorf("%d lease(s) have a live owner (%s); their next checkpoint would undo the change",
		len(held), strings.Join(held, ", ")),
		"stop the processors and wait for the leases to expire, or pass --force to take the leases from their owners")
}

// liveOwned returns "token (owner)" for each lease with a live owner at now.
func liveOwned(ls []*leases.Lease, now time.Time, expiration time.Duration) []string {
	var out []string
	for _, l := range ls {
		if l.State(now, expiration) == leases.StateOwned {
			out = append(out, fmt.Sprintf("%s (%s)", l.Token, l.Owner))
		}
	}
	return out
}

// partialFailure is the exit-3 error of a mutation that failed for some leases only.
func partialFailure(failed, total int, first error) error {
	if failed == 0 {
		return nil
	}
	if failed == total {
		return first
	}
	return &ExitError{Code: exitThreshold, Err: fmt.Errorf("%d of %d changes failed; first: %w", failed, total, first)}
}
