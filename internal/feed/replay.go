package feed

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/cfp-dev/cfp/internal/leases"
)

// Replay timings: a replay is usually the only host of its leases, so it balances and probes
// often; the lease expiration keeps the .NET default.
const (
	DefaultReplayAcquireInterval = time.Second
	DefaultReplayPollInterval    = time.Second
	DefaultReplayProbeInterval   = time.Second
)

// A replay's window lives in the properties of each of its leases, so that a resumed replay
// covers exactly the window of the run that created the leases, whatever the clock says now
// (relative times and the default end are resolved once, at the first run). Split children
// inherit the properties from their parent.
const (
	replayPropStart = "cfpReplayStart" // "beginning" or an RFC 3339 time: leases without a continuation start here
	replayPropUntil = "cfpReplayUntil" // RFC 3339: the window's end
)

// ReplayWindow is what a replay re-processes: the changes after Start (or after each range's
// position in State) whose _ts is before Until. The window is half-open, [start, Until), in
// the whole seconds of _ts, the resolution at which the feed starts from a time: windows that
// follow one another deliver each change once.
type ReplayWindow struct {
	Start StartFrom
	Until time.Time
	// State, when set, gives each range its own position (a `cfp tail --save-state` file);
	// the ranges without a continuation start at Start (see StateStart).
	State *TailState
}

// ReplayOptions configures Replay.
type ReplayOptions struct {
	// Window is the window of a new replay; a replay that finds leases of an earlier run
	// resumes with the window recorded in them (State is kept from here).
	Window ReplayWindow
	// Handler receives the changes inside the window, through a processor host (batches,
	// retries, LeaseHandler calls as Processor makes them). Required.
	Handler Handler
	// Instance is the host's name in the leases. Required; a stable name lets the next run
	// take its leases back at once after a crash.
	Instance string
	// Fresh deletes the lease set of an earlier run first (Store.DeleteAll), to start over.
	Fresh bool
	// Cleanup deletes the lease set once every range is done.
	Cleanup bool
	// MaxItems bounds each batch (0: the service default).
	MaxItems int
	// AcquireInterval, PollInterval and ProbeInterval default to DefaultReplayAcquireInterval,
	// DefaultReplayPollInterval and DefaultReplayProbeInterval. ProbeInterval is how often the
	// ranges not yet done are checked for the window's end.
	AcquireInterval time.Duration
	PollInterval    time.Duration
	ProbeInterval   time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Logger receives the processor's logs and failed probes (default: discard).
	Logger *slog.Logger
	// Started, when set, is called once the lease set is ready, before the first change, with
	// the window the replay covers and whether it resumes an earlier run.
	Started func(w ReplayWindow, resumed bool)
	// Progress, when set, is called after every probe of the ranges.
	Progress func(ReplayProgress)
}

// ReplayProgress is where a replay stands.
type ReplayProgress struct {
	// Done and Ranges count the replay's leases whose range has passed the window's end, and
	// all its leases (at the last probe).
	Done, Ranges int
	// Items is the number of changes the handler accepted.
	Items int64
	// Covered is the time every range has been replayed up to: the earliest, over the ranges
	// not done, of the _ts of the last change delivered (the window's start for a range that
	// delivered nothing yet; the window's end for a range that is done). Zero while a range
	// of a window that starts at the beginning has delivered nothing.
	Covered time.Time
}

// ReplayResult is what Replay did.
type ReplayResult struct {
	// Window is the window covered (an earlier run's when Resumed).
	Window  ReplayWindow
	Resumed bool
	// Finished is true when every range passed the window's end; false when ctx ended first
	// (or the replay failed before).
	Finished bool
	Items    int64
	Ranges   int
	// Splits counts the leases that were split during the replay.
	Splits int
}

