package feed

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/internal/leases"
)

// The rules of docs/architecture.md, "Balancing and host presence records", one row each,
// checked on planCycle, the pure decision of an acquire cycle.

var planNow = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

const planExp = 60 * time.Second

// pl builds a lease for a plan table: token, owner ("" free), age of its last write (a
// negative age is a timestamp in the future), and properties as "key=value".
func pl(token, owner string, age time.Duration, props ...string) *leases.Lease {
	l := leases.NewDotNetV1("p", leases.Range{Min: token, Max: token + "F"}, "", "")
	l.Token = token
	l.Owner = owner
	if owner != "" {
		l.Timestamp = planNow.Add(-age)
	}
	for _, kv := range props {
		k, v, _ := strings.Cut(kv, "=")
		l.Properties[k] = v
	}
	return l
}

// ph is a live presence record of instance.
func ph(instance string) leases.Host {
	return leases.Host{Instance: instance, Timestamp: planNow.Add(-time.Second)}
}

func TestPlanCycle(t *testing.T) {
	const live, dead = time.Second, 2 * planExp
	tests := []struct {
		rule    string
		first   bool
		all     []*leases.Lease
		hosts   []leases.Host
		owned   []string
		coolTo  map[string]string
		asked   map[string]handoffAsk
		rebuffs map[string]rebuff
		self    string // "me" when empty
		want    string // the actions, "kind:token" joined by spaces
		donor   bool
		asks    bool // cyclePlan.asked
		settled bool
	}{
		{rule: "free leases are taken first, up to the share",
			all:   []*leases.Lease{pl("a", "", 0), pl("b", "", 0), pl("c", "other", live), pl("d", "other", live)},
			hosts: []leases.Host{ph("me"), ph("other")},
			want:  "take:a take:b"},
		{rule: "a lease is free when it is expired (now - timestamp > expiration)",
			all:   []*leases.Lease{pl("a", "gone", dead), pl("b", "gone", dead)},
			hosts: []leases.Host{ph("me")},
			want:  "take:a take:b"},
		{rule: "a lease whose timestamp lies in the future counts as owned",
			all:   []*leases.Lease{pl("a", "other", -time.Hour), pl("b", "other", -time.Hour)},
			hosts: []leases.Host{ph("me"), ph("other")},
			want:  "ask:a", asks: true},
		{rule: "hosts that own no lease count (presence records): a cfp owner is asked for the share, not stolen from",
			all:   []*leases.Lease{pl("a", "other", live), pl("b", "other", live), pl("c", "other", live), pl("d", "other", live)},
			hosts: []leases.Host{ph("me"), ph("other")},
			want:  "ask:a ask:b", asks: true},
		{rule: "the first cycle asks no cfp host for a lease (its second cycle does)",
			first: true,
			all:   []*leases.Lease{pl("a", "other", live), pl("b", "other", live)},
			hosts: []leases.Host{ph("me"), ph("other")},
			want:  "", asks: true},
		{rule: "the first cycle takes back every lease still in its instance's name, live or not, a requested one too",
			first: true,
			all:   []*leases.Lease{pl("a", "me", live, "cfpHandoff=me>other"), pl("b", "me", dead), pl("c", "other", live)},
			hosts: []leases.Host{ph("me"), ph("other")},
			want:  "take:a take:b", donor: false},
		{rule: "a later cycle takes the leases handed over to this host",
			all:   []*leases.Lease{pl("a", "me", live, "cfpHandoff=other>me"), pl("b", "other", live)},
			hosts: []leases.Host{ph("me"), ph("other")},
			want:  "take:a"},
		{rule: "a lease handed over and not started yet is not asked for (its request would erase the sign)",
			self:  "third",
			all:   []*leases.Lease{pl("a", "me", live, "cfpHandoff=other>me"), pl("b", "me", live), pl("c", "me", live)},
			hosts: []leases.Host{ph("me"), ph("other"), ph("third")},
			want:  "ask:b", asks: true},
		{rule: "a live lease carrying cfpHandoffAccepted is neither asked for again nor stolen",
			all: []*leases.Lease{pl("a", "other", live, "cfpHandoff=other>third", "cfpHandoffAccepted=other"),
				pl("b", "other", live, "cfpHandoff=other>third", "cfpHandoffAccepted=other")},
			hosts: []leases.Host{ph("me"), ph("other"), ph("third")},
			want:  ""},
		{rule: "an owner without a presence record (.NET or Java) is stolen from at once, one lease per cycle",
			all:   []*leases.Lease{pl("a", "dotnet", live), pl("b", "dotnet", live), pl("c", "dotnet", live), pl("d", "dotnet", live)},
			hosts: []leases.Host{ph("me")},
			want:  "steal:a"},
		{rule: "a lease a .NET host took back within an expiration of its steal is not stolen from it again",
			all:     []*leases.Lease{pl("a", "dotnet", live), pl("b", "dotnet", live)},
			hosts:   []leases.Host{ph("me")},
			rebuffs: map[string]rebuff{"a": {owner: "dotnet", until: planNow.Add(planExp)}},
			want:    "steal:b"},
		{rule: "Java leases do not keep properties and are stolen directly from a cfp owner",
			all: func() []*leases.Lease {
				ls := []*leases.Lease{pl("a", "other", live), pl("b", "other", live)}
				for _, l := range ls {
					l.Family = leases.FamilyJavaEPK
				}
				return ls
			}(),
			hosts: []leases.Host{ph("me"), ph("other")},
			want:  "take:a"},
		{rule: "a cfp owner that does not answer a request within the lease expiration has the lease stolen",
			all:   []*leases.Lease{pl("a", "other", live), pl("b", "other", live)},
			hosts: []leases.Host{ph("me"), ph("other")},
			asked: map[string]handoffAsk{"a": {owner: "other", at: planNow.Add(-planExp - time.Second)}},
			want:  "take:a"},
		{rule: "a request still within the expiration is asked again (askHandoff writes it only when overwritten)",
			all:   []*leases.Lease{pl("a", "other", live), pl("b", "other", live)},
			hosts: []leases.Host{ph("me"), ph("other")},
			asked: map[string]handoffAsk{"a": {owner: "other", at: planNow.Add(-time.Second)}},
			want:  "ask:a", asks: true},
		{rule: "disjoint plans: hosts whose names sort first have taken their shares of the free leases",
			self:  "zed",
			all:   []*leases.Lease{pl("a", "", 0), pl("b", "", 0), pl("c", "", 0), pl("d", "", 0)},
			hosts: []leases.Host{ph("amy"), ph("zed")},
			want:  "take:c take:d"},
		{rule: "a lease this host handed off lately and not taken yet counts for its requester",
			all:    []*leases.Lease{pl("a", "me", live), pl("b", "", 0)},
			hosts:  []leases.Host{ph("me"), ph("other")},
			owned:  []string{"a"},
			coolTo: map[string]string{"b": "other"},
			want:   "", settled: false},
		{rule: "leases this host holds are never part of the plan",
			all:   []*leases.Lease{pl("a", "me", live), pl("b", "me", dead)},
			hosts: []leases.Host{ph("me")},
			owned: []string{"a", "b"},
			want:  ""},
		{rule: "a host over its share while another live host is short is a donor (expects requests)",
			all:   []*leases.Lease{pl("a", "me", live), pl("b", "me", live), pl("c", "me", live), pl("d", "me", live)},
			hosts: []leases.Host{ph("me"), ph("other")},
			owned: []string{"a", "b", "c", "d"},
			want:  "", donor: true},
		{rule: "settled: every lease held by a live cfp host, none requested, this host at its share",
			all:   []*leases.Lease{pl("a", "me", live), pl("b", "other", live)},
			hosts: []leases.Host{ph("me"), ph("other")},
			owned: []string{"a"},
			want:  "", settled: true},
		{rule: "not settled while a lease carries a request",
			all:   []*leases.Lease{pl("a", "me", live, "cfpHandoff=me>other"), pl("b", "other", live)},
			hosts: []leases.Host{ph("me"), ph("other")},
			owned: []string{"a"},
			want:  ""},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			self := tt.self
			if self == "" {
				self = "me"
			}
			v := &cycleView{
				self: self, now: planNow, expiration: planExp, first: tt.first,
				all: tt.all, hosts: tt.hosts, coolTo: tt.coolTo, asked: tt.asked, rebuffs: tt.rebuffs,
				owned: map[string]bool{},
			}
			for _, tok := range tt.owned {
				v.owned[tok] = true
			}
			v.holding = len(tt.owned)
			v.share()
			v.floor, _ = fairShare(len(tt.all), v.live, self)
			got := planCycle(v)
			var acts []string
			for _, a := range got.actions {
				acts = append(acts, fmt.Sprintf("%s:%s", a.kind, a.lease.Token))
			}
			if s := strings.Join(acts, " "); s != tt.want {
				t.Errorf("actions %q, want %q", s, tt.want)
			}
			if got.donor != tt.donor || got.asked != tt.asks || got.settled != tt.settled {
				t.Errorf("donor %v asked %v settled %v, want %v %v %v", got.donor, got.asked, got.settled, tt.donor, tt.asks, tt.settled)
			}
		})
	}
}
