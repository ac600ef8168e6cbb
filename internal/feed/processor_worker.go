package feed

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cfp-dev/cfp/internal/leases"
)

// errShutdown is the cause of a worker's end when the processor stops.
var errShutdown = errors.New("processor shutting down")

// errHandoff is the cause of a worker's end when another cfp host asked for its lease.
var errHandoff = errors.New("lease handed off")

// errSplit is the cause of a worker's end when its lease was replaced by child leases.
var errSplit = errors.New("lease split")

// ownedLease is a lease this host holds and the worker processing it.
type ownedLease struct {
	token  string
	ctx    context.Context // ends when the lease is lost or the processor stops
	cancel context.CancelCauseFunc
	// listing is the number of lease listings this host had started when it registered the
	// lease (after its acquire was answered): a listing numbered higher started after that
	// write, so a lease it shows owned by another host was taken from this one (see
	// noticeLost).
	listing uint64

	mu        sync.Mutex
	lease     *leases.Lease     // the newest version this host wrote
	confirmed time.Time         // start of the last successful write of the lease
	looked    time.Time         // start of the last read that found the lease still this host's
	onLost    func(cause error) // the worker's: cancels the batch in flight
	graceOver bool              // the stopping worker's batch in flight was cancelled
	// carry is the worker's continuation waiting for CheckpointInterval, and the stored
	// continuation it follows: the renewer writes it with its next renew (one write for both);
	// carried is the continuation the renewer wrote, for the worker to take in.
	carry   struct{ base, cont string }
	carried string

	renewing atomic.Bool // the renew goroutine has a renew of this lease in flight
	// ended is closed when the worker's goroutine ended (after its close and its removal
	// from owned).
	ended chan struct{}
}

// setCarry publishes the worker's waiting continuation cont (after base); "" withdraws it.
func (ol *ownedLease) setCarry(base, cont string) {
	ol.mu.Lock()
	ol.carry.base, ol.carry.cont = base, cont
	ol.mu.Unlock()
}

// carrying returns what setCarry published.
func (ol *ownedLease) carrying() (base, cont string) {
	ol.mu.Lock()
	defer ol.mu.Unlock()
	return ol.carry.base, ol.carry.cont
}

// markCarried records that a renew wrote cont.
func (ol *ownedLease) markCarried(cont string) {
	ol.mu.Lock()
	ol.carried = cont
	if ol.carry.cont == cont {
		ol.carry.base, ol.carry.cont = "", ""
	}
	ol.mu.Unlock()
}

// takeCarried returns and forgets the continuation a renew wrote, if any.
func (ol *ownedLease) takeCarried() string {
	ol.mu.Lock()
	defer ol.mu.Unlock()
	c := ol.carried
	ol.carried = ""
	return c
}

func (ol *ownedLease) current() *leases.Lease {
	ol.mu.Lock()
	defer ol.mu.Unlock()
	return ol.lease
}

// update records a successful write that started at start.
func (ol *ownedLease) update(l *leases.Lease, start time.Time) {
	ol.mu.Lock()
	defer ol.mu.Unlock()
	// Keep the checkpointed continuation: a renew that raced with a checkpoint may return an
	// older document, which the next write fixes through If-Match anyway.
	ol.lease = l
	if start.After(ol.confirmed) {
		ol.confirmed = start
	}
}

// markLooked records a read, started at start, that found the lease still this host's.
func (ol *ownedLease) markLooked(start time.Time) {
	ol.mu.Lock()
	defer ol.mu.Unlock()
	if start.After(ol.looked) {
		ol.looked = start
	}
}

// lastLook is the start of the last write of the lease, or of a later read that found it
// still this host's.
func (ol *ownedLease) lastLook() time.Time {
	ol.mu.Lock()
	defer ol.mu.Unlock()
	if ol.looked.After(ol.confirmed) {
		return ol.looked
	}
	return ol.confirmed
}