func (o ReplayOptions) withDefaults() ReplayOptions {
	if o.AcquireInterval <= 0 {
		o.AcquireInterval = DefaultReplayAcquireInterval
	}
	if o.PollInterval <= 0 {
		o.PollInterval = DefaultReplayPollInterval
	}
	if o.ProbeInterval <= 0 {
		o.ProbeInterval = DefaultReplayProbeInterval
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Validate reports options Replay cannot run with.
func (o ReplayOptions) Validate() error {
	switch {
	case o.Handler == nil:
		return errors.New("replay: no handler")
	case o.Instance == "":
		return errors.New("replay: no instance name")
	case o.Window.Until.IsZero():
		return errors.New("replay: the window has no end")
	case o.MaxItems < 0:
		return fmt.Errorf("replay: negative MaxItems %d", o.MaxItems)
	}
	return nil
}

// Replay re-processes a window of src's history through opts.Handler and returns once every
// range has passed the window's end (Finished), ctx ends (not Finished, nil error: a re-run
// resumes), or the processor fails. It keeps its progress in store, a lease prefix of its own
// (never a live processor's): it creates one lease per range of the window (per partition, or
// per range of the state file) carrying the window in its properties, marks the store
// initialized so the processor bootstraps nothing, runs a Processor on them, and probes each
// range from its furthest known position to see when it is done. With Cleanup, the lease set
// is deleted at the end under a fresh deadline, and a failure there is returned with
// Finished set.
func Replay(ctx context.Context, src Source, store *leases.Store, opts ReplayOptions) (ReplayResult, error) {
	if err := opts.Validate(); err != nil {
		return ReplayResult{}, err
	}
	opts = opts.withDefaults()
	r := &replayRun{o: opts, src: src, store: store, began: opts.Now(), done: map[string]bool{}}
	if opts.Fresh {
		if err := store.DeleteAll(ctx); err != nil {
			return ReplayResult{}, fmt.Errorf("start the replay over: %w", err)
		}
	}
	resumed, err := r.prepare(ctx, opts.Window)
	if err != nil {
		return ReplayResult{}, err
	}
	if opts.Started != nil {
		opts.Started(r.window, resumed)
	}
	r.h = newWindowHandler(opts.Handler, r.window.Until)
	finished, err := r.run(ctx)
	res := r.result(resumed)
	res.Finished = finished && err == nil
	if err != nil || !finished {
		return res, err
	}
	if opts.Cleanup {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), DefaultReleaseTimeout)
		defer cancel()
		if err := store.DeleteAll(cctx); err != nil {
			return res, fmt.Errorf("delete the replay's leases: %w", err)
		}
	}
	return res, nil
}

// ReplayName is the processor name of a replay: "<base>.replay-<id>", where id hashes the
// monitored container and the window as the user gave it (from and until as typed, a state
// file by its contents). The same command line therefore finds the same leases and resumes;
// another window gets another lease set. A live processor's lease ids continue with the
// account host right after its name, so they never start with a replay's prefix.
func ReplayName(base, database, container, from string, stateFile []byte, until string) string {
	h := sha256.New()
	for _, s := range []string{database, container, from, until} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	if stateFile != nil {
		h.Write(stateFile)
	}
	return base + ".replay-" + hex.EncodeToString(h.Sum(nil))[:8]
}

// StateStart is the start of the ranges of a tail state that have no continuation yet
// (beginning when there are none); they must agree, since one processor has one start
// position.
func StateStart(st *TailState, now time.Time) (StartFrom, error) {
	start := StartFrom{Kind: StartBeginning}
	seen := ""
	for _, rs := range st.Ranges {
		if rs.Continuation != "" {
			continue
		}
		if seen != "" && rs.Start != seen {
			return StartFrom{}, fmt.Errorf("ranges without a continuation start at different positions (%s, %s)", seen, rs.Start)
		}
		seen = rs.Start
		s, err := ParseStart(rs.Start, now)
		if err != nil {
			return StartFrom{}, err
		}
		start = s
	}
	return start, nil
}

// properties returns the lease properties that record the window.
func (w ReplayWindow) properties() map[string]string {
	return map[string]string{
		replayPropStart: FormatStart(w.Start),
		replayPropUntil: w.Until.UTC().Format(time.RFC3339Nano),
	}
}

