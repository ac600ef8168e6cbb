package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/cfp-dev/cfp/internal/cosmos"
	"github.com/cfp-dev/cfp/internal/leases"
	"github.com/cfp-dev/cfp/internal/lineio"
	"github.com/cfp-dev/cfp/internal/render"
)

type leasesExportOptions struct {
	f    *factory
	File string
}

func newLeasesExportCmd(f *factory) *cobra.Command {
	opts := &leasesExportOptions{f: f}
	c := &cobra.Command{
		Use:   "export [--file FILE]",
		Short: "Save a processor's lease documents as JSON",
		Long: `Save a processor's lease documents, and its .info marker, as one JSON document.

Each document is kept whole, every field of every lease family, without the service's
system properties (_rid, _etag, _ts, ...). 'cfp leases import' restores the file, and
'cfp leases reset --to @FILE' moves the continuations back to the positions it holds.
The format: {"version":1,"prefix":"...","exported_at":"...","leases":[...],"markers":[...]}.`,
		Example: `  # Back up the leases before a risky change
  cfp leases export -d shop -c orders -p orders-proj --file leases-backup.json

  # Continuation of every lease
  cfp leases export -d shop -c orders -p orders-proj | jq -r '.leases[] | "\(.LeaseToken) \(.ContinuationToken)"'`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return runLeasesExport(contextOf(c), opts)
		},
	}
	c.Flags().StringVarP(&opts.File, "file", "f", "", "write to `FILE` instead of stdout")
	return c
}

func runLeasesExport(ctx context.Context, opts *leasesExportOptions) error {
	f := opts.f
	p, t, err := f.openLeaseCommand(ctx)
	if err != nil {
		return err
	}
	e, err := t.store().Export(ctx)
	if err != nil {
		return err
	}
	if len(e.Leases) == 0 {
		return t.noLeases(ctx, f)
	}
	e.ExportedAt = f.Now().UTC()
	if opts.File == "" {
		return p.JSON(ctx, e)
	}
	b, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return fmt.Errorf("encode export: %w", err)
	}
	if err := os.WriteFile(opts.File, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("write export: %w", err)
	}
	fmt.Fprintf(f.IO.ErrOut, "Exported %d lease(s) of %s to %s.\n", len(e.Leases), e.Prefix, opts.File)
	return nil
}

// cmpBool orders false before true.
func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// maxExportFile bounds a lease export read by leases import and reset --to @FILE: an export
// of 10,000 leases is about 10 MiB.
const maxExportFile = 64 << 20

type leasesImportOptions struct {
	f *factory
	mutationFlags
	File       string
	Create     bool
	Expiration time.Duration
}

// importStepView is one planned document in `cfp leases import -o json`; a public contract.
type importStepView struct {
	ID     string  `json:"id"`
	Action string  `json:"action"`
	Owner  *string `json:"owner"`
}

func newLeasesImportCmd(f *factory) *cobra.Command {
	opts := &leasesImportOptions{f: f}
	c := &cobra.Command{
		Use:   "import FILE [--create] [--execute]",
		Short: "Restore lease documents saved by 'cfp leases export'",
		Long: `Restore lease documents saved by 'cfp leases export' (FILE, or - for stdin).

Documents missing from the lease container are created, different ones are replaced
(If-Match on the version read when planning), equal ones are left alone. The leases keep
the prefix in the file; with -p (and -d, -c) or --lease-id-prefix they are renamed to that
processor's prefix, which copies a lease set to another processor or account.

Like reset, import only prints its plan without --execute, asks on a terminal unless
--yes, and refuses to replace leases whose owner is alive unless --force. --create
creates the lease container (partitioned on /id) when it does not exist.`,
		Example: `  # Plan, then restore a backup
  cfp leases import -d shop leases-backup.json
  cfp leases import -d shop leases-backup.json --execute

  # Copy the leases of processor "a" to processor "b"
  cfp leases export -d shop -c orders -p a | cfp leases import -d shop -c orders -p b - --execute`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			opts.File = args[0]
			return runLeasesImport(contextOf(c), opts)
		},
	}
	c.Flags().BoolVar(&opts.Create, "create", false, "create the lease container (partition key /id) if it does not exist")
	opts.mutationFlags.add(c, "replace leases whose owner is alive too")
	positiveDurationVar(c.Flags(), &opts.Expiration, "lease-expiration", leases.DefaultExpiration, "an owner that has not renewed for this long is expired")
	return c
}

