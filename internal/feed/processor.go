package feed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/cfp-dev/cfp/internal/leases"
)

// Processor defaults: the .NET change feed processor's (docs/protocol-leases.md, "Timestamps and expiry"), and cfp's own
// shutdown bounds.
const (
	DefaultAcquireInterval = leases.DefaultAcquireInterval // 13s
	DefaultRenewInterval   = leases.DefaultRenewInterval   // 17s
	DefaultExpiration      = leases.DefaultExpiration      // 60s
	DefaultPollInterval    = DefaultPoll                   // 5s
	DefaultShutdownTimeout = 30 * time.Second
	DefaultReleaseTimeout  = 10 * time.Second
	DefaultErrorBackoff    = time.Second
	DefaultMaxErrorBackoff = 30 * time.Second
	// bootstrapWait is .NET's sleep between attempts to take the bootstrap lock.
	bootstrapWait = 15 * time.Second
)

// ProcessorOptions configures a Processor. Zero fields take the documented defaults, applied by
// NewProcessor (see WithDefaults). TailOptions, EstimateOptions and ReaderOptions have the same
// shape: WithDefaults returns a copy with the defaults applied, Validate checks the options.
type ProcessorOptions struct {
	// Instance is this host's name, written as the Owner of the leases it holds (required).
	Instance string
	// AcquireInterval is the balancing period (default 13s).
	AcquireInterval time.Duration
	// RenewInterval is the period of lease renewals (default 17s). A lease is written again
	// only once its last write (a renew or a checkpoint) is KeepAlive old: the renewer looks
	// every quarter interval and skips the leases written since.
	RenewInterval time.Duration
	// CheckpointInterval is the least time between two writes of one lease for a checkpoint
	// (default 0: a checkpoint after every batch, as .NET). A batch's continuation waits until
	// the lease's last write is that old, and is written at once when the lease is released,
	// handed off or the processor stops; a crash may deliver the batches since the last
	// written checkpoint again (at least once), and the lag the estimator reads from the lease
	// lags up to that long. A waiting continuation rides on the renewer's next write, so with
	// an interval of at least KeepAlive a lease is written once per keep-alive, busy or idle.
	CheckpointInterval time.Duration
	// Expiration is how long a lease stays owned without a write (default 60s).
	Expiration time.Duration
	// PollInterval is the wait after an empty page (default 5s).
	PollInterval time.Duration
	// MaxItems bounds a batch (0: the service default).
	MaxItems int
	// ReuseItems says the handler keeps nothing of a batch's Items once Handle returns (it
	// copies what it keeps, as cfp's delegates do): the source may then reuse a page's memory
	// for a later page (ReadRequest.Reuse; the worker releases the page after Handle). Default
	// false: a handler may keep its items.
	ReuseItems bool
	// StartFrom is where leases without a continuation start (default: now). Leases with a
	// continuation always resume from it. An AllVersionsAndDeletes processor starts from now
	// only, as .NET's all-versions-and-deletes processor does (docs/protocol-leases.md, "Modes").
	StartFrom StartFrom
	// Mode is the change feed mode: LatestVersion (default) reads the latest version of each
	// changed item, AllVersionsAndDeletes every create, replace and delete. New leases are
	// written with its lease-document name (leases.ModeIncremental or leases.ModeFullFidelity),
	// and a processor refuses leases written in the other mode (a *ModeMismatchError), as .NET
	// does.
	Mode FeedMode
	// LeaseFormat is the format of the leases a bootstrap creates (default: .NET's in a new
	// lease set, an existing set's own otherwise); an explicit format that the existing leases
	// contradict is refused with a *LeaseFormatError. See LeaseFormat.
	LeaseFormat LeaseFormat
	// Now is the clock for lease expiry (default time.Now).
	Now func() time.Time
	// LeaseRand, when set, returns the source of numbers in [0, 1) of the worker of one lease
	// (by token), for the jitter of its throttled reads' backoff (ReaderOptions.Rand; default
	// math/rand/v2's). A simulation gives each worker a seeded one of its own to replay
	// exactly: one source shared by the workers would hand its numbers out in the order the
	// scheduler runs them.
	LeaseRand func(token string) func() float64
	// ForeignRenewInterval is the renew interval assumed of hosts that are not cfp until one is
	// observed (default 17s, the SDKs' default; processor_mixedkeep.go).
	ForeignRenewInterval time.Duration
	// Logger receives the processor's logs (default: discard). Repeated errors are
	// rate-limited.
	Logger *slog.Logger
	// Notify, when set, is called for every lifecycle event, synchronously and from several
	// goroutines: it must be quick and safe for concurrent use.
	Notify func(Event)
	// ShutdownTimeout bounds how long a batch in flight may run after Run's context ended
	// (default 30s); its handler's context is cancelled then.
	ShutdownTimeout time.Duration
	// ReleaseTimeout is the fresh deadline of the final checkpoints and releases after
	// shutdown (default 10s).
	ReleaseTimeout time.Duration
	// ErrorBackoff is the first wait after a failed read, handler or lease operation; it
	// doubles per consecutive failure up to MaxErrorBackoff (defaults 1s and 30s).
	ErrorBackoff, MaxErrorBackoff time.Duration
	// OnAcquireCycle, when set, is called at the end of every acquire cycle that was not cut
	// off by shutdown, with nil when the cycle listed the leases, the listing's error (the
	// lease store did not answer), or a *ReadsFailingError when the leases listed but the
	// reads of leases this host holds fail permanently (see IsPermanent). It is called from
	// the balancing goroutine and must be quick. Health checks use it: the first call says the
	// host finished its first cycle.
	OnAcquireCycle func(err error)
	// StuckThreshold is how long a batch may stay in the handler before the host records on
	// the lease that it is in flight (a leases.Failure with InFlightSince, see
	// recordInFlight) and reports an error event; it also spaces the rewrites of a lease's
	// failure record (default DefaultStuckThreshold, the default of `cfp estimate
	// --stuck-threshold`).
	StuckThreshold time.Duration
	// Redact masks secrets in what the host writes into a lease's failure record (an
	// error, a command's stderr); default: leaves the text as it is.
	Redact func(string) string
}

