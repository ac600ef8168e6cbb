package feed

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/cfp-dev/cfp/internal/leases"
)

// Acquire: the balancing goroutine. Every AcquireInterval it lists the leases and the presence
// records, plans with PlanAcquireWithHosts (processor_balance.go) and takes its share: free and expired
// leases at once, live leases of cfp hosts by asking for them (processor_handoff.go), live leases of .NET
// and Java hosts the .NET way, one per cycle.

// balanceLoop runs an acquire cycle at once and then every AcquireInterval until ctx ends,
// then deletes this host's presence record.
//
// A host that holds more than its share while another live host holds less expects handoff
// requests, and a host that asked for leases expects them handed over: either looks at the
// leases once more half way to its next cycle, so that a lease moves within one cycle of the
// requester (ask, then take) more often than not, and is not left unprocessed, handed over and
// not taken yet, until the requester's next cycle.
//
// The first cycle asks no cfp host for a lease: a host that wants some runs its second cycle
// half way to the next, and asks then (see acquireCycle).
func (p *Processor) balanceLoop(ctx context.Context) {
	defer p.withdraw(ctx)
	t := time.NewTicker(p.opts.AcquireInterval)
	defer t.Stop()
	watch := time.NewTimer(p.opts.AcquireInterval / 2)
	defer watch.Stop()
	donor, asked := p.acquireCycle(ctx, true)
	early := asked // the asks the first cycle left for the second
	for {
		if !donor && !asked {
			watch.Stop()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if ctx.Err() != nil {
				return // both were ready (a tick that passed while a request hung): stop, not a cycle
			}
			early = false
			donor, asked = p.acquireCycle(ctx, false)
			watch.Reset(p.opts.AcquireInterval / 2)
		case <-watch.C:
			if ctx.Err() != nil {
				return
			}
			if early {
				// The second cycle; what it asked for is taken half way to the next.
				early = false
				donor, asked = p.acquireCycle(ctx, false)
				watch.Reset(p.opts.AcquireInterval / 4)
				continue
			}
			p.midCycle(ctx, donor, asked)
			donor, asked = false, false
		}
	}
}

// midCycle lists the leases; a donor hands off those this host holds that another host asked
// for (within its fair share, see checkHandoff), and a host that asked for leases takes those
// handed over to it.
func (p *Processor) midCycle(ctx context.Context, donor, asked bool) {
	listing := p.listings.Add(1)
	all, err := p.store.List(ctx)
	if err != nil {
		if ctx.Err() == nil {
			p.infraError(ctx, "list leases", "", err)
		}
		return
	}
	p.noticeLost(all, listing)
	if donor {
		p.answerRequests(ctx, all, false)
	}
	if asked {
		fill := p.rangeFiller(ctx)
		for _, l := range all {
			if ctx.Err() != nil {
				return
			}
			if p.handedToMe(l) {
				p.take(ctx, l, fill(l))
			}
		}
	}
}

// acquireCycle refreshes this host's presence record, lists the leases and the presence
// records, answers handoff requests for leases this host holds, plans with
// PlanAcquireWithHosts and acquires (or asks for) the plan. The first cycle also takes back
// every lease that still names this instance, live or not, as .NET does at start-up. It
// reports whether this host holds more than its fair share while another live host holds
// less (a donor, which should expect handoff requests).
//
// It also reports whether this host waits for leases it asked for (asked): handed over, they
// are taken half way to the next cycle (see balanceLoop); after the first cycle, whether it
// wants leases it did not ask for yet.
func (p *Processor) acquireCycle(ctx context.Context, first bool) (donor, asked bool) {
	if !first && p.quietCycle(ctx) {
		p.cycleDone(nil)
		return false, false
	}
	p.announceDue(ctx)
	listing := p.listings.Add(1)
	all, hosts, err := p.store.ListWithHosts(ctx)
	if err != nil {
		if ctx.Err() == nil {
			p.infraError(ctx, "list leases", "", err)
			p.cycleDone(err)
		}
		return
	}
	p.limit.reset(limitKey("list leases", ""))
	if p.checkName(ctx, hosts) || p.checkDeleted(ctx, all) {
		return
	}
	p.noticeLost(all, listing)
	p.retireSplitParents(ctx, all)
	now := p.opts.Now()
	p.pruneHandoffs(now)
	p.observeTimings(all, hosts, now)

	v := p.viewCycle(first, now, all, hosts)
	v.floor = p.setView(all, v.live, v.held)
	p.answerRequests(ctx, all, true)
	v.owned, v.holding = p.ownedTokens(), p.holding()
	plan := planCycle(v)
	p.calm.settle(plan.settled, liveRecords(hosts, now, p.opts.Expiration), v.holding)
	if !p.runCycle(ctx, plan.actions, now) {
		return
	}
	p.cycleDone(nil)
	return plan.donor, plan.asked
}