// lastWrite is the start of the last successful write of the lease by this host.
func (ol *ownedLease) lastWrite() time.Time {
	ol.mu.Lock()
	defer ol.mu.Unlock()
	return ol.confirmed
}

// valid reports whether the lease can still be ours at now: this host wrote it less than
// expiration ago (measured from before the write, so that it stops before others may take it).
func (ol *ownedLease) valid(now time.Time, expiration time.Duration) bool {
	ol.mu.Lock()
	defer ol.mu.Unlock()
	return now.Before(ol.confirmed.Add(expiration))
}

// expiry is when the lease may stop being ours: expiration after the start of the last
// successful write.
func (ol *ownedLease) expiry(expiration time.Duration) time.Time {
	ol.mu.Lock()
	defer ol.mu.Unlock()
	return ol.confirmed.Add(expiration)
}

// lose stops the worker because the lease is no longer ours, and its batch in flight, also
// when the worker was stopping already (a shutdown or a handoff lets that batch finish, but
// not on a lease another host holds now).
func (ol *ownedLease) lose(err error) {
	ol.cancel(err)
	ol.mu.Lock()
	onLost := ol.onLost
	ol.mu.Unlock()
	if onLost != nil {
		onLost(err)
	}
}

// held reports whether the lease is still this host's to renew: running, or stopping for a
// shutdown or a handoff while its batch in flight may still finish (ShutdownTimeout) and until
// its worker released it; not once it was lost, expired under this host or replaced by child
// leases.
func (ol *ownedLease) held() bool {
	if ol.ctx.Err() == nil {
		return true
	}
	cause := context.Cause(ol.ctx)
	if errors.Is(cause, leases.ErrLeaseLost) || errors.Is(cause, errSplit) {
		return false
	}
	ol.mu.Lock()
	defer ol.mu.Unlock()
	// Past the grace a handler that ignores its cancellation must not keep the lease forever:
	// it expires and another host takes it over.
	return !ol.graceOver
}

// start registers l as held and runs its worker in the processor's group.
func (p *Processor) start(l *leases.Lease) {
	acquired, after := p.startLocked(l)
	if acquired == nil {
		return
	}
	if !after {
		// Outside the lock: the callback may call Owned. The worker waits for it, so that the
		// lease's batch events come after its acquired event.
		p.notify(Event{Type: EventAcquired, Lease: l.Token, Range: l.Range})
	}
	close(acquired)
}

// startLocked registers l and starts its worker under p.mu; when a worker started, it returns
// the channel to close once the acquired event was sent, nil otherwise. after says that the
// worker sends the acquired event itself, once the old worker of the lease ended (see
// awaitPrevious): its lost event comes first.
func (p *Processor) startLocked(l *leases.Lease) (acquired chan struct{}, after bool) {
	p.mu.Lock()
	if p.group == nil {
		p.mu.Unlock()
		return nil, false // not running (start is only called from Run's goroutines)
	}
	if run := p.run; run.Err() != nil {
		p.mu.Unlock()
		// Acquired while shutting down: give it back at once rather than let it expire. Not
		// under mu: the release is a round trip, and the workers ending meanwhile take mu.
		ctx, cancel := p.fresh(run)
		defer cancel()
		if err := p.store.Release(ctx, l, p.opts.Instance); err != nil {
			p.log.Warn("release lease acquired during shutdown", "lease", l.Token, "err", err)
		}
		return nil, false
	}
	defer p.mu.Unlock()
	prev := p.owned[l.Token]
	if prev != nil && prev.held() {
		return nil, false // a worker runs for it already
	}
	// prev, when set, is the worker of the lease before this host lost it, still winding down
	// (a handler call that ignores its cancellation, its close): the new one takes its place
	// in owned at once, so that the lease is renewed and counted, and starts reading once prev
	// ended (see awaitPrevious); prev's exit leaves the new entry alone.
	acquired = make(chan struct{})
	ctx, cancel := context.WithCancelCause(p.run)
	ol := &ownedLease{token: l.Token, ctx: ctx, cancel: cancel, lease: l, confirmed: l.Timestamp, listing: p.listings.Load(), ended: make(chan struct{})}
	if ol.confirmed.IsZero() || ol.confirmed.After(p.opts.Now()) {
		ol.confirmed = p.opts.Now()
	}
	p.owned[l.Token] = ol
	run := p.run
	p.group.Go(func() error {
		defer close(ol.ended)
		defer cancel(nil)
		defer func() {
			p.mu.Lock()
			if p.owned[l.Token] == ol {
				delete(p.owned, l.Token)
				delete(p.failing, l.Token)
			}
			p.mu.Unlock()
			select {
			case p.workerEnded <- struct{}{}:
			default:
			}
		}()
		<-acquired
		if prev != nil {
			p.awaitPrevious(ol, prev)
			p.notify(Event{Type: EventAcquired, Lease: l.Token, Range: l.Range})
		}
		return p.work(run, ol)
	})
	return acquired, prev != nil
}

