package feed

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/internal/leases"
)

var balanceNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// leaseSet builds leases from "owner" or "owner!" (expired) or "" (free) per token 0..n-1.
func leaseSet(owners ...string) []*leases.Lease {
	out := make([]*leases.Lease, len(owners))
	for i, o := range owners {
		ts := balanceNow.Add(-10 * time.Second)
		if before, ok := strings.CutSuffix(o, "!"); ok {
			o, ts = before, balanceNow.Add(-2*time.Minute)
		}
		out[i] = &leases.Lease{Token: fmt.Sprint(i), Owner: o, Timestamp: ts}
	}
	return out
}

func tokens(ls []*leases.Lease) string {
	var t []string
	for _, l := range ls {
		t = append(t, l.Token)
	}
	return strings.Join(t, ",")
}

func repeat(owner string, n int) []string { return slices.Repeat([]string{owner}, n) }

func TestPlanAcquire(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		owners []string
		self   string
		want   string
	}{
		{"no leases", nil, "a", ""},
		{"all free, alone: take all", []string{"", "", "", ""}, "a", "0,1,2,3"},
		{"free first, up to target", []string{"b", "b", "", "", "", ""}, "a", "2,3,4"},
		{"expired counts as free and its owner is not a host", []string{"b!", "b!", "c", "c"}, "a", "0,1"},
		{"at target: nothing", []string{"a", "a", "b", "b"}, "a", ""},
		{"own expired lease is taken back", []string{"a!", "a", "b", "b"}, "a", "0"},
		{"owner match ignores case", []string{"A", "A", "b", "b"}, "a", ""},
		{"more hosts than leases: target 1", []string{"b", "c", "d"}, "a", ""},
		{"more hosts than leases, one free", []string{"b", "", "d"}, "a", "1"},
		{"steal from the busiest", []string{"b", "b", "b", "c", "c", "a"}, "a", "0"},
		{"steal several in one cycle", slices.Concat(repeat("b", 8)), "a", "0,1,2,3"},
		{"steal evens, never below self", []string{"b", "b", "b", "c", "c", "c"}, "a", "0,3"},
		{"no steal when busiest is one ahead", []string{"b", "b", "b", "c", "c", "a", "a"}, "a", ""},
		{"33 over 4 hosts: 9,9,9,6 steals towards 9,8,8,8", slices.Concat(repeat("b", 9), repeat("c", 9), repeat("d", 9), repeat("a", 6)), "a", "0,9"},
		{"duplicate tokens count once", []string{"b", "b"}, "a", "0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			all := leaseSet(tc.owners...)
			if tc.name == "duplicate tokens count once" {
				all = append(all, &leases.Lease{Token: "0", Owner: "c", Timestamp: balanceNow})
			}
			got := tokens(PlanAcquire(all, tc.self, balanceNow, time.Minute))
			if got != tc.want {
				t.Fatalf("PlanAcquire(%q, %s) = [%s], want [%s]", tc.owners, tc.self, got, tc.want)
			}
		})
	}
}

// TestPlanAcquire_Converges runs balancing cycles of several hosts over a shared lease set
// (each host applies its plan before the next plans) and checks the final spread.
func TestPlanAcquire_Converges(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ leases, hosts int }{{32, 4}, {8, 3}, {5, 2}, {1, 3}, {100, 7}, {4, 4}} {
		t.Run(fmt.Sprintf("%d leases %d hosts", tc.leases, tc.hosts), func(t *testing.T) {
			t.Parallel()
			all := leaseSet(repeat("", tc.leases)...)
			cycles := converge(all, tc.hosts, 50)
			counts := ownerCounts(all)
			lo, hi := tc.leases/tc.hosts, (tc.leases+tc.hosts-1)/tc.hosts
			for h := range tc.hosts {
				c := counts[fmt.Sprintf("h%d", h)]
				if c < lo || c > hi {
					t.Fatalf("after %d cycles host h%d holds %d leases, want %d..%d (%v)", cycles, h, c, lo, hi, counts)
				}
			}
			if cycles >= 50 {
				t.Fatalf("no convergence after %d cycles", cycles)
			}
		})
	}
}

func ownerCounts(all []*leases.Lease) map[string]int {
	c := map[string]int{}
	for _, l := range all {
		c[l.Owner]++
	}
	return c
}

// converge runs rounds in which host 0 starts alone and the others join one per round; it
// returns the number of rounds until a round changes nothing.
func converge(all []*leases.Lease, hosts, maxRounds int) int {
	for round := 1; round <= maxRounds; round++ {
		changed := false
		for h := range min(hosts, round) {
			self := fmt.Sprintf("h%d", h)
			for _, l := range PlanAcquire(all, self, balanceNow, time.Minute) {
				l.Owner, l.Timestamp = self, balanceNow
				changed = true
			}
		}
		if !changed && round >= hosts {
			return round
		}
	}
	return maxRounds
}

