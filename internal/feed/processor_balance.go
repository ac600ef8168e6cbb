package feed

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/cfp-dev/cfp/internal/leases"
)

// PlanAcquire decides which leases self should try to take in one balancing cycle, from a
// listing of every lease of the processor, when only the hosts that own leases are known. It
// is PlanAcquireWithHosts without presence records.
func PlanAcquire(all []*leases.Lease, self string, now time.Time, expiration time.Duration) []*leases.Lease {
	return PlanAcquireWithHosts(all, nil, self, now, expiration)
}

// PlanAcquireWithHosts decides which leases self should try to take in one balancing cycle,
// from a listing of every lease of the processor and the names of the live hosts, those that
// own no lease included (from their presence records: see leases.LiveHosts). It follows .NET's
// EqualPartitionsBalancingStrategy (docs/protocol-leases.md, "Balancing"):
//
//   - a lease is free when it has no owner or is expired (now - Timestamp > expiration);
//     every other lease counts for its owner; the hosts are the live owners, self and hosts
//     (a name that owns leases, or equals self, case-insensitively, counts once);
//   - target = ceil(leases / hosts), at least 1; self wants target minus what it holds;
//   - free leases are taken first, up to what self wants;
//   - when no lease is free, self steals from the busiest host.
//
// Four differences. First, hosts that own no lease count (.NET sees only owners): with them,
// hosts that start together, or join a busy host, aim at their fair share from the first
// cycle instead of at every lease or at half of them.
//
// Second, when the leases do not divide evenly, only the hosts that hold the most now (the
// smaller name first on a tie) aim at target; the others aim at one less, so that the shares
// add up to the leases and no lease has to move twice.
//
// Third, .NET steals at most one lease per cycle, so a new host among h hosts that hold n
// leases needs about n/h cycles to get its share. A host here keeps stealing in the same
// cycle, each time from the host that is busiest after the steals already planned, as long as
// that host holds at least two more leases than the stealer would: every steal strictly evens
// the spread, no host goes past target, and no host is left with fewer leases than the
// stealer. That is .NET's own steal condition applied repeatedly (with the stealer below
// target, "busiest > target - (needed > 1 ? 1 : 0)" means "busiest >= self + 2"), so a cfp
// host never takes a lease that a .NET host would not also have taken over a few cycles, and
// two cfp hosts never pass a lease back and forth.
//
// Fourth, hosts that plan at the same time would all reach for the same leases (the first
// free ones, the first of the busiest host's): self plans as if every host whose name sorts
// before its own had already taken its share, so hosts that see the same listing plan
// disjoint sets and none wastes a cycle on a lease another host wins. Each host first takes
// the free leases that a handoff request names it for (properties["cfpHandoff"]), then, in
// name order, the other free leases in listing order, then steals, from the start of the
// listing like .NET.
//
// Owners are compared with self case-insensitively, as .NET matches its own instance name.
// When two leases carry the same token (which makes .NET's cycle fail) only the first one
// counts. The result is in the order the leases should be tried; leases self already holds
// and that are live are never part of it.
func PlanAcquireWithHosts(all []*leases.Lease, hosts []string, self string, now time.Time, expiration time.Duration) []*leases.Lease {
	b := balancer{counts: map[string]int{self: 0}, stealable: map[string][]*leases.Lease{}, taken: map[*leases.Lease]bool{}}
	seen := make(map[string]bool, len(all))
	total := 0
	for _, l := range all {
		if l == nil || seen[l.Token] {
			continue
		}
		seen[l.Token] = true
		total++
		if l.Expired(now, expiration) {
			b.free = append(b.free, l)
			continue
		}
		owner := l.Owner
		if strings.EqualFold(owner, self) {
			owner = self
		} else {
			b.stealable[owner] = append(b.stealable[owner], l)
		}
		b.counts[owner]++
	}
	if total == 0 {
		return nil
	}
	for _, h := range hosts {
		if strings.TrimSpace(h) != "" && b.host(h) == "" {
			b.counts[h] = 0
		}
	}
	b.order = make([]string, 0, len(b.counts))
	for h := range b.counts {
		b.order = append(b.order, h)
	}
	slices.Sort(b.order)
	// Each host's share: target = ceil(leases / hosts) for the hosts that hold the most now
	// (the smaller name first on a tie), one less for the others, so that the shares add up
	// to the leases and the hosts that start from nothing do not take the extra ones.
	n := len(b.order)
	target := max(1, (total+n-1)/n)
	b.share = make(map[string]int, n)
	byCount := slices.Clone(b.order)
	slices.SortStableFunc(byCount, func(x, y string) int { return cmp.Compare(b.counts[y], b.counts[x]) })
	for i, h := range byCount {
		b.share[h] = target
		if total%n != 0 && i >= total%n {
			b.share[h] = total / n
		}
	}
	if b.counts[self] >= b.share[self] {
		return nil
	}
	b.reserved = make(map[*leases.Lease]string, len(b.free))
	for _, l := range b.free {
		if _, to, ok := strings.Cut(l.Properties[handoffKey], handoffSep); ok {
			b.reserved[l] = b.host(to)
		}
	}
	// Every host takes the leases handed off to it first; then the hosts up to self take free
	// leases, then steal (the hosts after self cannot change self's plan).
	var plan []*leases.Lease
	for _, h := range b.order {
		if got := b.takeReserved(h); h == self {
			plan = got
		}
	}
	for _, pass := range []func(h string) []*leases.Lease{b.takeFree, b.steal} {
		for _, h := range b.order {
			got := pass(h)
			if h == self {
				plan = append(plan, got...)
				break
			}
		}
	}
	return plan
}

