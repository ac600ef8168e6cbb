package cmd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cfp-dev/cfp/internal/leases"
	"github.com/cfp-dev/cfp/internal/render"
)

type leasesDeleteOptions struct {
	f *factory
	mutationFlags
	Expiration time.Duration
	LockOnly   bool
}

// deleteStepView is one document in `cfp leases delete -o json`; a public contract.
type deleteStepView struct {
	ID    string  `json:"id"`
	Kind  string  `json:"kind"`
	Lease *string `json:"lease"`
	Owner *string `json:"owner"`
	State *string `json:"state"`
}

func newLeasesDeleteCmd(f *factory) *cobra.Command {
	opts := &leasesDeleteOptions{f: f}
	c := &cobra.Command{
		Use:   "delete [--lock] [--execute]",
		Short: "Remove a processor's leases and markers",
		Long: `Remove a processor's leases, its .info and .lock markers and the presence records of
its cfp hosts.

This is the way to restart a processor from its start options, as for the .NET and Java
processors: stop every instance, delete the lease set, start the processors with the
start time you want; the first one bootstraps a fresh lease per partition. Deleting the
leases while keeping .info would leave the processors with nothing to do, so delete always
removes both.

--lock removes only the bootstrap lock: processors never delete a lock they did not write
(a host still bootstrapping would fail), so a lock left by a host that died while it
bootstrapped, in a lease container without time to live, stays until it is removed;
'cfp leases list --check' reports it.

Without --execute, delete prints what it would remove. It asks on a terminal unless
--yes, and refuses while any lease has a live owner unless --force. A cfp host still running
finds its leases deleted at its next renew or checkpoint, and stops (exit 6) rather than
bootstrap a new set by itself; a .NET or Java host idles. Save the leases
first with 'cfp leases export' to be able to undo it with 'cfp leases import'.`,
		Example: `  # Only the bootstrap lock a dead host left in a lease container without time to live
  cfp leases delete -d shop -c orders -p orders-proj --lock --execute

  # Every lease of a processor that is retired, after a backup
  cfp leases export -d shop -c orders -p orders-proj --file backup.json
  cfp leases delete -d shop -c orders -p orders-proj --execute`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return runLeasesDelete(contextOf(c), opts)
		},
	}
	opts.mutationFlags.add(c, "delete leases whose owner is alive too")
	c.Flags().BoolVar(&opts.LockOnly, "lock", false, "remove only the .lock marker (a bootstrap lock left behind in a lease container without time to live)")
	positiveDurationVar(c.Flags(), &opts.Expiration, "lease-expiration", leases.DefaultExpiration, "an owner that has not renewed for this long is expired")
	return c
}

// hostState is the state of a cfp host's presence record: "owned" while the host refreshes it,
// else "expired".
func hostState(h leases.Host, now time.Time, expiration time.Duration) string {
	if h.Expired(now, expiration) {
		return leases.StateExpired
	}
	return leases.StateOwned
}

func runLeasesDelete(ctx context.Context, opts *leasesDeleteOptions) error {
	f := opts.f
	p, t, err := f.openLeaseCommand(ctx)
	if err != nil {
		return err
	}
	set, err := t.leaseSet(ctx)
	if err != nil {
		return err
	}
	if len(set.Docs) == 0 {
		return t.noLeases(ctx, f)
	}
	now := f.Now()
	byID := map[string]*leases.Lease{}
	for _, l := range set.Leases {
		byID[l.ID] = l
	}
	hostByID := map[string]*leases.Host{}
	for i, h := range set.Hosts {
		hostByID[h.ID] = &set.Hosts[i]
	}
	views := make([]deleteStepView, 0, len(set.Docs))
	if opts.LockOnly {
		set.Docs = slices.DeleteFunc(set.Docs, func(d leases.Document) bool { return d.ID != leases.LockID(t.prefix) })
		set.Leases = nil
	}
	for _, d := range set.Docs {
		v := deleteStepView{ID: d.ID, Kind: "lease"}
		switch d.ID {
		case leases.InfoID(t.prefix):
			v.Kind = "info"
		case leases.LockID(t.prefix):
			v.Kind = "lock"
		}
		if l := byID[d.ID]; l != nil {
			v.Lease, v.Owner, v.State = new(l.Token), nonZero(l.Owner), new(l.State(now, opts.Expiration))
		} else if h := hostByID[d.ID]; h != nil {
			v.Kind, v.Owner, v.State = "host", new(h.Instance), new(hostState(*h, now, opts.Expiration))
		}
		views = append(views, v)
	}
	err = p.Print(ctx, views, func(tb *render.Table) {
		*tb = *render.NewTable(f.IO, "id", "kind", "owner", "state")
		tb.Truncatable(0)
		for _, v := range views {
			tb.Row(v.ID, v.Kind, deref(v.Owner), deref(v.State))
		}
	})
	if err != nil {
		return err
	}
	// Markers first (Set.DeleteOrder): an interrupted delete leaves leases without .info, which
	// the next processor bootstraps over, never .info with leases missing.
	docs := set.DeleteOrder(t.prefix)
	m := mutation{
		f: f, flags: opts.mutationFlags, held: liveOwned(set.Leases, now, opts.Expiration),
		none:     fmt.Sprintf("Nothing under prefix %s.", t.prefix),
		question: fmt.Sprintf("Delete %d document(s) under %s?", len(docs), t.prefix),
		done:     "Deleted %d document(s).",
	}
	for _, d := range docs {
		m.changes = append(m.changes, func(ctx context.Context) error {
			ifMatch := d.ETag
			if opts.Force {
				ifMatch = ""
			}
			if err := t.docs.Delete(ctx, d.ID, d.PK, ifMatch); err != nil && !errors.Is(err, leases.ErrNotFound) {
				return fmt.Errorf("delete %s: %w", d.ID, err)
			}
			return nil
		})
	}
	return m.run(ctx)
}

