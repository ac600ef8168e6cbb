package feed

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
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

var errNoHandoff = errors.New("no handoff request")

// handOver gives l to the host whose request it carries in one conditional replace: Owner =
// the requester; the request stays on the lease as the requester's sign that it was handed the
// lease (its acquire removes it), the acceptance mark goes. The lease is never unowned in
// between, so a .NET or Java host, which sees only owners, cannot take it, and the requester
// starts it at its next cycle.
// It returns errNoHandoff when the stored lease carries no request to this host or the
// requester has no presence record any more (the caller releases it then), a *leases.LeaseLostError when another host owns it.
func (p *Processor) handOver(ctx context.Context, l *leases.Lease) (to string, err error) {
	ctx = leases.WithCharge(ctx, leases.ChargeRelease, l.Token)
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

// askFirstOf reports whether a steal of the live lease l should be a handoff request: yes,
// unless the lease cannot carry one or an earlier request (asked, by token) went unanswered
// for longer than an expiration.
func askFirstOf(l *leases.Lease, asked map[string]handoffAsk, now time.Time, expiration time.Duration) bool {
	if l.Family == leases.FamilyJavaPK || l.Family == leases.FamilyJavaEPK {
		return false
	}
	a, ok := asked[l.Token]
	if !ok || a.owner != l.Owner {
		return true
	}
	return now.Sub(a.at) < expiration
}

// askHandoff writes the handoff request on l (once per owner, again when another host's
// request replaced it: two hosts that planned from different views of the hosts can ask for
// the same lease, and the owner answers the request the lease carries).
func (p *Processor) askHandoff(ctx context.Context, l *leases.Lease, now time.Time) {
	ctx = leases.WithCharge(ctx, leases.ChargeAcquire, l.Token)
	at := now
	if asked, ok := p.ho.askedOf(l.Token); ok && asked.owner == l.Owner {
		if strings.EqualFold(l.Properties[handoffKey], l.Owner+handoffSep+p.opts.Instance) {
			return // asked already: wait for the answer
		}
		// Overwritten: ask again; askFirstOf still counts the expiration from the first request.
		at = asked.at
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
	p.ho.recordAsk(l.Token, handoffAsk{owner: seen, at: at})
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
// this host would be left with less than its fair share (the floor of the last cycle), or the
// handoff evens nothing (see evensNothing): a request made from an older view of the hosts
// waits until the views agree. It reports whether it accepted the request; the lease's
// renewals then say so (see renew).
func (p *Processor) checkHandoff(ol *ownedLease, l *leases.Lease) bool {
	if l == nil || !handoffAsked(l, p.opts.Instance) || ol.ctx.Err() != nil {
		return false
	}
	req := l.Properties[handoffKey]
	_, to, _ := strings.Cut(req, handoffSep)
	return p.ho.accept(l.Token, req, handoffAsk{owner: to, at: p.opts.Now()}, func(floor, theirs int) bool {
		if ol.ctx.Err() != nil {
			return false // handed off by a concurrent check
		}
		held := p.holding()
		if held <= floor {
			p.log.Debug("lease handoff refused: at the fair share", "lease", l.Token, "to", to, "held", held)
			return false
		}
		if evensNothing(held, theirs) {
			p.log.Debug("lease handoff refused: it evens nothing", "lease", l.Token, "to", to, "held", held, "theirs", theirs)
			return false
		}
		p.log.Info("lease handoff", "lease", l.Token, "to", to)
		ol.cancel(errHandoff)
		return true
	})
}

// withdrawSated removes from l, a lease this host holds and processes, a handoff request
// that this cycle's listing shows made by a host that holds the largest share already, or
// whose grant would even nothing, or by a host that is no longer live (see handoffs.accept): refused, it would stay on the lease for good, since only an acquire
// removes it, and a lease asked for keeps every cfp host from settling (see settledLeases),
// so that each lists every lease each cycle. A requester that still wants the lease (its
// view of the hosts differs for a moment) asks again at its next cycle.
func (p *Processor) withdrawSated(ctx context.Context, ol *ownedLease, l *leases.Lease) {
	req := l.Properties[handoffKey]
	_, to, _ := strings.Cut(req, handoffSep)
	if !handoffAsked(l, p.opts.Instance) || handoffAccepted(l) || ol.ctx.Err() != nil || !p.ho.sated(to) && !p.ho.evensNothing(to, p.holding()) && !p.ho.gone(to) {
		return
	}
	ctx = leases.WithCharge(ctx, leases.ChargeRenew, l.Token)
	start := p.opts.Now()
	// The listed version, which carries the request, rather than the worker's copy: Update
	// tries its mutation on the version it is given first.
	n, err := p.store.Update(ctx, l, func(n *leases.Lease) error {
		if n.Owner != p.opts.Instance {
			return &leases.LeaseLostError{Token: n.Token, Owner: n.Owner}
		}
		if n.Properties[handoffKey] != req || n.Properties[handoffAcceptedKey] != "" {
			return errNoHandoff // asked again, or accepted meanwhile: leave it
		}
		delete(n.Properties, handoffKey)
		return nil
	})
	switch {
	case err == nil:
		ol.update(n, start)
		p.log.Debug("lease handoff request withdrawn: the requester holds the largest share, or the handoff evens nothing", "lease", l.Token, "to", to)
	case errors.Is(err, leases.ErrLeaseLost), errors.Is(err, errNoHandoff), ctx.Err() != nil:
		// Lost (its worker learns it at its next write or listing), asked again or accepted
		// meanwhile, or stopping: nothing to withdraw.
	default:
		p.infraError(ctx, "withdraw handoff request", l.Token, err)
	}
}

// setView records this host's view after a listing of the leases all among the live hosts (self
// counted even when absent), which held the live leases held (by heldBy): the fair share,
// which no accepted handoff request takes this host below, and what each host holds, so that
// no request of a host that holds its share already is accepted (see handoffs.accept). It
// returns the floor of the share.
func (p *Processor) setView(all []*leases.Lease, live []string, held map[string]int) int {
	floor, ceil := fairShare(len(all), live, p.opts.Instance)
	shown := map[string]string{}
	for _, l := range all {
		if req, ok := l.Properties[handoffKey]; ok && strings.EqualFold(l.Owner, p.opts.Instance) {
			shown[l.Token] = strings.ToLower(req)
		}
	}
	return p.ho.setView(floor, ceil, held, live, shown)
}

// pruneHandoffs forgets old requests and cool-downs.
func (p *Processor) pruneHandoffs(now time.Time) {
	p.ho.prune(now, 3*p.opts.AcquireInterval, 2*p.opts.Expiration)
}

// handoffAsk is a handoff request: to (or from) owner, at a time.
type handoffAsk struct {
	owner string
	at    time.Time
}

// handoffs is this host's memory of handoffs: the requests it made, the leases it handed off
// lately (it stays away from them for a few cycles), its fair share at the last acquire
// cycle, which no accepted request takes it below, and what each host held then. Its methods are safe for concurrent use:
// the balancing goroutine, the renew goroutine and the workers all call them.
//
// Lock order: handoffs.mu comes before Processor.mu. accept runs its decision under mu, and
// that decision counts the held leases under Processor.mu (Processor.holding), so that two
// concurrent checks cannot both hand off the last lease above the floor. Never call a
// handoffs method while holding Processor.mu.
type handoffs struct {
	mu        sync.Mutex
	asked     map[string]handoffAsk // requests this host made (to the owner), by token
	handedOff map[string]handoffAsk // leases this host handed off (to the requester), by token
	floor     int                   // this host's fair share at the last cycle (rounded down)
	ceil      int                   // the same, rounded up: the most any host's share is
	// held counts the live leases each host (lower-cased) held at the last cycle's listing,
	// plus the handoffs this host accepted since; nil before the first cycle.
	held map[string]int
	// live are the live hosts (lower-cased) at the last cycle's listing: a request of another
	// host is refused (see accept).
	live map[string]bool
	// shown are the handoff requests (lower-cased, by token) that the last cycle's listing
	// showed on the leases this host held: only those are answered (see accept).
	shown map[string]string
	// relist asks the next acquire cycle to list the leases (not a quiet cycle): a renewal or
	// a checkpoint saw a request that the last listing did not show.
	relist bool
}

func newHandoffs() *handoffs {
	return &handoffs{asked: map[string]handoffAsk{}, handedOff: map[string]handoffAsk{}}
}

// askedAll returns a copy of the requests this host made, by token.
func (h *handoffs) askedAll() map[string]handoffAsk {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.asked)
}

// coolingDown returns, by token, the host each lease this host handed off less than coolDown
// before now went to.
func (h *handoffs) coolingDown(now time.Time, coolDown time.Duration) map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]string{}
	for t, a := range h.handedOff {
		if now.Sub(a.at) < coolDown {
			out[t] = a.owner
		}
	}
	return out
}