// WithDefaults returns o with every zero field set to its default.
func (o ProcessorOptions) WithDefaults() ProcessorOptions {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&o.AcquireInterval, DefaultAcquireInterval)
	def(&o.RenewInterval, DefaultRenewInterval)
	def(&o.Expiration, DefaultExpiration)
	def(&o.PollInterval, DefaultPollInterval)
	def(&o.ShutdownTimeout, DefaultShutdownTimeout)
	def(&o.ReleaseTimeout, DefaultReleaseTimeout)
	def(&o.ErrorBackoff, DefaultErrorBackoff)
	def(&o.MaxErrorBackoff, DefaultMaxErrorBackoff)
	def(&o.StuckThreshold, DefaultStuckThreshold)
	def(&o.ForeignRenewInterval, foreignDefaultRenew)
	if o.Redact == nil {
		o.Redact = func(s string) string { return s }
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Notify == nil {
		o.Notify = func(Event) {}
	}
	return o
}

// KeepAlive is how old a lease's last write may get before the renewer writes it again: one
// renew interval short of the expiration, at most three quarters of it, and a second and a
// quarter interval short of it (the write's own latency and the host's scheduling): 43s with
// the defaults, a write every 43-47s instead of every 17s. When that is less than a renew
// interval (an expiration of a few seconds, as in tests and demos) it is one renew interval,
// as .NET, or 0 (every look) when the renew interval is close to the expiration. The renewer
// looks every quarter renew interval, so a healthy lease is never older than KeepAlive plus
// a quarter interval, and a failed write is retried at least twice before the lease could
// look expired to another host (.NET's or cfp's: every host compares the lease's timestamp
// with the expiration); a checkpoint counts as a write.
func (o ProcessorOptions) KeepAlive() time.Duration {
	o = o.WithDefaults()
	k := min(o.Expiration-o.RenewInterval, 3*o.Expiration/4, o.Expiration-o.RenewInterval/4-keepAliveSlack)
	switch {
	case k >= o.RenewInterval:
		return k
	case o.RenewInterval+o.RenewInterval/4 < o.Expiration:
		return o.RenewInterval // a short expiration: every renew interval, as .NET
	}
	return 0 // a renew interval close to the expiration: every look
}

// keepAliveSlack is the least time KeepAlive leaves before the expiration.
const keepAliveSlack = time.Second

