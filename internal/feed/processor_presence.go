package feed

import (
	"context"
	"errors"

	"github.com/cfp-dev/cfp/internal/leases"
)

// Presence: the marker document a cfp host keeps in the lease container while it runs
// (leases.Host), so that the other cfp hosts count it before it owns a lease.

// announce writes this host's presence record (see leases.Host), so that the other cfp hosts
// count it before it owns a lease. A failure is logged (rate-limited) and otherwise ignored:
// without the record, the others see this host once it owns leases, as .NET hosts do.
// It reports whether the record was written.
func (p *Processor) announce(ctx context.Context) bool {
	_, err := p.store.AnnounceIncarnation(ctx, p.record(), max(leases.DefaultHostTTL, 2*p.opts.Expiration))
	if err != nil {
		if ctx.Err() == nil {
			p.warnLimited(ctx, "announce host", "", err)
		}
		return false
	}
	p.limit.reset(limitKey("announce host", ""))
	return true
}

// withdraw deletes this host's presence record, under a fresh deadline: at shutdown, so that
// the other hosts stop counting it at their next cycle.
func (p *Processor) withdraw(ctx context.Context) {
	fctx, cancel := p.fresh(ctx)
	defer cancel()
	var dup *DuplicateInstanceError
	if errors.As(context.Cause(ctx), &dup) {
		return // the record and the leases of this name are the other process's
	}
	if err := p.store.Withdraw(fctx, p.opts.Instance); err != nil {
		p.warnLimited(ctx, "withdraw host", "", err)
	}
	// Leases handed over to this host that it did not start yet: give them back rather than
	// let them expire (owners stop handing leases over to it once its record is gone).
	all, err := p.store.List(fctx)
	if err != nil {
		p.warnLimited(ctx, "list leases", "", err)
		return
	}
	for _, l := range all {
		if p.handedToMe(l) {
			if err := p.store.Release(fctx, l, p.opts.Instance); err != nil && !errors.Is(err, leases.ErrLeaseLost) {
				p.warnLimited(ctx, "release lease", "", err)
			}
		}
	}
}