// askedOf returns the request this host made for token, if any.
func (h *handoffs) askedOf(token string) (handoffAsk, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	a, ok := h.asked[token]
	return a, ok
}

// recordAsk remembers a request this host wrote on token.
func (h *handoffs) recordAsk(token string, a handoffAsk) {
	h.mu.Lock()
	h.asked[token] = a
	h.mu.Unlock()
}

// handedOffOf returns to whom, and when, this host handed token off, if it did.
func (h *handoffs) handedOffOf(token string) (handoffAsk, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	a, ok := h.handedOff[token]
	return a, ok
}

// accept calls give with the floor and what the requester held at the last cycle's listing
// (with the handoffs accepted since; -1 when unknown), under mu; when give agrees (it stops
// the lease's worker), it records the handoff of token to a.owner and reports true. give may
// take Processor.mu.
//
// A request that the last cycle's listing did not show on the lease is left for the next cycle,
// which lists the leases (see relistDue): the view it would be answered on is older than the
// request. The requester may have gained leases since that listing (the children of a split,
// or a free lease, in the same cycle it asked), and the view then counts it short when a
// handoff evens nothing: simulation seed 524 moved a lease from a host of 7 to one of 6 this
// way, after the set had settled.
//
// A request from a host that held the largest share already at the last cycle's listing (with
// the handoffs accepted since) is refused without asking give: it was made from an older view
// (a host that started before others joined counts fewer hosts, so a larger share), or it
// outlived the need it was made for (a request refused at the floor stays on the lease, and
// would be granted once this host held one more lease). Granting it takes the requester over
// its share, and another handoff must then take that lease on: in a scalebench join of 25
// hosts to 25, requests like this left 19 to 21 leases per host for several cycles.
func (h *handoffs) accept(token, req string, a handoffAsk, give func(floor, theirs int) bool) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held != nil && h.shown[token] != strings.ToLower(req) {
		h.relist = true
		return false
	}
	to := strings.ToLower(a.owner)
	if h.held != nil && !h.live[to] {
		return false // the requester stopped: the lease would go free (see gone)
	}
	theirs := -1
	if h.held != nil {
		theirs = h.held[to]
	}
	if h.held != nil && theirs >= h.ceil {
		return false
	}
	if !give(h.floor, theirs) {
		return false
	}
	h.handedOff[token] = a
	if h.held != nil {
		h.held[to]++
	}
	return true
}

