package render

import (
	"strconv"
	"strings"
	"time"

	"github.com/cfp-dev/cfp/internal/leases"
)

// EmptyEPK is how a table or a terminal line shows the empty effective partition key, the
// lowest key of every container (leases.EmptyEPKText; --range accepts it as written).
const EmptyEPK = leases.EmptyEPKText

// TopEPK is the top of the key space, the maximum of the last range.
const TopEPK = "FF"

// EPK renders an effective partition key bound for a person: the empty minimum as EmptyEPK,
// anything else as it is.
func EPK(s string) string {
	if s == "" {
		return EmptyEPK
	}
	return s
}

// RangeText renders the EPK range [min, max) for a person as MIN-MAX: the empty minimum as
// EmptyEPK and an empty maximum (a lease's way of writing the top) as TopEPK. Every table and
// terminal line shows ranges this one way; JSON keeps the stored strings.
func RangeText(min, max string) string {
	if max == "" {
		max = TopEPK
	}
	return EPK(min) + "-" + max
}

// LSN renders an optional LSN, Empty when unknown.
func LSN(n *int64) string {
	if n == nil {
		return Empty
	}
	return strconv.FormatInt(*n, 10)
}

// Seconds renders a duration given in seconds as "1m30s" (whole seconds), Empty when unknown.
func Seconds(s *float64) string {
	if s == nil {
		return Empty
	}
	return (time.Duration(*s * float64(time.Second))).Round(time.Second).String()
}

// Lease ownership states, as the lease tables colour them.
const (
	StateOwned   = "owned"
	StateExpired = "expired"
)

// State colours a lease state: owned green, expired yellow, anything else plain.
func State(st Styles, state string) string {
	switch state {
	case StateOwned:
		return st.Success.Render(state)
	case StateExpired:
		return st.Warning.Render(state)
	}
	return state
}

// Abbrev says how a table column of identifiers is shortened on a terminal. Shortened values
// end in "…" and are the shortest prefix, at least the kind's minimum, that no other value of
// the column starts with, so each still names one thing (git's short hashes); --wide and every
// pipe and JSON output show them whole.
type Abbrev int

const (
	// AbbrevNone leaves the column as it is.
	AbbrevNone Abbrev = iota
	// AbbrevToken shortens long tokens (the 32 hex digits of a merged lease) to at least
	// TokenMin characters, and the MIN-MAX tokens of EPK leases as AbbrevRange does. Short
	// tokens (partition ids) stay whole.
	AbbrevToken
	// AbbrevRange shortens each bound of MIN-MAX ranges to at least EPKMin characters,
	// unique among all the bounds of the column.
	AbbrevRange
)

// Minimum lengths of an abbreviated value, before the "…".
const (
	TokenMin = 8
	EPKMin   = 4
)

// Ellipsis ends a shortened value.
const Ellipsis = "…"

// abbreviateColumn returns the column's values shortened as kind says.
func abbreviateColumn(values []string, kind Abbrev) []string {
	switch kind {
	case AbbrevToken:
		// An EPK lease's token is its range, MIN-MAX: its bounds are shortened as a range's,
		// among the other range tokens; the rest (hex ids) as prefixes among themselves.
		var ranges, ids []string
		for _, v := range values {
			if _, _, ok := cutRange(v); ok {
				ranges = append(ranges, v)
			} else {
				ids = append(ids, v)
			}
		}
		short := shortPrefixes(ids, TokenMin)
		for i, v := range abbreviateColumn(ranges, AbbrevRange) {
			short[ranges[i]] = v
		}
		out := make([]string, len(values))
		for i, v := range values {
			out[i] = short[v]
		}
		return out
	case AbbrevRange:
		var bounds []string
		for _, v := range values {
			if lo, hi, ok := cutRange(v); ok {
				bounds = append(bounds, lo, hi)
			}
		}
		short := shortPrefixes(bounds, EPKMin)
		out := make([]string, len(values))
		for i, v := range values {
			lo, hi, ok := cutRange(v)
			if !ok {
				out[i] = v
				continue
			}
			out[i] = short[lo] + "-" + short[hi]
		}
		return out
	}
	return values
}

// cutRange splits a MIN-MAX cell into its bounds; EPKs are hex, so the one "-" separates them.
func cutRange(v string) (lo, hi string, ok bool) {
	lo, hi, ok = strings.Cut(v, "-")
	if !ok || hi == "" || !isHex(hi) || (lo != EmptyEPK && !isHex(lo)) {
		return "", "", false
	}
	return lo, hi, true
}

// isHex reports whether s is upper- or lower-case hex digits (the empty string is).
func isHex(s string) bool {
	return strings.Trim(s, "0123456789ABCDEFabcdef") == ""
}

// shortPrefixes maps each value to its shortest prefix of at least min characters that no other
// distinct value starts with, followed by Ellipsis; a value that would not get shorter (by
// more than the ellipsis) stays whole. Values are compared as bytes: tokens and EPKs are ASCII.
func shortPrefixes(values []string, min int) map[string]string {
	distinct := make(map[string]bool, len(values))
	for _, v := range values {
		distinct[v] = true
	}
	out := make(map[string]string, len(distinct))
	for v := range distinct {
		out[v] = v
		for n := min; n < len(v)-1; n++ {
			p := v[:n]
			clash := false
			for o := range distinct {
				if o != v && strings.HasPrefix(o, p) {
					clash = true
					break
				}
			}
			if !clash {
				out[v] = p + Ellipsis
				break
			}
		}
	}
	return out
}
