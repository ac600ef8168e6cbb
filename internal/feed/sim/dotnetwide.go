package sim

import (
	"sort"
	"strings"
	"time"

	"github.com/cfp-dev/cfp/internal/feed/feedtest"
	"github.com/cfp-dev/cfp/internal/leases"
)

// .NET's own overlap. When a PK-range lease's partition is gone and more than one partition
// now overlaps its range, .NET creates one PK-range lease per overlapping partition, each over
// that partition's whole range (Bootstrapping/PartitionSynchronizerCore.cs,
// HandlePartitionGoneAsync for DocumentServiceLeaseCore, the "Split" branch, with
// LeaseManagement/DocumentServiceLeaseManagerCosmos.cs, CreateLeaseIfNotExistAsync(
// PartitionKeyRange): FeedRange = partitionKeyRange.ToRange()). When one of the split's
// children was merged with a neighbour outside the parent before the parent's lease handled
// the split (its owner was killed and the lease waited for its expiry), that partition reaches
// past the parent, over keys another lease already covers: from then on two leases read those
// keys, and neither .NET nor its later split and merge handling ever undo it. The model does
// what the source does (a .NET host that lost the gone lease meanwhile handles it all the same,
// PartitionControllerCore.HandlePartitionGoneAsync); the model reports each gone lease it
// handled (dotnettest.Options.HandledGone), and the simulation excuses the overlap over the
// keys beyond the gone lease (and their duplicates) alone: every other invariant, and every
// overlap elsewhere, still counts. docs/architecture.md, "The deployment
// simulation", findings.

// noteGone is a .NET host's report of a gone lease it handled (dotnettest.Options.HandledGone).
// The keys of every lease it created beyond the gone lease's range are .NET's own overlap; so
// are all the keys of the leases it created for a gone lease it no longer held (a host that was
// frozen while another took the lease and handled its split: .NET handles the gone range of
// its cached lease without looking at the lease again, PartitionControllerCore.
// ProcessPartitionAsync and HandlePartitionGoneAsync).
func (w *World) noteGone(host, token string, gone leases.Range, created []leases.Range) {
	w.mu.Lock()
	held := w.owner[token].owner == host
	w.mu.Unlock()
	pr := gone.Normal()
	// The leases that were there before: the children of an earlier attempt at this gone
	// lease (by any host) made for the partitions of that moment, or what replaced them.
	var before []*leases.Lease
	for _, l := range w.leaseSet() {
		mine := l.Token == token
		for _, c := range created {
			mine = mine || l.HasRange() && l.Range.Normal().Equal(c.Normal())
		}
		if !mine && l.HasRange() {
			before = append(before, l)
		}
	}
	for _, c := range created {
		cr := c.Normal()
		for _, l := range before {
			if common, ok := l.Range.Normal().Intersect(cr); ok {
				w.logf("dotnet %s replaced gone lease %s over %s by a lease over %s where lease %s over %s was already: .NET's own overlap over %s (an earlier attempt's child; PartitionSynchronizerCore.HandlePartitionGoneAsync looks at no lease)",
					host, token, pr, cr, l.Token, l.Range, common)
				w.addWide(common)
			}
		}
		var beyond []leases.Range
		switch {
		case !held:
			beyond = []leases.Range{cr}
		case cr.Within(pr):
			continue
		default:
			if leases.CompareEPK(cr.Min, pr.Min) < 0 {
				beyond = append(beyond, leases.Range{Min: cr.Min, Max: minEPK(pr.Min, cr.Max)})
			}
			if leases.CompareEPK(pr.Max, cr.Max) < 0 {
				beyond = append(beyond, leases.Range{Min: maxEPK(pr.Max, cr.Min), Max: cr.Max})
			}
		}
		why := "wider than the gone lease"
		if !held {
			why = "for a gone lease it no longer held"
		}
		w.logf("dotnet %s replaced gone lease %s over %s by a lease over %s, %s: .NET's own overlap over %s (PartitionSynchronizerCore.HandlePartitionGoneAsync)",
			host, token, pr, cr, why, rangesString(beyond))
		w.addWide(beyond...)
	}
}

// addWide records rs as .NET's own overlap, from now.
func (w *World) addWide(rs ...leases.Range) {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range rs {
		w.wide = append(w.wide, r)
		w.wideAt = append(w.wideAt, now)
	}
}

// wideBeforeLocked reports whether document id's key lies within a range of .NET's own overlap
// recorded after at. Callers hold w.mu.
func (w *World) wideBeforeLocked(id string, at time.Time) bool {
	e := feedtest.EPK("pk-" + id)
	for i, x := range w.wide {
		if w.wideAt[i].After(at) && x.Normal().Contains(e) {
			return true
		}
	}
	return false
}

func minEPK(a, b string) string {
	if leases.CompareEPK(a, b) < 0 {
		return a
	}
	return b
}

func maxEPK(a, b string) string {
	if leases.CompareEPK(a, b) > 0 {
		return a
	}
	return b
}

// inWide reports whether r lies within the keys of .NET's own overlaps.
func (w *World) inWide(r leases.Range) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.inWideLocked(r)
}

func (w *World) inWideLocked(r leases.Range) bool {
	// The union of the wide ranges, in key order: r must lie within one stretch of it.
	ws := make([]leases.Range, len(w.wide))
	for i, x := range w.wide {
		ws[i] = x.Normal()
	}
	sort.Slice(ws, func(i, j int) bool { return leases.CompareEPK(ws[i].Min, ws[j].Min) < 0 })
	var union []leases.Range
	for _, x := range ws {
		if n := len(union); n > 0 && leases.CompareEPK(x.Min, union[n-1].Max) <= 0 {
			union[n-1].Max = maxEPK(union[n-1].Max, x.Max)
			continue
		}
		union = append(union, x)
	}
	for _, x := range union {
		if r.Normal().Within(x) {
			return true
		}
	}
	return false
}

// wideKey reports whether document id's key lies within .NET's own overlaps. Callers hold w.mu.
func (w *World) wideKey(id string) bool {
	if len(w.wide) == 0 {
		return false
	}
	e := feedtest.EPK("pk-" + id)
	for _, x := range w.wide {
		if x.Normal().Contains(e) {
			return true
		}
	}
	return false
}

func rangesString(rs []leases.Range) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = r.String()
	}
	return strings.Join(s, ", ")
}