// windowOfLeases reads the window back from the replay's leases.
func windowOfLeases(ls []*leases.Lease, now time.Time) (ReplayWindow, error) {
	for _, l := range ls {
		until, ok := l.Properties[replayPropUntil]
		if !ok {
			continue
		}
		end, err := time.Parse(time.RFC3339Nano, until)
		if err != nil {
			return ReplayWindow{}, fmt.Errorf("lease %s: bad %s %q: %w", l.Token, replayPropUntil, until, err)
		}
		start, err := ParseStart(l.Properties[replayPropStart], now)
		if err != nil {
			return ReplayWindow{}, fmt.Errorf("lease %s: bad %s: %w", l.Token, replayPropStart, err)
		}
		return ReplayWindow{Start: start, Until: end}, nil
	}
	return ReplayWindow{}, errors.New("the replay's leases do not record their window: run again with --fresh")
}

// replayRun is the state of one replay.
type replayRun struct {
	o      ReplayOptions
	src    Source
	store  *leases.Store
	window ReplayWindow
	h      *windowHandler
	began  time.Time

	mu     sync.Mutex
	done   map[string]bool // lease tokens whose range is done
	ranges int             // leases seen at the last probe
	splits int
}

func (r *replayRun) result(resumed bool) ReplayResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	res := ReplayResult{Window: r.window, Resumed: resumed, Ranges: r.ranges, Splits: r.splits}
	if r.h != nil {
		res.Items = r.h.items.Load()
	}
	return res
}

// prepare finds the leases of an earlier run (resumed: their window wins) or creates one lease
// per range of the window, with the window in their properties, then marks the store
// initialized so the processor does not bootstrap leases of its own.
func (r *replayRun) prepare(ctx context.Context, w ReplayWindow) (resumed bool, err error) {
	existing, err := r.store.List(ctx)
	if err != nil {
		return false, err
	}
	if len(existing) > 0 {
		// The same command line gives the same prefix, hence the same state file, if any.
		stored, err := windowOfLeases(existing, r.o.Now())
		if err != nil {
			return false, err
		}
		stored.State = w.State
		w, resumed = stored, true
	}
	r.window = w
	initialized, err := r.store.IsInitialized(ctx)
	if err != nil {
		return false, err
	}
	if initialized {
		return resumed, nil
	}
	var plan []*leases.Lease
	if w.State != nil {
		for _, rs := range w.State.Ranges {
			plan = append(plan, leases.NewDotNetV1(r.store.Prefix(), rs.Range, rs.Continuation, ""))
		}
	} else {
		parts, err := r.src.Partitions(ctx)
		if err != nil {
			return false, fmt.Errorf("list partitions: %w", err)
		}
		for _, p := range parts {
			plan = append(plan, leases.NewDotNetV0(r.store.Prefix(), p.ID, p.Range, ""))
		}
	}
	for _, l := range plan {
		if slices.ContainsFunc(existing, func(e *leases.Lease) bool { return e.Token == l.Token }) {
			continue
		}
		l.Properties = w.properties()
		if _, err := r.store.Create(ctx, l); err != nil && !errors.Is(err, leases.ErrConflict) {
			return false, fmt.Errorf("create replay lease: %w", err)
		}
	}
	if err := r.store.MarkInitialized(ctx); err != nil {
		return false, err
	}
	return resumed, nil
}

// run processes the window until every range is done (true), ctx ends (false) or the
// processor fails.
func (r *replayRun) run(ctx context.Context) (bool, error) {
	start := r.window.Start
	if start.Kind == StartNow || start.Kind == StartContinuation {
		start = StartFrom{Kind: StartBeginning}
	}
	proc, err := NewProcessor(r.src, r.store, r.h, ProcessorOptions{
		Instance:        r.o.Instance,
		AcquireInterval: r.o.AcquireInterval,
		PollInterval:    r.o.PollInterval,
		MaxItems:        r.o.MaxItems,
		StartFrom:       start,
		Logger:          r.o.Logger,
		Notify: func(e Event) {
			if e.Type == EventSplit || e.Type == EventMerge {
				r.mu.Lock()
				r.splits++
				r.mu.Unlock()
			}
		},
	})
	if err != nil {
		return false, err
	}
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	var finished bool
	g, gctx := errgroup.WithContext(pctx)
	g.Go(func() error {
		err := proc.Run(gctx)
		stop() // a processor that stopped by itself ends the watch too
		var se *StopError
		if errors.As(err, &se) {
			return fmt.Errorf("replay stopped: %w", se.Err)
		}
		return err
	})
	g.Go(func() error {
		finished = r.watch(gctx)
		if finished {
			stop()
		}
		return nil
	})
	if err := g.Wait(); err != nil {
		return false, err
	}
	return finished, nil
}

