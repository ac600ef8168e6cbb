package leases

import (
	"errors"
	"fmt"
	"strings"
)

// Range is an effective-partition-key (EPK) range [Min, Max): upper-case hex strings, "" is the
// lowest key and "FF" the exclusive top of the key space.
//
// The methods below are the one home of range arithmetic for cfp: every package compares,
// intersects and nests ranges through them. They read a Max of "" as the top of the key space
// ("FF"), the way a read request's range is written; a lease whose document gave no range has
// Max == "" too, so callers that must tell an unknown range from the whole key space ask
// Lease.HasRange first.
type Range struct {
	Min string `json:"min"`
	Max string `json:"max"`
}

// EmptyEPKText is how a person reads and writes the empty effective partition key, the lowest
// key of every container: two quotes, so it is never mistaken for a missing value ("-") or for
// a bound that was cut. Tables show it; ParseRange accepts it as written.
const EmptyEPKText = `""`

// FullRange covers the whole key space.
var FullRange = Range{Min: "", Max: "FF"}

// String renders the range as "min-max", the form of a .NET v1 lease token.
func (r Range) String() string { return r.Min + "-" + r.Max }

// top is r.Max, with "" read as the top of the key space.
func (r Range) top() string {
	if r.Max == "" {
		return FullRange.Max
	}
	return r.Max
}

// Normal returns r with a Max of "" written as "FF", the form in which ranges compare as
// equal map keys.
func (r Range) Normal() Range { return Range{Min: r.Min, Max: r.top()} }

// Contains reports whether epk lies in [Min, Max).
func (r Range) Contains(epk string) bool {
	return CompareEPK(r.Min, epk) <= 0 && (r.Max == "" || CompareEPK(epk, r.Max) < 0)
}

// Empty reports whether the range holds no key (Min at or above Max).
func (r Range) Empty() bool { return CompareEPK(r.Min, r.top()) >= 0 }

// Overlaps reports whether r and o share at least one key.
func (r Range) Overlaps(o Range) bool {
	_, ok := r.Intersect(o)
	return ok
}

// Intersect returns the keys r and o share; ok is false when they share none.
func (r Range) Intersect(o Range) (common Range, ok bool) {
	common = Range{Min: r.Min, Max: r.top()}
	if CompareEPK(o.Min, common.Min) > 0 {
		common.Min = o.Min
	}
	if CompareEPK(o.top(), common.Max) < 0 {
		common.Max = o.top()
	}
	return common, !common.Empty()
}

// Within reports whether every key of r lies in o (an empty r lies in any range).
func (r Range) Within(o Range) bool {
	return r.Empty() || CompareEPK(o.Min, r.Min) <= 0 && CompareEPK(r.top(), o.top()) <= 0
}

// Equal reports whether r and o hold the same keys: boundaries compare as CompareEPK does
// ("05" equals "050"), and a Max of "" equals "FF".
func (r Range) Equal(o Range) bool { return r.Compare(o) == 0 }

// Compare orders ranges by Min, then by Max (-1, 0 or +1), for sorting ranges in key order.
func (r Range) Compare(o Range) int {
	if c := CompareEPK(r.Min, o.Min); c != 0 {
		return c
	}
	return CompareEPK(r.top(), o.top())
}

// CompareEPK compares two EPK boundaries the way the Go SDK does: upper-case hex, a shorter
// string padded with '0' compares equal to a longer one, and "FF" is the exclusive top.
//
// It allocates nothing for ASCII boundaries (every EPK): the lease checks and the balancer call
// it for every pair of ranges they compare.
func CompareEPK(a, b string) int {
	if !isASCII(a) || !isASCII(b) {
		return compareEPKPadded(a, b)
	}
	for i := range max(len(a), len(b)) {
		ca, cb := byte('0'), byte('0')
		if i < len(a) {
			ca = upperASCII(a[i])
		}
		if i < len(b) {
			cb = upperASCII(b[i])
		}
		if ca != cb {
			if ca < cb {
				return -1
			}
			return 1
		}
	}
	return 0
}

// compareEPKPadded is CompareEPK by its definition: both upper-cased, the shorter padded with
// '0'. CompareEPK falls back to it for text that is not ASCII, where upper-casing can change
// the length; FuzzCompareEPK holds the two equal.
func compareEPKPadded(a, b string) int {
	a, b = strings.ToUpper(a), strings.ToUpper(b)
	if len(a) < len(b) {
		a += strings.Repeat("0", len(b)-len(a))
	}
	if len(b) < len(a) {
		b += strings.Repeat("0", len(a)-len(b))
	}
	return strings.Compare(a, b)
}

func isASCII(s string) bool {
	for i := range len(s) {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

func upperASCII(c byte) byte {
	if 'a' <= c && c <= 'z' {
		return c - ('a' - 'A')
	}
	return c
}

// ParseRange parses a range a person wrote as "MIN-MAX" (tail's --range): upper- or lower-case
// hex EPKs; MIN may be empty or EmptyEPKText for the lowest key, as tables show it, MAX empty
// or FF for the top. The result is upper case, with the top written as "FF".
func ParseRange(s string) (Range, error) {
	lo, hi, ok := strings.Cut(strings.TrimSpace(s), "-")
	if !ok || strings.Contains(hi, "-") {
		return Range{}, errors.New("want MIN-MAX in hex EPKs, e.g. -3F or 3F-FF")
	}
	if lo == EmptyEPKText {
		lo = ""
	}
	lo, hi = strings.ToUpper(lo), strings.ToUpper(hi)
	if hi == "" {
		hi = "FF"
	}
	for _, v := range []string{lo, hi} {
		if strings.Trim(v, "0123456789ABCDEF") != "" {
			return Range{}, fmt.Errorf("%q is not a hex EPK", v)
		}
	}
	r := Range{Min: lo, Max: hi}
	if CompareEPK(r.Min, r.Max) >= 0 {
		return Range{}, errors.New("MIN must be below MAX")
	}
	if CompareEPK(r.Max, "FF") > 0 {
		return Range{}, errors.New("MAX must not be above FF")
	}
	return r, nil
}