// runCycle performs an acquire cycle's actions in order; it reports false when it stopped
// early because ctx ended.
func (p *Processor) runCycle(ctx context.Context, actions []cycleAction, now time.Time) bool {
	fill := p.rangeFiller(ctx)
	for _, a := range actions {
		if ctx.Err() != nil {
			return false
		}
		if p.isOwned(a.lease.Token) {
			continue // a worker started for it since the view was taken
		}
		switch a.kind {
		case actAsk:
			p.askHandoff(ctx, a.lease, now)
			continue
		case actSteal:
			p.noteSteal(a.lease, now)
		}
		p.take(ctx, a.lease, fill(a.lease))
	}
	return true
}

// answerRequests answers the handoff requests that all, a listing, shows on the leases this
// host holds (see checkHandoff); with withdraw (a full cycle, whose view of the hosts is this
// listing's) it also removes those it refuses because their requester holds the largest
// share (see withdrawSated).
func (p *Processor) answerRequests(ctx context.Context, all []*leases.Lease, withdraw bool) {
	for _, l := range all {
		ol := p.ownedLease(l.Token)
		if ol == nil || !strings.EqualFold(l.Owner, p.opts.Instance) {
			continue
		}
		if p.checkHandoff(ol, l) {
			p.renew(ctx, ol) // tell the requester at once
		} else if withdraw {
			p.withdrawSated(ctx, ol, l)
		}
	}
}

// take acquires l (filling in rng, see acquire) and starts its worker.
func (p *Processor) take(ctx context.Context, l *leases.Lease, rng Range) {
	// Under a fresh deadline: a write cut off by shutdown could land with its answer lost,
	// leaving the lease owned here until it expired; start releases it when stopping.
	actx, cancel := p.fresh(ctx)
	acquired, err := p.acquire(actx, l, rng)
	if err != nil && !errors.Is(err, leases.ErrLeaseLost) && ctx.Err() == nil {
		if got, ok := p.landedAcquire(actx, l); ok {
			p.log.Info("lease acquire answered with an error, but it was written", "lease", l.Token, "err", err)
			acquired, err = got, nil
		}
	}
	cancel()
	if errors.Is(err, leases.ErrLeaseLost) {
		p.log.Debug("lease taken by another host first", "lease", l.Token, "err", err)
		return
	}
	if err != nil {
		if ctx.Err() == nil {
			p.infraError(ctx, "acquire lease", l.Token, err)
		}
		return
	}
	from := "free"
	if l.Owner != "" && !strings.EqualFold(l.Owner, p.opts.Instance) {
		from = l.Owner
	}
	p.log.Info("lease acquired", "lease", l.Token, "range", l.Range.String(), "from", from)
	p.start(acquired)
}

// landedAcquire reads l again after its acquire failed without a conflict (a timeout, a 503):
// the write may have been applied with its answer lost. A lease that names this host is this
// host's, whoever wrote the name: it starts its worker rather than leave it in its name with
// nobody reading it until it expires (every host counts it as this host's).
func (p *Processor) landedAcquire(ctx context.Context, l *leases.Lease) (*leases.Lease, bool) {
	cur, err := p.store.Get(ctx, l)
	if err != nil || cur.Token != l.Token || !strings.EqualFold(cur.Owner, p.opts.Instance) {
		return nil, false
	}
	return cur, true
}

