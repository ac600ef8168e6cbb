package cmd

import (
	"context"
	"errors"
	"fmt"

	"github.com/cfp-dev/cfp/internal/account"
	"github.com/cfp-dev/cfp/internal/cosmos"
	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/leases"
)

// warnUncovered warns when an existing lease set does not cover the key space (a lease deleted
// by hand, or a lease import that failed part way after the .info marker was written): the
// bootstrap creates leases only for a store without the marker, so the changes of a gap would
// never be processed.
func warnUncovered(ctx context.Context, f *factory, store *leases.Store) {
	ls, err := store.List(ctx)
	if err != nil || len(ls) == 0 {
		return
	}
	for _, fd := range leases.Check(ls, f.Now(), leases.DefaultExpiration) {
		if fd.Kind == leases.FindingGap {
			f.warnf("the leases of %s do not cover the key space: %s; the changes there are never processed (see 'cfp leases list --check')", store.Prefix(), fd.Message)
		}
	}
}

// modeMismatch explains a lease set of another mode in cfp's terms, on one line.
func (o *processOptions) modeMismatch(mm *feed.ModeMismatchError) error {
	if mm.Refused {
		return fmt.Errorf("lease %s has Mode %q, which .NET refuses to start on (%s); set its Mode to %q (see cfp leases list --check)",
			mm.Lease, mm.LeaseMode, leases.RefusedModeMessage(mm.LeaseMode, mm.ProcessorMode), mm.ProcessorMode)
	}
	have := feed.LatestVersion
	if mm.LeaseMode == leases.ModeFullFidelity {
		have = feed.AllVersionsAndDeletes
	}
	return fmt.Errorf("the leases of processor %s are in %s mode, not %s: %w; run with --mode %s, or use another -p/--processor",
		o.f.Global.Processor, have, o.mode, mm, have)
}

// leaseFormat is the lease format the processor bootstraps in: --lease-format when given, else
// the default (.NET's for a new set, an existing set's own).
func (o *processOptions) leaseFormat() feed.LeaseFormat {
	if !o.leaseFormatSet {
		return feed.LeaseFormatDefault
	}
	return feed.LeaseFormat(o.LeaseFormat)
}

// leaseFormatMismatch explains, on one line, a lease set in the other format than
// --lease-format.
func (o *processOptions) leaseFormatMismatch(lf *feed.LeaseFormatError) error {
	have, reader := "Java's", "only Java hosts"
	if lf.Want == feed.LeaseFormatJava {
		have, reader = ".NET's", ".NET hosts, not Java hosts,"
	}
	return fmt.Errorf("the leases of processor %s are in %s format (lease %s is %s), which %s can read; --lease-format %s cannot change it: leave --lease-format out, or use another -p/--processor",
		o.f.Global.Processor, have, lf.Lease, lf.Family, reader, lf.Want)
}

// leaseStore opens (or creates) the lease container in the lease account and returns the store
// of the processor's lease set on the monitored container of mon (cosmos.OpenLeaseSet: the rid
// prefix, or Java's PK-range set named by the container's names when only that one exists).
func (o *processOptions) leaseStore(ctx context.Context, mon *account.Account, info cosmos.ContainerInfo) (*leases.Store, error) {
	f := o.f
	acct, err := f.leaseAccount(ctx)
	if err != nil {
		return nil, err
	}
	store, err := cosmos.OpenLeaseSet(ctx, cosmos.LeaseSet{
		Monitored: mon.Account, Info: info, Leases: acct.Account,
		Database: f.leaseDatabase(), Container: f.Global.LeaseContainer,
		Processor: f.Global.Processor, Explicit: f.Global.LeaseIDPrefix, Create: o.CreateLeaseContainer,
		Store: leases.StoreOptions{Mode: o.mode.LeaseMode(), OnSkip: func(id string, err error) {
			f.Log.Warn("not a lease document, ignored", "id", id, "err", err)
		}},
	})
	if errors.Is(err, leases.ErrNotFound) {
		return nil, withHint(err, "create it with --create-lease-container, or name another with --lease-container")
	}
	return store, err
}

// noteExistingLeases tells the user that --from does not move leases that already have a
// continuation.
func (o *processOptions) noteExistingLeases(ctx context.Context, store *leases.Store) {
	ls, err := store.List(ctx)
	if err != nil {
		return
	}
	withCont := 0
	for _, l := range ls {
		if l.Continuation != "" {
			withCont++
		}
	}
	if withCont == 0 {
		return
	}
	proc := o.f.Global.Processor
	if proc == "" {
		proc = "NAME"
	}
	fmt.Fprintf(o.f.IO.ErrOut, "cfp: note: %d of %d leases of processor %s already have a continuation and resume from it; "+
		"--from %s applies only to the others. To move them, run 'cfp leases reset -p %s' (see its --to flag)\n",
		withCont, len(ls), proc, o.StartFrom, proc)
}
