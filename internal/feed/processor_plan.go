package feed

import (
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/cfp-dev/cfp/internal/leases"
)

// Decide, then do: an acquire cycle (acquireCycle) reads the leases and the presence records,
// does the housekeeping those need (noticeLost, retireSplitParents, answerRequests), takes a
// snapshot of this host's own state into a cycleView, and asks planCycle, a pure function of
// that view, what to do; its executor (runCycle) then performs the actions in order. The
// rules planCycle applies are those of docs/architecture.md, "Balancing and host presence
// records"; processor_plan_test.go checks them one table row per rule.

// cycleView is everything one acquire cycle decides from: the listing, the presence records,
// this host's own state at the time of the listing, and the time.
type cycleView struct {
	self       string
	now        time.Time
	expiration time.Duration
	first      bool // the host's first cycle since Run started

	all   []*leases.Lease // the leases, as listed
	hosts []leases.Host   // the presence records, as listed

	owned    map[string]bool       // tokens of the leases this host holds (isOwned), and of the children its unfinished splits hold (ownedTokens)
	holding  int                   // leases whose worker is not stopping (holding)
	coolTo   map[string]string     // token -> host this host handed it off to lately (coolingDown)
	asked    map[string]handoffAsk // requests this host made, by token (handoffs.asked)
	rebuffs  map[string]rebuff     // leases lost to a non-cfp host soon after a steal (rebuffed)
	restored []string              // leases deleted under this host that this listing shows again (calm.restored)
	floor    int                   // this host's fair share, rounded down (fairShare)
	cands    []*leases.Lease       // all as planned from (see share)
	live     []string              // the live hosts (leases.LiveHosts over cands and hosts)
	held     map[string]int        // live leases by owner, lower-cased (heldBy over cands)
}

// share fills in cands, live and held: a lease this host handed off lately and that is not
// taken yet counts for the host that asked for it, so that this host does not plan to take it
// back; leases a .NET host took back soon after this host stole them go last, so that a steal
// picks another lease of that host, if it has one (see rebuffed).
func (v *cycleView) share() {
	v.cands = make([]*leases.Lease, 0, len(v.all))
	for _, l := range v.all {
		if to, ok := v.coolTo[l.Token]; ok && l.Expired(v.now, v.expiration) {
			l = l.Clone()
			l.Owner, l.Timestamp = to, v.now
		}
		v.cands = append(v.cands, l)
	}
	slices.SortStableFunc(v.cands, func(a, b *leases.Lease) int {
		return cmpBool(v.rebuffed(a), v.rebuffed(b))
	})
	v.live = leases.LiveHosts(v.cands, v.hosts, v.now, v.expiration)
	v.held = heldBy(v.cands, v.now, v.expiration)
}

// rebuffed reports whether l, owned by another host, is one this host lost to that host soon
// after taking it, less than two expirations ago (the view's snapshot of the rebuffs).
func (v *cycleView) rebuffed(l *leases.Lease) bool {
	r, ok := v.rebuffs[l.Token]
	return ok && v.now.Before(r.until) && strings.EqualFold(r.owner, l.Owner)
}

// askFirst is askFirstOf over the view's snapshot of this host's requests.
func (v *cycleView) askFirst(l *leases.Lease) bool {
	return askFirstOf(l, v.asked, v.now, v.expiration)
}

// handedToMe is Processor.handedToMe over the view's snapshot.
func (v *cycleView) handedToMe(l *leases.Lease) bool {
	return handedOver(l) && strings.EqualFold(l.Owner, v.self) && !v.owned[l.Token]
}

// cycleActKind is what the executor does with a lease.
type cycleActKind int

const (
	actTake  cycleActKind = iota + 1 // acquire it and start its worker (take)
	actAsk                           // write a handoff request on it (askHandoff)
	actSteal                         // take it from its live non-cfp owner (noteSteal, then take)
)

func (k cycleActKind) String() string {
	switch k {
	case actTake:
		return "take"
	case actAsk:
		return "ask"
	case actSteal:
		return "steal"
	}
	return "?"
}

// cycleAction is one step of an acquire cycle's plan.
type cycleAction struct {
	kind  cycleActKind
	lease *leases.Lease
}

// cyclePlan is what planCycle decided.
type cyclePlan struct {
	actions []cycleAction
	// donor: this host holds more than its fair share while another live host holds less, so
	// it should expect handoff requests (see balanceLoop).
	donor bool
	// asked: this host waits for leases it asked for, or (first cycle) wants leases it did not
	// ask for yet (see balanceLoop).
	asked bool
	// settled: nothing to do and every host holds its share (see calm).
	settled bool
}