// BenchmarkPlanAcquire_Converge32Over4 reports the balancing cycles 4 hosts need to hold 8 of
// 32 leases each, when one host holds them all and three join at once.
func BenchmarkPlanAcquire_Converge32Over4(b *testing.B) {
	b.ReportAllocs()
	var cycles int
	for b.Loop() {
		all := leaseSet(repeat("h0", 32)...)
		for cycles = 1; ; cycles++ {
			changed := false
			for h := range 4 {
				self := fmt.Sprintf("h%d", h)
				for _, l := range PlanAcquire(all, self, balanceNow, time.Minute) {
					l.Owner, l.Timestamp = self, balanceNow
					changed = true
				}
			}
			if !changed {
				break
			}
		}
		counts := ownerCounts(all)
		for h := range 4 {
			if counts[fmt.Sprintf("h%d", h)] != 8 {
				b.Fatalf("not converged: %v", counts)
			}
		}
	}
	b.ReportMetric(float64(cycles-1), "cycles")
}

func hostNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("h%d", i)
	}
	return out
}

// planAll plans one cycle for every host from the same listing (hosts that plan at the same
// time) and returns each host's plan.
func planAll(all []*leases.Lease, hosts []string) map[string][]*leases.Lease {
	plans := map[string][]*leases.Lease{}
	for _, h := range hosts {
		plans[h] = PlanAcquireWithHosts(all, hosts, h, balanceNow, time.Minute)
	}
	return plans
}

func TestPlanAcquireWithHosts_IdleHostsStartingTogetherTakeDisjointShares(t *testing.T) {
	t.Parallel()
	all := leaseSet(repeat("", 32)...)
	hosts := hostNames(4)
	plans := planAll(all, hosts)
	planned := map[string]string{}
	for _, h := range hosts {
		if len(plans[h]) != 8 {
			t.Errorf("%s plans %d leases [%s], want 8", h, len(plans[h]), tokens(plans[h]))
		}
		for _, l := range plans[h] {
			if other, ok := planned[l.Token]; ok {
				t.Errorf("lease %s planned by %s and %s", l.Token, other, h)
			}
			planned[l.Token] = h
		}
	}
	if len(planned) != 32 {
		t.Errorf("%d of 32 leases planned", len(planned))
	}
	// Without presence each host would aim at all 32.
	if n := len(PlanAcquire(all, "h3", balanceNow, time.Minute)); n != 32 {
		t.Errorf("PlanAcquire without hosts plans %d leases, want 32 (every lease, as .NET)", n)
	}
}

func TestPlanAcquireWithHosts_JoinersAskTheOwnerForDisjointShares(t *testing.T) {
	t.Parallel()
	all := leaseSet(repeat("h0", 32)...)
	hosts := hostNames(4)
	plans := planAll(all, hosts)
	if len(plans["h0"]) != 0 {
		t.Errorf("the owner plans [%s], want nothing", tokens(plans["h0"]))
	}
	stolen := map[string]string{}
	for _, h := range hosts[1:] {
		if len(plans[h]) != 8 {
			t.Errorf("%s plans %d steals [%s], want 8", h, len(plans[h]), tokens(plans[h]))
		}
		for _, l := range plans[h] {
			if l.Owner != "h0" {
				t.Errorf("%s plans lease %s of %q, want only h0's", h, l.Token, l.Owner)
			}
			if other, ok := stolen[l.Token]; ok {
				t.Errorf("lease %s planned by %s and %s", l.Token, other, h)
			}
			stolen[l.Token] = h
		}
	}
	if left := 32 - len(stolen); left != 8 {
		t.Errorf("the owner would keep %d leases, want its fair share 8", left)
	}
	// Without presence a joiner sees 2 hosts and aims at 16.
	if n := len(PlanAcquire(all, "h1", balanceNow, time.Minute)); n != 16 {
		t.Errorf("PlanAcquire without hosts plans %d steals, want 16 (half, as .NET's target)", n)
	}
}