// awaitPrevious waits until prev, the worker of ol's lease before this host lost it and took
// it again, ended, so that the handler sees the old worker's CloseLease before the new one's
// OpenLease and never two batches of the lease at once from this host; but no longer than
// ShutdownTimeout (a handler that ignores its cancellation must not keep the lease unread for
// ever), nor once ol ended.
func (p *Processor) awaitPrevious(ol, prev *ownedLease) {
	if prev == nil {
		return
	}
	t := time.NewTimer(p.opts.ShutdownTimeout)
	defer t.Stop()
	select {
	case <-prev.ended:
	case <-ol.ctx.Done():
	case <-t.C:
		select {
		case <-prev.ended:
			return // both were ready: it did end
		default:
		}
		p.log.Warn("lease taken again while its old worker is still in a handler call: reading it anyway", "lease", ol.token, "waited", p.opts.ShutdownTimeout)
	}
}

// worker is the state of one lease's processing loop.
type worker struct {
	p            *Processor
	run          context.Context // the processor's run context
	ol           *ownedLease
	info         LeaseInfo
	reader       *Reader
	checkpointed string    // the lease's continuation as stored
	base         StartFrom // where to rewind to while nothing is checkpointed
	pending      string    // processed but not checkpointed
	deferred     bool      // pending comes from ErrNoCheckpoint
	// splitFailures counts the failed attempts of the split in progress (for its backoff);
	// splitHeld holds the child leases it created or took so far, by token.
	splitFailures int
	splitHeld     map[string]*leases.Lease
	// ahead is the read of the next page, started while the page before it is handled.
	ahead *readAhead
	// fail is what the worker knows about the failures of its next batch (processor_failure.go).
	fail failureState
	// rand is the source of its reads' backoff jitter (ProcessorOptions.LeaseRand; nil: the
	// reader's default).
	rand func() float64
}

// readAhead is a read of a lease's next page running while the worker handles and checkpoints
// the page before it: the checkpoint's round trip and the handler's work overlap the read.
// The worker uses the reader only through it until it took the result (next) or dropped it
// (dropAhead); a dropped page is never delivered, and the reader is then moved (rewind) or the
// worker ends, so nothing is skipped.
type readAhead struct {
	done   chan struct{}
	cancel context.CancelFunc
	page   Page
	err    error
}

// next returns the lease's next page: the one read ahead, else one read now.
func (w *worker) next(ctx context.Context) (Page, error) {
	if a := w.ahead; a != nil {
		w.ahead = nil
		<-a.done
		a.cancel()
		return a.page, a.err
	}
	return w.reader.Next(ctx)
}

// readNextAhead starts reading the page after the one just read, in a goroutine that next or
// dropAhead waits for.
func (w *worker) readNextAhead(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	a := &readAhead{done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(a.done)
		a.page, a.err = w.reader.Next(ctx)
	}()
	w.ahead = a
}

// dropAhead stops the read ahead, if any, waits for it and gives its page back.
func (w *worker) dropAhead() {
	a := w.ahead
	if a == nil {
		return
	}
	w.ahead = nil
	a.cancel()
	<-a.done
	release(a.page)
}

