package feed

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/cfp-dev/cfp/internal/leases"
)

// Tail defaults, applied to zero fields of TailOptions.
const (
	DefaultTailPoll        = time.Second
	DefaultTailConcurrency = 8
	DefaultTailSaveEvery   = 10 * time.Second
	DefaultTailStopGrace   = 500 * time.Millisecond
)

// TailStateVersion is the version written in TailState.Version.
const TailStateVersion = 1

// Change is one changed item as the tail driver delivers it: the raw item plus the envelope
// facts of --envelope.
type Change struct {
	// Item is the document exactly as the feed returned it.
	Item json.RawMessage
	// PartitionID is the physical partition it was read from ("" for a partition-key tail).
	PartitionID string
	// Range is the EPK range being tailed that holds it.
	Range Range
	// LSN is the item's _lsn (0 if absent).
	LSN int64
	// TS is the item's _ts (zero if absent); in all-versions mode the change's crts.
	TS time.Time
	// Operation is the change's metadata.operationType in all-versions mode (OperationCreate,
	// OperationReplace or OperationDelete); "" in latest-version mode, where a create and a
	// replace look alike and deletes are not seen.
	Operation string
}

// RangeState is where one tailed range resumes.
type RangeState struct {
	// PartitionID is the physical partition read for the range ("" for a partition-key tail).
	PartitionID string `json:"partition"`
	// Range is the EPK range tailed.
	Range Range `json:"range"`
	// Continuation is the raw continuation after the last delivered change.
	Continuation string `json:"continuation,omitempty"`
	// Start is the start position ("now", "beginning" or an RFC 3339 time) when the range has
	// no continuation yet.
	Start string `json:"start,omitempty"`
	// Skip is how many changes with the LSN right after Continuation were already delivered. A
	// merged partition holds its parents' changes with their own LSNs, so two changes can share
	// one; a tail that stopped between them resumes before that LSN and skips the ones it had
	// printed. Absent (0) in files written before it existed.
	Skip int `json:"skip,omitempty"`
}

// TailState is the JSON-serialisable position of a tail: one entry per range. Resuming from it
// loses nothing, across splits too, and re-delivers nothing, with one exception: a range with a
// Skip whose partition split before the resume starts its children before that LSN (which
// child holds the skipped changes is not known from the count), so those Skip changes may
// come again.
type TailState struct {
	Version      int             `json:"version"`
	PartitionKey json.RawMessage `json:"partition_key,omitempty"`
	// Mode is the change-feed mode the tail read ("all-versions"; "" for latest).
	Mode   string       `json:"mode,omitempty"`
	Ranges []RangeState `json:"ranges"`
	// Scope is the EPK range the tail covers (the whole key space, or its --range); the ranges
	// tile it. Absent in files written before it existed and for a partition-key tail.
	Scope *Range `json:"scope,omitempty"`
	// Database, Container and ContainerRID name the container tailed (set by the caller that
	// writes the file; absent in older files), so another container's state can be refused.
	Database     string `json:"database,omitempty"`
	Container    string `json:"container,omitempty"`
	ContainerRID string `json:"container_rid,omitempty"`
}

// TailStatus is reported through TailOptions.OnStatus when it changes.
type TailStatus struct {
	// Ranges is the number of ranges tailed, CaughtUp how many of them are caught up.
	Ranges, CaughtUp int
	// Items is the number of changes delivered so far.
	Items int64
}

// Stop reasons of a tail, in TailSummary.Reason.
const (
	TailStopCaughtUp    = "caught-up"
	TailStopMaxItems    = "max-items"
	TailStopUntil       = "until"
	TailStopInterrupted = "interrupted"
	TailStopError       = "error"
)

// TailSummary describes a finished tail.
type TailSummary struct {
	Items         int64
	Pages         int
	RequestCharge float64
	// Splits counts the partitions that split under the tail, Merges the partitions that
	// merged ranges of it followed into (one per merged partition).
	Splits, Merges int
	// Ranges and CaughtUp are the final range counts.
	Ranges, CaughtUp int
	// Reason is one of the TailStop* constants.
	Reason string
	// State is the final position, the same value given to the last SaveState.
	State TailState
}

