package leases

import (
	"slices"
	"strings"
	"time"
)

// Set is one lease prefix's documents in a lease container, sorted by kind: its leases, its
// .info and .lock markers, and the presence records of cfp hosts.
type Set struct {
	Leases []*Lease
	// HasInfo says the .info marker exists (the store is initialized).
	HasInfo bool
	// LockTime and LockTTL describe the bootstrap lock (zero when there is none).
	LockTime time.Time
	LockTTL  time.Duration
	Hosts    []Host
	// Docs are the documents of the set (leases, markers, host records), in the order given.
	Docs []Document
}

// SetOf picks the documents of prefix out of docs (a prefix query's answer, or a whole
// container): "<prefix>..<token>" leases, the markers and "<prefix>.host.<instance>" records.
// Documents of other prefixes are left out; a document under "<prefix>.." that is not a lease
// is left out too and passed to skip, when not nil.
func SetOf(docs []Document, prefix string, skip func(id string, err error)) Set {
	var set Set
	for _, d := range docs {
		switch {
		case d.ID == InfoID(prefix):
			set.HasInfo = true
			set.Docs = append(set.Docs, d)
		case d.ID == LockID(prefix):
			lock := ParseLock(d.Body)
			set.LockTime, set.LockTTL = lock.Since, lock.TTL
			set.Docs = append(set.Docs, d)
		case strings.HasPrefix(d.ID, HostIDPrefix(prefix)):
			if h, err := DecodeHost(d); err == nil && h.Prefix == prefix {
				set.Hosts = append(set.Hosts, h)
				set.Docs = append(set.Docs, d)
			}
		case strings.HasPrefix(d.ID, prefix+leaseSeparator):
			l, err := Decode(d)
			if err != nil {
				if skip != nil {
					skip(d.ID, err)
				}
				continue
			}
			set.Leases = append(set.Leases, l)
			set.Docs = append(set.Docs, d)
		}
	}
	return set
}

// DeleteOrder returns the set's documents in the order a delete of the whole set must take, the
// order Store.DeleteAll takes: the .info and .lock markers first, then the leases, then the host
// records. A delete interrupted half way then leaves leases without .info, which the next
// processor to start bootstraps over (it keeps the leases it finds and creates the missing
// ones, as .NET's bootstrapper does), never a store marked initialized with leases missing,
// whose partitions no processor would ever read.
func (s Set) DeleteOrder(prefix string) []Document {
	rank := func(d Document) int {
		switch {
		case d.ID == InfoID(prefix):
			return 0
		case d.ID == LockID(prefix):
			return 1
		case strings.HasPrefix(d.ID, HostIDPrefix(prefix)):
			return 3
		}
		return 2
	}
	out := slices.Clone(s.Docs)
	slices.SortStableFunc(out, func(a, b Document) int { return rank(a) - rank(b) })
	return out
}
