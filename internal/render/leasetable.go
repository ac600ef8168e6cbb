package render

import "github.com/cfp-dev/cfp/internal/leases"

// LeaseColumns are the first columns of every table of one processor's leases (leases list,
// estimate, the demo); LeaseCells fills them.
var LeaseColumns = []string{"lease", "range", "owner", "state", "checkpoint"}

// Columns of LeaseColumns, for callers that mark more of them.
const (
	LeaseColumnToken = iota
	LeaseColumnRange
	LeaseColumnOwner
	LeaseColumnState
)

// NewLeaseTable starts a table of one processor's leases: LeaseColumns, then extra. On a
// terminal, lease tokens and ranges are abbreviated unambiguously (whole with --wide) and
// owners may be cut in the middle to fit the width.
func NewLeaseTable(ios *IOStreams, extra ...string) *Table {
	headers := append(append([]string{}, LeaseColumns...), extra...)
	t := NewTable(ios, headers...)
	t.Abbreviated(LeaseColumnToken, AbbrevToken).Abbreviated(LeaseColumnRange, AbbrevRange).TruncateMiddle(LeaseColumnOwner).StateColumn(LeaseColumnState)
	return t
}

// LeaseCells renders a lease's LeaseColumns from the optional fields of its JSON view: its
// token, range (Empty when the lease names none), owner, state (coloured by the lease table on
// a terminal) and checkpoint LSN.
func LeaseCells(token string, r *leases.Range, owner *string, state string, checkpoint *int64) []string {
	rng := Empty
	if r != nil && r.Max != "" {
		rng = RangeText(r.Min, r.Max)
	}
	o := ""
	if owner != nil {
		o = *owner
	}
	return []string{token, rng, o, state, LSN(checkpoint)}
}