// TailOptions configures Tail. Zero fields take the documented defaults.
type TailOptions struct {
	// Start is where ranges start (default now); ignored when State is set.
	Start StartFrom
	// Until, when set, ends each range at its first change with a _ts after Until, or when it is
	// caught up and the clock has passed Until.
	Until time.Time
	// ExitAtEnd ends the tail once every range has been caught up.
	ExitAtEnd bool
	// MaxItems ends the tail after that many changes (0: no limit).
	MaxItems int64
	// PartitionKey scopes the tail to one logical partition (JSON array form).
	PartitionKey json.RawMessage
	// Mode is the change-feed mode (default LatestVersion). AllVersionsAndDeletes starts from
	// now or a continuation only, and a State must have been written in the same mode.
	Mode FeedMode
	// Range restricts the tail to the partitions overlapping it, each cut to the range.
	Range *Range
	// Poll is the wait after an empty page (default 1s).
	Poll time.Duration
	// PageSize is the maximum items per read (0: the service default).
	PageSize int
	// State resumes a previous tail; Start, Range and PartitionKey are then taken from it.
	State *TailState
	// Concurrency bounds the reads in flight at once (default 8); every range is read.
	Concurrency int
	// ReuseItems says emit copies whatever it keeps of a change's Item before it returns: the
	// source may then reuse a page's memory once the page is delivered (ReadRequest.Reuse),
	// which spares allocating and zeroing a buffer per page.
	ReuseItems bool
	// SaveState, when set, is called every SaveEvery (default 10s) and once on exit with the
	// current state. An error ends the tail.
	SaveState func(TailState) error
	SaveEvery time.Duration
	// Written, when set, reports how many of the changes emit accepted are written out (emit may
	// buffer): the states given to SaveState and the summary count only those, so a state never
	// runs ahead of the output. nil: every change emit accepted counts.
	Written func() int64
	// Flush, when set, is called before each state is taken for SaveState (and before the
	// summary's), so that what emit buffered is written out and counted by Written. It must
	// return promptly even when the output blocks; the state then counts what Written reports.
	Flush func()
	// StopGrace bounds how long Tail waits, once ctx ends, for an emit that does not return (a
	// blocked stdout) before it saves the state and returns anyway (default 500ms).
	StopGrace time.Duration
	// OnStatus, when set, is called (serialised, under the driver's lock: keep it short) when the
	// number of ranges or of caught-up ranges changes.
	OnStatus func(TailStatus)
	// Now is the clock (default time.Now); Reader carries the sleep, backoff and logger.
	Now    func() time.Time
	Reader ReaderOptions
	Logger *slog.Logger
}

// Validate reports contradictory options. Defaults need not be applied first.
func (o TailOptions) Validate() error {
	if o.Range != nil && len(o.PartitionKey) > 0 {
		return errors.New("a range and a partition key cannot both be set")
	}
	if o.MaxItems < 0 {
		return errors.New("max items must not be negative")
	}
	if o.State != nil {
		if o.State.Version != TailStateVersion {
			return fmt.Errorf("tail state version %d is not supported", o.State.Version)
		}
		if len(o.State.Ranges) == 0 {
			return errors.New("tail state has no ranges")
		}
		if o.Range != nil {
			return errors.New("a range cannot be combined with a tail state: the state has its ranges")
		}
		if len(o.PartitionKey) > 0 && !bytes.Equal(o.PartitionKey, o.State.PartitionKey) {
			return errors.New("the partition key differs from the tail state's")
		}
		if m, err := ParseFeedMode(o.State.Mode); err != nil {
			return fmt.Errorf("tail state: %w", err)
		} else if m != o.Mode {
			return fmt.Errorf("the tail state was written in %s mode, not %s", m, o.Mode)
		}
	}
	if o.Mode == AllVersionsAndDeletes {
		if err := allVersionsStart(o); err != nil {
			return err
		}
	}
	return nil
}

// ErrAllVersionsStart is returned when an all-versions tail is asked to start from the beginning
// or from a point in time, which the service does not support in that mode.
var ErrAllVersionsStart = errors.New("all-versions mode starts from now or from a saved position only")