// noticeLost stops the workers of the leases this host holds that all, the result of the
// listing numbered listing, shows owned by another host (or by none): another host took them
// (a .NET or Java host's steal, a cfp host that found them expired) after this host acquired
// them, since the listing started after that. Without it this host would learn of the loss
// only at its next write of the lease, up to KeepAlive later (43-47s with the defaults) when
// no checkpoint comes first, processing the lease alongside its new owner all that time.
// It costs no request. A lease whose worker hands it over to its listed owner is not lost.
func (p *Processor) noticeLost(all []*leases.Lease, listing uint64) {
	for _, l := range all {
		if strings.EqualFold(l.Owner, p.opts.Instance) {
			continue
		}
		ol := p.ownedLease(l.Token)
		if ol == nil || ol.listing >= listing || !ol.held() {
			continue
		}
		if ol.ctx.Err() != nil {
			if l.Owner == "" {
				continue // its stopping worker released it
			}
			if to, ok := p.ho.handedOffOf(l.Token); ok && strings.EqualFold(to.owner, l.Owner) {
				continue // its stopping worker handed it over (see handOver)
			}
		}
		p.log.Info("lease taken by another host", "lease", l.Token, "owner", l.Owner)
		ol.lose(&leases.LeaseLostError{Token: l.Token, Owner: l.Owner})
	}
}

// retireSplitParents deletes every lease this host holds whose range other leases tile
// exactly: the parent of a split cut short after its children were created (its host could
// not tell whether its writes succeeded, counted it expired and gave it up), which a merge put
// back in one partition, where it reads without a 410 again. Its children carry the split on
// (from the parent's position then, so nothing is skipped); the parent would deliver their keys
// a second time. Its worker ends as split.
func (p *Processor) retireSplitParents(ctx context.Context, all []*leases.Lease) {
	for _, l := range all {
		if !strings.EqualFold(l.Owner, p.opts.Instance) || !tiledByOthers(l, all) {
			continue
		}
		ol := p.ownedLease(l.Token)
		if ol == nil || !ol.held() {
			continue
		}
		ol.cancel(errSplit)
		if err := p.store.Delete(ctx, l); err != nil {
			p.infraError(ctx, "delete split lease", l.Token, err)
			continue
		}
		p.log.Info("split lease retired beside its children", "lease", l.Token)
	}
}

// tiledByOthers reports whether the other leases of all that lie within l's range cover it
// exactly, without gap or overlap.
func tiledByOthers(l *leases.Lease, all []*leases.Lease) bool {
	if !l.HasRange() {
		return false
	}
	var in []leases.Range
	for _, o := range all {
		if o == l || o.Token == l.Token || !o.HasRange() || !o.Range.Within(l.Range) || o.Range.Equal(l.Range) {
			continue
		}
		in = append(in, o.Range)
	}
	slices.SortFunc(in, func(a, b leases.Range) int { return leases.CompareEPK(a.Min, b.Min) })
	cursor := l.Range.Min
	for _, r := range in {
		if leases.CompareEPK(r.Min, cursor) != 0 {
			return false
		}
		cursor = r.Max
	}
	return len(in) > 1 && leases.CompareEPK(cursor, l.Range.Max) == 0
}

// cycleDone tells ProcessorOptions.OnAcquireCycle that an acquire cycle ended.
func (p *Processor) cycleDone(err error) {
	if err == nil {
		err = p.readsFailing()
	}
	if p.opts.OnAcquireCycle != nil {
		p.opts.OnAcquireCycle(err)
	}
}

