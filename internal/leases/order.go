package leases

import (
	"slices"
	"strconv"
	"strings"
)

// Sort orders leases by range, then token (Compare), keeping the order of equal ones: the
// order of every lease table and listing.
func Sort(ls []*Lease) { slices.SortStableFunc(ls, Compare) }

// Compare orders two leases by the start of their ranges when both have one, else (and for
// equal starts) by token (CompareTokens).
func Compare(a, b *Lease) int {
	if c := CompareEPK(a.Range.Min, b.Range.Min); c != 0 && a.HasRange() && b.HasRange() {
		return c
	}
	return CompareTokens(a.Token, b.Token)
}

// CompareTokens orders lease tokens: numeric partition ids numerically ("2" before "10"),
// anything else as text.
func CompareTokens(a, b string) int {
	x, errA := strconv.Atoi(a)
	y, errB := strconv.Atoi(b)
	if errA == nil && errB == nil && strconv.Itoa(x) == a && strconv.Itoa(y) == b {
		return x - y
	}
	return strings.Compare(a, b)
}
