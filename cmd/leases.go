package cmd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cfp-dev/cfp/internal/account"
	"github.com/cfp-dev/cfp/internal/cosmos"
	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/leases"
	"github.com/cfp-dev/cfp/internal/render"
)

const leasesLong = `Inspect and repair the lease container of a change feed processor.

A change feed processor (.NET, Java, or 'cfp process') splits a container's change feed
into leases, one per physical partition or EPK range, and keeps them as documents in a
lease container. Every lease id starts with the processor's prefix:

  <processor><account host>_<database rid>_<container rid>..<lease token>

so -p/--processor together with -d/--database and -c/--container names one processor's
lease set, the way a group id names a Kafka consumer group. --lease-id-prefix gives the
whole prefix instead, for leases written through another host name.

[details]

Each lease holds:
  continuation  the change-feed position of the last checkpoint: a raw ETag such as "42",
                meaning "resume with the changes after LSN 42" (Java EPK leases wrap it in
                a Base64 state). No continuation means the processor's start options decide.
  owner         the processor instance working on the lease; it renews the lease every 17s.
                An owner that has not renewed within the expiration interval (60s) is
                expired, and any instance may take the lease over.
  family        the document format (.NET v0/v1, Java PK-range/EPK); cfp writes every
                lease back in its own family, field for field.

Lag is how far a lease's continuation is behind its partition's latest change, in LSNs,
the number the .NET change feed estimator reports ('cfp estimate').

Changing a lease while its owner runs is undone by the owner's next checkpoint, so the
commands that write (reset, import, delete, release) show a plan first, refuse leases
with a live owner unless --force, clear the owner in the same If-Match replace, and write
only with --execute (asking first on a terminal unless --yes).`

const leasesExample = `  # Which processors keep leases in the lease container?
  cfp leases list -d shop

  # The leases of processor "orders-proj", and hygiene checks (exit 3 on findings)
  cfp leases list -d shop -c orders -p orders-proj --check

  # Replay the last hour: plan, then apply
  cfp leases reset -d shop -c orders -p orders-proj --to -1h
  cfp leases reset -d shop -c orders -p orders-proj --to -1h --execute`

func newLeasesCmd(f *factory) *cobra.Command {
	c := &cobra.Command{
		Use:     "leases <command>",
		Short:   "List, check, reset, export and import processor leases",
		Long:    leasesLong,
		Example: leasesExample,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return c.Help()
		},
	}
	c.AddCommand(
		addTimeoutFlag(f, newLeasesListCmd(f), nil),
		addTimeoutFlag(f, newLeasesShowCmd(f), nil),
		addTimeoutFlag(f, newLeasesResetCmd(f), nil),
		addTimeoutFlag(f, newLeasesExportCmd(f), nil),
		addTimeoutFlag(f, newLeasesImportCmd(f), nil),
		addTimeoutFlag(f, newLeasesDeleteCmd(f), nil),
		addTimeoutFlag(f, newLeasesReleaseCmd(f), nil),
	)
	return c
}

// leaseTarget is what a lease command works on: the lease account and container, the prefix
// and, when known, the monitored container.
type leaseTarget struct {
	// acct is the lease container's account: the lease account (--lease-endpoint, ...) or the
	// monitored account.
	acct   *account.Account
	docs   leases.Documents
	prefix string
	// monitored is the monitored container, in the monitored account; nil when the prefix came
	// from --lease-id-prefix and no -c was given.
	monitored *cosmos.Container
	// host is the monitored account's host, which lease prefixes embed; "" when monitored is nil.
	host string
	// mon is the monitored account; nil when monitored is.
	mon *account.Account
	now func() time.Time
	// skip warns about a document under the prefix that is not a lease.
	skip func(id string, err error)
}

// openLeaseContainer opens the lease account and the lease container, and the monitored
// container when -d and -c name it, without resolving a prefix.
func (f *factory) openLeaseContainer(ctx context.Context) (*leaseTarget, error) {
	db := f.leaseDatabase()
	if db == "" {
		return nil, briefUsageErrorf("no lease database given: set -d/--database (COSMOS_DATABASE) or --lease-database")
	}
	acct, err := f.leaseAccount(ctx)
	if err != nil {
		return nil, err
	}
	t := &leaseTarget{
		acct: acct, docs: acct.LeaseDocuments(db, f.Global.LeaseContainer), now: f.Now,
		skip: func(id string, err error) { f.warnf("skipping document %s: %v", id, err) },
	}
	if f.Global.Database != "" && f.Global.Container != "" {
		mon, err := f.Account(ctx)
		if err != nil {
			return nil, err
		}
		t.monitored, t.host, t.mon = mon.Container(f.Global.Database, f.Global.Container), mon.Host(), mon
	}
	return t, nil
}

// openLeaseTarget opens the lease container and resolves the lease prefix with
// cosmos.OpenLeaseSet, as cfp process does: --lease-id-prefix, else the processor's rid prefix
// on the monitored container and its account's host (never the lease account's), or Java's
// name-based set when only that one exists.
func (f *factory) openLeaseTarget(ctx context.Context, needContainer bool) (*leaseTarget, error) {
	if err := f.requireProcessor(); err != nil {
		return nil, err
	}
	if needContainer || f.Global.LeaseIDPrefix == "" {
		if err := f.requireContainer(); err != nil {
			return nil, err
		}
	}
	t, err := f.openLeaseContainer(ctx)
	if err != nil {
		return nil, err
	}
	set := cosmos.LeaseSet{
		Leases: t.acct.Account, Database: f.leaseDatabase(), Container: f.Global.LeaseContainer,
		Processor: f.Global.Processor, Explicit: f.Global.LeaseIDPrefix,
		Store: leases.StoreOptions{Now: t.now, OnSkip: t.skip},
		// The lease commands report a missing container at their first read, and
		// leases import --create makes it after showing its plan.
		MayBeMissing: true,
	}
	if t.mon != nil {
		set.Monitored = t.mon.Account
	}
	if f.Global.LeaseIDPrefix == "" {
		if set.Info, err = t.monitored.Info(ctx); err != nil {
			return nil, err
		}
	}
	store, err := cosmos.OpenLeaseSet(ctx, set)
	if err != nil {
		return nil, err
	}
	t.prefix = store.Prefix()
	return t, nil
}