// acquire takes l (free, expired, or stolen) if its owner has not changed since it was
// listed, and clears any handoff request on it. A lease without a range gets rng (when not
// zero) in the same replace, as .NET's acquire fills in a missing FeedRange
// (LeaseManagement/DocumentServiceLeaseManagerCosmos.cs, AcquireAsync, lines 60-84).
//
// A lease taken because it looked expired (or free) in the listing is not taken when the stored
// version turns out live (its If-Match failed and the re-read shows its owner wrote it since):
// the owner renewed it between this host's listing and its acquire, a cycle that can take
// seconds on a loaded host, and overwriting that renew stole a live lease from a host that
// went on processing it until it learned of the loss. .NET's acquire checks only the owner.
func (p *Processor) acquire(ctx context.Context, l *leases.Lease, rng Range) (*leases.Lease, error) {
	ctx = leases.WithCharge(ctx, leases.ChargeAcquire, l.Token)
	seen := l.Owner
	wasExpired := l.Expired(p.opts.Now(), p.opts.Expiration)
	return p.store.Update(ctx, l, func(n *leases.Lease) error {
		if n.Owner != seen {
			return &leases.LeaseLostError{Token: n.Token, Owner: n.Owner}
		}
		if wasExpired && !strings.EqualFold(n.Owner, p.opts.Instance) && !n.Expired(p.opts.Now(), p.opts.Expiration) {
			return &leases.LeaseLostError{Token: n.Token, Owner: n.Owner} // renewed since the listing
		}
		if !n.HasRange() && rng != (Range{}) {
			n.Range = rng
		}
		n.Owner = p.opts.Instance
		delete(n.Properties, handoffKey)
		delete(n.Properties, handoffAcceptedKey)
		return nil
	})
}

// rangeFiller returns the range an acquire writes on a lease that has none: a .NET v0 lease
// without FeedRange (pre-FeedRange v3 leases, V2 PartitionId leases) gets the range of the live
// partition its token names, as .NET's acquire looks it up in the partition key range cache,
// so that a later merge can replace it by an EPK lease over that range. The partitions are
// listed once per cycle, and only when a lease needs them; a partition that is already gone
// (or a listing that fails) leaves the lease as it is, as in .NET. Java PK-range documents have
// no range field, so nothing is written on them.
func (p *Processor) rangeFiller(ctx context.Context) func(*leases.Lease) Range {
	var parts []Partition
	listed := false
	return func(l *leases.Lease) Range {
		if l.HasRange() || l.Family != leases.FamilyDotNetV0 {
			return Range{}
		}
		if !listed {
			listed = true
			var err error
			if parts, err = p.src.Partitions(ctx); err != nil && ctx.Err() == nil {
				p.infraError(ctx, "list partitions", l.Token, err)
			}
		}
		rt, err := Route(l, parts)
		if err != nil {
			return Range{}
		}
		return rt.Partition.Range
	}
}

// heldBy counts the live leases of ls by owner (lower-cased).
func heldBy(ls []*leases.Lease, now time.Time, expiration time.Duration) map[string]int {
	held := map[string]int{}
	for _, l := range ls {
		if !l.Expired(now, expiration) {
			held[strings.ToLower(l.Owner)]++
		}
	}
	return held
}

// hungry reports whether a live host other than self holds fewer than floor live leases (held,
// by heldBy).
func hungry(held map[string]int, live []string, self string, floor int) bool {
	for _, h := range live {
		if !strings.EqualFold(h, self) && held[strings.ToLower(h)] < floor {
			return true
		}
	}
	return false
}

// holding counts the leases whose worker is not stopping.
func (p *Processor) holding() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, ol := range p.owned {
		if ol.ctx.Err() == nil {
			n++
		}
	}
	return n
}

// isOwned reports whether a worker runs for token and the lease is still this host's (see
// ownedLease.held): a lease whose worker winds down after it was lost is not, and is taken
// again when the listing shows it free or expired (startLocked starts its new worker once
// the old one ended).
func (p *Processor) isOwned(token string) bool {
	ol := p.ownedLease(token)
	return ol != nil && ol.held()
}

func (p *Processor) ownedLease(token string) *ownedLease {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.owned[token]
}