// work processes one lease until it is lost, split or the processor stops, then closes it:
// the handler is told, a shutdown flushes pending checkpoints and releases the lease.
func (p *Processor) work(run context.Context, ol *ownedLease) (err error) {
	l := ol.current()
	w := &worker{
		p: p, run: run, ol: ol, checkpointed: l.Continuation,
		info: LeaseInfo{Token: l.Token, Range: l.Range, Owner: p.opts.Instance, Continuation: l.Continuation},
		base: p.opts.StartFrom,
	}
	if l.Continuation != "" {
		w.base = StartFrom{Kind: StartContinuation, Continuation: l.Continuation}
	}
	if p.opts.LeaseRand != nil {
		w.rand = p.opts.LeaseRand(l.Token)
	}

	// The handler's context outlives a shutdown by ShutdownTimeout so that the batch in flight
	// can finish; a lost lease cancels it at once.
	hctx, hcancel := context.WithCancelCause(context.WithoutCancel(ol.ctx))
	var graceMu sync.Mutex
	var grace *time.Timer
	stopAfter := context.AfterFunc(ol.ctx, func() {
		cause := context.Cause(ol.ctx)
		if errors.Is(cause, leases.ErrLeaseLost) {
			hcancel(cause)
			return
		}
		graceMu.Lock()
		grace = time.AfterFunc(p.opts.ShutdownTimeout, func() {
			ol.mu.Lock()
			ol.graceOver = true
			ol.mu.Unlock()
			hcancel(errShutdown)
		})
		graceMu.Unlock()
	})
	defer func() {
		stopAfter()
		graceMu.Lock()
		if grace != nil {
			grace.Stop()
		}
		graceMu.Unlock()
		hcancel(nil)
	}()

	// Self-fencing: once this host has not written the lease for an expiration another host may
	// hold it, so the batch in flight is cancelled then (also while the worker stops), not at
	// the next failed renewal.
	ol.mu.Lock()
	ol.onLost = func(err error) { hcancel(err) }
	ol.mu.Unlock()
	stopFence := p.fence(ol, ol.lose)
	defer stopFence()

	reason, loopErr := w.loop(hctx)
	fctx, cancel := p.fresh(run)
	defer cancel()
	w.releaseChildren(fctx) // of a split that did not finish
	return errors.Join(loopErr, w.close(fctx, reason))
}

// loop runs until the lease ends; it returns why, and a StopError from the handler.
func (w *worker) loop(hctx context.Context) (CloseReason, error) {
	ol := w.ol
	if !w.openLease(hctx) {
		return w.reason(), nil
	}
	failures, attempt := 0, 1
	defer w.dropAhead()
	for {
		if ol.ctx.Err() != nil {
			return w.reason(), nil
		}
		if w.reader == nil {
			if err := w.route(ol.ctx); err != nil {
				if reason, serr, stop := w.readError(err, "route lease", &failures); stop {
					return reason, serr
				}
				continue
			}
		}
		readCtx := leases.WithCharge(ol.ctx, leases.ChargeChangeFeed, w.info.Token)
		page, err := w.next(readCtx)
		if err != nil {
			if ol.ctx.Err() != nil {
				return w.reason(), nil
			}
			// A range gone splits, merges (the lease stays) or retries the split.
			if reason, serr, stop := w.readError(err, "read change feed", &failures); stop {
				return reason, serr
			}
			continue
		}
		if failures > 0 || ReadFailure(ol.current()) != "" {
			w.p.readRecovered(ol.ctx, ol) // also a mark left by an earlier owner
		}
		failures = 0
		w.p.limit.reset(limitKey("read change feed", w.info.Token))
		if len(page.Items) == 0 {
			if lost := w.emptyPage(page); lost {
				return CloseLeaseLost, nil
			}
			continue
		}
		if reason, herr, stop := w.deliver(hctx, readCtx, page, &attempt); stop {
			return reason, herr
		}
	}
}

