package feed

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/cfp-dev/cfp/internal/leases"
)

// Handoff: how cfp hosts move a lease between them without ever processing it twice at once.
//
// .NET steals a lease by overwriting its Owner, so the old owner may still be in the middle of
// a batch when the new one starts reading. A cfp host that plans to steal a lease from a live
// cfp owner first asks for it: it writes properties["cfpHandoff"] = "<owner>><requester>" on
// the lease (an If-Match write that keeps the Owner). The owner sees the request at its next
// renew, checkpoint or balancing cycle, stops delivering batches, lets the batch in flight
// finish, checkpoints and hands the lease over in one conditional replace that sets Owner to
// the requester (see handOver: the lease is never unowned, so a .NET or Java host cannot take
// it in between), and stays away from it for a few cycles; the requester starts it at its next
// cycle. While the batch in flight finishes, the owner renews the lease with
// properties["cfpHandoffAccepted"] = "<owner>" on it: no cfp host asks for or steals a live
// lease whose owner accepted its handoff, it waits for the handover (or the expiration, if the
// owner dies). An owner without a presence record is no cfp host (a .NET or Java host ignores
// the property): it is never asked, its leases are stolen the .NET way, one per acquire cycle.
// A cfp owner that does not answer within the lease expiration (a host that cannot write) has
// the lease stolen the same way: a cfp host that could not write its lease since the request
// has stopped processing it by then (see ownedLease.valid). Java leases do not persist
// properties: they are stolen directly. Taking a lease always removes both properties.
const (
	handoffKey         = "cfpHandoff"
	handoffAcceptedKey = "cfpHandoffAccepted"
	handoffSep         = ">"
)

// balanceLoop runs an acquire cycle at once and then every AcquireInterval until ctx ends,
// then deletes this host's presence record.
//
// A host that holds more than its share while another live host holds less expects handoff
// requests: it checks for them once more half way to its next cycle, so that a lease moves
// within one cycle of the requester (ask, then take) more often than not.
func (p *Processor) balanceLoop(ctx context.Context) {
	defer p.withdraw(ctx)
	t := time.NewTicker(p.opts.AcquireInterval)
	defer t.Stop()
	watch := time.NewTimer(p.opts.AcquireInterval / 2)
	defer watch.Stop()
	donor := p.acquireCycle(ctx, true)
	for {
		if !donor {
			watch.Stop()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			donor = p.acquireCycle(ctx, false)
			watch.Reset(p.opts.AcquireInterval / 2)
		case <-watch.C:
			p.answerHandoffs(ctx)
			donor = false
		}
	}
}