func runLeasesImport(ctx context.Context, opts *leasesImportOptions) error {
	f := opts.f
	p, err := f.printer(render.FormatJSON)
	if err != nil {
		return err
	}
	var b []byte
	if opts.File == "-" {
		b, err = lineio.ReadAll(f.IO.In, "standard input", maxExportFile)
	} else {
		b, err = lineio.ReadFile(opts.File, maxExportFile)
	}
	if err != nil {
		return fmt.Errorf("read export: %w", err)
	}
	e, err := parseExport(opts.File, b)
	if err != nil {
		return err
	}

	var t *leaseTarget
	if f.Global.Processor != "" || f.Global.LeaseIDPrefix != "" {
		if t, err = f.openLeaseTarget(ctx, false); err != nil {
			return err
		}
		if t.prefix != e.Prefix {
			fmt.Fprintf(f.IO.ErrOut, "Renaming the leases from %s to %s.\n", e.Prefix, t.prefix)
			if e, err = e.Rename(t.prefix); err != nil {
				return err
			}
		}
	} else {
		if t, err = f.openLeaseContainer(ctx); err != nil {
			return err
		}
		t.prefix = e.Prefix
	}

	missing := false
	existing, err := t.docs.QueryPrefix(ctx, t.prefix)
	if errors.Is(err, leases.ErrNotFound) && opts.Create {
		existing, missing = nil, true
	} else if err != nil {
		return fmt.Errorf("import: list leases of %s: %w", t.prefix, err)
	}
	steps, err := leases.PlanImport(e, existing)
	if err != nil {
		return err
	}
	now := f.Now()
	current := map[string]*leases.Lease{}
	for _, d := range existing {
		if l, err := leases.Decode(d); err == nil {
			current[d.ID] = l
		}
	}
	store := t.store()
	m := mutation{f: f, flags: opts.mutationFlags, none: "Nothing to change.", done: "Wrote %d document(s)."}
	views := make([]importStepView, 0, len(steps))
	var replaced []*leases.Lease
	// Markers (.info, .lock) are written last, and only when every lease was written: a .info
	// marker over an incomplete lease set tells the next processor not to create the missing
	// leases, and their changes would never be processed.
	isMarker := func(id string) bool { return id == leases.InfoID(t.prefix) || id == leases.LockID(t.prefix) }
	slices.SortStableFunc(steps, func(a, b leases.ImportStep) int {
		return cmpBool(isMarker(a.ID), isMarker(b.ID))
	})
	leaseFailures := 0
	for _, s := range steps {
		views = append(views, importStepView{ID: s.ID, Action: s.Action, Owner: nonZero(s.Owner)})
		if s.Action == leases.ImportUnchanged {
			continue
		}
		if l := current[s.ID]; l != nil && s.Action == leases.ImportReplace {
			replaced = append(replaced, l)
		}
		if isMarker(s.ID) {
			m.changes = append(m.changes, func(ctx context.Context) error {
				if leaseFailures > 0 {
					return fmt.Errorf("%s not written: %d lease(s) were not written; import again once they can be", s.ID, leaseFailures)
				}
				return store.ApplyImport(ctx, s)
			})
			continue
		}
		m.changes = append(m.changes, func(ctx context.Context) error {
			err := store.ApplyImport(ctx, s)
			if err != nil {
				leaseFailures++
			}
			return err
		})
	}
	m.held = liveOwned(replaced, now, opts.Expiration)
	m.question = fmt.Sprintf("Write %d document(s)?", len(m.changes))
	err = p.Print(ctx, views, func(tb *render.Table) {
		*tb = *render.NewTable(f.IO, "id", "action", "owner")
		tb.Truncatable(0)
		for _, v := range views {
			tb.Row(v.ID, v.Action, deref(v.Owner))
		}
	})
	if err != nil {
		return err
	}
	ok, err := m.approve()
	if err != nil || !ok {
		return err
	}
	if missing {
		db := f.leaseDatabase()
		if err := t.acct.CreateDatabaseIfNotExists(ctx, db); err != nil {
			return err
		}
		if _, err := t.acct.CreateContainerIfNotExists(ctx, db, f.Global.LeaseContainer, "/id", cosmos.LeaseContainerOptions()); err != nil {
			return err
		}
		fmt.Fprintf(f.IO.ErrOut, "Created lease container %s/%s (partition key /id).\n", db, f.Global.LeaseContainer)
	}
	return m.apply(ctx)
}

// parseExport reads the export file name holds (b), with a hint when it is not one.
func parseExport(name string, b []byte) (leases.Export, error) {
	e, err := leases.ParseExport(b)
	if err != nil {
		return leases.Export{}, withHint(fmt.Errorf("read export %s: %w", name, err), "pass a file written by 'cfp leases export'")
	}
	return e, nil
}

// exportContinuations reads an export file and returns each lease token's continuation.
func exportContinuations(name string) (map[string]string, error) {
	b, err := lineio.ReadFile(name, maxExportFile)
	if err != nil {
		return nil, fmt.Errorf("read the export file: %w", err)
	}
	e, err := parseExport(name, b)
	if err != nil {
		return nil, err
	}
	out, err := e.Continuations()
	if err != nil {
		return nil, fmt.Errorf("read --to @%s: %w", name, err)
	}
	return out, nil
}