// openLease calls the LeaseHandler's OpenLease until it succeeds, with a backoff; it reports
// false when the lease stopped first.
func (w *worker) openLease(hctx context.Context) bool {
	p, ol := w.p, w.ol
	if p.lh == nil {
		return true
	}
	for n := 1; ; n++ {
		err := p.lh.OpenLease(hctx, w.info)
		if err == nil {
			return true
		}
		if ol.ctx.Err() != nil {
			return false
		}
		p.handlerError(hctx, w.info, fmt.Errorf("open lease %s: %w", w.info.Token, err))
		if sleepCtx(ol.ctx, p.backoff(n)) != nil {
			return false
		}
	}
}

// readError handles a failed route or read (op names it): a range gone is split (or merged);
// another error counts in failures, is logged (a permanent one marks the lease, see
// readFailed) and waits a backoff. It reports stop with the loop's result when the worker
// ends.
func (w *worker) readError(err error, op string, failures *int) (reason CloseReason, serr error, stop bool) {
	p, ol := w.p, w.ol
	if IsRangeGone(err) {
		reason, serr = w.split()
		return reason, serr, serr != nil || reason != ""
	}
	*failures++
	if ol.ctx.Err() == nil {
		if !IsPermanent(err) {
			p.infraError(ol.ctx, op, w.info.Token, err)
		} else if gone := p.readFailed(ol.ctx, ol, op, err); gone != nil {
			return CloseShutdown, gone, true
		}
	}
	_ = sleepCtx(ol.ctx, p.backoff(*failures))
	return "", nil, false
}

// emptyPage handles a page without items; it reports whether the lease was lost on the
// checkpoint it may write.
func (w *worker) emptyPage(page Page) (lost bool) {
	ol := w.ol
	if w.checkpointed == "" && w.pending == "" && w.base.Kind == StartNow {
		w.base = w.reader.Position() // "now" resolved: rewind here, not to a later now
	}
	// .NET never checkpoints an empty page. Java's EPK processor does
	// (epkversion/PartitionProcessorImpl.java, run: "still need to checkpoint with the
	// new continuation token"), and its estimator reads the lease's continuation, so an
	// idle range cfp owns would show a growing lag there. cfp writes it only when the
	// continuation moved and no batch is held back (Java writes every empty page).
	if ol.current().Family == leases.FamilyJavaEPK && page.Continuation != "" &&
		page.Continuation != w.checkpointed && (w.pending == "" || w.coalesced()) {
		w.pending, w.deferred = page.Continuation, false
	}
	return w.checkpointDue(ol.ctx)
}

// deliver hands page to the handler as a batch (attempt counts the deliveries of the same
// batch) and acts on its answer: checkpoint, hold back, retry after a backoff, or stop. It
// reports stop with the loop's result when the worker ends.
func (w *worker) deliver(hctx, readCtx context.Context, page Page, attempt *int) (reason CloseReason, herr error, stop bool) {
	p, ol := w.p, w.ol
	// A lease lost (or expired under us) between the read and here is not delivered.
	if ol.ctx.Err() != nil || !ol.valid(p.opts.Now(), p.opts.Expiration) {
		release(page)
		if ol.ctx.Err() == nil {
			ol.lose(&expiredError{token: w.info.Token})
		}
		return w.reason(), nil, true
	}
	w.readNextAhead(readCtx)
	b := Batch{
		LeaseToken: w.info.Token, Range: w.info.Range, Owner: p.opts.Instance,
		Items: page.Items, Continuation: page.Continuation, LatestLSN: page.LatestLSN, Attempt: *attempt,
		Checkpoint: w.checkpointed, Mode: p.opts.Mode,
	}
	stopWatch := w.watchInFlight(ol.ctx, b, p.opts.Now())
	herr = p.h.Handle(hctx, b)
	stopWatch()
	release(page) // the handler kept nothing of the items (ReuseItems), b.Items is not read again
	var stopErr *StopError
	switch {
	case herr == nil:
		*attempt = 1
		p.notify(Event{Type: EventBatch, Lease: b.LeaseToken, Range: b.Range, Items: len(b.Items), Continuation: b.Continuation})
		w.pending, w.deferred = page.Continuation, false
		if lost := w.checkpointDue(ol.ctx); lost {
			return CloseLeaseLost, nil, true
		}
	case errors.Is(herr, ErrNoCheckpoint):
		*attempt = 1
		p.notify(Event{Type: EventBatch, Lease: b.LeaseToken, Range: b.Range, Items: len(b.Items), Continuation: b.Continuation})
		w.pending, w.deferred = page.Continuation, true
	case errors.As(herr, &stopErr):
		p.handlerError(hctx, w.info, herr)
		w.batchFailed(ol.ctx, b, herr, true)
		return CloseShutdown, herr, true
	case hctx.Err() != nil:
		// Lost, or shutdown with the grace period over: the batch stays unprocessed.
		return w.reason(), nil, true
	default:
		p.handlerError(hctx, w.info, herr)
		w.batchFailed(ol.ctx, b, herr, false)
		*attempt++
		w.rewind()
		if sleepCtx(ol.ctx, p.backoff(*attempt-1)) != nil {
			return w.reason(), nil, true
		}
	}
	return "", nil, false
}