func allVersionsStart(o TailOptions) error {
	if o.State == nil {
		if o.Start.Kind != StartNow && o.Start.Kind != StartContinuation {
			return fmt.Errorf("start from %s: %w", FormatStart(o.Start), ErrAllVersionsStart)
		}
		return nil
	}
	for _, rs := range o.State.Ranges {
		if rs.Continuation == "" && rs.Start != "now" {
			return fmt.Errorf("tail state range %s starts from %s: %w", rs.Range, rs.Start, ErrAllVersionsStart)
		}
	}
	return nil
}

// WithDefaults returns o with every zero field set to its default.
func (o TailOptions) WithDefaults() TailOptions {
	if o.Poll == 0 {
		o.Poll = DefaultTailPoll
	}
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultTailConcurrency
	}
	if o.SaveEvery <= 0 {
		o.SaveEvery = DefaultTailSaveEvery
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Reader.Poll == 0 {
		o.Reader.Poll = o.Poll
	}
	if o.Reader.Logger == nil {
		o.Reader.Logger = o.Logger
	}
	if o.StopGrace <= 0 {
		o.StopGrace = DefaultTailStopGrace
	}
	o.Reader = o.Reader.WithDefaults()
	return o
}

// Tail reads every partition of src (or the selected range or partition key) in parallel and
// calls emit for each change, one call at a time. It follows splits (a gone partition is replaced
// by its children, which start at the parent's position) and stops when ctx ends, after
// MaxItems changes, when every range passed Until, or with ExitAtEnd when every range was caught
// up. An emit error ends the tail and is returned. The returned summary is always filled in; on
// a normal stop the error is nil, on interruption it is ctx.Err().
func Tail(ctx context.Context, src Source, opts TailOptions, emit func(Change) error) (TailSummary, error) {
	opts = opts.WithDefaults()
	if err := opts.Validate(); err != nil {
		return TailSummary{}, err
	}
	t := &tailRun{
		opts:  opts,
		src:   &limitedSource{Source: src, sem: make(chan struct{}, opts.Concurrency)},
		emit:  emit,
		pk:    opts.PartitionKey,
		state: make(map[int]*tailRange),
	}
	switch {
	case opts.State != nil:
		t.pk = opts.State.PartitionKey
		t.scope = opts.State.Scope
	case len(opts.PartitionKey) > 0:
	case opts.Range != nil:
		t.scope = new(opts.Range.Normal())
	default:
		t.scope = new(leases.FullRange.Normal())
	}
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	t.cancel = cancel

	initial, err := t.initialRanges(ctx)
	if err != nil {
		return TailSummary{Reason: TailStopError}, err
	}
	g, gctx := errgroup.WithContext(runCtx)
	t.mu.Lock()
	for _, tr := range initial {
		t.add(tr)
	}
	if opts.Written != nil {
		t.view = make(map[int]tailRange, len(initial))
		for _, tr := range initial {
			t.view[tr.id] = *tr
		}
	}
	t.status()
	t.mu.Unlock()
	for _, tr := range initial {
		g.Go(func() error { return t.runRange(gctx, g, tr) })
	}

	saverDone := make(chan struct{})
	var saverWG sync.WaitGroup
	if opts.SaveState != nil {
		saverWG.Go(func() { t.saveLoop(gctx, saverDone) })
	}
	err = t.wait(ctx, g)
	close(saverDone)
	saverWG.Wait()
	if opts.Flush != nil {
		opts.Flush()
	}

	return t.finish(ctx, err)
}

// finish closes the run and returns its summary: why it stopped, and err, the run's error
// (nil on a normal stop, ctx's on interruption), or the state's save error.
func (t *tailRun) finish(ctx context.Context, err error) (TailSummary, error) {
	opts := t.opts
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	sum := t.sum
	sum.Ranges, sum.CaughtUp = len(t.state), t.caught
	sum.State = t.snapshot()
	switch {
	case err != nil:
		sum.Reason = TailStopError
	case t.saveErr != nil:
		sum.Reason, err = TailStopError, t.saveErr
	case t.reason != "":
		sum.Reason = t.reason
	case ctx.Err() != nil:
		sum.Reason, err = TailStopInterrupted, ctx.Err()
	case opts.ExitAtEnd:
		sum.Reason = TailStopCaughtUp
	default:
		sum.Reason = TailStopUntil
	}
	if opts.SaveState != nil {
		if serr := opts.SaveState(sum.State); serr != nil && err == nil {
			sum.Reason, err = TailStopError, fmt.Errorf("save tail state: %w", serr)
		}
	}
	return sum, err
}

