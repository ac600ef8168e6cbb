package cmd

import (
	"context"
	"errors"
	"fmt"

	"github.com/cfp-dev/cfp/changefeed"
	"github.com/cfp-dev/cfp/internal/cosmos"
	"github.com/cfp-dev/cfp/internal/leases"
)

// warnUncovered warns when an existing lease set does not cover the key space (a lease deleted
// by hand, or a lease import that failed part way after the .info marker was written): the
// bootstrap creates leases only for a store without the marker, so the changes of a gap would
// never be processed.
func warnUncovered(ctx context.Context, f *factory, proc *changefeed.Processor) {
	ls, err := proc.Leases(ctx)
	if err != nil || len(ls) == 0 {
		return
	}
	for _, fd := range leases.Check(ls, f.Now(), leases.DefaultExpiration) {
		if fd.Kind == leases.FindingGap {
			f.warnf("the leases of %s do not cover the key space: %s; the changes there are never processed (see 'cfp leases list --check')", proc.Prefix(), fd.Message)
		}
	}
}

// modeMismatch explains a lease set of another mode in cfp's terms, on one line.
func (o *processOptions) modeMismatch(mm *changefeed.ModeMismatchError) error {
	if mm.Refused {
		return fmt.Errorf("lease %s has Mode %q, which .NET refuses to start on (%s); set its Mode to %q (see cfp leases list --check)",
			mm.Lease, mm.LeaseMode, leases.RefusedModeMessage(mm.LeaseMode, mm.ProcessorMode), mm.ProcessorMode)
	}
	have := changefeed.LatestVersion
	if mm.LeaseMode == leases.ModeFullFidelity {
		have = changefeed.AllVersionsAndDeletes
	}
	return fmt.Errorf("the leases of processor %s are in %s mode, not %s: %w; run with --mode %s, or use another -p/--processor",
		o.f.Global.Processor, have, o.mode, mm, have)
}

// leaseFormat is the lease format the processor bootstraps in: --lease-format when given, else
// the default (.NET's for a new set, an existing set's own).
func (o *processOptions) leaseFormat() changefeed.LeaseFormat {
	if !o.leaseFormatSet {
		return changefeed.LeaseFormatDefault
	}
	return changefeed.LeaseFormat(o.LeaseFormat)
}

// leaseFormatMismatch explains, on one line, a lease set in the other format than
// --lease-format.
func (o *processOptions) leaseFormatMismatch(lf *changefeed.LeaseFormatError) error {
	have, reader := "Java's", "only Java hosts"
	if lf.Want == changefeed.LeaseFormatJava {
		have, reader = ".NET's", ".NET hosts, not Java hosts,"
	}
	return fmt.Errorf("the leases of processor %s are in %s format (lease %s is %s), which %s can read; --lease-format %s cannot change it: leave --lease-format out, or use another -p/--processor",
		o.f.Global.Processor, have, lf.Lease, lf.Family, reader, lf.Want)
}

// openError adds to a failure to open the lease container how to create it.
func (o *processOptions) openError(err error) error {
	if _, ok := errors.AsType[*cosmos.LeaseContainerError](err); ok && errors.Is(err, leases.ErrNotFound) {
		return withHint(err, "create it with --create-lease-container, or name another with --lease-container")
	}
	return err
}

// noteExistingLeases tells the user that --from does not move leases that already have a
// continuation.
func (o *processOptions) noteExistingLeases(ctx context.Context, proc *changefeed.Processor) {
	ls, err := proc.Leases(ctx)
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
	name := o.f.Global.Processor
	if name == "" {
		name = "NAME"
	}
	fmt.Fprintf(o.f.IO.ErrOut, "cfp: note: %d of %d leases of processor %s already have a continuation and resume from it; "+
		"--from %s applies only to the others. To move them, run 'cfp leases reset -p %s' (see its --to flag)\n",
		withCont, len(ls), name, o.StartFrom, name)
}
