package feed

import (
	"fmt"

	"github.com/cfp-dev/cfp/internal/leases"
)

// LeaseFormat is the lease document format a processor bootstraps a new lease set in
// (ProcessorOptions.LeaseFormat). One document cannot serve both SDKs: .NET sends a lease's
// ContinuationToken as an ETag, while Java's EPK processor Base64-decodes it as its state as soon
// as it reads the lease (epkversion/ServiceItemLeaseV1.fromDocument → withContinuationToken), so
// a Java host that lists a set holding one checkpointed .NET lease fails ("Illegal base64
// character 22"), and .NET cannot resume from a Java state. The format is chosen per lease set,
// when it is created (docs/protocol-leases.md, "Lease formats").
type LeaseFormat string

const (
	// LeaseFormatDefault creates .NET leases in a new lease set and keeps an existing set's
	// own format.
	LeaseFormatDefault LeaseFormat = ""
	// LeaseFormatDotNet creates .NET v0 (PK-range) leases, as .NET's bootstrapper does, and
	// refuses a lease set holding Java leases.
	LeaseFormatDotNet LeaseFormat = "dotnet"
	// LeaseFormatJava creates Java EPK leases (version 1, feedRange, null continuation), as
	// the Java v4 SDK's EPK bootstrapper does, and refuses a lease set holding .NET leases.
	LeaseFormatJava LeaseFormat = "java"
)

// LeaseFormatError is returned by Bootstrap (and Run) when an explicit LeaseFormat contradicts
// the leases the set already holds: a host of the other SDK could not read the leases cfp would
// write beside them.
type LeaseFormatError struct {
	// Lease is the token of the first lease in the other format, Family its family.
	Lease  string
	Family leases.Family
	// Want is the format asked for.
	Want LeaseFormat
}

func (e *LeaseFormatError) Error() string {
	return fmt.Sprintf("lease %s is a %s lease, not in the %s format asked for", e.Lease, e.Family, e.Want)
}

// formatOf is the lease format of a family: Java's families are read only by Java hosts, the
// .NET families by .NET hosts (a Java PK-range lease, a raw ETag without version, is readable by
// both, and counts as neither).
func formatOf(f leases.Family) LeaseFormat {
	switch f {
	case leases.FamilyJavaEPK:
		return LeaseFormatJava
	case leases.FamilyDotNetV0, leases.FamilyDotNetV1:
		return LeaseFormatDotNet
	}
	return LeaseFormatDefault
}

// checkFormat refuses an existing lease set in the other format than an explicit LeaseFormat.
func (p *Processor) checkFormat(ls []*leases.Lease) error {
	if p.opts.LeaseFormat == LeaseFormatDefault {
		return nil
	}
	for _, l := range ls {
		if f := formatOf(l.Family); f != LeaseFormatDefault && f != p.opts.LeaseFormat {
			return &LeaseFormatError{Lease: l.Token, Family: l.Family, Want: p.opts.LeaseFormat}
		}
	}
	return nil
}

// newLeaseFormat is the format of the leases a bootstrap creates beside existing: the explicit
// LeaseFormat, else the format of the leases already there (a set Java began stays Java's), else
// .NET's.
func (p *Processor) newLeaseFormat(existing []*leases.Lease) LeaseFormat {
	if p.opts.LeaseFormat != LeaseFormatDefault {
		return p.opts.LeaseFormat
	}
	for _, l := range existing {
		if f := formatOf(l.Family); f != LeaseFormatDefault {
			return f
		}
	}
	return LeaseFormatDotNet
}

// newLease builds the lease a bootstrap creates for partition part in format f.
func (p *Processor) newLease(f LeaseFormat, part Partition) *leases.Lease {
	if f == LeaseFormatJava {
		return leases.NewJavaEPK(p.store.Prefix(), part.Range)
	}
	return leases.NewDotNetV0(p.store.Prefix(), part.ID, part.Range, p.opts.Mode.leaseMode())
}

// LeaseMode is the mode's name in lease documents, as .NET writes it (leases.ModeIncremental or
// leases.ModeFullFidelity): what leases.StoreOptions.Mode wants.
func (m FeedMode) LeaseMode() string { return m.leaseMode() }
