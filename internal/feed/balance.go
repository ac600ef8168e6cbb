package feed

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/cfp-dev/cfp/internal/leases"
)

// PlanAcquire decides which leases self should try to take in one balancing cycle, from a
// listing of every lease of the processor. It follows .NET's EqualPartitionsBalancingStrategy
// (spec/leases.md §5.2):
//
//   - a lease is free when it has no owner or is expired (now - Timestamp > expiration);
//     every other lease counts for its owner, and the live owners plus self are the hosts;
//   - target = ceil(leases / hosts), at least 1; self wants target minus what it holds;
//   - free leases are taken first, in listing order, up to what self wants;
//   - when no lease is free, self steals from the busiest host.
//
// One difference: .NET steals at most one lease per cycle, so a new host among h hosts that
// hold n leases needs about n/h cycles to get its share. PlanAcquire keeps stealing in the same
// cycle, each time from the host that is busiest after the steals already planned, as long as
// that host holds at least two more leases than self would: every steal strictly evens the
// spread, self never goes past target, and no host is left with fewer leases than self.
// That is .NET's own steal condition applied repeatedly (with self below target, "busiest >
// target - (needed > 1 ? 1 : 0)" means "busiest >= self + 2"), so a cfp host never takes a
// lease that a .NET host would not also have taken over a few cycles, and two cfp hosts never
// pass a lease back and forth. Stolen leases are taken from the start of the listing, like .NET.
//
// Owners are compared with self case-insensitively, as .NET matches its own instance name.
// When two leases carry the same token (which makes .NET's cycle fail) only the first one
// counts. The result is in the order the leases should be tried; leases self already holds
// and that are live are never part of it.
func PlanAcquire(all []*leases.Lease, self string, now time.Time, expiration time.Duration) []*leases.Lease {
	seen := make(map[string]bool, len(all))
	var free []*leases.Lease
	counts := map[string]int{} // live owner -> leases
	byOwner := map[string][]*leases.Lease{}
	mine := 0
	total := 0
	for _, l := range all {
		if l == nil || seen[l.Token] {
			continue
		}
		seen[l.Token] = true
		total++
		if l.Expired(now, expiration) {
			free = append(free, l)
			continue
		}
		if strings.EqualFold(l.Owner, self) {
			mine++
			continue
		}
		counts[l.Owner]++
		byOwner[l.Owner] = append(byOwner[l.Owner], l)
	}
	if total == 0 {
		return nil
	}
	hosts := len(counts) + 1
	target := max(1, (total+hosts-1)/hosts)
	needed := target - mine
	if needed <= 0 {
		return nil
	}
	if len(free) > 0 {
		return free[:min(needed, len(free))]
	}

	owners := make([]string, 0, len(counts))
	for o := range counts {
		owners = append(owners, o)
	}
	var plan []*leases.Lease
	for mine < target {
		// The busiest host after the steals planned so far; ties go to the smaller name so
		// that the plan is deterministic.
		busiest := slices.MaxFunc(owners, func(a, b string) int {
			if c := cmp.Compare(counts[a], counts[b]); c != 0 {
				return c
			}
			return strings.Compare(b, a)
		})
		if counts[busiest] < mine+2 {
			break
		}
		victim := byOwner[busiest][0]
		byOwner[busiest] = byOwner[busiest][1:]
		counts[busiest]--
		mine++
		plan = append(plan, victim)
	}
	return plan
}