// monitoredHost returns the monitored account's host, which names processors in lease
// prefixes. With a separate lease account and no monitored account configured it is "": the
// leases can still be read, but .NET prefixes cannot be split into processor names.
func (t *leaseTarget) monitoredHost(ctx context.Context, f *factory) (string, error) {
	if t.host != "" {
		return t.host, nil
	}
	host, err := f.monitoredHost(ctx)
	if errors.Is(err, errNoAccount) {
		if _, separate, _ := f.leaseAccountConfig(); separate {
			return "", nil
		}
	}
	return host, err
}

// openLeaseCommand starts a command on one processor's leases: its printer (JSON in a pipe)
// and its lease target.
func (f *factory) openLeaseCommand(ctx context.Context) (*render.Printer, *leaseTarget, error) {
	p, err := f.printer(render.FormatJSON)
	if err != nil {
		return nil, nil, err
	}
	t, err := f.openLeaseTarget(ctx, false)
	return p, t, err
}

// noLeases is the error of a command given a processor (or --lease-id-prefix) that has no
// leases in the lease container: it exits 5 and names the processors that are there, nearest
// to the one given first, so a typo never looks like a healthy, empty lease set.
func (t *leaseTarget) noLeases(ctx context.Context, f *factory) error {
	given, what := f.Global.Processor, "processor"
	if f.Global.LeaseIDPrefix != "" {
		given, what = f.Global.LeaseIDPrefix, "lease prefix"
	}
	where := f.leaseDatabase() + "/" + f.Global.LeaseContainer
	msg := fmt.Sprintf("no leases for %s %q in lease container %s", what, given, where)
	var names []string
	labels := map[string]string{}
	if docs, err := t.docs.QueryPrefix(ctx, ""); err == nil {
		host, _ := t.monitoredHost(ctx, f)
		for _, in := range leases.Discover(docs) {
			if in.Prefix == t.prefix || in.Leases == 0 {
				continue
			}
			name, ok := processorName(in, host)
			if !ok || f.Global.LeaseIDPrefix != "" {
				name = in.Prefix
			}
			if _, seen := labels[name]; !seen {
				labels[name] = name
				if name == given {
					labels[name] = name + " (of another container, prefix " + in.Prefix + ")"
				}
			}
			names = append(names, name)
		}
	}
	var found []string
	for _, name := range leases.Nearest(given, names) {
		found = append(found, labels[name])
	}
	var hint string
	switch {
	case len(found) == 0:
		msg += " (it holds no other lease sets)"
	default:
		if s, ok := leases.Suggest(given, names); ok {
			msg += fmt.Sprintf(" (did you mean %s?)", s)
		}
		msg += "; found: " + strings.Join(found, ", ")
		hint = "check -p/--processor, or 'cfp leases list' to see every processor of the lease container"
	}
	return &ExitError{Code: exitNoLeases, Err: withHint(errors.New(msg), hint)}
}

// processorName returns the processor name of a discovered prefix, given the monitored
// account's host ("" when unknown).
func processorName(in leases.ProcessorInfo, host string, known ...leases.Monitored) (string, bool) {
	if host != "" {
		if name, ok := leases.ProcessorName(in.Prefix, host, known...); ok {
			return name, true
		}
	}
	return in.Processor, in.Processor != ""
}

// store returns the lease store of the target's prefix; documents under the prefix that are not
// leases are skipped with a warning.
func (t *leaseTarget) store() *leases.Store {
	return leases.NewStore(t.docs, t.prefix, leases.StoreOptions{Now: t.now, OnSkip: t.skip})
}

// partitions lists the monitored container's live partitions, nil when it is not known.
func (t *leaseTarget) partitions(ctx context.Context) ([]feed.Partition, error) {
	if t.monitored == nil {
		return nil, nil
	}
	return t.monitored.Partitions(ctx)
}

// selectLeases keeps the leases whose token is in tokens (all when tokens is empty); an unknown
// token is a usage error.
func selectLeases(ls []*leases.Lease, tokens []string) ([]*leases.Lease, error) {
	if len(tokens) == 0 {
		return ls, nil
	}
	var out []*leases.Lease
	for _, tok := range tokens {
		n := 0
		for _, l := range ls {
			if l.Token == tok {
				out = append(out, l)
				n++
			}
		}
		if n == 0 {
			return nil, briefUsageErrorf("no lease with token %q under this prefix", tok)
		}
	}
	return out, nil
}

// nonZero returns a pointer to a copy of v, or nil when v is the zero value: an optional field
// of a JSON view, null when unknown.
func nonZero[T comparable](v T) *T {
	var zero T
	if v == zero {
		return nil
	}
	return &v
}

// deref returns *p, or the zero value when p is nil: the table cell of an optional view field
// (a table shows an empty cell as render.Empty).
func deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}

// timeView renders t for a JSON view, RFC 3339 in UTC, or nil when t is zero.
func timeView(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	return new(t.UTC().Format(time.RFC3339Nano))
}

// orDash returns s, or render.Empty when s is blank.
func orDash(s string) string {
	if strings.TrimSpace(s) == "" {
		return render.Empty
	}
	return s
}
