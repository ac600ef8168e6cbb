package feed

// EstimateLag is the .NET estimator's per-lease number (docs/protocol-leases.md, "Estimating lag"), in LSNs:
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
