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