// release hands page's memory back to the source, when it was read for reuse.
func release(page Page) {
	if page.Release != nil {
		page.Release()
	}
}

// fence calls expire once ol has not been written for an expiration (see ownedLease.valid),
// looking again each time that moment comes; the returned function stops it.
func (p *Processor) fence(ol *ownedLease, expire func(error)) (stop func()) {
	var mu sync.Mutex
	var t *time.Timer
	done := false
	check := func() {
		mu.Lock()
		defer mu.Unlock()
		if done {
			return
		}
		now := p.opts.Now()
		if ol.valid(now, p.opts.Expiration) {
			t.Reset(ol.expiry(p.opts.Expiration).Sub(now))
			return
		}
		done = true
		expire(&expiredError{token: ol.token})
	}
	mu.Lock()
	defer mu.Unlock()
	t = time.AfterFunc(ol.expiry(p.opts.Expiration).Sub(p.opts.Now()), check)
	return func() {
		mu.Lock()
		defer mu.Unlock()
		done = true
		t.Stop()
	}
}

// reason maps the end of the lease context to a close reason.
func (w *worker) reason() CloseReason {
	cause := context.Cause(w.ol.ctx)
	switch {
	case errors.Is(cause, errSplit):
		return CloseSplit
	case errors.Is(cause, leases.ErrLeaseLost):
		return CloseLeaseLost
	case errors.Is(cause, errHandoff):
		return CloseRebalance
	}
	return CloseShutdown
}

// rewind moves the reader back to the last checkpoint (or the start position), so that the
// failed batch, and batches held with ErrNoCheckpoint, come again.
func (w *worker) rewind() {
	w.dropAhead() // read past the failed batch: the reader moves back below
	start := w.base
	if w.checkpointed != "" {
		start = StartFrom{Kind: StartContinuation, Continuation: w.checkpointed}
	}
	if w.coalesced() {
		// Delivered and waiting for CheckpointInterval: those batches are done, rewind to
		// their end and keep the continuation to write.
		if w.reader != nil {
			w.reader.Seek(StartFrom{Kind: StartContinuation, Continuation: w.pending})
		}
		return
	}
	w.pending, w.deferred = "", false
	w.ol.setCarry("", "")
	if w.reader != nil {
		w.reader.Seek(start)
	}
}

// coalesced reports whether w.pending is the continuation of delivered batches that waits
// for CheckpointInterval (not one held back by ErrNoCheckpoint).
func (w *worker) coalesced() bool { return w.pending != "" && !w.deferred }

