package feed

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/cfp-dev/cfp/internal/leases"
)

// split handles a lease whose range is gone (a split or a merge): the partitions now covering
// its range get child leases in the parent's family, each resuming from the parent's last read
// position (see readPosition) with the parent's properties, acquired by this
// host; then the parent is deleted. A .NET v0 lease whose range now lies in one partition
// (a merge) becomes one EPK lease over its range, as in .NET; an EPK lease in that case is
// kept and only read from its new partition (unless an earlier attempt's children cover some
// of its keys, see planSplit); a Java PK-range lease gets a lease per partition whose parents
// name it, as in Java, the merged one starting low enough for both parents.
//
// The lease writes (create or take the children, delete the parent, release) run under a fresh
// deadline (ReleaseTimeout), not the run context: a shutdown in the middle completes the split,
// and the children are released at once (see startLocked), instead of leaving children owned by
// this host next to their parent, or the parent owned, until the leases expire. A split that
// fails half way keeps the children it owns for its next attempt; when the worker stops first,
// it gives them back (see releaseChildren).
//
// A host handles one split at a time, from the read of the parent to its deletion: the plan
// counts the leases another split may be deleting. Two leases over the same keys (a .NET v0
// lease and the EPK lease .NET's own overlap made beside it, seed 4866) whose partition split
// each counted the other as covering their keys when planned at once, made no children and
// deleted themselves, leaving those keys unread for ever
// (TestProcessor_TwoLeasesOverTheSameKeysSplitAtOnceLeaveOneOverThem). Planned in turn, the
// second sees the first's outcome. Two hosts that hold such a pair can still plan at once.
//
// It returns CloseSplit when the children replaced the lease, CloseLeaseLost when the parent
// is no longer ours, and "" when the lease goes on (merged EPK lease, or a failure that is
// retried at the next read, after a backoff that grows with each failed attempt).
func (w *worker) split() (CloseReason, error) {
	p, ol, ctx := w.p, w.ol, w.run
	select {
	case p.splitTurn <- struct{}{}:
	case <-ctx.Done():
		return "", nil
	case <-ol.ctx.Done():
		return "", nil
	}
	held := true
	release := func() {
		if held {
			held = false
			<-p.splitTurn
		}
	}
	defer release()
	retry := func(op string, err error) (CloseReason, error) {
		release() // not held through the backoff
		w.splitFailures++
		if ctx.Err() == nil {
			p.infraError(ctx, op, w.info.Token, err)
		}
		_ = sleepCtx(ol.ctx, p.backoff(w.splitFailures))
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
	// Children resume from where the parent last read, 304s included, not from its last
	// checkpoint: .NET hands the continuation of the last response to the split handler
	// (FeedProcessing/FeedProcessorCore.cs lines 69, 83, 116; PartitionControllerCore.cs
	// line 188; Bootstrapping/PartitionSynchronizerCore.cs lines 110, 158, 169). So children of an
	// idle parent that never checkpointed carry its position instead of null. Batches held
	// with ErrNoCheckpoint are not done yet: then the children resume from the checkpoint.
	if pos := w.readPosition(); pos != "" {
		parent.Continuation = pos
	}
	var all []*leases.Lease
	if splitNeedsList(parent, parts) {
		if all, err = p.store.List(ctx); err != nil {
			return retry("split lease", err)
		}
	}
	sp := planSplit(parent, parts, all)
	switch {
	case sp.err != nil:
		return retry("split lease", sp.err)
	case sp.route:
		if err := w.route(ctx); err != nil {
			return retry("route lease", err)
		}
		w.splitFailures = 0
		p.log.Info("lease moved to a merged partition", "lease", parent.Token, "partition", sp.over[0].ID)
		return "", nil
	}
	return w.replace(parent, sp, retry)
}

// replace performs a split plan's lease writes: it creates and acquires the children, deletes
// the parent, tells of the split or merge and starts the children's workers.
func (w *worker) replace(parent *leases.Lease, sp splitPlan, retry func(string, error) (CloseReason, error)) (CloseReason, error) {
	p, ol := w.p, w.ol
	wctx, cancel := p.fresh(w.run)
	defer cancel()
	var mine []*leases.Lease
	tokens := make([]string, 0, len(sp.children))
	for _, c := range sp.children {
		tokens = append(tokens, c.Token)
		got, err := w.takeChild(wctx, c)
		if err != nil {
			return retry("split lease", err)
		}
		if got != nil {
			mine = append(mine, got)
			w.holdChild(got)
		}
	}
	// From here the parent is replaced: its worker ends as split, whatever the renewer sees.
	ol.cancel(errSplit)
	if err := p.store.Delete(wctx, parent); err != nil {
		p.infraError(wctx, "delete split lease", parent.Token, err)
	}
	w.dropChildren() // the children's own workers hold them now (below)
	// One partition in place of the parent's: it merged with a neighbour. Two or more: it split.
	typ, what := EventSplit, "lease split"
	if len(sp.over) == 1 {
		typ, what = EventMerge, "lease merged"
	}
	p.log.Info(what, "lease", parent.Token, "children", tokens, "continuation", parent.Continuation)
	p.notify(Event{Type: typ, Lease: parent.Token, Range: parent.Range, Children: tokens, Continuation: parent.Continuation})
	for _, c := range mine {
		p.start(c)
	}
	return CloseSplit, nil
}

// takeChild creates the child lease c unowned, then acquires it, as .NET does
// (PartitionControllerCore.cs, HandlePartitionGoneAsync, lines 184-198, and
// AddOrUpdateLeaseAsync, lines 49-62). It returns the child as this host holds it, or nil when
// another host holds it (a host that takes a child in between keeps it). A child an earlier
// attempt (or another host) created is taken when this host holds it already or it is free.
func (w *worker) takeChild(ctx context.Context, c *leases.Lease) (*leases.Lease, error) {
	p := w.p
	created, err := p.store.Create(ctx, c)
	if err == nil {
		created, err = p.store.Acquire(ctx, created, p.opts.Instance)
		if errors.Is(err, leases.ErrLeaseLost) {
			return nil, nil // another host took the free child first
		}
	}
	if errors.Is(err, leases.ErrConflict) {
		existing, gerr := p.store.Get(ctx, c)
		if gerr != nil {
			return nil, gerr
		}
		if strings.EqualFold(existing.Owner, p.opts.Instance) {
			return existing, nil
		}
		if !existing.Expired(p.opts.Now(), p.opts.Expiration) {
			return nil, nil
		}
		created, err = p.store.Acquire(ctx, existing, p.opts.Instance)
		if errors.Is(err, leases.ErrLeaseLost) {
			return nil, nil
		}
	}
	return created, err
}

// splitPlan is what planSplit decided for a lease whose range is gone.
type splitPlan struct {
	over     []Partition     // the live partitions that took over the parent's keys
	route    bool            // an EPK lease inside one partition again: keep it, read from there
	children []*leases.Lease // the leases that replace the parent, unowned, to create and take
	err      error           // the split cannot be planned now: retried after a backoff
}

// splitOver returns the live partitions of parts that took over parent's keys: those over its
// range, or, for a lease without one (a Java PK-range lease), those whose parents name it.
func splitOver(parent *leases.Lease, parts []Partition) []Partition {
	if parent.HasRange() {
		return overlapping(parts, parent.Range)
	}
	var over []Partition
	for _, part := range parts {
		if slices.Contains(part.Parents, parent.Token) {
			over = append(over, part)
		}
	}
	return over
}

// splitNeedsList reports whether planSplit needs the listing of the leases to plan the split
// of parent over parts: for a Java PK-range lease (where the merged child starts, see
// mergedStart) and for a lease with a range that is replaced (the children of an earlier
// attempt, see notYetCovered).
func splitNeedsList(parent *leases.Lease, parts []Partition) bool {
	over := splitOver(parent, parts)
	switch {
	case len(over) == 0:
		return false
	case len(over) == 1 && !parent.NamesPartition():
		return parent.HasRange() // the children of an earlier attempt, see planSplit
	}
	return parent.Family == leases.FamilyJavaPK || parent.HasRange()
}

// planSplit decides how the live partitions parts replace parent, whose range is gone, the
// way its SDK does (docs/architecture.md, "Splits and merges"), from parent as this host holds
// it (its continuation the position the children start from) and all, the leases listed when
// splitNeedsList says so. A .NET v0 lease whose range now lies in one partition (a merge)
// becomes one EPK lease over its range; an EPK lease in that case is routed, not replaced,
// unless other leases inside its range cover some of its keys (then leases over the rest
// replace it); a Java PK-range lease gets a lease per partition whose parents name it, the
// merged one starting low enough for both parents; a .NET v0 lease's child partition that reaches past the
// parent's range gets an EPK lease over the common part. Children that other leases within
// the parent's range already cover (an earlier attempt's) are left out. Children are unowned
// and carry none of cfp's handoff properties.
func planSplit(parent *leases.Lease, parts []Partition, all []*leases.Lease) splitPlan {
	sp := splitPlan{over: splitOver(parent, parts)}
	over := sp.over
	switch {
	case len(over) == 0:
		sp.err = fmt.Errorf("no partition covers the range of lease %s", parent.Token)
		return sp
	case len(over) == 1 && !parent.NamesPartition():
		// An EPK lease inside one partition again is kept and read from there, unless other
		// leases inside its range cover some of its keys: the children of an earlier attempt of
		// its split, made before the partitions merged back (found by the simulation, seed
		// 4913: a create whose answer was lost, then a merge). Kept, the parent would read
		// their keys too, for ever. It is replaced by leases over the keys nobody else covers,
		// as a split that finishes would have done.
		rest, partly := uncoveredByOthers(parent, all, parts)
		if !partly {
			sp.route = true
			return sp
		}
		for _, r := range rest {
			sp.children = append(sp.children, parent.Child(over[0].ID, r))
		}
	case len(over) == 1 && parent.Family != leases.FamilyJavaPK:
		m := parent.Merged()
		if m == parent {
			sp.err = fmt.Errorf("lease %s has no range to merge", parent.Token)
			return sp
		}
		sp.children = []*leases.Lease{m}
	case parent.Family == leases.FamilyJavaPK:
		// Java makes a PK-range lease per partition whose parents name the gone one, a merge
		// included (a Java pkversion host reads no other lease kind), starting at the parent's
		// continuation. A merged partition's items keep their parents' LSNs, so a child that
		// starts at one parent's position would skip the other parent's undelivered changes:
		// cfp starts it at the lowest position of the parents' leases (see mergedStart).
		for _, part := range over {
			c := parent.Child(part.ID, part.Range)
			c.Continuation = mergedStart(parent, part, all)
			sp.children = append(sp.children, c)
		}
	default:
		sp.children = splitChildren(parent, over)
	}
	if parent.HasRange() && parent.Family != leases.FamilyJavaPK {
		sp.children = notYetCovered(parent, sp.children, all)
	}
	for _, c := range sp.children {
		// Created unowned, then acquired, as .NET does; the parent's handoff properties are
		// stale on its children: none of them is asked for yet.
		c.Owner, c.Timestamp = "", time.Time{}
		delete(c.Properties, handoffKey)
		delete(c.Properties, handoffAcceptedKey)
	}
	return sp
}

// splitChildren builds the children of a split of parent (not a Java PK-range lease) over the
// partitions over: one per partition, over the partition's range for a PK-range lease, over
// the common part of the parent's and the partition's range for an EPK lease.
func splitChildren(parent *leases.Lease, over []Partition) []*leases.Lease {
	var children []*leases.Lease
	for _, part := range over {
		if parent.NamesPartition() && !parent.HasRange() {
			children = append(children, parent.Child(part.ID, part.Range))
			continue
		}
		rng, _ := parent.Range.Intersect(part.Range)
		if parent.Family == leases.FamilyDotNetV0 && !rng.Equal(part.Range) {
			// The child partition reaches past the parent's range: it was merged with a
			// neighbour before the split was handled. Its lease covers the parent's part
			// only, as an EPK lease (the merge path's rule), or it would overlap the
			// neighbour's. .NET makes a v0 lease over the whole partition here
			// (PartitionSynchronizerCore.cs, HandlePartitionGoneAsync, lines 100-116).
			children = append(children, parent.EPKChild(rng))
			continue
		}
		if parent.NamesPartition() {
			rng = part.Range
		}
		children = append(children, parent.Child(part.ID, rng))
	}
	return children
}

// mergedStart is where the child lease over part of the PK-range lease parent starts: the
// parent's continuation, or the lowest continuation of the other PK-range leases in all named
// after one of part's parents (the partitions merged into it) when lower. A parent lease without
// a continuation makes it start without one too (at the processor's start position), as that
// parent's own lease would have; a parent continuation that is not an LSN is kept as it is.
func mergedStart(parent *leases.Lease, part Partition, all []*leases.Lease) string {
	start := parent.Continuation
	low, ok := leases.ParseLSN(start)
	if !ok {
		return start
	}
	for _, l := range all {
		if !l.NamesPartition() || l.Token == parent.Token || !slices.Contains(part.Parents, l.Token) {
			continue
		}
		if l.Continuation == "" {
			return ""
		}
		if n, ok := l.LSN(); ok && n < low {
			low, start = n, l.Continuation
		}
	}
	return start
}

// readPosition is the continuation of the worker's last read when every batch read was
// delivered and not held back (ErrNoCheckpoint), else "".
func (w *worker) readPosition() string {
	if w.reader == nil || w.deferred {
		return ""
	}
	return w.reader.Continuation()
}

// holdChild records a child lease this worker's unfinished split owns (also in
// Processor.children, which the acquire cycles leave alone).
func (w *worker) holdChild(c *leases.Lease) {
	if w.splitHeld == nil {
		w.splitHeld = map[string]*leases.Lease{}
	}
	if _, ok := w.splitHeld[c.Token]; !ok {
		w.p.mu.Lock()
		if w.p.children == nil {
			w.p.children = map[string]int{} // a Processor built in a test
		}
		w.p.children[c.Token]++
		w.p.mu.Unlock()
	}
	w.splitHeld[c.Token] = c
}

// dropChildren forgets the child leases this worker's split held.
func (w *worker) dropChildren() {
	w.p.mu.Lock()
	for token := range w.splitHeld {
		if w.p.children[token]--; w.p.children[token] <= 0 {
			delete(w.p.children, token)
		}
	}
	w.p.mu.Unlock()
	w.splitHeld = nil
}

// releaseChildren gives back the child leases of a split that did not finish, when the worker
// stops before its next attempt: nothing renews them, and other hosts would wait for them to
// expire. ctx is a fresh one (the worker's close). They go in key order (see heldChildren),
// not the map's: the order of the writes is the same in every run, so a simulation's seed
// replays.
func (w *worker) releaseChildren(ctx context.Context) {
	for _, c := range w.heldChildren() {
		if err := w.p.store.Release(ctx, c, w.p.opts.Instance); err != nil && !errors.Is(err, leases.ErrLeaseLost) {
			w.p.infraError(ctx, "release child lease", c.Token, err)
		}
	}
	w.dropChildren()
}

// heldChildren returns the child leases the worker's unfinished split holds, in key order: by
// the start of their range, then those without one (Java PK-range leases) by token.
func (w *worker) heldChildren() []*leases.Lease {
	cs := slices.Collect(maps.Values(w.splitHeld))
	slices.SortFunc(cs, func(a, b *leases.Lease) int {
		if c := cmpBool(!a.HasRange(), !b.HasRange()); c != 0 {
			return c // those with a range first
		}
		if a.HasRange() {
			if c := leases.CompareEPK(a.Range.Min, b.Range.Min); c != 0 {
				return c
			}
		}
		return strings.Compare(a.Token, b.Token)
	})
	return cs
}

// notYetCovered drops from children the keys that other leases inside the parent's range
// already cover: the children of an earlier attempt of this split, made for the partitions of
// that moment. When a child's partition split or merged again before the attempt that
// finishes, the new attempt's children differ from them, and creating both would leave two
// leases over the same keys (found by the simulation, seed 861: a split retried after lost
// answers made a lease over a partition that had meanwhile split, and the retry a lease over
// one of its halves; a merge of the halves then made both permanent). The earlier child is a
// lease of the parent's keys with the parent's position; it handles its own partition's split or
// merge. A child left partly covered keeps the uncovered part, as an EPK lease of the parent's
// family (the merge path's rule); a child with the same token is kept (the create's conflict
// path takes it).
func notYetCovered(parent *leases.Lease, children, all []*leases.Lease) []*leases.Lease {
	tokens := map[string]bool{}
	for _, c := range children {
		tokens[c.Token] = true
	}
	covered := coveredWithin(parent, all, tokens)
	if len(covered) == 0 {
		return children
	}
	var out []*leases.Lease
	for _, c := range children {
		rest := uncovered(c.Range, covered)
		switch {
		case len(rest) == 1 && rest[0].Equal(c.Range):
			out = append(out, c)
		case parent.Family == leases.FamilyDotNetV0 || parent.Family == leases.FamilyDotNetV1:
			for _, r := range rest {
				out = append(out, parent.EPKChild(r))
			}
		case len(rest) > 0:
			out = append(out, c) // a family without EPK children: as before
		}
	}
	return out
}

// coveredWithin returns the ranges of the leases of all, other than parent and those whose
// tokens skip names, that lie inside parent's range.
func coveredWithin(parent *leases.Lease, all []*leases.Lease, skip map[string]bool) []leases.Range {
	var covered []leases.Range
	for _, l := range all {
		if l.Token == parent.Token || skip[l.Token] || !l.HasRange() || !l.Range.Within(parent.Range) {
			continue
		}
		covered = append(covered, l.Range)
	}
	return covered
}

// uncoveredByOthers returns the parts of parent's range that no other lease of all inside it
// covers, in key order, and whether any such lease covers some of it.
//
// A .NET v0 lease whose partition is gone (not in parts) and whose merge makes parent itself
// (the EPK lease over the same range, the same id) covers nothing: its own handling creates
// parent, meets it and deletes the v0 lease, so parent must stay. Found by the simulation, seed
// 4866: .NET's own overlap left v0 lease 23 and EPK lease 10-16 over the same keys, held by one
// cfp host, and partition 23 merged. Each lease's handling counted on the other and deleted its
// own: no lease covered 10-16, and its changes were never read. .NET converges here: it keeps
// an EPK lease across a merge ("redirected", PartitionSynchronizerCore.cs:179-187) and makes
// the v0 lease's EPK lease with CreateLeaseIfNotExistAsync (lines 120-130), a conflict keeping
// the first.
func uncoveredByOthers(parent *leases.Lease, all []*leases.Lease, parts []Partition) ([]leases.Range, bool) {
	live := map[string]bool{}
	for _, p := range parts {
		live[p.ID] = true
	}
	becomes := map[string]bool{}
	for _, l := range all {
		if l.Family == leases.FamilyDotNetV0 && !live[l.Token] {
			if m := l.Merged(); m != l && m.ID == parent.ID {
				becomes[l.Token] = true
			}
		}
	}
	covered := coveredWithin(parent, all, becomes)
	if len(covered) == 0 {
		return nil, false
	}
	return uncovered(parent.Range, covered), true
}

// uncovered returns the parts of r that no range of by holds, in key order.
func uncovered(r leases.Range, by []leases.Range) []leases.Range {
	rest := []leases.Range{r.Normal()}
	for _, b := range by {
		b = b.Normal()
		var next []leases.Range
		for _, x := range rest {
			common, ok := x.Intersect(b)
			if !ok {
				next = append(next, x)
				continue
			}
			if leases.CompareEPK(x.Min, common.Min) < 0 {
				next = append(next, leases.Range{Min: x.Min, Max: common.Min})
			}
			if leases.CompareEPK(common.Max, x.Max) < 0 {
				next = append(next, leases.Range{Min: common.Max, Max: x.Max})
			}
		}
		rest = next
	}
	return rest
}
