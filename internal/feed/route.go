package feed

import (
	"fmt"
	"strings"

	"github.com/cfp-dev/cfp/internal/leases"
)

// Routing is where a lease's changes are read: one live partition, and the part of it the
// lease covers.
type Routing struct {
	// Partition is the live physical partition that serves the lease.
	Partition Partition
	// Range restricts reads to the lease's part of Partition; the zero value when the lease
	// covers the whole partition (as ReadRequest.Range).
	Range Range
}

// Request is the read of the routed lease: its partition and its sub-range, from the start.
func (r Routing) Request() ReadRequest {
	return ReadRequest{PartitionID: r.Partition.ID, Range: r.Range}
}

// RouteError says why no single live partition serves a lease.
type RouteError struct {
	// Lease is the lease's token.
	Lease string
	// Range is the lease's range ("" Max when the lease gave none).
	Range Range
	// NoRange is true for an EPK lease whose document gave no range.
	NoRange bool
	// Gone is true for a PK-range lease whose partition is no longer live.
	Gone bool
	// Over are the live partitions overlapping the lease's range: several after a split (or a
	// merge of a PK-range lease's partition), none when no live partition holds it.
	Over []Partition
}

func (e *RouteError) Error() string {
	switch {
	case e.NoRange:
		return fmt.Sprintf("lease %s has no range", e.Lease)
	case e.Gone:
		return fmt.Sprintf("partition %s is gone (split or merged)", e.Lease)
	case len(e.Over) == 0:
		return fmt.Sprintf("no live partition holds range %s of lease %s", e.Range, e.Lease)
	}
	ids := make([]string, len(e.Over))
	for i, p := range e.Over {
		ids[i] = p.ID
	}
	return fmt.Sprintf("range %s of lease %s spans partitions %s", e.Range, e.Lease, strings.Join(ids, ", "))
}

// Unwrap gives a *RangeGoneError when the lease needs a split or merge first (its partition is
// gone, or its range spans several partitions), so that IsRangeGone holds for it.
func (e *RouteError) Unwrap() error {
	if e.Gone || len(e.Over) > 1 {
		return &RangeGoneError{PartitionID: e.Lease}
	}
	return nil
}

// Route says which live partition serves lease l, given the live partitions: a PK-range lease
// (l.NamesPartition) is served by the partition its token names, whole; an EPK lease by the one
// partition that its range overlaps, restricted to the common part when that is less than the
// partition. Otherwise it returns a *RouteError, which wraps a *RangeGoneError when the lease
// must be split first. It is the one place cfp decides this: the processor, the estimator,
// replay and the lease commands all call it.
func Route(l *leases.Lease, parts []Partition) (Routing, error) {
	if l.NamesPartition() {
		for _, p := range parts {
			if p.ID == l.Token {
				return Routing{Partition: p}, nil
			}
		}
		e := &RouteError{Lease: l.Token, Range: l.Range, Gone: true}
		if l.HasRange() {
			e.Over = overlapping(parts, l.Range)
		}
		return Routing{}, e
	}
	if !l.HasRange() {
		return Routing{}, &RouteError{Lease: l.Token, NoRange: true}
	}
	over := overlapping(parts, l.Range)
	if len(over) != 1 {
		return Routing{}, &RouteError{Lease: l.Token, Range: l.Range, Over: over}
	}
	r := Routing{Partition: over[0]}
	if common, _ := over[0].Range.Intersect(l.Range); !common.Equal(over[0].Range) {
		r.Range = common
	}
	return r, nil
}

// overlapping returns the partitions that share keys with r, in their order.
func overlapping(parts []Partition, r Range) []Partition {
	var out []Partition
	for _, part := range parts {
		if part.Range.Overlaps(r) {
			out = append(out, part)
		}
	}
	return out
}