// planCycle decides one acquire cycle from v (share done, floor set). The first cycle takes
// back every lease that still names this instance, live or not, as .NET does at start-up;
// later cycles take the leases handed over to this host, and the live ones in its name that no
// worker of it reads. Then come PlanAcquireWithHosts's
// leases: free and expired ones are taken, live ones of a cfp host asked for (not in the first
// cycle), live ones of a host that is not cfp stolen, one per cycle.
func planCycle(v *cycleView) cyclePlan {
	var pl cyclePlan
	pl.donor = v.holding > v.floor && hungry(v.held, v.live, v.self, v.floor)
	plan := PlanAcquireWithHosts(v.cands, v.live, v.self, v.now, v.expiration)
	pl.settled = len(plan) == 0 && !pl.donor && v.holding >= v.floor && settledLeases(v.all, v.hosts, v.now, v.expiration)
	var mine []*leases.Lease
	for _, l := range v.all {
		switch {
		case v.first && strings.EqualFold(l.Owner, v.self) && !v.owned[l.Token]:
			// Also a lease asked for (or handed off, accepted) before this host stopped: no
			// worker of this instance answers that request any more, and left alone the lease
			// counted as this host's for every host until it expired. The acquire removes the
			// request; its requester asks again.
			mine = append(mine, l)
		case !v.first && v.handedToMe(l):
			mine = append(mine, l) // handed over by its owner (see handOver)
		case !v.first && strings.EqualFold(l.Owner, v.self) && !v.owned[l.Token] && !l.Expired(v.now, v.expiration) && v.coolTo[l.Token] == "":
			// Live in this host's name, and no worker of it reads it: restored by an operator
			// after it was deleted under this host (cfp leases import), a release or an
			// acquire whose write landed but whose answer was lost, a renew that landed after
			// its worker stopped. Every host, this one too, counts it as this host's, so
			// nobody would read it until it expired. Not a lease this host handed off lately
			// (its handover failed: the requester takes it when it expires, or asks again).
			mine = append(mine, l)
		case !v.first && strings.EqualFold(l.Owner, v.self) && !v.owned[l.Token] && slices.Contains(v.restored, l.Token):
			// Restored in this host's name after it was deleted under it, expired (the export's
			// timestamp): only the leases show the restore, and the other hosts, calm, list
			// them only every two expirations (see calm). Taken back even above this host's
			// share: its presence record then changes, and the others list and ask for their
			// share. Simulation seed 7143: 24-28, restored in cfp-7's name at the faults' end,
			// expired, waited 13.6 s for cfp-3's safety-net full list.
			mine = append(mine, l)
		}
	}
	plan = append(mine, plan...)
	tried := map[string]bool{}
	cfp := make(map[string]bool, len(v.hosts))
	for _, h := range v.hosts {
		cfp[strings.ToLower(h.Instance)] = true
	}
	stoleForeign := false
	for _, l := range plan {
		if tried[l.Token] || v.owned[l.Token] {
			continue
		}
		tried[l.Token] = true
		live := !l.Expired(v.now, v.expiration) && !strings.EqualFold(l.Owner, v.self)
		if live && (handoffAccepted(l) || handedOver(l)) {
			// Its owner finishes the batch in flight, then hands it over; or it was handed
			// over and its new owner starts it at its next cycle: asking now would overwrite
			// the sign that new owner looks for.
			continue
		}
		switch {
		case live && !cfp[strings.ToLower(l.Owner)]:
			// An owner without a presence record is not a cfp host (a .NET or Java host):
			// it never answers a handoff request, so steal the .NET way, at once and one
			// lease per cycle (FeedManagement/EqualPartitionsBalancingStrategy.cs lines 77-78,
			// 87-93).
			if stoleForeign || v.rebuffed(l) {
				continue
			}
			stoleForeign = true
			pl.actions = append(pl.actions, cycleAction{actSteal, l})
		case live && v.askFirst(l):
			pl.asked = true
			if v.first {
				// Not yet: hosts started together (a scale-out) write their presence records
				// within a moment of each other, and the first of them to plan would count
				// fewer hosts, so a larger share, and ask for too many leases (at a join of 25
				// hosts to 25, hosts went up to 28 of 20, and the surplus took two cycles more
				// to move on). The second cycle, half an interval later, asks.
				continue
			}
			pl.actions = append(pl.actions, cycleAction{actAsk, l})
		default:
			pl.actions = append(pl.actions, cycleAction{actTake, l})
		}
	}
	return pl
}

// fairShare is the fair share of n leases among the live hosts and self: rounded down and up.
func fairShare(n int, live []string, self string) (floor, ceil int) {
	hosts := len(live)
	if !slices.ContainsFunc(live, func(h string) bool { return strings.EqualFold(h, self) }) {
		hosts++
	}
	return n / hosts, (n + hosts - 1) / hosts
}

// viewCycle snapshots this host's own state for an acquire cycle over all and hosts, listed at
// now: the part of the view the fair share is computed from. The executor adds the floor, and
// owned and holding once it answered the handoff requests (which can stop workers).
func (p *Processor) viewCycle(first bool, now time.Time, all []*leases.Lease, hosts []leases.Host) *cycleView {
	v := &cycleView{
		self: p.opts.Instance, now: now, expiration: p.opts.Expiration, first: first,
		all: all, hosts: hosts,
		coolTo: p.ho.coolingDown(now, 3*p.opts.AcquireInterval),
		asked:  p.ho.askedAll(), rebuffs: p.rebuffsNow(), restored: p.calm.restored,
	}
	v.share()
	return v
}

// ownedTokens returns the tokens of the leases this host holds (see isOwned), and those of
// the child leases its unfinished splits hold.
func (p *Processor) ownedTokens() map[string]bool {
	owned := p.ownedSorted()
	out := make(map[string]bool, len(owned))
	for _, ol := range owned {
		if ol.held() {
			out[ol.token] = true
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for t := range p.children {
		out[t] = true
	}
	return out
}

// rebuffsNow returns a copy of the rebuffed steals (see noteRebuff).
func (p *Processor) rebuffsNow() map[string]rebuff {
	f := &p.others
	f.rebuffMu.Lock()
	defer f.rebuffMu.Unlock()
	return maps.Clone(f.rebuffs)
}
