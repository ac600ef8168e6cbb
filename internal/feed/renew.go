package feed

import (
	"context"
	"errors"
	"time"

	"github.com/cfp-dev/cfp/internal/leases"
)

// renewLoop renews every held lease each RenewInterval, .NET-style after a first half
// interval, until ctx ends. A lease that is lost, or that could not be written for longer than
// the expiration (another host may hold it by now), stops its worker.
func (p *Processor) renewLoop(ctx context.Context) {
	first := time.NewTimer(p.opts.RenewInterval / 2)
	defer first.Stop()
	select {
	case <-ctx.Done():
		return
	case <-first.C:
	}
	t := time.NewTicker(p.opts.RenewInterval)
	defer t.Stop()
	for {
		p.renewAll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (p *Processor) renewAll(ctx context.Context) {
	p.mu.Lock()
	owned := make([]*ownedLease, 0, len(p.owned))
	for _, ol := range p.owned {
		owned = append(owned, ol)
	}
	p.mu.Unlock()
	for _, ol := range owned {
		if ctx.Err() != nil {
			return
		}
		if ol.ctx.Err() != nil {
			continue // stopping already
		}
		p.renew(ctx, ol)
	}
}

func (p *Processor) renew(ctx context.Context, ol *ownedLease) {
	start := p.opts.Now()
	renewed, err := p.store.Renew(ctx, ol.current(), p.opts.Instance)
	switch {
	case err == nil:
		ol.update(renewed, start)
		p.checkHandoff(ol, renewed)
		p.limit.reset("renew lease\x00" + ol.token)
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

// expiredError reports that this host could not write a lease for longer than the expiration.
type expiredError struct{ token string }

func (e *expiredError) Error() string {
	return "lease " + e.token + " expired: not renewed within the lease expiration"
}

// Is makes an expired lease count as lost.
func (e *expiredError) Is(target error) bool { return target == leases.ErrLeaseLost }