// tailRange is one range being tailed.
type tailRange struct {
	id        int
	partition string
	rng       Range // the range tailed
	whole     bool  // rng is the partition's whole range: send no EPK restriction
	pos       StartFrom
	skip      int // changes at the LSN right after pos already delivered (RangeState.Skip)
	caughtUp  bool
	done      bool // finished by Until or ExitAtEnd
	gone      int  // consecutive "gone" answers for a partition that is still live
	meta      *pageMeta
}

// pageMeta holds the facts deliver reads once from each change of a page, kept between the
// pages of a range (one goroutine delivers a range's pages, one at a time).
type pageMeta struct {
	changes []Change
	lsns    []int64
	skips   []int
}

type tailRun struct {
	opts   TailOptions
	src    Source
	emit   func(Change) error
	pk     json.RawMessage
	scope  *Range
	cancel context.CancelCauseFunc

	// Lock order: emitMu before mu. emitMu serialises emit calls and is held while emit runs
	// (which may block on the output); mu guards everything below and is never held across emit,
	// so the state saver and the shutdown always get it.
	emitMu sync.Mutex

	mu sync.Mutex
	// closed is set when Tail returns: a goroutine that comes back from a blocked emit after
	// that changes nothing.
	closed bool
	// view and events exist with TailOptions.Written: view is the state as of the changes
	// written out, events the position changes not yet folded into it, in delivery order.
	view    map[int]tailRange
	events  []tailEvent
	state   map[int]*tailRange // live ranges (finished ones included) by id
	nextID  int
	caught  int
	sum     TailSummary
	merged  map[string]bool // partitions counted in sum.Merges
	reason  string          // why the driver stopped everything, "" if it did not
	saveErr error
}

func (t *tailRun) initialRanges(ctx context.Context) ([]*tailRange, error) {
	if st := t.opts.State; st != nil {
		parts, err := t.src.Partitions(ctx)
		if err != nil {
			return nil, fmt.Errorf("list partitions: %w", err)
		}
		var out []*tailRange
		for _, rs := range st.Ranges {
			pos, err := rangeStatePosition(rs, t.opts.Now())
			if err != nil {
				return nil, err
			}
			tr := &tailRange{partition: rs.PartitionID, rng: rs.Range, pos: pos}
			if pos.Kind == StartContinuation && rs.Skip > 0 {
				tr.skip = rs.Skip
			}
			for _, p := range parts {
				if p.ID == rs.PartitionID && p.Range == rs.Range {
					tr.whole = true
				}
			}
			out = append(out, tr)
		}
		return out, nil
	}
	start := t.opts.Start
	if len(t.pk) > 0 {
		return []*tailRange{{rng: leases.FullRange, whole: true, pos: start}}, nil
	}
	parts, err := t.src.Partitions(ctx)
	if err != nil {
		return nil, fmt.Errorf("list partitions: %w", err)
	}
	want := leases.FullRange
	if t.opts.Range != nil {
		want = *t.opts.Range
	}
	var out []*tailRange
	for _, p := range parts {
		r, ok := p.Range.Intersect(want)
		if !ok {
			continue
		}
		out = append(out, &tailRange{partition: p.ID, rng: r, whole: r == p.Range, pos: start})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no partition overlaps range %s", want)
	}
	if start.Kind == StartContinuation && t.opts.State == nil && len(out) > 1 {
		// An LSN belongs to one partition: applied to several it would skip or repeat changes.
		return nil, fmt.Errorf("start %s is a position in one partition, but range %s spans %d partitions", FormatStart(start), want, len(out))
	}
	return out, nil
}

func rangeStatePosition(rs RangeState, now time.Time) (StartFrom, error) {
	if rs.Continuation != "" {
		return StartFrom{Kind: StartContinuation, Continuation: rs.Continuation}, nil
	}
	s, err := ParseStart(rs.Start, now)
	if err != nil {
		return StartFrom{}, fmt.Errorf("tail state range %s: %w", rs.Range, err)
	}
	return s, nil
}