// checkpointDue writes w.pending (not held back by ErrNoCheckpoint) once the lease's last
// write is CheckpointInterval old, and reports whether the lease turned out lost. Until then
// the continuation waits: the next page, empty or not, looks again, and closing the lease
// writes it.
//
// A waiting continuation rides on the renewer's next write of the lease (see carry), so that
// with CheckpointInterval at least KeepAlive a lease is written once per keep-alive, busy or
// idle.
func (w *worker) checkpointDue(ctx context.Context) (lost bool) {
	p := w.p
	w.takeCarried()
	if !w.coalesced() {
		return false
	}
	if iv := p.opts.CheckpointInterval; iv > 0 && p.opts.Now().Sub(w.ol.lastWrite()) < iv {
		w.ol.setCarry(w.checkpointed, w.pending)
		return false
	}
	return w.checkpoint(ctx)
}

// takeCarried takes in a continuation the renewer wrote for this worker: it is checkpointed
// now (and no longer pending, unless newer batches were delivered since).
func (w *worker) takeCarried() {
	c := w.ol.takeCarried()
	if c == "" {
		return
	}
	w.checkpointed = c
	if w.pending == c {
		w.pending, w.deferred = "", false
	}
	w.p.notify(Event{Type: EventCheckpoint, Lease: w.info.Token, Range: w.info.Range, Continuation: c})
}

// checkpoint writes w.pending; it reports whether the lease turned out lost. Other failures
// keep the continuation pending for the next checkpoint.
func (w *worker) checkpoint(ctx context.Context) (lost bool) {
	p, ol := w.p, w.ol
	w.takeCarried()
	if w.pending == "" {
		return false
	}
	ol.setCarry("", "")
	start := p.opts.Now()
	l, err := p.store.Checkpoint(ctx, ol.current(), p.opts.Instance, w.pending)
	switch {
	case err == nil:
		ol.update(l, start)
		p.checkHandoff(ol, l)
		w.checkpointed, w.pending, w.deferred = w.pending, "", false
		p.limit.reset(limitKey("checkpoint lease", w.info.Token))
		p.notify(Event{Type: EventCheckpoint, Lease: w.info.Token, Range: w.info.Range, Continuation: w.checkpointed})
		return false
	case errors.Is(err, leases.ErrLeaseLost):
		ol.lose(err)
		return true
	default:
		if ctx.Err() == nil {
			p.infraError(ctx, "checkpoint lease", w.info.Token, err)
		}
		return false
	}
}

// close ends the lease on this host: the handler is told, a shutdown writes what is pending
// and releases the lease, a lost lease is only reported.
func (w *worker) close(ctx context.Context, reason CloseReason) error {
	p, ol := w.p, w.ol
	var closeErr error
	if p.lh != nil {
		closeErr = p.lh.CloseLease(ctx, w.info, reason)
		if closeErr != nil && !errors.Is(closeErr, ErrNoCheckpoint) {
			p.handlerError(ctx, w.info, fmt.Errorf("close lease %s: %w", w.info.Token, closeErr))
		}
	}
	var dup *DuplicateInstanceError
	if reason == CloseShutdown && errors.As(context.Cause(w.run), &dup) {
		// Another process runs under this name and holds this lease in the same name: a
		// checkpoint or a release from here would be written over its work. Just stop.
		p.notify(Event{Type: EventLost, Lease: w.info.Token, Range: w.info.Range, Err: dup})
		return nil
	}
	switch reason {
	case CloseLeaseLost:
		cause := context.Cause(ol.ctx)
		p.noteRebuff(ol, cause)
		if isDeleted(cause) {
			p.deletedLease(w.info, cause)
		} else {
			p.log.Info("lease lost", "lease", w.info.Token, "err", cause)
		}
		p.notify(Event{Type: EventLost, Lease: w.info.Token, Range: w.info.Range, Err: cause})
		var expired *expiredError
		if errors.As(cause, &expired) {
			w.releaseExpired(ctx)
		}
		return nil
	case CloseSplit:
		p.notify(Event{Type: EventReleased, Lease: w.info.Token, Range: w.info.Range})
		return nil
	}
	// CloseShutdown and CloseRebalance: write what is pending, release.
	flush := w.pending != "" && (!w.deferred || (p.lh != nil && closeErr == nil))
	if flush {
		if lost := w.checkpoint(ctx); lost {
			p.notify(Event{Type: EventLost, Lease: w.info.Token, Range: w.info.Range, Err: context.Cause(ol.ctx)})
			return nil
		}
	}
	if reason == CloseRebalance {
		to, err := p.handOver(ctx, ol.current())
		switch {
		case err == nil:
			p.log.Info("lease handed over", "lease", w.info.Token, "to", to)
			p.notify(Event{Type: EventReleased, Lease: w.info.Token, Range: w.info.Range})
			return nil
		case errors.Is(err, leases.ErrLeaseLost):
			p.notify(Event{Type: EventLost, Lease: w.info.Token, Range: w.info.Range, Err: err})
			return nil
		case !errors.Is(err, errNoHandoff):
			p.infraError(ctx, "hand over lease", w.info.Token, err)
		}
	}
	err := p.store.Release(ctx, ol.current(), p.opts.Instance)
	if errors.Is(err, leases.ErrLeaseLost) {
		p.notify(Event{Type: EventLost, Lease: w.info.Token, Range: w.info.Range, Err: err})
		return nil
	}
	if err != nil {
		p.infraError(ctx, "release lease", w.info.Token, err)
		return nil // the lease expires; this is no reason to fail Run
	}
	p.log.Info("lease released", "lease", w.info.Token)
	p.notify(Event{Type: EventReleased, Lease: w.info.Token, Range: w.info.Range})
	return nil
}