// watch probes the ranges that are not done yet every probe interval and reports progress; it
// returns true once every range is done, false when ctx ends first.
func (r *replayRun) watch(ctx context.Context) bool {
	t := time.NewTicker(r.o.ProbeInterval)
	defer t.Stop()
	for {
		if r.probe(ctx) {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
}

// probe checks every lease not known to be done; it reports whether all are.
func (r *replayRun) probe(ctx context.Context) bool {
	ls, err := r.store.List(ctx)
	if err != nil || len(ls) == 0 {
		if err != nil && ctx.Err() == nil {
			r.o.Logger.Warn("list replay leases", "err", err)
		}
		return false
	}
	parts, err := r.src.Partitions(ctx)
	if err != nil {
		if ctx.Err() == nil {
			r.o.Logger.Warn("list partitions", "err", err)
		}
		return false
	}
	r.mu.Lock()
	r.ranges = len(ls)
	r.mu.Unlock()
	done := 0
	for _, l := range ls {
		r.mu.Lock()
		known := r.done[l.Token]
		r.mu.Unlock()
		if !known {
			known = r.leaseDone(ctx, parts, l)
		}
		if known {
			done++
			r.mu.Lock()
			r.done[l.Token] = true
			r.mu.Unlock()
		}
	}
	if r.o.Progress != nil {
		r.o.Progress(ReplayProgress{Done: done, Ranges: len(ls), Items: r.h.items.Load(), Covered: r.covered(ls)})
	}
	return done == len(ls)
}

// covered is ReplayProgress.Covered for the leases ls.
func (r *replayRun) covered(ls []*leases.Lease) time.Time {
	var covered time.Time
	for i, l := range ls {
		r.mu.Lock()
		done := r.done[l.Token]
		r.mu.Unlock()
		t := windowClosed(r.window.Until)
		if !done {
			t = r.h.reachedAt(l.Token)
		}
		if t.IsZero() {
			if r.window.Start.Kind != StartTime {
				return time.Time{}
			}
			t = r.window.Start.Time
		}
		if i == 0 || t.Before(covered) {
			covered = t
		}
	}
	return covered
}

// leaseDone probes one lease from the furthest position the replay knows for it.
func (r *replayRun) leaseDone(ctx context.Context, parts []Partition, l *leases.Lease) bool {
	acked, _ := r.h.position(l.Token)
	pos := r.window.Start
	switch {
	case acked != "":
		pos = StartFrom{Kind: StartContinuation, Continuation: acked}
	case l.Continuation != "":
		pos = StartFrom{Kind: StartContinuation, Continuation: l.Continuation}
	case pos.Kind == StartNow || pos.Kind == StartContinuation:
		pos = StartFrom{Kind: StartBeginning}
	}
	done, err := rangeDone(ctx, r.src, parts, l, pos, r.window.Until, r.o.Now)
	if err != nil && ctx.Err() == nil {
		r.o.Logger.Debug("probe replay lease", "lease", l.Token, "err", err)
	}
	return done
}

// itemTime returns a change's _ts (zero when it has none).
func itemTime(raw json.RawMessage) time.Time {
	_, ts := changeMeta(raw)
	return ts
}

// afterWindow reports whether a change stamped ts lies at or after the window's end, in the
// whole seconds of _ts (see ReplayWindow).
func afterWindow(ts, until time.Time) bool {
	return !ts.IsZero() && ts.Unix() >= until.Unix()
}

// windowClosed is the first moment at which no new change can be stamped inside the window.
func windowClosed(until time.Time) time.Time {
	return until.Truncate(time.Second)
}

// inWindow returns the leading items of a page that lie inside the window and whether the page
// reached its end. Within a range the feed is in LSN order and _ts never goes back, so
// everything after the first change past the end is past it too.
func inWindow(items []json.RawMessage, until time.Time) ([]json.RawMessage, bool) {
	for i, it := range items {
		if afterWindow(itemTime(it), until) {
			return items[:i], true
		}
	}
	return items, false
}

// windowHandler hands the delegate only the changes inside the window and records, per lease,
// the position the delegate acknowledged (so the end probe need not wait for a deferred
// checkpoint). It forwards OpenLease and CloseLease.
type windowHandler struct {
	next  Handler
	until time.Time

	items atomic.Int64

	mu      sync.Mutex
	acked   map[string]string    // lease token -> continuation acknowledged by the delegate
	ended   map[string]bool      // lease tokens whose range reached past the window
	reached map[string]time.Time // lease token -> _ts of the last change delivered
}

var _ LeaseHandler = (*windowHandler)(nil)

func newWindowHandler(next Handler, until time.Time) *windowHandler {
	return &windowHandler{next: next, until: until, acked: map[string]string{}, ended: map[string]bool{}, reached: map[string]time.Time{}}
}

// Handle delivers the batch's changes up to the window's end. A batch wholly past the end is
// acknowledged without reaching the delegate.
func (h *windowHandler) Handle(ctx context.Context, b Batch) error {
	in, past := inWindow(b.Items, h.until)
	if len(in) == 0 {
		h.ack(b.LeaseToken, b.Continuation, past)
		return nil
	}
	b.Items = in
	err := h.next.Handle(ctx, b)
	if err == nil || errors.Is(err, ErrNoCheckpoint) {
		h.items.Add(int64(len(in)))
		h.ack(b.LeaseToken, b.Continuation, past)
		if ts := itemTime(in[len(in)-1]); !ts.IsZero() {
			h.mu.Lock()
			h.reached[b.LeaseToken] = ts
			h.mu.Unlock()
		}
	}
	return err
}

// reachedAt returns the _ts of the last change delivered for a lease (zero if none).
func (h *windowHandler) reachedAt(token string) time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.reached[token]
}

func (h *windowHandler) ack(token, continuation string, past bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if continuation != "" {
		h.acked[token] = continuation
	}
	if past {
		h.ended[token] = true
	}
}

// position returns the continuation acknowledged for a lease ("" if none) and whether its
// range already reached past the window.
func (h *windowHandler) position(token string) (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.acked[token], h.ended[token]
}

// OpenLease forwards to the delegate when it is a LeaseHandler.
func (h *windowHandler) OpenLease(ctx context.Context, l LeaseInfo) error {
	if lh, ok := h.next.(LeaseHandler); ok {
		return lh.OpenLease(ctx, l)
	}
	return nil
}

// CloseLease forwards to the delegate when it is a LeaseHandler.
func (h *windowHandler) CloseLease(ctx context.Context, l LeaseInfo, reason CloseReason) error {
	if lh, ok := h.next.(LeaseHandler); ok {
		return lh.CloseLease(ctx, l, reason)
	}
	return nil
}

// rangeDone reports whether lease l has nothing left inside the window when read from pos:
// the first change after pos is past the window's end, or there is none and the read began
// after the window closed. A lease whose range is gone or spans several partitions is not done:
// the processor splits it first.
func rangeDone(ctx context.Context, src Source, parts []Partition, l *leases.Lease, pos StartFrom, until time.Time, now func() time.Time) (bool, error) {
	rt, err := Route(l, parts)
	if err != nil {
		return false, nil
	}
	req := rt.Request()
	req.MaxItems, req.Start = 1, pos
	began := now()
	page, err := NewReader(src, req, ReaderOptions{Poll: -1, MaxThrottleRetries: 2}).Next(ctx)
	switch {
	case IsRangeGone(err):
		return false, nil
	case err != nil:
		return false, err
	case len(page.Items) > 0:
		return afterWindow(itemTime(page.Items[0]), until), nil
	}
	return !began.Before(windowClosed(until)), nil
}
