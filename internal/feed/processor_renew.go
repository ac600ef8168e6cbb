package feed

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cfp-dev/cfp/internal/leases"
)

// renewLoop looks at every held lease each half RenewInterval, after a first half interval,
// and renews those whose last write is KeepAlive old (shorter in a mixed set, see
// observeTimings), until ctx ends, then goes on renewing the leases whose workers still finish a batch
// in flight until the last worker ended. A lease that is lost, or that could not be written for
// longer than the expiration (another host may hold it by now), stops its worker.
//
// Leases are renewed concurrently (up to renewParallel writes at once, one at a time per
// lease), as .NET runs one renewer per lease: a write that hangs (a starved process, a slow
// request) delays only its own lease, not every lease after it in the round.
func (p *Processor) renewLoop(ctx context.Context) {
	defer p.renewWhileStopping(ctx)
	var inFlight sync.WaitGroup
	defer inFlight.Wait()
	slots := make(chan struct{}, renewParallel)
	first := time.NewTimer(p.opts.RenewInterval / 2)
	defer first.Stop()
	select {
	case <-ctx.Done():
		return
	case <-first.C:
	}
	t := time.NewTicker(p.opts.RenewInterval / 4)
	defer t.Stop()
	spawn := func(ol *ownedLease, do func(context.Context, *ownedLease)) {
		if !ol.renewing.CompareAndSwap(false, true) {
			return // its last renew is still in flight
		}
		select {
		case slots <- struct{}{}:
		default:
			ol.renewing.Store(false) // every slot busy: the next look tries again
			return
		}
		inFlight.Add(1)
		go func() {
			defer inFlight.Done()
			defer func() { <-slots; ol.renewing.Store(false) }()
			do(ctx, ol)
		}()
	}
	for {
		for _, ol := range p.dueForRenew(p.keepAlive()) {
			spawn(ol, p.renew)
		}
		for _, ol := range p.dueForLook() {
			spawn(ol, p.look)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if ctx.Err() != nil {
				return // both were ready: select would pick one at random
			}
		}
	}
}

// renewWhileStopping renews, after Run's context ended, the leases whose workers still finish
// their batch in flight (for up to ShutdownTimeout), each round under a fresh deadline, until
// every worker ended: a batch that outlasts the rest of the lease's expiration must not see
// another host take the lease and process it at the same time.
//
// These renewals do not wait for KeepAlive: each is also how a stopping host learns at once
// that a lease was stolen under its batch in flight, which it must then cancel.
func (p *Processor) renewWhileStopping(ctx context.Context) {
	t := time.NewTicker(p.opts.RenewInterval)
	defer t.Stop()
	for {
		p.mu.Lock()
		n := len(p.owned)
		p.mu.Unlock()
		if n == 0 {
			return
		}
		select {
		case <-t.C:
			fctx, cancel := p.fresh(ctx)
			p.renewAll(fctx, 0)
			cancel()
		case <-p.workerEnded:
		}
	}
}

// renewParallel bounds the renew writes one host has in flight at once.
const renewParallel = 8

// renewAll writes, one after another, every held lease whose last write is at least keep old.
func (p *Processor) renewAll(ctx context.Context, keep time.Duration) {
	for _, ol := range p.dueForRenew(keep) {
		if ctx.Err() != nil {
			return
		}
		p.renew(ctx, ol)
	}
}

// dueForRenew returns the held leases whose last write is at least keep old, the oldest
// first (by token on a tie): when every renew slot is busy the next look tries the rest,
// and the leases closest to expiring go first, in the same order every time (not the map's).
func (p *Processor) dueForRenew(keep time.Duration) []*ownedLease {
	owned := p.ownedSorted()
	type dueLease struct {
		ol   *ownedLease
		last time.Time
	}
	var due []dueLease
	for _, ol := range owned {
		if !ol.held() {
			continue // lost or split: no longer this host's to write
		}
		last := ol.lastWrite()
		if p.opts.Now().Sub(last) < keep {
			continue // written lately (a checkpoint, or the last renew): still far from expiring
		}
		due = append(due, dueLease{ol, last})
	}
	slices.SortStableFunc(due, func(a, b dueLease) int { return a.last.Compare(b.last) })
	out := make([]*ownedLease, len(due))
	for i, d := range due {
		out[i] = d.ol
	}
	return out
}

// ownedSorted returns the leases a worker runs for, by token.
func (p *Processor) ownedSorted() []*ownedLease {
	p.mu.Lock()
	owned := make([]*ownedLease, 0, len(p.owned))
	for _, ol := range p.owned {
		owned = append(owned, ol)
	}
	p.mu.Unlock()
	slices.SortFunc(owned, func(a, b *ownedLease) int { return strings.Compare(a.token, b.token) })
	return owned
}

