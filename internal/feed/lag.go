package feed

import (
	"strconv"
	"strings"
)

// EstimateLag is the .NET estimator's per-lease number (spec/leases.md §8.1 step 3), in LSNs:
// from a one-item read at the lease's continuation, sessionLSN is the partition's LSN from the
// session token and firstItemLSN the first item's _lsn (0 when missing or unparsable).
//
//   - with items, the last processed LSN is firstItemLSN-1; without, it is sessionLSN;
//   - a negative last processed LSN (a missing _lsn) gives the sentinel 1;
//   - otherwise the lag is sessionLSN - lastProcessed, never below 0 (so sessionLSN -
//     firstItemLSN + 1 with items, and 0 without).
func EstimateLag(sessionLSN, firstItemLSN int64, hasItems bool) int64 {
	last := sessionLSN
	if hasItems {
		last = firstItemLSN - 1
	}
	if last < 0 {
		return 1
	}
	return max(0, sessionLSN-last)
}

// ParseSessionLSN extracts the LSN from an x-ms-session-token the way the .NET estimator does
// (spec/leases.md §8.1 step 5): everything after the first ':', split on '#', element [1] when
// there are at least two parts, else element [0]. An empty or unparsable token gives 0.
// Examples: "0:-1#12345" and "0:1#12345#3=12000" give 12345, "0:12345" gives 12345.
func ParseSessionLSN(token string) int64 {
	if token == "" {
		return 0
	}
	_, rest, found := strings.Cut(token, ":")
	if !found {
		rest = token
	}
	parts := strings.Split(rest, "#")
	s := parts[0]
	if len(parts) >= 2 {
		s = parts[1]
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return 0
	}
	return n
}