// Validate checks the options; zero fields stand for their defaults (see WithDefaults).
func (o ProcessorOptions) Validate() error {
	o = o.WithDefaults()
	var errs []error
	if strings.TrimSpace(o.Instance) == "" {
		errs = append(errs, errors.New("an instance name is required"))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"acquire interval", o.AcquireInterval}, {"renew interval", o.RenewInterval},
		{"lease expiration", o.Expiration}, {"poll interval", o.PollInterval},
		{"shutdown timeout", o.ShutdownTimeout}, {"release timeout", o.ReleaseTimeout},
		{"error backoff", o.ErrorBackoff}, {"max error backoff", o.MaxErrorBackoff},
		{"stuck threshold", o.StuckThreshold},
	} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %s", d.name, d.v))
		}
	}
	if o.RenewInterval > 0 && o.Expiration > 0 && o.RenewInterval >= o.Expiration {
		errs = append(errs, fmt.Errorf("renew interval %s must be shorter than the lease expiration %s", o.RenewInterval, o.Expiration))
	}
	if o.CheckpointInterval < 0 {
		errs = append(errs, fmt.Errorf("checkpoint interval must not be negative, got %s", o.CheckpointInterval))
	}
	if o.MaxItems < 0 {
		errs = append(errs, fmt.Errorf("max items must not be negative, got %d", o.MaxItems))
	}
	if o.Mode != LatestVersion && o.Mode != AllVersionsAndDeletes {
		errs = append(errs, fmt.Errorf("unknown change feed mode %d", o.Mode))
	}
	if o.StartFrom.Kind == StartContinuation {
		errs = append(errs, errors.New("a processor starts leases from now, the beginning or a time, not from a continuation"))
	} else if o.Mode == AllVersionsAndDeletes && o.StartFrom.Kind != StartNow {
		errs = append(errs, fmt.Errorf("an all-versions-and-deletes processor starts leases from now only, not from %s", FormatStart(o.StartFrom)))
	}
	if len(errs) > 0 {
		return fmt.Errorf("processor options: %w", errors.Join(errs...))
	}
	return nil
}

// ModeMismatchError is returned by Bootstrap (and Run) when the lease store holds a lease
// written in another change feed mode than the processor's: .NET refuses to switch a lease
// set's mode ("Switching ChangeFeedMode ... is not allowed", docs/protocol-leases.md, "Modes").
type ModeMismatchError struct {
	// Lease is the token of the first lease found in the other mode.
	Lease string
	// LeaseMode and ProcessorMode are .NET's mode names (leases.ModeIncremental or
	// leases.ModeFullFidelity); LeaseMode is the lease's own Mode when Refused.
	LeaseMode, ProcessorMode string
	// Refused is true when the lease's Mode is no mode .NET knows ("IncrementalFeed",
	// "LatestVersion", ""): .NET refuses to start on it whatever its own mode.
	Refused bool
}

func (e *ModeMismatchError) Error() string {
	return fmt.Sprintf("switching ChangeFeedMode %s to %s is not allowed (lease %s)", e.LeaseMode, e.ProcessorMode, e.Lease)
}

// ErrModeMismatch matches every *ModeMismatchError with errors.Is.
var ErrModeMismatch = errors.New("lease mode mismatch")

// Is reports whether target is ErrModeMismatch.
func (e *ModeMismatchError) Is(target error) bool { return target == ErrModeMismatch }