func TestPlanAcquireWithHosts(t *testing.T) {
	t.Parallel()
	handedTo := func(owners []string, to string, idx ...int) []*leases.Lease {
		all := leaseSet(owners...)
		for _, i := range idx {
			all[i].Properties = map[string]string{handoffKey: "h0" + handoffSep + to}
		}
		return all
	}
	for _, tc := range []struct {
		name  string
		all   []*leases.Lease
		hosts []string
		self  string
		want  string
	}{
		{"an idle host lowers the target", leaseSet("", "", "", ""), []string{"b"}, "a", "0,1"},
		{"hosts before self take the first free leases", leaseSet("", "", "", ""), []string{"a"}, "b", "2,3"},
		{"a host that owns leases counts once", leaseSet("b", "b", "", ""), []string{"B", "b"}, "a", "2,3"},
		{"self in hosts counts once", leaseSet("", "", "", ""), []string{"A"}, "a", "0,1,2,3"},
		{"a host already at target takes nothing", leaseSet("a", "a", "", ""), []string{"b"}, "a", ""},
		{"steals stop at the fair share", leaseSet(repeat("b", 6)...), []string{"c"}, "a", "0,1"},
		{"hosts before self steal first", leaseSet(repeat("c", 6)...), []string{"a"}, "b", "2,3"},
		{"more hosts than leases: target 1", leaseSet("", "b"), []string{"c", "d"}, "d", ""},
		{"more hosts than leases: first in order takes", leaseSet("", "b"), []string{"c", "d"}, "a", "0"},
		{"a lease handed off to self is taken first", handedTo(slices.Concat(repeat("h0", 4), repeat("", 4)), "h2", 6, 7), []string{"h1", "h2"}, "h2", "6,7"},
		{"a lease handed off to another host is left to it", handedTo(repeat("", 4), "h2", 0, 1), []string{"h1", "h2"}, "h1", "2,3"},
		{"a handoff to a host that is gone is free", handedTo(repeat("", 4), "gone", 0, 1), []string{"h1", "h2"}, "h1", "0,1"},
		// Planned from listings that differ, two hosts would ask for the same lease.
		{"a lease another host asked for is stolen last", handedTo(repeat("h0", 4), "h2", 0), []string{"h1", "h2"}, "h1", "1"},
		{"a host asks again for the lease it asked for", handedTo(repeat("h0", 4), "h2", 0), []string{"h1", "h2"}, "h2", "0"},
		{"33 over 4: the extra lease stays with the busiest", leaseSet(slices.Concat(repeat("b", 9), repeat("c", 8), repeat("d", 8), repeat("a", 8))...), nil, "a", ""},
		{"33 over 4: the first in order takes the extra free lease", leaseSet(repeat("", 33)...), []string{"b", "c", "d"}, "a", "0,1,2,3,4,5,6,7,8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := tokens(PlanAcquireWithHosts(tc.all, tc.hosts, tc.self, balanceNow, time.Minute))
			if got != tc.want {
				var owners []string
				for _, l := range tc.all {
					owners = append(owners, l.Owner)
				}
				t.Fatalf("PlanAcquireWithHosts(%q, hosts %q, %s) = [%s], want [%s]", owners, tc.hosts, tc.self, got, tc.want)
			}
		})
	}
}

// TestPlanAcquireWithHosts_ConvergesInOneCycle runs cycles in which every host plans from the
// same listing and then applies its plan (the first host to write a lease wins it, steals
// included) and counts the cycles until the spread is even.
func TestPlanAcquireWithHosts_ConvergesInOneCycle(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name          string
		owners        []string
		hosts, cycles int
	}{
		{"32 free, 4 hosts", repeat("", 32), 4, 1},
		{"32 held by one, 3 join", repeat("h0", 32), 4, 1},
		{"33 free, 4 hosts", repeat("", 33), 4, 1},
		{"100 free, 7 hosts", repeat("", 100), 7, 1},
		{"2 hosts of 16 each, 2 join", slices.Concat(repeat("h0", 16), repeat("h1", 16)), 4, 1},
		{"3 leases, 5 hosts", repeat("", 3), 5, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			all := leaseSet(tc.owners...)
			hosts := hostNames(tc.hosts)
			cycles := 0
			for ; cycles < 10; cycles++ {
				c := ownerCounts(all)
				even := c[""] == 0
				for _, h := range hosts {
					if c[h] < len(all)/tc.hosts || c[h] > (len(all)+tc.hosts-1)/tc.hosts {
						even = false
					}
				}
				if even {
					break
				}
				plans := planAll(all, hosts)
				won := map[string]bool{}
				for _, h := range hosts {
					for _, l := range plans[h] {
						if !won[l.Token] {
							won[l.Token] = true
							l.Owner, l.Timestamp = h, balanceNow
						}
					}
				}
			}
			if cycles != tc.cycles {
				t.Fatalf("even after %d cycles (%v), want %d", cycles, ownerCounts(all), tc.cycles)
			}
		})
	}
}

// TestPlanAcquire_FutureTimestampCountsAsOwned keeps .NET's rule for a lease whose timestamp
// lies in the future (a host with a clock ahead): it is not expired (timestamp + expiration is
// after now), so it counts for its owner and is never taken as free; only a steal, by the usual
// rule, moves it. (leases list --check reports such a lease.)
func TestPlanAcquire_FutureTimestampCountsAsOwned(t *testing.T) {
	t.Parallel()
	ahead := leaseSet("x", "x", "x", "x")
	for _, l := range ahead {
		l.Timestamp = balanceNow.Add(24 * time.Hour)
	}
	if l := ahead[0]; l.Expired(balanceNow, time.Minute) || l.State(balanceNow, time.Minute) != leases.StateOwned {
		t.Fatalf("a lease with a future timestamp is %s, want owned", l.State(balanceNow, time.Minute))
	}
	// Four leases, two hosts: self plans the steals of an even split, not all four as free
	// leases.
	if got := tokens(PlanAcquire(ahead, "self", balanceNow, time.Minute)); got != "0,1" {
		t.Errorf("plan = %q, want the steals 0,1 of an even split, not every lease", got)
	}
	if got := tokens(PlanAcquire(ahead[:1], "self", balanceNow, time.Minute)); got != "" {
		t.Errorf("plan over one future-stamped lease = %q, want nothing (it is owned)", got)
	}
}