// balancer is the state of PlanAcquireWithHosts's simulation: every host's lease count after
// the takes planned so far.
type balancer struct {
	share     map[string]int             // host -> leases it should hold
	order     []string                   // the hosts, sorted
	counts    map[string]int             // host -> live leases + planned
	stealable map[string][]*leases.Lease // owner -> live leases not planned yet (self's excluded)
	free      []*leases.Lease            // free and expired leases, in listing order
	reserved  map[*leases.Lease]string   // free lease -> host a handoff request names ("": none)
	taken     map[*leases.Lease]bool     // leases planned for some host
}

// host returns the host named name, compared case-insensitively, or "".
func (b *balancer) host(name string) string {
	if _, ok := b.counts[name]; ok {
		return name
	}
	for h := range b.counts {
		if strings.EqualFold(h, name) {
			return h
		}
	}
	return ""
}

func (b *balancer) take(h string, l *leases.Lease) {
	b.taken[l] = true
	b.counts[h]++
}

// takeReserved plans for h the free leases handed off to it.
func (b *balancer) takeReserved(h string) []*leases.Lease {
	var out []*leases.Lease
	for _, l := range b.free {
		if b.counts[h] >= b.share[h] {
			break
		}
		if !b.taken[l] && b.reserved[l] == h {
			b.take(h, l)
			out = append(out, l)
		}
	}
	return out
}

// takeFree plans for h the free leases nobody took yet, in listing order.
func (b *balancer) takeFree(h string) []*leases.Lease {
	var out []*leases.Lease
	for _, l := range b.free {
		if b.counts[h] >= b.share[h] {
			break
		}
		if !b.taken[l] {
			b.take(h, l)
			out = append(out, l)
		}
	}
	return out
}

// victim returns the index of the lease h should ask owner for: the first of owner's leases
// that h already asked for, else the first that nobody asked for, else the first. Two hosts
// whose listings differ (a handover in between changes the counts, and so the plan) would
// otherwise ask for the same lease, the second request replacing the first: the owner then
// hands the lease to one of them, and the other, short of a lease, asks again a cycle later.
// Requests do not change the counts (a refused request is no holding).
func (b *balancer) victim(h, owner string) int {
	best, rank := 0, 3
	for i, l := range b.stealable[owner] {
		r := 1 // nobody asked
		if from, to, ok := strings.Cut(l.Properties[handoffKey], handoffSep); ok && strings.EqualFold(from, l.Owner) {
			r = 2 // another host asked
			if strings.EqualFold(to, h) {
				r = 0
			}
		}
		if r < rank {
			best, rank = i, r
		}
		if r == 0 {
			break
		}
	}
	return best
}

// steal plans for h leases of the busiest hosts while h is below its share and the busiest host
// holds at least two more than h.
func (b *balancer) steal(h string) []*leases.Lease {
	var out []*leases.Lease
	for b.counts[h] < b.share[h] {
		// The busiest host with a lease left to give, after the takes planned so far; ties go
		// to the smaller name so that the plan is deterministic.
		busiest := ""
		for _, o := range b.order {
			if o == h || len(b.stealable[o]) == 0 {
				continue
			}
			if busiest == "" || cmp.Compare(b.counts[o], b.counts[busiest]) > 0 {
				busiest = o
			}
		}
		if busiest == "" || b.counts[busiest] < b.counts[h]+2 {
			break
		}
		i := b.victim(h, busiest)
		victim := b.stealable[busiest][i]
		b.stealable[busiest] = slices.Delete(b.stealable[busiest], i, i+1)
		b.counts[busiest]--
		b.take(h, victim)
		out = append(out, victim)
	}
	return out
}