// dueForLook returns the held leases whose worker delivered batches it has not written yet
// (their continuation waits for CheckpointInterval, see carry) and that this host has neither
// written nor looked at for a renew interval. Under a checkpoint interval a busy lease is
// written only every keep-alive, and a host learns that another took the lease at its next
// write or listing: a settled host's acquire cycles read only the presence records, which a
// .NET or Java host does not write, so it went on delivering the stolen lease's changes, which
// the thief processes too, for up to a keep-alive (issue 22, F2). The look is a point read,
// 1 RU against about 10 for a write.
func (p *Processor) dueForLook() []*ownedLease {
	if p.opts.CheckpointInterval <= 0 {
		return nil
	}
	owned := p.ownedSorted()
	now := p.opts.Now()
	due := owned[:0]
	for _, ol := range owned {
		if ol.ctx.Err() != nil {
			continue // stopping: the renewer's writes see a theft
		}
		if _, cont := ol.carrying(); cont == "" {
			continue // nothing delivered since the last write
		}
		if now.Sub(ol.lastLook()) < p.opts.RenewInterval {
			continue
		}
		due = append(due, ol)
	}
	return due
}

// look reads ol's lease and stops its worker at once, the batch in flight included, when the
// lease is owned by another host or gone: the worker then delivers nothing more of it. So a
// host delivers a lease's changes at most a renew interval and a quarter after another host
// took it (the renewer looks every quarter interval), plus the batch in flight then.
func (p *Processor) look(ctx context.Context, ol *ownedLease) {
	start := p.opts.Now()
	l, err := p.store.Get(ctx, ol.current())
	switch {
	case errors.Is(err, leases.ErrNotFound):
		ol.lose(&leases.LeaseLostError{Token: ol.token, Gone: true})
	case err != nil:
		// The renewer's next write, or the expiry fence, decides.
		if ctx.Err() == nil {
			p.infraError(ctx, "read lease", ol.token, err)
		}
	case l.Owner != p.opts.Instance:
		p.log.Info("lease taken by another host", "lease", ol.token, "by", l.Owner)
		ol.lose(&leases.LeaseLostError{Token: ol.token, Owner: l.Owner})
	default:
		ol.markLooked(start)
	}
}

// renew rewrites ol's lease with a fresh timestamp; a lease being handed off also gets the
// mark that its owner accepted the handoff (see handoffAcceptedKey).
func (p *Processor) renew(ctx context.Context, ol *ownedLease) {
	start := p.opts.Now()
	var renewed *leases.Lease
	var err error
	if errors.Is(context.Cause(ol.ctx), errHandoff) {
		renewed, err = p.renewAccepted(ctx, ol)
	} else if base, cont := ol.carrying(); cont != "" {
		renewed, err = p.renewCarrying(ctx, ol, base, cont)
	} else {
		renewed, err = p.store.Renew(ctx, ol.current(), p.opts.Instance)
	}
	switch {
	case err == nil:
		ol.update(renewed, start)
		if p.checkHandoff(ol, renewed) {
			p.renew(ctx, ol) // tell the requester at once
		}
		p.limit.reset(limitKey("renew lease", ol.token))
	case errors.Is(err, leases.ErrLeaseLost):
		ol.lose(err)
	case ctx.Err() != nil:
	default:
		p.infraError(ctx, "renew lease", ol.token, err)
		if !ol.valid(p.opts.Now(), p.opts.Expiration) {
			ol.lose(&expiredError{token: ol.token})
		}
	}
}

// renewCarrying is Renew that also writes the worker's waiting continuation cont, provided
// the stored continuation is still base (the worker's own checkpoint may have gone first: a
// renew never moves a checkpoint back).
func (p *Processor) renewCarrying(ctx context.Context, ol *ownedLease, base, cont string) (*leases.Lease, error) {
	ctx = leases.WithCharge(ctx, leases.ChargeRenew, ol.token)
	l, err := p.store.Update(ctx, ol.current(), func(n *leases.Lease) error {
		if n.Owner != p.opts.Instance {
			return &leases.LeaseLostError{Token: n.Token, Owner: n.Owner}
		}
		if n.Continuation == base {
			n.Continuation = cont
		}
		return nil
	})
	if err == nil && l.Continuation == cont {
		ol.markCarried(cont)
	}
	return l, err
}

// renewAccepted is Renew for a lease this host hands off: it also marks the handoff accepted,
// so that the requester waits for the release instead of stealing the lease while the batch
// in flight finishes.
func (p *Processor) renewAccepted(ctx context.Context, ol *ownedLease) (*leases.Lease, error) {
	ctx = leases.WithCharge(ctx, leases.ChargeRenew, ol.token)
	fresh, err := p.store.Get(ctx, ol.current())
	if errors.Is(err, leases.ErrNotFound) {
		return nil, &leases.LeaseLostError{Token: ol.token, Gone: true}
	}
	if err != nil {
		return nil, err
	}
	return p.store.Update(ctx, fresh, func(n *leases.Lease) error {
		if n.Owner != p.opts.Instance {
			return &leases.LeaseLostError{Token: n.Token, Owner: n.Owner}
		}
		if n.Properties == nil {
			n.Properties = map[string]string{}
		}
		n.Properties[handoffAcceptedKey] = p.opts.Instance
		return nil
	})
}

// expiredError reports that this host could not write a lease for longer than the expiration.
type expiredError struct{ token string }

func (e *expiredError) Error() string {
	return "lease " + e.token + " expired: not renewed within the lease expiration"
}

// Is makes an expired lease count as lost.
func (e *expiredError) Is(target error) bool { return target == leases.ErrLeaseLost }