// Processor is a change feed processor host, interoperable with .NET v3 hosts that share its
// lease prefix: it bootstraps the lease store, balances leases with the other hosts, renews
// the leases it holds and runs one worker per lease that reads the lease's range, hands each
// non-empty page to the Handler and checkpoints it afterwards (at least once).
//
// Goroutines (each has an owner that waits for it):
//
//   - Bootstrap's lease creators: an errgroup of at most 25, started and joined (g.Wait) by
//     bootstrap.
//   - The balancing goroutine (balanceLoop: acquire cycles, planCycle then runCycle) and the
//     renew goroutine (renewLoop, then renewWhileStopping): started by Run in its errgroup,
//     joined by Run's g.Wait.
//   - One worker per lease (work): started by startLocked in the same errgroup (p.group, under
//     mu), so joined by Run's g.Wait too; Run returns after every worker closed its lease. A
//     lease lost and taken again while its old worker winds down has two for that time: the
//     new one waits for the old one's end (awaitPrevious) before it reads.
//   - A worker's read ahead (readNextAhead): started by the worker, joined by the worker
//     (next takes its page, dropAhead cancels and waits; loop defers dropAhead).
//   - Renewals and looks in flight: at most renewParallel, started by renewLoop (spawn),
//     joined by its deferred inFlight.Wait before renewWhileStopping runs.
//   - Timer callbacks of a worker: the fence (fence, stopped by work's deferred stopFence),
//     the shutdown grace timer and the context.AfterFunc that arms it (stopped in work's
//     defer), the stuck-batch watch (watchInFlight: its stop waits for a record being
//     written).
//
// Locks, what they guard, and their order (a lock is only taken before those after it):
//
//   - handoffs.mu (p.ho): requests made, handoffs given, the fair share and the hosts'
//     holdings of the last cycle. Taken before Processor.mu: accept decides under it and
//     counts the held leases (holding) inside.
//   - Processor.bootMu: boot (Bootstrap runs once); held across bootstrap, which takes mu
//     (through holding) after it.
//   - Processor.mu: owned, failing, deleted, group and run. No other lock of the processor is
//     taken under it but ownedLease.mu, and no store or source call is made under it
//     (startLocked releases a lease acquired during shutdown after letting it go).
//   - foreignView.rebuffMu (p.others): rebuffs and stolen. A leaf.
//   - The fence's mu (one per worker): its timer and done. Taken before ownedLease.mu
//     (expire, ol.lose, reads onLost).
//   - ownedLease.mu: the lease as last written, confirmed, looked, onLost, graceOver and the
//     carried continuation. A leaf, also taken under Processor.mu (startLocked asks whether
//     the worker registered for a lease still holds it).
//   - work's graceMu: the grace timer. A leaf.
//   - rateLog.mu (p.limit): the rate-limited log's state. A leaf.
//
// calm and the rest of foreignView belong to the balancing goroutine alone (foreignView.keep
// is an atomic the renewer reads); listings is an atomic.
type Processor struct {
	src   Source
	store *leases.Store
	h     Handler
	lh    LeaseHandler // h, when it keeps per-lease state
	opts  ProcessorOptions
	log   *slog.Logger
	limit *rateLog

	bootMu sync.Mutex
	boot   *BootstrapResult

	// splitTurn lets one worker at a time handle its lease's split or merge (see worker.split);
	// taken before mu.
	splitTurn chan struct{}

	ho     *handoffs   // taken before mu (see handoffs)
	calm   calm        // the balancing goroutine's own (see quietCycle)
	others foreignView // the balancing goroutine's, but keep (see observeTimings)

	mu    sync.Mutex             // guards owned, failing, children, group and run
	owned map[string]*ownedLease // by token
	// failing holds the last permanent read failure of each lease whose reads fail (see
	// readFailed), by token.
	failing map[string]error
	// workerEnded gets a value (when it has room) each time a worker ended.
	workerEnded chan struct{}
	group       *errgroup.Group
	run         context.Context // the group's context: ends at shutdown

	listings atomic.Uint64 // lease listings started (see ownedLease.listing)

	// incarnation and since tell this process's presence record from another process's under
	// the same instance name (see processor_instance.go); abort ends Run with its cause.
	incarnation string
	since       time.Time
	abort       context.CancelCauseFunc
	// deleted are the leases found deleted since the last acquire cycle (see processor_deleted.go),
	// guarded by mu.
	deleted []LeaseInfo
	// children counts, by token, the child leases that unfinished splits of this host's
	// workers hold (worker.holdChild): in this host's name without a worker of their own, and
	// not to be taken back by an acquire cycle (see planCycle). Guarded by mu.
	children map[string]int
}

// BootstrapResult says what Bootstrap found.
type BootstrapResult struct {
	// Existed is true when the lease store was already initialized or held leases: StartFrom
	// then applies only to leases without a continuation.
	Existed bool
	// Created is how many leases this host created.
	Created int
}

