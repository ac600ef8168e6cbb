package feed

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cfp-dev/cfp/internal/leases"
)

// split handles a lease whose range is gone (spec/leases.md §7): the partitions now covering
// its range get child leases in the parent's family, each resuming from the parent's last
// checkpoint (never the worker's read position) with the parent's properties, acquired by this
// host; then the parent is deleted. A PK-range lease whose range now lies in one partition
// (a merge) becomes one EPK lease over its range, as in .NET; an EPK lease in that case is
// kept and only read from its new partition.
//
// It returns CloseSplit when the children replaced the lease, CloseLeaseLost when the parent
// is no longer ours, and "" when the lease goes on (merged EPK lease, or a failure that is
// retried at the next read, after a backoff).
func (w *worker) split() (CloseReason, error) {
	p, ol, ctx := w.p, w.ol, w.run
	retry := func(op string, err error) (CloseReason, error) {
		if ctx.Err() == nil {
			p.infraError(ctx, op, w.info.Token, err)
		}
		_ = sleepCtx(ol.ctx, p.backoff(1))
		return "", nil
	}
	parent, err := p.store.Get(ctx, ol.current())
	if errors.Is(err, leases.ErrNotFound) {
		ol.lose(&leases.LeaseLostError{Token: w.info.Token, Gone: true})
		return CloseLeaseLost, nil
	}
	if err != nil {
		return retry("split lease", err)
	}
	if !strings.EqualFold(parent.Owner, p.opts.Instance) {
		ol.lose(&leases.LeaseLostError{Token: w.info.Token, Owner: parent.Owner})
		return CloseLeaseLost, nil
	}
	parts, err := p.src.Partitions(ctx)
	if err != nil {
		return retry("split lease", fmt.Errorf("list partitions: %w", err))
	}
	var over []Partition
	if parent.HasRange() {
		over = overlapping(parts, parent.Range)
	} else {
		for _, part := range parts {
			if slices.Contains(part.Parents, parent.Token) {
				over = append(over, part)
			}
		}
	}
	if len(over) == 0 {
		return retry("split lease", fmt.Errorf("no partition covers the range of lease %s", parent.Token))
	}

	var children []*leases.Lease
	switch {
	case len(over) == 1 && !pkRangeLease(parent):
		// An EPK lease inside one partition again: keep it, read from that partition.
		if err := w.route(ctx); err != nil {
			return retry("route lease", err)
		}
		p.log.Info("lease moved to a merged partition", "lease", parent.Token, "partition", over[0].ID)
		return "", nil
	case len(over) == 1:
		m := parent.Merged()
		if m == parent {
			return retry("split lease", fmt.Errorf("lease %s has no range to merge", parent.Token))
		}
		children = []*leases.Lease{m}
	default:
		for _, part := range over {
			rng := part.Range
			if !pkRangeLease(parent) {
				rng = subRange(parent.Range, part.Range)
			}
			children = append(children, parent.Child(part.ID, rng))
		}
	}

	var mine []*leases.Lease
	tokens := make([]string, 0, len(children))
	for _, c := range children {
		c.Owner, c.Timestamp = p.opts.Instance, p.opts.Now()
		delete(c.Properties, handoffKey)
		tokens = append(tokens, c.Token)
		created, err := p.store.Create(ctx, c)
		if errors.Is(err, leases.ErrConflict) {
			// An earlier attempt (or another host) created it: take it if it is free.
			existing, gerr := p.store.Get(ctx, c)
			if gerr != nil {
				return retry("split lease", gerr)
			}
			if strings.EqualFold(existing.Owner, p.opts.Instance) {
				mine = append(mine, existing)
				continue
			}
			if !existing.Expired(p.opts.Now(), p.opts.Expiration) {
				continue
			}
			created, err = p.store.Acquire(ctx, existing, p.opts.Instance)
			if errors.Is(err, leases.ErrLeaseLost) {
				continue
			}
		}
		if err != nil {
			return retry("split lease", err)
		}
		mine = append(mine, created)
	}
	// From here the parent is replaced: its worker ends as split, whatever the renewer sees.
	ol.cancel(errSplit)
	if err := p.store.Delete(ctx, parent); err != nil {
		p.infraError(ctx, "delete split lease", parent.Token, err)
	}
	p.log.Info("lease split", "lease", parent.Token, "children", tokens, "continuation", parent.Continuation)
	p.notify(Event{Type: EventSplit, Lease: parent.Token, Range: parent.Range, Children: tokens, Continuation: parent.Continuation})
	for _, c := range mine {
		p.start(c)
	}
	return CloseSplit, nil
}

// subRange returns the common part of two overlapping ranges.
func subRange(a, b Range) Range {
	r := a
	if leases.CompareEPK(b.Min, r.Min) > 0 {
		r.Min = b.Min
	}
	if leases.CompareEPK(b.Max, r.Max) < 0 {
		r.Max = b.Max
	}
	return r
}