// tailEvent is one change of the tail's positions: range id moved to pos (or was removed),
// after the first seq changes were delivered.
type tailEvent struct {
	seq     int64
	id      int
	removed bool
	r       tailRange
}

// add registers a range. Callers hold t.mu.
func (t *tailRun) add(tr *tailRange) {
	tr.id = t.nextID
	t.nextID++
	t.state[tr.id] = tr
	t.record(tr, false)
}

// record notes a new position (or the removal) of tr for the written view. Callers hold t.mu.
func (t *tailRun) record(tr *tailRange, removed bool) {
	if t.view == nil {
		return
	}
	t.events = append(t.events, tailEvent{seq: t.sum.Items, id: tr.id, removed: removed, r: *tr})
}

// wait waits for the range goroutines. Once ctx ends it waits at most StopGrace more: a range
// blocked in emit (an output nobody reads) must not keep the tail from saving and returning.
func (t *tailRun) wait(ctx context.Context, g *errgroup.Group) error {
	done := make(chan error, 1)
	go func() { done <- g.Wait() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	grace := time.NewTimer(t.opts.StopGrace)
	defer grace.Stop()
	select {
	case err := <-done:
		return err
	case <-grace.C:
		t.opts.Logger.Warn("the output is blocked: stopping without waiting for it", "grace", t.opts.StopGrace)
		return nil
	}
}

// status reports the counts. Callers hold t.mu.
func (t *tailRun) status() {
	if t.opts.OnStatus != nil {
		t.opts.OnStatus(TailStatus{Ranges: len(t.state), CaughtUp: t.caught, Items: t.sum.Items})
	}
}

// stopAll ends the whole tail for reason. Callers hold t.mu.
func (t *tailRun) stopAll(reason string) {
	if t.reason == "" {
		t.reason = reason
	}
	t.cancel(errors.New("tail stopped: " + reason))
}

func (t *tailRun) runRange(ctx context.Context, g *errgroup.Group, tr *tailRange) error {
	for {
		again, err := t.readRange(ctx, g, tr)
		if !again || err != nil {
			return err
		}
	}
}

// readRange reads tr from its position until it is finished, fails, or the service answers
// "gone" for a partition that still serves the range (a stale route: 410 with substatus 1000,
// or 1002 answered by a replica that is behind): then it waits and reports again, and the range
// is read on from the same position.
func (t *tailRun) readRange(ctx context.Context, g *errgroup.Group, tr *tailRange) (again bool, err error) {
	t.mu.Lock()
	req := ReadRequest{PartitionID: tr.partition, Start: tr.pos, MaxItems: t.opts.PageSize, PartitionKey: t.pk, Mode: t.opts.Mode, Reuse: t.opts.ReuseItems}
	t.mu.Unlock()
	if !tr.whole {
		req.Range = tr.rng
	}
	r := NewReader(t.src, req, t.opts.Reader)
	for {
		before := r.Position()
		page, err := r.Next(ctx)
		switch {
		case ctx.Err() != nil:
			return false, nil
		case IsRangeGone(err) || IsStaleRoute(err):
			live, err := t.split(ctx, g, tr, err)
			if err != nil || !live {
				return false, err
			}
			tr.gone++
			d := min(t.opts.Reader.MinBackoff<<min(tr.gone-1, 16), t.opts.Reader.MaxBackoff)
			if t.opts.Reader.Sleep(ctx, d) != nil {
				return false, nil
			}
			return true, nil
		case err != nil:
			return false, fmt.Errorf("tail range %s: %w", tr.rng, err)
		}
		tr.gone = 0
		done, err := t.deliver(tr, before, page)
		if page.Release != nil {
			page.Release() // emit kept nothing of the items (ReuseItems)
		}
		if err != nil || done {
			return false, err
		}
	}
}

// deliver emits a page's changes and moves the range's position after each. It reports
// whether the range is finished. emit runs outside t.mu.
func (t *tailRun) deliver(tr *tailRange, before StartFrom, page Page) (bool, error) {
	t.mu.Lock()
	if t.reason != "" || t.closed {
		t.mu.Unlock()
		return true, nil
	}
	t.sum.Pages++
	t.sum.RequestCharge += page.RequestCharge
	t.mu.Unlock()
	until := t.opts.Until
	if tr.meta == nil {
		tr.meta = &pageMeta{}
	}
	m := tr.meta
	n := len(page.Items)
	m.changes, m.lsns = slices.Grow(m.changes[:0], n)[:n], slices.Grow(m.lsns[:0], n)[:n]
	for i, raw := range page.Items {
		m.changes[i] = t.change(raw)
		m.lsns[i] = m.changes[i].LSN
	}
	m.skips = equalBefore(m.skips, m.lsns)
	changes, lsns, skips := m.changes, m.lsns, m.skips
	defer clear(m.changes) // the page's bytes are not kept past the page
	first := t.skipDelivered(tr, before, lsns)
	for i := first; i < len(changes); i++ {
		ch := changes[i]
		if !until.IsZero() && !ch.TS.IsZero() && ch.TS.After(until) {
			t.mu.Lock()
			defer t.mu.Unlock()
			t.move(tr, resumeAt(lsns, skips, i, before))
			t.finishUntil(tr)
			return true, nil
		}
		ch.PartitionID, ch.Range = tr.partition, tr.rng
		if stop, err := t.emitAt(tr, page, before, ch, i); stop {
			return true, err
		}
	}
	return t.pageDone(tr, before, page)
}

// emitAt emits ch, the change at index i of page, and moves tr past it; it reports stop when
// the tail ends (closed, stopped by another range, MaxItems reached, or emit's error).
func (t *tailRun) emitAt(tr *tailRange, page Page, before StartFrom, ch Change, i int) (stop bool, err error) {
	lsns, skips := tr.meta.lsns, tr.meta.skips
	// emitMu is held from the check of the stop reason until the change is counted, so that
	// two ranges never both emit the change that reaches MaxItems (a tail -n 25 printed 26).
	t.emitMu.Lock()
	t.mu.Lock()
	stop = t.reason != "" || t.closed
	t.mu.Unlock()
	if stop {
		t.emitMu.Unlock()
		return true, nil
	}
	err = t.emit(ch)
	t.mu.Lock()
	t.emitMu.Unlock()
	if t.closed {
		t.mu.Unlock()
		return true, nil
	}
	if err != nil {
		t.move(tr, resumeAt(lsns, skips, i, before))
		t.mu.Unlock()
		return true, err
	}
	t.sum.Items++
	next := position{pos: continuationAfter(page, before)}
	if i < len(page.Items)-1 {
		next = resumeAt(lsns, skips, i+1, before)
	}
	t.move(tr, next)
	if t.opts.MaxItems > 0 && t.sum.Items >= t.opts.MaxItems {
		t.stopAll(TailStopMaxItems)
		t.mu.Unlock()
		return true, nil
	}
	stopped := t.reason != ""
	t.mu.Unlock()
	return stopped, nil
}

// pageDone moves tr past page, every change of which was emitted; it counts the range caught
// up or not, and reports whether the range is done (Until passed, or ExitAtEnd at its end).
func (t *tailRun) pageDone(tr *tailRange, before StartFrom, page Page) (bool, error) {
	until := t.opts.Until
	t.mu.Lock()
	defer t.mu.Unlock()
	t.move(tr, position{pos: continuationAfter(page, before)})
	if len(page.Items) > 0 {
		if tr.caughtUp {
			tr.caughtUp = false
			t.caught--
			t.status()
		}
		return false, nil
	}
	if !tr.caughtUp {
		tr.caughtUp = true
		t.caught++
		t.status()
	}
	if !until.IsZero() && !t.opts.Now().Before(until) {
		t.finishUntil(tr)
		return true, nil
	}
	if t.opts.ExitAtEnd {
		tr.done = true
	}
	return tr.done, nil
}

// move sets tr's position. Callers hold t.mu.
func (t *tailRun) move(tr *tailRange, p position) {
	if tr.pos == p.pos && tr.skip == p.skip {
		return
	}
	tr.pos, tr.skip = p.pos, p.skip
	t.record(tr, false)
}

// position is where a range reads on: pos, less the first skip changes at the LSN right after
// it, which were delivered.
type position struct {
	pos  StartFrom
	skip int
}

// resumeAt is the position that reads the page's change i next: just before its LSN, skipping
// the changes of the page before i that share that LSN (skips[i], see equalBefore: a merged
// partition's parents' changes keep their LSNs, so two can be equal).
func resumeAt(lsns []int64, skips []int, i int, before StartFrom) position {
	if lsns[i] <= 0 {
		return position{pos: before}
	}
	return position{pos: resumeBefore(lsns[i], before), skip: skips[i]}
}

// equalBefore returns in skips, for each change of a page, how many changes before it in the page have
// the same LSN. A page's LSNs almost always ascend, which takes one pass; otherwise a count per
// LSN does. (Counting for each change anew made a page of n changes cost n²/2 comparisons, a
// tenth of the tail's CPU at 1,000-change pages.)
func equalBefore(skips []int, lsns []int64) []int {
	skips = slices.Grow(skips[:0], len(lsns))[:len(lsns)]
	clear(skips)
	if slices.IsSorted(lsns) {
		for i := 1; i < len(lsns); i++ {
			if lsns[i] == lsns[i-1] {
				skips[i] = skips[i-1] + 1
			}
		}
		return skips
	}
	seen := make(map[int64]int, len(lsns))
	for i, l := range lsns {
		skips[i] = seen[l]
		seen[l]++
	}
	return skips
}

// skipDelivered is the index of the page's first change not yet delivered: a page read from a
// position with a skip starts with changes at that LSN that were delivered before it.
func (t *tailRun) skipDelivered(tr *tailRange, before StartFrom, lsns []int64) int {
	t.mu.Lock()
	skip := tr.skip
	t.mu.Unlock()
	if skip == 0 || before.Kind != StartContinuation {
		return 0
	}
	at, ok := ContinuationLSN(before.Continuation)
	if !ok {
		return 0
	}
	n := 0
	for n < len(lsns) && n < skip && lsns[n] == at+1 {
		n++
	}
	return n
}

// finishUntil marks a range as finished by Until and stops the tail once every range is
// finished. Callers hold t.mu.
func (t *tailRun) finishUntil(tr *tailRange) {
	tr.done = true
	for _, o := range t.state {
		if !o.done {
			return
		}
	}
	t.stopAll(TailStopUntil)
}

// continuationAfter is the position after a whole page.
func continuationAfter(page Page, before StartFrom) StartFrom {
	if page.Continuation == "" {
		return before
	}
	return StartFrom{Kind: StartContinuation, Continuation: page.Continuation}
}

// change reads the facts of one item in the tail's mode: _lsn and _ts of a latest-version item,
// the metadata of an all-versions change.
func (t *tailRun) change(raw json.RawMessage) Change {
	if t.opts.Mode == AllVersionsAndDeletes {
		lsn, ts, op := allVersionsMeta(raw)
		return Change{Item: raw, LSN: lsn, TS: ts, Operation: op}
	}
	lsn, ts := changeMeta(raw)
	return Change{Item: raw, LSN: lsn, TS: ts}
}

// resumeBefore is the position that re-reads the change at lsn and what follows it: just before
// its LSN. Without a usable LSN it falls back to the page's start, re-delivering rather than
// losing.
func resumeBefore(lsn int64, before StartFrom) StartFrom {
	if lsn <= 0 {
		return before
	}
	return StartFrom{Kind: StartContinuation, Continuation: LSNContinuation(lsn - 1)}
}

// split replaces a gone range by the partitions now covering it, each starting at the gone
// range's position. When the partition still serves the whole range (the "gone" answer, cause,
// was a stale route), it changes nothing and reports live: read on from the same position.
func (t *tailRun) split(ctx context.Context, g *errgroup.Group, tr *tailRange, cause error) (live bool, err error) {
	parts, err := t.src.Partitions(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return false, nil
		}
		return false, fmt.Errorf("list partitions after split of %s: %w", tr.partition, err)
	}
	for _, p := range parts {
		if r, ok := p.Range.Intersect(tr.rng); ok && p.ID == tr.partition && r == tr.rng {
			t.opts.Logger.Info("partition answered gone but still serves the range: reading on",
				"partition", tr.partition, "range", tr.rng.String(), "attempt", tr.gone+1, "error", cause.Error())
			return true, nil
		}
	}
	var children []*tailRange
	for _, p := range parts {
		if p.ID == tr.partition {
			continue
		}
		if r, ok := p.Range.Intersect(tr.rng); ok {
			t.mu.Lock()
			pos := tr.pos
			t.mu.Unlock()
			children = append(children, &tailRange{partition: p.ID, rng: r, whole: r == p.Range, pos: pos})
		}
	}
	if len(children) == 0 {
		return false, fmt.Errorf("partition %s is gone and no partition covers range %s", tr.partition, tr.rng)
	}
	t.mu.Lock()
	if t.reason != "" || t.closed {
		t.mu.Unlock()
		return false, nil
	}
	delete(t.state, tr.id)
	t.record(tr, true)
	if tr.caughtUp {
		t.caught--
	}
	for _, c := range children {
		t.add(c)
	}
	if tr.whole && len(children) == 1 && !children[0].whole {
		// One partition now covers more than the whole gone partition: a merge. Count it once,
		// however many of the tail's ranges moved into it. (A tail over part of a partition
		// cannot tell; it counts a split.)
		if t.merged == nil {
			t.merged = map[string]bool{}
		}
		if !t.merged[children[0].partition] {
			t.merged[children[0].partition] = true
			t.sum.Merges++
		}
		t.opts.Logger.Info("partition merged", "partition", tr.partition, "range", tr.rng.String(), "into", children[0].partition)
	} else {
		t.sum.Splits++
		t.opts.Logger.Info("partition split", "partition", tr.partition, "range", tr.rng.String(), "children", len(children))
	}
	t.status()
	t.mu.Unlock()
	for _, c := range children {
		g.Go(func() error { return t.runRange(ctx, g, c) })
	}
	return false, nil
}