// NewProcessor returns a processor over src whose leases live in store. Zero option fields take
// their defaults.
func NewProcessor(src Source, store *leases.Store, h Handler, opts ProcessorOptions) (*Processor, error) {
	if src == nil || store == nil || h == nil {
		return nil, errors.New("new processor: source, lease store and handler are required")
	}
	opts = opts.WithDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	p := &Processor{
		src: src, store: store, h: h, opts: opts,
		log:   opts.Logger.With("owner", opts.Instance),
		owned: map[string]*ownedLease{}, failing: map[string]error{}, children: map[string]int{}, workerEnded: make(chan struct{}, 1),
		splitTurn: make(chan struct{}, 1),
		ho:        newHandoffs(), incarnation: newIncarnation(), abort: func(error) {},
	}
	p.limit = newRateLog(p.log, opts.Now, DefaultMaxErrorBackoff)
	p.lh, _ = h.(LeaseHandler)
	p.others.keep.Store(int64(opts.KeepAlive()))
	return p, nil
}

// Options returns the processor's options, defaults applied.
func (p *Processor) Options() ProcessorOptions { return p.opts }

// Owned returns the tokens of the leases this host holds now: those it processes, and those
// whose worker stops (a shutdown or a handoff) and still renews them until it released them.
// A lease leaves it as soon as this host learns the lease is no longer its own (a write
// refused, a listing that shows another owner, or no write for the expiration), even while
// the lease's worker is still inside a handler or a source call that does not return at once:
// that worker delivers and writes nothing more.
func (p *Processor) Owned() []string {
	p.mu.Lock()
	owned := make([]*ownedLease, 0, len(p.owned))
	for _, ol := range p.owned {
		owned = append(owned, ol)
	}
	p.mu.Unlock()
	out := make([]string, 0, len(owned))
	for _, ol := range owned {
		if ol.held() {
			out = append(out, ol.token)
		}
	}
	return out
}