type leasesReleaseOptions struct {
	f *factory
	mutationFlags
	Leases     []string
	Owner      string
	Expiration time.Duration
}

// releaseStepView is one lease in `cfp leases release -o json`; a public contract.
type releaseStepView struct {
	Lease string `json:"lease"`
	Owner string `json:"owner"`
	State string `json:"state"`
}

func newLeasesReleaseCmd(f *factory) *cobra.Command {
	opts := &leasesReleaseOptions{f: f}
	c := &cobra.Command{
		Use:   "release (--lease TOKEN... | --owner NAME) [--execute]",
		Short: "Clear the owner of stuck leases",
		Long: `Clear the owner of leases, so that any processor instance takes them at once.

An instance that died without releasing its leases keeps them until they expire
(--lease-expiration, 60s by default); release frees them now. Choose the leases by token
(--lease, repeatable) or by owner (--owner, case-insensitive, as the SDKs compare owners).
The continuation is kept.

Without --execute, release prints the leases it would free. It asks on a terminal unless
--yes, and refuses leases whose owner is alive unless --force (the owner then loses the
lease at its next renew).`,
		Example: `  # Free every lease of an instance that was killed
  cfp leases release -d shop -c orders -p orders-proj --owner host-a-1234 --execute --force

  # Free one expired lease
  cfp leases release -d shop -c orders -p orders-proj --lease 3 --execute`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return runLeasesRelease(contextOf(c), opts)
		},
	}
	c.Flags().StringArrayVar(&opts.Leases, "lease", nil, "release the lease with this `TOKEN` (repeatable)")
	c.Flags().StringVar(&opts.Owner, "owner", "", "release every lease owned by `NAME`")
	opts.mutationFlags.add(c, "release leases whose owner is alive too")
	positiveDurationVar(c.Flags(), &opts.Expiration, "lease-expiration", leases.DefaultExpiration, "an owner that has not renewed for this long is expired")
	c.MarkFlagsOneRequired("lease", "owner")
	c.MarkFlagsMutuallyExclusive("lease", "owner")
	return c
}

func runLeasesRelease(ctx context.Context, opts *leasesReleaseOptions) error {
	f := opts.f
	p, t, err := f.openLeaseCommand(ctx)
	if err != nil {
		return err
	}
	store := t.store()
	all, err := store.List(ctx)
	if err != nil {
		return err
	}
	if len(all) == 0 {
		return t.noLeases(ctx, f)
	}
	var sel []*leases.Lease
	if opts.Owner != "" {
		sel = leases.Owned(all, opts.Owner)
	} else if sel, err = selectLeases(all, opts.Leases); err != nil {
		return err
	}
	leases.Sort(sel)
	now := f.Now()
	var targets []*leases.Lease
	views := []releaseStepView{}
	for _, l := range sel {
		if strings.TrimSpace(l.Owner) == "" {
			continue
		}
		targets = append(targets, l)
		views = append(views, releaseStepView{Lease: l.Token, Owner: l.Owner, State: l.State(now, opts.Expiration)})
	}
	err = p.Print(ctx, views, func(tb *render.Table) {
		*tb = *render.NewTable(f.IO, "lease", "owner", "state")
		tb.Abbreviated(0, render.AbbrevToken).StateColumn(2)
		for _, v := range views {
			tb.Row(v.Lease, v.Owner, v.State)
		}
	})
	if err != nil {
		return err
	}
	m := mutation{
		f: f, flags: opts.mutationFlags, held: liveOwned(targets, now, opts.Expiration),
		none:     "No owned leases to release.",
		question: fmt.Sprintf("Release %d lease(s)?", len(targets)),
		done:     "Released %d lease(s).",
	}
	for _, l := range targets {
		m.changes = append(m.changes, func(ctx context.Context) error {
			seen := l.Owner
			_, err := store.Update(ctx, l, func(n *leases.Lease) error {
				if n.Owner != seen {
					return &leases.LeaseLostError{Token: n.Token, Owner: n.Owner}
				}
				n.Owner = ""
				return nil
			})
			if err != nil {
				return fmt.Errorf("release lease %s: %w", l.Token, err)
			}
			return nil
		})
	}
	return m.run(ctx)
}