// answerHandoffs lists the leases and hands off those this host holds that another host asked
// for (within its fair share, see checkHandoff).
func (p *Processor) answerHandoffs(ctx context.Context) {
	all, err := p.store.List(ctx)
	if err != nil {
		if ctx.Err() == nil {
			p.infraError(ctx, "list leases", "", err)
		}
		return
	}
	for _, l := range all {
		if ol := p.ownedLease(l.Token); ol != nil && strings.EqualFold(l.Owner, p.opts.Instance) {
			if p.checkHandoff(ol, l) {
				p.renew(ctx, ol) // tell the requester at once
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
func (p *Processor) acquireCycle(ctx context.Context, first bool) (donor bool) {
	p.announce(ctx)
	all, hosts, err := p.store.ListWithHosts(ctx)
	if err != nil {
		if ctx.Err() == nil {
			p.infraError(ctx, "list leases", "", err)
			p.cycleDone(err)
		}
		return
	}
	p.limit.reset("list leases\x00")
	now := p.opts.Now()
	p.pruneHandoffs(now)

	candidates := make([]*leases.Lease, 0, len(all))
	for _, l := range all {
		if to, ok := p.coolingDown(l.Token, now); ok && l.Expired(now, p.opts.Expiration) {
			// Handed off lately and not taken yet: count it for the host that asked for it,
			// so that this host does not plan to take it back.
			l = l.Clone()
			l.Owner, l.Timestamp = to, now
		}
		candidates = append(candidates, l)
	}
	live := leases.LiveHosts(candidates, hosts, now, p.opts.Expiration)
	floor := p.setFloor(len(all), live)
	for _, l := range all {
		if ol := p.ownedLease(l.Token); ol != nil && strings.EqualFold(l.Owner, p.opts.Instance) {
			if p.checkHandoff(ol, l) {
				p.renew(ctx, ol) // tell the requester at once
			}
		}
	}
	donor = p.holding() > floor && hungry(candidates, live, p.opts.Instance, floor, now, p.opts.Expiration)
	plan := PlanAcquireWithHosts(candidates, live, p.opts.Instance, now, p.opts.Expiration)
	var mine []*leases.Lease
	for _, l := range all {
		switch {
		case first && strings.EqualFold(l.Owner, p.opts.Instance) && !p.isOwned(l.Token) && !handoffAsked(l, p.opts.Instance):
			mine = append(mine, l)
		case !first && p.handedToMe(l):
			mine = append(mine, l) // handed over by its owner (see handOver)
		}
	}
	plan = append(mine, plan...)
	tried := map[string]bool{}
	fill := p.rangeFiller(ctx)
	cfp := make(map[string]bool, len(hosts))
	for _, h := range hosts {
		cfp[strings.ToLower(h.Instance)] = true
	}
	stoleForeign := false
	for _, l := range plan {
		if ctx.Err() != nil {
			return
		}
		if tried[l.Token] || p.isOwned(l.Token) {
			continue
		}
		tried[l.Token] = true
		live := !l.Expired(now, p.opts.Expiration) && !strings.EqualFold(l.Owner, p.opts.Instance)
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
			if stoleForeign {
				continue
			}
			stoleForeign = true
		case live && p.askFirst(l, now):
			p.askHandoff(ctx, l, now)
			continue
		}
		// Under a fresh deadline: a write cut off by shutdown could land with its answer lost,
		// leaving the lease owned here until it expired; start releases it when stopping.
		actx, cancel := p.fresh(ctx)
		acquired, err := p.acquire(actx, l, fill(l))
		cancel()
		if errors.Is(err, leases.ErrLeaseLost) {
			p.log.Debug("lease taken by another host first", "lease", l.Token, "err", err)
			continue
		}
		if err != nil {
			if ctx.Err() == nil {
				p.infraError(ctx, "acquire lease", l.Token, err)
			}
			continue
		}
		from := "free"
		if l.Owner != "" && !strings.EqualFold(l.Owner, p.opts.Instance) {
			from = l.Owner
		}
		p.log.Info("lease acquired", "lease", l.Token, "range", l.Range.String(), "from", from)
		p.start(acquired)
	}
	p.cycleDone(nil)
	return donor
}

// cycleDone tells ProcessorOptions.OnAcquireCycle that an acquire cycle ended.
func (p *Processor) cycleDone(err error) {
	if p.opts.OnAcquireCycle != nil {
		p.opts.OnAcquireCycle(err)
	}
}

// acquire takes l (free, expired, or stolen) if its owner has not changed since it was
// listed, and clears any handoff request on it. A lease without a range gets rng (when not
// zero) in the same replace, as .NET's acquire fills in a missing FeedRange
// (LeaseManagement/DocumentServiceLeaseManagerCosmos.cs, AcquireAsync, lines 60-84).
func (p *Processor) acquire(ctx context.Context, l *leases.Lease, rng Range) (*leases.Lease, error) {
	seen := l.Owner
	return p.store.Update(ctx, l, func(n *leases.Lease) error {
		if n.Owner != seen {
			return &leases.LeaseLostError{Token: n.Token, Owner: n.Owner}
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

// errNoHandoff: the lease carries no handoff request addressed to this host.
var errNoHandoff = errors.New("no handoff request")

// handOver gives l to the host whose request it carries in one conditional replace: Owner =
// the requester; the request stays on the lease as the requester's sign that it was handed the
// lease (its acquire removes it), the acceptance mark goes. The lease is never unowned in
// between, so a .NET or Java host, which sees only owners, cannot take it, and the requester
// starts it at its next cycle.
// It returns errNoHandoff when the stored lease carries no request to this host or the
// requester has no presence record any more (the caller releases it then), a *leases.LeaseLostError when another host owns it.
func (p *Processor) handOver(ctx context.Context, l *leases.Lease) (to string, err error) {
	hosts, err := p.store.Hosts(ctx)
	if err != nil {
		return "", err
	}
	// The stored version, not the worker's copy: Update tries its mutation on the lease it is
	// given first, and a copy from before the request was written carries no request, so the
	// lease was released (unowned for a cycle) instead of handed over.
	cur, err := p.store.Get(ctx, l)
	if errors.Is(err, leases.ErrNotFound) {
		return "", errNoHandoff // deleted meanwhile (a split): the release finds nothing to do
	}
	if err != nil {
		return "", err
	}
	_, err = p.store.Update(ctx, cur, func(n *leases.Lease) error {
		if !strings.EqualFold(n.Owner, p.opts.Instance) {
			return &leases.LeaseLostError{Token: n.Token, Owner: n.Owner}
		}
		from, req, ok := strings.Cut(n.Properties[handoffKey], handoffSep)
		if !ok || !strings.EqualFold(from, p.opts.Instance) || strings.TrimSpace(req) == "" || strings.EqualFold(req, p.opts.Instance) {
			return errNoHandoff
		}
		if !slices.ContainsFunc(hosts, func(h leases.Host) bool { return strings.EqualFold(h.Instance, req) }) {
			return errNoHandoff // the requester stopped (its record is gone)
		}
		to = req
		n.Owner = req
		delete(n.Properties, handoffAcceptedKey)
		return nil
	})
	return to, err
}

// handedToMe reports whether l was handed over to this host after it asked for it (the owner
// wrote this host's name as Owner and left the request on it): its next cycle starts it.
func (p *Processor) handedToMe(l *leases.Lease) bool {
	return handedOver(l) && strings.EqualFold(l.Owner, p.opts.Instance) && !p.isOwned(l.Token)
}

// handedOver reports whether l carries the sign of a handover to its owner (a request from its
// previous owner to its owner) that its owner has not acquired yet.
func handedOver(l *leases.Lease) bool {
	from, to, ok := strings.Cut(l.Properties[handoffKey], handoffSep)
	return ok && l.Owner != "" && strings.EqualFold(to, l.Owner) && !strings.EqualFold(from, l.Owner)
}

// askFirst reports whether a steal of the live lease l should be a handoff request: yes,
// unless the lease cannot carry one or an earlier request went unanswered for too long.
func (p *Processor) askFirst(l *leases.Lease, now time.Time) bool {
	if l.Family == leases.FamilyJavaPK || l.Family == leases.FamilyJavaEPK {
		return false
	}
	p.hoMu.Lock()
	defer p.hoMu.Unlock()
	asked, ok := p.asked[l.Token]
	if !ok || asked.owner != l.Owner {
		return true
	}
	return now.Sub(asked.at) < p.opts.Expiration
}

// askHandoff writes the handoff request on l (once per owner).
func (p *Processor) askHandoff(ctx context.Context, l *leases.Lease, now time.Time) {
	p.hoMu.Lock()
	asked, ok := p.asked[l.Token]
	p.hoMu.Unlock()
	if ok && asked.owner == l.Owner {
		return // asked already: wait for the answer
	}
	seen := l.Owner
	_, err := p.store.Update(ctx, l, func(n *leases.Lease) error {
		if n.Owner != seen {
			return &leases.LeaseLostError{Token: n.Token, Owner: n.Owner}
		}
		if n.Properties == nil {
			n.Properties = map[string]string{}
		}
		n.Properties[handoffKey] = seen + handoffSep + p.opts.Instance
		return nil
	})
	if errors.Is(err, leases.ErrLeaseLost) {
		return
	}
	if err != nil {
		if ctx.Err() == nil {
			p.infraError(ctx, "ask for lease", l.Token, err)
		}
		return
	}
	p.hoMu.Lock()
	p.asked[l.Token] = handoffAsk{owner: seen, at: now}
	p.hoMu.Unlock()
	p.log.Info("lease handoff requested", "lease", l.Token, "from", seen)
}

// handoffAsked reports whether l carries a handoff request addressed to owner.
func handoffAsked(l *leases.Lease, owner string) bool {
	from, to, ok := strings.Cut(l.Properties[handoffKey], handoffSep)
	return ok && strings.EqualFold(from, owner) && !strings.EqualFold(to, owner)
}

// handoffAccepted reports whether the owner of l accepted a handoff request on it: it hands
// the lease over once its batch in flight finished.
func handoffAccepted(l *leases.Lease) bool {
	from, _, ok := strings.Cut(l.Properties[handoffKey], handoffSep)
	return ok && l.Owner != "" && strings.EqualFold(from, l.Owner) && strings.EqualFold(l.Properties[handoffAcceptedKey], l.Owner)
}

// checkHandoff stops the worker of ol when l (its newest version) asks for a handoff, unless
// this host would be left with less than its fair share (the floor of the last cycle): a
// request made from an older view of the hosts waits until the views agree. It reports
// whether it accepted the request; the lease's renewals then say so (see renew).
func (p *Processor) checkHandoff(ol *ownedLease, l *leases.Lease) bool {
	if l == nil || !handoffAsked(l, p.opts.Instance) || ol.ctx.Err() != nil {
		return false
	}
	_, to, _ := strings.Cut(l.Properties[handoffKey], handoffSep)
	p.hoMu.Lock()
	defer p.hoMu.Unlock()
	if ol.ctx.Err() != nil {
		return false // handed off by a concurrent check
	}
	if held := p.holding(); held <= p.floor {
		p.log.Debug("lease handoff refused: at the fair share", "lease", l.Token, "to", to, "held", held)
		return false
	}
	p.handedOff[l.Token] = handoffAsk{owner: to, at: p.opts.Now()}
	p.log.Info("lease handoff", "lease", l.Token, "to", to)
	ol.cancel(errHandoff)
	return true
}

// setFloor records and returns this host's fair share after a listing of n leases among the
// live hosts (self counted even when absent): a handoff request never takes it below that.
func (p *Processor) setFloor(n int, live []string) int {
	hosts := len(live)
	if !slices.ContainsFunc(live, func(h string) bool { return strings.EqualFold(h, p.opts.Instance) }) {
		hosts++
	}
	p.hoMu.Lock()
	defer p.hoMu.Unlock()
	p.floor = n / hosts
	return p.floor
}

// hungry reports whether a live host other than self holds fewer than floor live leases.
func hungry(ls []*leases.Lease, live []string, self string, floor int, now time.Time, expiration time.Duration) bool {
	held := map[string]int{}
	for _, l := range ls {
		if !l.Expired(now, expiration) {
			held[strings.ToLower(l.Owner)]++
		}
	}
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

// announce writes this host's presence record (see leases.Host), so that the other cfp hosts
// count it before it owns a lease. A failure is logged (rate-limited) and otherwise ignored:
// without the record, the others see this host once it owns leases, as .NET hosts do.
func (p *Processor) announce(ctx context.Context) {
	_, err := p.store.Announce(ctx, p.opts.Instance, max(leases.DefaultHostTTL, 2*p.opts.Expiration))
	if err != nil {
		if ctx.Err() == nil {
			p.warnLimited(ctx, "announce host", err)
		}
		return
	}
	p.limit.reset("announce host\x00")
}

// withdraw deletes this host's presence record, under a fresh deadline: at shutdown, so that
// the other hosts stop counting it at their next cycle.
func (p *Processor) withdraw(ctx context.Context) {
	fctx, cancel := p.fresh(ctx)
	defer cancel()
	if err := p.store.Withdraw(fctx, p.opts.Instance); err != nil {
		p.warnLimited(ctx, "withdraw host", err)
	}
	// Leases handed over to this host that it did not start yet: give them back rather than
	// let them expire (owners stop handing leases over to it once its record is gone).
	all, err := p.store.List(fctx)
	if err != nil {
		p.warnLimited(ctx, "list leases", err)
		return
	}
	for _, l := range all {
		if p.handedToMe(l) {
			if err := p.store.Release(fctx, l, p.opts.Instance); err != nil && !errors.Is(err, leases.ErrLeaseLost) {
				p.warnLimited(ctx, "release lease", err)
			}
		}
	}
}

// warnLimited logs a failed lease-container operation, rate-limited, without an error event.
func (p *Processor) warnLimited(ctx context.Context, op string, err error) {
	if ok, suppressed := p.limit.allow(op + "\x00"); ok {
		attrs := []any{"op", op, "err", err}
		if suppressed > 0 {
			attrs = append(attrs, "suppressed", suppressed)
		}
		p.log.WarnContext(ctx, "lease operation failed", attrs...)
	}
}

// coolingDown reports whether this host handed token off lately, and to whom.
func (p *Processor) coolingDown(token string, now time.Time) (string, bool) {
	p.hoMu.Lock()
	defer p.hoMu.Unlock()
	h, ok := p.handedOff[token]
	return h.owner, ok && now.Sub(h.at) < 3*p.opts.AcquireInterval
}

// pruneHandoffs forgets old requests and cool-downs.
func (p *Processor) pruneHandoffs(now time.Time) {
	p.hoMu.Lock()
	defer p.hoMu.Unlock()
	for t, h := range p.handedOff {
		if now.Sub(h.at) >= 3*p.opts.AcquireInterval {
			delete(p.handedOff, t)
		}
	}
	for t, a := range p.asked {
		if now.Sub(a.at) >= 2*p.opts.Expiration {
			delete(p.asked, t)
		}
	}
}

// handoffAsk is a handoff request: to (or from) owner, at a time.
type handoffAsk struct {
	owner string
	at    time.Time
}

// isOwned reports whether a worker runs for token.
func (p *Processor) isOwned(token string) bool { return p.ownedLease(token) != nil }

func (p *Processor) ownedLease(token string) *ownedLease {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.owned[token]
}

// infraError logs (rate-limited) and notifies a failure of the store or the feed.
func (p *Processor) infraError(ctx context.Context, op, token string, err error) {
	p.notify(Event{Type: EventError, Lease: token, Err: err, Cause: CauseInfra})
	if ok, suppressed := p.limit.allow(op + "\x00" + token); ok {
		attrs := []any{"op", op, "err", err}
		if token != "" {
			attrs = append(attrs, "lease", token)
		}
		if suppressed > 0 {
			attrs = append(attrs, "suppressed", suppressed)
		}
		p.log.WarnContext(ctx, "lease operation failed", attrs...)
	}
}