// Run bootstraps the lease store (unless Bootstrap ran), then balances, renews and processes
// leases until ctx ends or the handler returns a Stop error. It returns only after every worker
// stopped, the last checkpoints were written and every lease it held was released, under a
// fresh deadline (ReleaseTimeout), so that other hosts take them over at their next cycle. A
// shutdown caused by ctx returns nil.
func (p *Processor) Run(ctx context.Context) error {
	if _, err := p.Bootstrap(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	actx, abort := context.WithCancelCause(ctx)
	defer abort(nil)
	g, gctx := errgroup.WithContext(actx)
	p.mu.Lock()
	if p.group != nil {
		p.mu.Unlock()
		return errors.New("processor is already running")
	}
	p.group, p.run, p.abort = g, gctx, abort
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.group, p.run = nil, nil
		p.mu.Unlock()
	}()

	g.Go(func() error { p.balanceLoop(gctx); return nil })
	g.Go(func() error { p.renewLoop(gctx); return nil })
	err := g.Wait()
	var dup *DuplicateInstanceError
	if errors.As(context.Cause(actx), &dup) && ctx.Err() == nil {
		return dup
	}
	var setGone *LeaseSetDeletedError
	if errors.As(context.Cause(actx), &setGone) && ctx.Err() == nil {
		return setGone
	}
	var gone *MonitoredGoneError
	if errors.As(err, &gone) {
		return err
	}
	var stop *StopError
	if errors.As(err, &stop) {
		return err
	}
	if err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

// Bootstrap initializes the lease store if needed, as .NET's bootstrapper does (docs/protocol-leases.md, "Bootstrap"):
// when the .info marker is missing, the host holding the .lock marker creates one .NET v0
// lease per physical partition that no lease covers yet, then writes .info; the others wait
// for it. It also refuses leases written in another mode. Run calls it; call it first to learn
// whether leases already existed. It runs once per Processor.
//
// Bootstrap first writes this host's presence record (see leases.Host), so that the hosts
// already running, and the one that creates the leases, count it from their next cycle; Run
// refreshes it every cycle and deletes it when it returns, and so does a failed Bootstrap. A
// Bootstrap not followed by Run leaves it to expire like a lease.
func (p *Processor) Bootstrap(ctx context.Context) (BootstrapResult, error) {
	p.bootMu.Lock()
	defer p.bootMu.Unlock()
	if p.boot != nil {
		return *p.boot, nil
	}
	p.since = p.opts.Now()
	if err := p.claimName(ctx); err != nil {
		return BootstrapResult{}, err
	}
	p.announce(ctx)
	res, err := p.bootstrap(ctx)
	if err != nil {
		p.withdraw(ctx)
		return BootstrapResult{}, err
	}
	p.boot = &res
	return res, nil
}

func (p *Processor) bootstrap(ctx context.Context) (BootstrapResult, error) {
	wait := min(bootstrapWait, p.opts.AcquireInterval)
	for {
		ok, err := p.store.IsInitialized(ctx)
		if err != nil {
			return BootstrapResult{}, fmt.Errorf("bootstrap: %w", err)
		}
		if ok {
			existing, err := p.store.ListAll(ctx)
			if err != nil {
				return BootstrapResult{}, fmt.Errorf("bootstrap: %w", err)
			}
			p.reportUnreadable(ctx, existing)
			if err := p.checkFormat(existing); err != nil {
				return BootstrapResult{Existed: true}, err
			}
			return BootstrapResult{Existed: true}, p.checkMode(existing)
		}
		locked, holder, err := p.store.TryLock(ctx, leases.DefaultLockTTL, p.opts.Instance)
		if err != nil {
			return BootstrapResult{}, fmt.Errorf("bootstrap: %w", err)
		}
		if locked {
			return p.createMissing(ctx)
		}
		p.logLockWait(holder, wait)
		if err := sleepCtx(ctx, wait); err != nil {
			return BootstrapResult{}, err
		}
	}
}

// logLockWait says whose bootstrap lock this host waits on and since when. cfp never deletes
// a lock it did not write, as .NET and Java never do: the holder may still be creating leases,
// and its start fails if .info appears meanwhile. A lock younger than its ttl is an ordinary
// concurrent start (logged at Info); one past its ttl, which only a lease container without
// time to live keeps, is a warning, since it never expires by itself. Repeats are rate-limited.
func (p *Processor) logLockWait(h *leases.LockHolder, wait time.Duration) {
	if h != nil && *h == (leases.LockHolder{}) {
		return // the lock was gone when its holder was read: released, no one to wait on
	}
	holder := "another host (the lock names no owner: a .NET or Java processor)"
	if h != nil && h.Owner != "" {
		holder = "cfp host " + h.Owner
	}
	attrs := []any{"lock", leases.LockID(p.store.Prefix()), "holder", holder, "retry", wait}
	level := slog.LevelInfo
	if h != nil && !h.Since.IsZero() {
		age := p.opts.Now().Sub(h.Since)
		attrs = append(attrs, "since", h.Since.UTC().Format(time.RFC3339), "age", age.Round(time.Second))
		ttl := h.TTL
		if ttl <= 0 {
			ttl = leases.DefaultLockTTL
		}
		if age > ttl {
			level = slog.LevelWarn
			attrs = append(attrs, "ttl", ttl, "hint", "the lease container keeps the lock past its ttl (no time to live); if no host is bootstrapping, remove it with cfp leases delete --lock")
		}
	}
	// A .NET or Java host's lock (it names no owner) is worth a warning even when young.
	if h == nil || h.Owner == "" {
		level = slog.LevelWarn
	}
	p.limit.logAt(context.Background(), level, limitKey("bootstrap lock", level.String()), "waiting for the bootstrap lock; another host is initializing the lease store", attrs...)
}

// createMissing runs under the bootstrap lock: one v0 lease per partition not yet covered,
// then the .info marker, then the lock is removed.
func (p *Processor) createMissing(ctx context.Context) (res BootstrapResult, err error) {
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.opts.ReleaseTimeout)
		defer cancel()
		if uerr := p.store.Unlock(uctx); uerr != nil && err == nil {
			err = fmt.Errorf("bootstrap: %w", uerr)
		}
	}()
	existing, err := p.store.ListAll(ctx)
	if err != nil {
		return res, fmt.Errorf("bootstrap: %w", err)
	}
	p.reportUnreadable(ctx, existing)
	if err := p.checkFormat(existing); err != nil {
		return res, err
	}
	if err := p.checkMode(existing); err != nil {
		return res, err
	}
	res.Existed = len(existing) > 0
	format := p.newLeaseFormat(existing)
	parts, err := p.src.Partitions(ctx)
	if err != nil {
		return res, fmt.Errorf("bootstrap: list partitions: %w", err)
	}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(25) // .NET's DefaultDegreeOfParallelism
	for _, part := range parts {
		if covered(existing, part) {
			continue
		}
		g.Go(func() error {
			_, err := p.store.Create(gctx, p.newLease(format, part))
			if errors.Is(err, leases.ErrConflict) {
				return nil // another host created it
			}
			if err != nil {
				return err
			}
			mu.Lock()
			res.Created++
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return res, fmt.Errorf("bootstrap: %w", err)
	}
	if err := p.store.MarkInitialized(ctx); err != nil {
		return res, fmt.Errorf("bootstrap: %w", err)
	}
	p.log.Info("lease store initialized", "created", res.Created, "partitions", len(parts))
	// Keep the lock a moment after .info: a .NET or Java host that read .info just before it
	// was written tries the lock next, and does not read .info again once it holds it: it
	// would create .info too, and its start fails on the 409. Finding the lock taken, it waits
	// and then finds the lease set initialized. (A cancelled wait only removes it sooner.)
	_ = sleepCtx(ctx, min(p.opts.AcquireInterval, lockLinger))
	return res, nil
}

// lockLinger bounds how long a bootstrap keeps the lock after writing .info (an acquire
// interval when shorter): far longer than a request's round trip, the gap it covers, and short
// enough not to slow the first start of a lease set.
const lockLinger = time.Second

// UnreadableLeaseError reports a lease whose continuation cfp cannot decode (a Java state of a
// version it does not know): the processor never acquires it, so its range is not processed by
// cfp hosts.
type UnreadableLeaseError struct {
	Lease string
	Err   error
}

func (e *UnreadableLeaseError) Error() string {
	return fmt.Sprintf("lease %s is not processed: its continuation cannot be decoded: %v", e.Lease, e.Err)
}

func (e *UnreadableLeaseError) Unwrap() error { return e.Err }

// reportUnreadable tells, with an error event and a warning, about each lease whose
// continuation cannot be decoded: the store's List leaves them out, so the balancer never takes
// them, and this is where a user learns why a range is not processed.
func (p *Processor) reportUnreadable(ctx context.Context, ls []*leases.Lease) {
	for _, l := range ls {
		if l.StateError != nil {
			p.infraError(ctx, "read lease", l.Token, &UnreadableLeaseError{Lease: l.Token, Err: l.StateError})
		}
	}
}

// covered is .NET's test for an existing lease of a partition: a PK-range lease named after
// it, or an EPK lease sharing its min or max.
func covered(existing []*leases.Lease, part Partition) bool {
	for _, l := range existing {
		if l.NamesPartition() {
			if l.Token == part.ID {
				return true
			}
			continue
		}
		if l.HasRange() && (leases.CompareEPK(l.Range.Min, part.Range.Min) == 0 || leases.CompareEPK(l.Range.Max, part.Range.Max) == 0) {
			return true
		}
	}
	return false
}

// checkMode refuses leases of another change feed mode (missing Mode = incremental). .NET
// checks the first lease only; cfp checks them all, so that a mixed set is refused too.
func (p *Processor) checkMode(ls []*leases.Lease) error {
	want := p.opts.Mode.leaseMode()
	for _, l := range ls {
		if m, refused := l.RefusedMode(); refused {
			return &ModeMismatchError{Lease: l.Token, LeaseMode: m, ProcessorMode: want, Refused: true}
		}
	}
	for _, l := range ls {
		if l.Family == leases.FamilyJavaEPK && l.JavaState() == nil {
			continue // Java's bootstrapper writes no mode: a null continuation has none yet
		}
		if mode := leases.DotNetMode(l.Mode); mode != want {
			return &ModeMismatchError{Lease: l.Token, LeaseMode: mode, ProcessorMode: want}
		}
	}
	return nil
}

// notify stamps and sends an event.
func (p *Processor) notify(e Event) {
	e.Time = p.opts.Now()
	e.Owner = p.opts.Instance
	p.opts.Notify(e)
}

// backoff returns the wait after n consecutive failures (n >= 1).
func (p *Processor) backoff(n int) time.Duration {
	return Backoff{Min: p.opts.ErrorBackoff, Max: p.opts.MaxErrorBackoff}.Wait(n)
}

// fresh returns a context for final writes after shutdown: not cancelled with ctx, bounded by
// ReleaseTimeout.
func (p *Processor) fresh(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), p.opts.ReleaseTimeout)
}