func (t *tailRun) saveLoop(ctx context.Context, done <-chan struct{}) {
	tick := time.NewTicker(t.opts.SaveEvery)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if t.opts.Flush != nil {
			t.opts.Flush()
		}
		t.mu.Lock()
		st := t.snapshot()
		t.mu.Unlock()
		if err := t.opts.SaveState(st); err != nil {
			t.mu.Lock()
			t.saveErr = fmt.Errorf("save tail state: %w", err)
			t.cancel(t.saveErr)
			t.mu.Unlock()
			return
		}
	}
}

// snapshot is the current state, ranges in key order: with TailOptions.Written, as of the
// changes written out. Callers hold t.mu.
func (t *tailRun) snapshot() TailState {
	st := TailState{Version: TailStateVersion, PartitionKey: t.pk, Ranges: []RangeState{}, Scope: t.scope}
	if t.opts.Mode != LatestVersion {
		st.Mode = t.opts.Mode.String()
	}
	add := func(tr *tailRange) {
		rs := RangeState{PartitionID: tr.partition, Range: tr.rng}
		if tr.pos.Kind == StartContinuation {
			rs.Continuation, rs.Skip = tr.pos.Continuation, tr.skip
		} else {
			rs.Start = FormatStart(tr.pos)
		}
		st.Ranges = append(st.Ranges, rs)
	}
	if t.view != nil {
		t.fold(t.opts.Written())
		for _, tr := range t.view {
			add(&tr)
		}
	} else {
		for _, tr := range t.state {
			add(tr)
		}
	}
	slices.SortFunc(st.Ranges, func(a, b RangeState) int { return a.Range.Compare(b.Range) })
	return st
}

// fold applies to the written view the events of the first written changes. Callers hold t.mu.
func (t *tailRun) fold(written int64) {
	n := 0
	for _, ev := range t.events {
		if ev.seq > written {
			break
		}
		if ev.removed {
			delete(t.view, ev.id)
		} else {
			t.view[ev.id] = ev.r
		}
		n++
	}
	t.events = append(t.events[:0], t.events[n:]...)
}

func jsonInt(raw json.RawMessage) int64 {
	s := string(bytes.Trim(bytes.TrimSpace(raw), `"`))
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// limitedSource bounds the reads in flight.
type limitedSource struct {
	Source
	sem chan struct{}
}

func (l *limitedSource) ReadPage(ctx context.Context, req ReadRequest) (Page, error) {
	select {
	case l.sem <- struct{}{}:
	case <-ctx.Done():
		return Page{}, ctx.Err()
	}
	defer func() { <-l.sem }()
	return l.Source.ReadPage(ctx, req)
}