// sated reports whether owner held the largest share at the last cycle's listing (with the
// handoffs this host accepted since): accept refuses its requests.
func (h *handoffs) sated(owner string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.held != nil && h.held[strings.ToLower(owner)] >= h.ceil
}

// evensNothing reports whether handing owner's lease to the requester (held is what this host
// holds, theirs what the requester held at the last cycle's listing, -1 when unknown) leaves
// the two as uneven as before: with 5 and 4, the handoff makes them 4 and 5, and the lease
// moves for nothing. A request like that is made from an older view (the requester counted
// another host's lease, or one lease less of its own) and is refused; at the next cycle's
// listing the requester sees it is not short.
func evensNothing(held, theirs int) bool {
	return theirs >= 0 && held <= theirs+1
}

// evensNothing is the package's evensNothing for a request of owner to this host, which holds
// held, by the last cycle's listing.
func (h *handoffs) evensNothing(owner string, held int) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.held != nil && evensNothing(held, h.held[strings.ToLower(owner)])
}

// setView records this host's fair share (rounded down and up), what each host held at a
// cycle's listing and the requests it showed on this host's leases; it returns the floor.
func (h *handoffs) setView(floor, ceil int, held map[string]int, live []string, shown map[string]string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.floor, h.ceil, h.held, h.shown, h.relist = floor, ceil, maps.Clone(held), shown, false
	h.live = make(map[string]bool, len(live))
	for _, n := range live {
		h.live[strings.ToLower(n)] = true
	}
	return floor
}

// gone reports whether owner was not a live host at the last cycle's listing (a host that
// stopped deletes its presence record and releases its leases): a request of it is refused
// and withdrawn. Granted, it would hand the lease to nobody: free, it goes to whichever host
// lists it first (simulation seed 1090: cfp-9 asked, paused and stopped; the owner, paused
// meanwhile, granted the request after the set had settled, and the lease moved).
func (h *handoffs) gone(owner string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.held != nil && !h.live[strings.ToLower(owner)]
}

// relistDue reports, once, whether a request the last listing did not show was seen since.
func (h *handoffs) relistDue() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	due := h.relist
	h.relist = false
	return due
}

// prune forgets the handoffs older than coolDown and the requests older than askTTL.
func (h *handoffs) prune(now time.Time, coolDown, askTTL time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for t, a := range h.handedOff {
		if now.Sub(a.at) >= coolDown {
			delete(h.handedOff, t)
		}
	}
	for t, a := range h.asked {
		if now.Sub(a.at) >= askTTL {
			delete(h.asked, t)
		}
	}
}