// releaseExpired releases a lease this host stopped processing because it could not write it
// for an expiration (see fence), provided the stored lease still names this host: a renew
// that was in flight when the fence fired (a slow request, a starved process) can land after
// it, and leave the lease looking live and owned by this host, which runs no worker for it and
// counts it as its own, so that no host took it until it expired again, an expiration later.
// .NET releases a lost lease the same way, whatever the reason it was lost
// (ChangeFeedProcessor/FeedManagement/PartitionControllerCore.cs: ProcessPartitionAsync ends
// in RemoveLeaseAsync, which calls ReleaseAsync, after a LeaseLostException too). A renew that
// lands after the release fails its If-Match and finds the lease no longer this host's.
func (w *worker) releaseExpired(ctx context.Context) {
	p := w.p
	if p.ownedLease(w.info.Token) != w.ol {
		return // this host took the lease again meanwhile: its new worker holds it (see startLocked)
	}
	err := p.store.Release(ctx, w.ol.current(), p.opts.Instance)
	switch {
	case err == nil:
		p.log.Info("expired lease released", "lease", w.info.Token)
	case errors.Is(err, leases.ErrLeaseLost):
		// Another host took it: nothing to give back.
	case ctx.Err() == nil:
		p.infraError(ctx, "release lease", w.info.Token, err)
	}
}

// route builds the lease's reader: a PK-range lease reads its partition; an EPK lease reads
// the one partition that holds its range (restricted to the range when it is a sub-range) and
// is gone when its range spans several partitions.
func (w *worker) route(ctx context.Context) error {
	p := w.p
	l := w.ol.current()
	req := ReadRequest{MaxItems: p.opts.MaxItems, Start: w.base, Mode: p.opts.Mode, Reuse: p.opts.ReuseItems}
	if w.checkpointed != "" {
		req.Start = StartFrom{Kind: StartContinuation, Continuation: w.checkpointed}
	}
	if w.reader != nil {
		req.Start = w.reader.Position()
	}
	parts, err := p.src.Partitions(ctx)
	if err != nil {
		return fmt.Errorf("route lease %s: %w", l.Token, err)
	}
	rt, err := Route(l, parts)
	if err != nil {
		return fmt.Errorf("route lease: %w", err)
	}
	req.PartitionID, req.Range = rt.Partition.ID, rt.Range
	w.reader = NewReader(p.src, req, ReaderOptions{Poll: p.opts.PollInterval, Rand: w.rand, Logger: p.log})
	return nil
}
