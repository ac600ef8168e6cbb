package feed

import (
	"fmt"
	"slices"
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

// ranged sets l's range to [min, max) (max "" is a range not known) and returns l.
func ranged(l *leases.Lease, min, max string) *leases.Lease {
	l.Range = leases.Range{Min: min, Max: max}
	return l
}

// ph is a live presence record of instance.
func ph(instance string) leases.Host {
	return leases.Host{Instance: instance, Timestamp: planNow.Add(-time.Second)}
}

func TestPlanCycle(t *testing.T) {
	const live, dead = time.Second, 2 * planExp
	tests := []struct {
		rule     string
		first    bool
		all      []*leases.Lease
		hosts    []leases.Host
		owned    []string
		coolTo   map[string]string
		asked    map[string]handoffAsk
		rebuffs  map[string]rebuff
		restored []string
		self     string // "me" when empty
		want     string // the actions, "kind:token" joined by spaces
		donor    bool
		asks     bool // cyclePlan.asked
		settled  bool
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
			all:   []*leases.Lease{ranged(pl("a", "me", live), "", "80"), ranged(pl("b", "other", live), "80", "FF")},
			hosts: []leases.Host{ph("me"), ph("other")},
			owned: []string{"a"},
			want:  "", settled: true},
		{rule: "not settled while some keys have no lease: a deleted lease whose restore only the leases show (simulation seed 6604)",
			all:   []*leases.Lease{ranged(pl("a", "me", live), "", "80"), ranged(pl("c", "other", live), "C0", "FF")},
			hosts: []leases.Host{ph("me"), ph("other")},
			owned: []string{"a"},
			want:  ""},
		{rule: "a lease restored expired in this host's name after it was deleted under it is taken back, even at the share (simulation seed 7143)",
			all:      []*leases.Lease{pl("a", "zz", live), pl("b", "zz", dead), pl("c", "other", live), pl("d", "third", live)},
			hosts:    []leases.Host{ph("zz"), ph("other"), ph("third")},
			owned:    []string{"a"},
			restored: []string{"b"},
			self:     "zz",
			want:     "take:b"},
		{rule: "an expired lease in this host's name that was not restored goes to the host the balance gives it",
			all:   []*leases.Lease{pl("a", "zz", live), pl("b", "zz", dead), pl("c", "other", live), pl("d", "third", live)},
			hosts: []leases.Host{ph("zz"), ph("other"), ph("third")},
			owned: []string{"a"},
			self:  "zz",
			want:  ""},
		{rule: "leases without a known range may cover any keys: settled",
			all:   []*leases.Lease{ranged(pl("a", "me", live), "", "80"), ranged(pl("b", "other", live), "", "")},
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
				all: tt.all, hosts: tt.hosts, coolTo: tt.coolTo, asked: tt.asked, rebuffs: tt.rebuffs, restored: tt.restored,
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

// The rules of docs/architecture.md, "Splits and merges", one row each, checked on planSplit.
func TestPlanSplit(t *testing.T) {
	r := func(min, max string) leases.Range { return leases.Range{Min: min, Max: max} }
	part := func(id string, rng leases.Range, parents ...string) Partition {
		return Partition{ID: id, Range: rng, Parents: parents}
	}
	v0 := func(token string, rng leases.Range) *leases.Lease {
		l := leases.NewDotNetV0("p", token, rng, "")
		l.Continuation, l.Owner, l.Timestamp = "\"40\"", "me", planNow
		return l
	}
	v1 := func(rng leases.Range) *leases.Lease {
		l := leases.NewDotNetV1("p", rng, "\"40\"", "")
		l.Owner, l.Timestamp = "me", planNow
		return l
	}
	javaPK := func(token, cont string) *leases.Lease {
		return &leases.Lease{ID: leases.LeaseID("p", token), PK: leases.LeaseID("p", token), Token: token,
			Continuation: cont, Family: leases.FamilyJavaPK, Owner: "me", Timestamp: planNow, Properties: map[string]string{}}
	}
	withProps := func(l *leases.Lease) *leases.Lease {
		l.Properties["cfpHandoff"] = "me>other"
		l.Properties["cfpHandoffAccepted"] = "me"
		l.Properties["user"] = "kept"
		return l
	}
	tests := []struct {
		rule   string
		parent *leases.Lease
		parts  []Partition
		all    []*leases.Lease
		list   bool   // splitNeedsList
		want   string // children as "family token range continuation", or "route", or "error"
		event  int    // len(over): 1 a merge, more a split
	}{
		{rule: "a split: the live partitions over the range get child leases in the parent's family",
			parent: v1(r("", "80")), parts: []Partition{part("1", r("", "40")), part("2", r("40", "80")), part("3", r("80", "FF"))},
			list: true, event: 2,
			want: `dotnet-v1 -40 -40 "40"; dotnet-v1 40-80 40-80 "40"`},
		{rule: "a .NET v0 lease's split children are v0 leases named after their partitions",
			parent: v0("0", r("", "80")), parts: []Partition{part("1", r("", "40")), part("2", r("40", "80"))},
			list: true, event: 2,
			want: `dotnet-v0 1 -40 "40"; dotnet-v0 2 40-80 "40"`},
		{rule: "a .NET v0 lease whose partition was merged becomes a v1 (EPK) lease over its own range",
			parent: v0("0", r("", "40")), parts: []Partition{part("5", r("", "80"))},
			list: true, event: 1,
			want: `dotnet-v1 -40 -40 "40"`},
		{rule: "an EPK lease that now lies in one partition is kept and read from it",
			parent: v1(r("", "40")), parts: []Partition{part("5", r("", "80"))},
			list: true, event: 1, want: "route"},
		{rule: "an EPK lease in one partition again beside a child an earlier attempt made is replaced by leases over the rest",
			parent: v1(r("", "40")), parts: []Partition{part("5", r("", "80"))},
			all:  []*leases.Lease{v1(r("", "40")), v1(r("", "20")), v1(r("40", "80"))},
			list: true, event: 1,
			want: `dotnet-v1 20-40 20-40 "40"`},
		{rule: "an EPK lease in one partition again whose keys other leases cover whole is replaced by none",
			parent: v1(r("", "40")), parts: []Partition{part("5", r("", "80"))},
			all:  []*leases.Lease{v1(r("", "40")), v1(r("", "20")), v1(r("20", "40"))},
			list: true, event: 1, want: ""},
		{rule: "an EPK lease in one partition again beside a v0 lease over its keys whose partition merged too is kept: that lease's merge makes this very lease",
			// Seed 4866: .NET's own overlap left v0 lease 23 and EPK lease 10-16 over the same
			// keys, both held by one cfp host; partition 23 merged. Lease 23's merge makes the
			// EPK lease 10-16, whose create meets this one and deletes 23; this one, counting 23
			// as covering its keys, deleted itself: no lease covered 10-16 any more.
			parent: v1(r("10", "16")), parts: []Partition{part("35", r("08", "16"), "12", "23")},
			all:  []*leases.Lease{v1(r("10", "16")), v0("23", r("10", "16")), v0("12", r("08", "10"))},
			list: true, event: 1, want: "route"},
		{rule: "an EPK lease in one partition again beside a live v0 lease over its keys is replaced by none",
			parent: v1(r("10", "16")), parts: []Partition{part("23", r("10", "16"))},
			all:  []*leases.Lease{v1(r("10", "16")), v0("23", r("10", "16"))},
			list: true, event: 1, want: ""},
		{rule: "a v0 lease without a range whose partition was merged cannot be merged (.NET fails too)",
			parent: func() *leases.Lease { l := v0("0", leases.Range{}); return l }(),
			parts:  []Partition{part("5", r("", "80"), "0")},
			list:   false, want: "error"},
		{rule: "no partition covers the range: retried",
			parent: v1(r("", "40")), parts: []Partition{part("5", r("80", "FF"))},
			list: false, want: "error"},
		{rule: "no overlap after a split and a merge while down: a v0 child partition reaching past the parent's range gets an EPK lease over the common part",
			parent: v0("0", r("", "80")), parts: []Partition{part("1", r("", "40")), part("7", r("40", "C0"))},
			list: true, event: 2,
			want: `dotnet-v0 1 -40 "40"; dotnet-v1 40-80 40-80 "40"`},
		{rule: "Java PK-range leases: one per partition whose parents name the gone one",
			parent: javaPK("0", `"40"`), parts: []Partition{part("1", r("", "40"), "0"), part("2", r("40", "80"), "0"), part("3", r("80", "FF"), "9")},
			all:  []*leases.Lease{javaPK("0", `"40"`), javaPK("9", `"10"`)},
			list: true, event: 2,
			want: `java-pk 1 -40 "40"; java-pk 2 40-80 "40"`},
		{rule: "Java PK-range merge: the merged lease starts at the lowest continuation of the parents' leases",
			parent: javaPK("0", `"40"`), parts: []Partition{part("5", r("", "FF"), "0", "9")},
			all:  []*leases.Lease{javaPK("0", `"40"`), javaPK("9", `"10"`)},
			list: true, event: 1,
			want: `java-pk 5 -FF "10"`},
		{rule: "Java PK-range merge: another parent's lease without a continuation starts the merged lease at the start position",
			parent: javaPK("0", `"40"`), parts: []Partition{part("5", r("", "FF"), "0", "9")},
			all:  []*leases.Lease{javaPK("0", `"40"`), javaPK("9", "")},
			list: true, event: 1,
			want: `java-pk 5 -FF `},
		{rule: "children an earlier attempt made (other leases inside the parent's range) are not made again",
			parent: v1(r("", "80")), parts: []Partition{part("1", r("", "20")), part("2", r("20", "40")), part("3", r("40", "80"))},
			all:  []*leases.Lease{v1(r("", "80")), v1(r("", "40"))},
			list: true, event: 3,
			want: `dotnet-v1 40-80 40-80 "40"`},
		{rule: "children are created unowned and carry the parent's properties without cfp's handoff properties",
			parent: withProps(v1(r("", "80"))), parts: []Partition{part("1", r("", "40")), part("2", r("40", "80"))},
			list: true, event: 2,
			want: `dotnet-v1 -40 -40 "40" user=kept; dotnet-v1 40-80 40-80 "40" user=kept`},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			if got := splitNeedsList(tt.parent, tt.parts); got != tt.list {
				t.Errorf("splitNeedsList %v, want %v", got, tt.list)
			}
			before := tt.parent.Clone()
			sp := planSplit(tt.parent, tt.parts, tt.all)
			var got string
			switch {
			case sp.err != nil:
				got = "error"
			case sp.route:
				got = "route"
			default:
				var cs []string
				for _, c := range sp.children {
					if c.Owner != "" || !c.Timestamp.IsZero() {
						t.Errorf("child %s owned by %q at %v, want unowned", c.Token, c.Owner, c.Timestamp)
					}
					s := fmt.Sprintf("%s %s %s %s", c.Family, c.Token, c.Range, c.Continuation)
					var props []string
					for k, v := range c.Properties {
						props = append(props, k+"="+v)
					}
					slices.Sort(props)
					for _, p := range props {
						s += " " + p
					}
					cs = append(cs, s)
				}
				got = strings.Join(cs, "; ")
				if len(sp.over) != tt.event {
					t.Errorf("%d partitions over the parent, want %d", len(sp.over), tt.event)
				}
			}
			if got != tt.want {
				t.Errorf("plan %q, want %q", got, tt.want)
			}
			if tt.parent.Owner != before.Owner || tt.parent.Continuation != before.Continuation {
				t.Errorf("planSplit changed the parent")
			}
		})
	}
}
