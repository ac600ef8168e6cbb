package leases

import "strings"

// Id separators and marker suffixes (docs/protocol-leases.md, "Ids, prefixes and markers").
const (
	leaseSeparator = ".."
	infoSuffix     = ".info"
	lockSuffix     = ".lock"
)

// Prefix builds a lease prefix the way both SDKs do: the processor name glued to the account
// host, then the database and container identifiers (rids for .NET and Java EPK processors,
// names for Java's PK-range processor), separated by underscores.
func Prefix(processor, host, dbRid, collRid string) string {
	return processor + host + "_" + dbRid + "_" + collRid
}

// LeaseID returns the id of the lease for token under prefix: "<prefix>..<token>".
func LeaseID(prefix, token string) string { return prefix + leaseSeparator + token }

// InfoID returns the id of the "store initialized" marker of prefix.
func InfoID(prefix string) string { return prefix + infoSuffix }

// LockID returns the id of the bootstrap lock of prefix.
func LockID(prefix string) string { return prefix + lockSuffix }

// SplitID splits a lease id into its prefix and lease token. ok is false for marker documents and
// for ids that are not lease ids.
func SplitID(id string) (prefix, token string, ok bool) {
	i := strings.LastIndex(id, leaseSeparator)
	if i <= 0 || i+len(leaseSeparator) == len(id) {
		return "", "", false
	}
	return id[:i], id[i+len(leaseSeparator):], true
}

// markerPrefix returns the prefix of a marker id and which marker it is ("info" or "lock").
func markerPrefix(id string) (prefix, kind string, ok bool) {
	switch {
	case strings.HasSuffix(id, infoSuffix) && len(id) > len(infoSuffix):
		return strings.TrimSuffix(id, infoSuffix), "info", true
	case strings.HasSuffix(id, lockSuffix) && len(id) > len(lockSuffix):
		return strings.TrimSuffix(id, lockSuffix), "lock", true
	}
	return "", "", false
}
