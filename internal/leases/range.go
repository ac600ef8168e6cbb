package leases

import "strings"

// Range is an effective-partition-key (EPK) range [Min, Max): upper-case hex strings, "" is the
// lowest key and "FF" the exclusive top of the key space.
type Range struct {
	Min string `json:"min"`
	Max string `json:"max"`
}

// FullRange covers the whole key space.
var FullRange = Range{Min: "", Max: "FF"}

// String renders the range as "min-max", the form of a .NET v1 lease token.
func (r Range) String() string { return r.Min + "-" + r.Max }

// Contains reports whether epk lies in [Min, Max).
func (r Range) Contains(epk string) bool {
	return CompareEPK(r.Min, epk) <= 0 && (r.Max == "" || CompareEPK(epk, r.Max) < 0)
}

// Overlaps reports whether r and o share at least one key.
func (r Range) Overlaps(o Range) bool {
	return CompareEPK(r.Min, o.Max) < 0 && CompareEPK(o.Min, r.Max) < 0
}

// CompareEPK compares two EPK boundaries the way the Go SDK does: upper-case hex, a shorter
// string padded with '0' compares equal to a longer one, and "FF" is the exclusive top.
func CompareEPK(a, b string) int {
	a, b = strings.ToUpper(a), strings.ToUpper(b)
	for len(a) < len(b) {
		a += "0"
	}
	for len(b) < len(a) {
		b += "0"
	}
	return strings.Compare(a, b)
}
