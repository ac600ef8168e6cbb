package changefeed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/leases"
)

// Processor is one change feed processor host. Create it with NewProcessor and call Run.
type Processor struct {
	e     *engine
	h     Handler
	hooks hooks
	opts  feed.ProcessorOptions // without StartFrom, which Run anchors

	mu      sync.Mutex
	running bool
	// run is the engine's processor of the coming or current Run, from Bootstrap (or Run) on
	// until Run returns.
	run *engineRun
}

// engineRun is one run of the engine's processor: its lease set and the anchored options.
type engineRun struct {
	proc  *feed.Processor
	store *leases.Store
	opts  feed.ProcessorOptions
}

// NewProcessor checks cfg and returns a processor that hands batches to h. It does no I/O: Run
// reads the containers.
func NewProcessor(cfg Config, h Handler) (*Processor, error) {
	if h == nil {
		return nil, errors.New("changefeed: a Handler is required")
	}
	e, err := newEngine(cfg)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(cfg.Instance) == "" {
		return nil, errors.New("changefeed: an Instance name is required")
	}
	opts := cfg.processorOptions(e.log)
	hk := newHooks(cfg)
	hk.options(&opts)
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("changefeed: %w", err)
	}
	return &Processor{e: e, h: h, hooks: hk, opts: opts}, nil
}

// Bootstrap opens the containers and initializes the lease set on first use (one lease per
// partition, as .NET does), as Run does first; call it before Run to learn whether the lease set
// existed (then StartFrom applies only to leases without a continuation) before any lease is
// processed. It writes this host's presence record, so call Run next; a Bootstrap not followed
// by Run leaves that record to expire. Errors: those of Run's start (ErrNotFound,
// ErrModeMismatch, a *DuplicateInstanceError, ...).
func (p *Processor) Bootstrap(ctx context.Context) (BootstrapResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running {
		return BootstrapResult{}, errors.New("changefeed: the processor is already running")
	}
	ctx = p.hooks.context(ctx)
	r, err := p.prepare(ctx)
	if err != nil {
		return BootstrapResult{}, err
	}
	return r.proc.Bootstrap(ctx)
}

// prepare opens the lease set and builds the engine's processor of the next run, once; p.mu
// is held.
func (p *Processor) prepare(ctx context.Context) (*engineRun, error) {
	if p.run != nil {
		return p.run, nil
	}
	opts := p.opts
	now := time.Now
	if p.e.cfg.Now != nil {
		now = p.e.cfg.Now
	}
	// "now" is this host's start, as in .NET and `cfp process` (see feed.AnchorNow).
	opts.StartFrom = feed.AnchorNow(opts.StartFrom, opts.Mode, now())
	store, err := p.e.store(ctx)
	if err != nil {
		return nil, err
	}
	var h feed.Handler = feed.HandlerFunc(func(ctx context.Context, b Batch) error { return p.hooks.handle(ctx, b, p.handle) })
	if lh := p.e.cfg.LeaseHandler; lh != nil {
		h = leaseHandler{HandlerFunc: h.(feed.HandlerFunc), lh: lh}
	}
	proc, err := feed.NewProcessor(p.e.monitored, store, h, opts)
	if err != nil {
		return nil, fmt.Errorf("changefeed: %w", err)
	}
	p.run = &engineRun{proc: proc, store: store, opts: opts}
	return p.run, nil
}

// processorOptions are the engine's options of cfg (without its hooks).
func (cfg Config) processorOptions(log *slog.Logger) feed.ProcessorOptions {
	return feed.ProcessorOptions{
		Instance:           cfg.Instance,
		AcquireInterval:    cfg.AcquireInterval,
		RenewInterval:      cfg.RenewInterval,
		Expiration:         cfg.Expiration,
		PollInterval:       cfg.PollInterval,
		MaxItems:           cfg.MaxItems,
		StartFrom:          cfg.StartFrom.s,
		Mode:               cfg.Mode,
		Logger:             log,
		ShutdownTimeout:    cfg.ShutdownTimeout,
		CheckpointInterval: cfg.CheckpointInterval,
		StuckThreshold:     cfg.StuckThreshold,
		Redact:             cfg.Redact,
		ReuseItems:         cfg.ReuseItems,
		LeaseFormat:        cfg.LeaseFormat,
	}
}

// ValidateHost checks the settings of a processor host that need no account: Instance, the
// timings, MaxItems, Mode and StartFrom (an AllVersionsAndDeletes processor starts from Now()
// only). NewProcessor checks them too, with the containers.
func (cfg Config) ValidateHost() error {
	return cfg.processorOptions(nil).Validate()
}

// Run runs the host until ctx ends or a handler returns Stop(err). It opens the lease
// container, initializes the lease set on first use (one lease per partition, as .NET does)
// unless Bootstrap did, then balances leases with the other hosts, renews the ones it holds and
// processes them.
//
// It returns only after every batch in flight finished (or ShutdownTimeout passed), the last
// checkpoints were written and every lease it held was released, so other hosts take them over
// at their next acquire cycle; no goroutine it started is left. A shutdown because ctx ended
// returns nil. Errors: ErrNotFound (a container is missing, also the monitored container
// deleted while Run ran: a *MonitoredGoneError), ErrModeMismatch (the lease set is in the other
// mode), a *StopError from a handler, a *DuplicateInstanceError (another live host runs under
// Config.Instance), a *LeaseSetDeletedError (the lease set was deleted while Run ran), or
// another failure to reach the account. Run may be called again after it returned, but not
// while it runs.
func (p *Processor) Run(ctx context.Context) error {
	p.mu.Lock()
	if p.running {
		p.mu.Unlock()
		return errors.New("changefeed: the processor is already running")
	}
	p.running = true
	ctx = p.hooks.context(ctx)
	r, err := p.prepare(ctx)
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.running, p.run = false, nil
		p.mu.Unlock()
	}()
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	return r.proc.Run(ctx)
}

// Owned returns the tokens of the leases this host holds now (none before Run or after it
// returned). It is safe to call while Run runs.
func (p *Processor) Owned() []string {
	if r := p.current(); r != nil {
		return r.proc.Owned()
	}
	return nil
}

// Prefix is the lease id prefix of the processor's lease set, once Bootstrap or Run opened it
// ("" before): the one built from Processor and the monitored container, Java's name-based one
// when only that set exists, or Config.LeasePrefix.
func (p *Processor) Prefix() string {
	if r := p.current(); r != nil {
		return r.store.Prefix()
	}
	return ""
}

// StartFrom is where the leases without a continuation start in the current run, Now()
// anchored at the host's start (see Config.StartFrom); Config.StartFrom before Bootstrap or Run.
func (p *Processor) StartFrom() StartFrom {
	if r := p.current(); r != nil {
		return StartFrom{r.opts.StartFrom}
	}
	return StartFrom{p.opts.StartFrom}
}

// Leases lists the leases of the processor's lease set (after Bootstrap, or while Run runs).
func (p *Processor) Leases(ctx context.Context) ([]*Lease, error) {
	r := p.current()
	if r == nil {
		return nil, errors.New("changefeed: the lease set is not open: call Bootstrap or Run first")
	}
	ls, err := r.store.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("changefeed: list leases: %w", err)
	}
	return ls, nil
}

func (p *Processor) current() *engineRun {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.run
}

// PanicError is the error of a batch whose Handler panicked: the host recovers, logs the stack
// (at Error, to Config.Logger) and treats the batch as not processed, as for any other error.
type PanicError struct {
	// Lease is the batch's lease token; Value is what the handler panicked with.
	Lease string
	Value any
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("handler panicked on a batch of lease %s: %v", e.Lease, e.Value)
}

// handle calls the user's handler for b, and turns a panic into the batch's error: a handler's
// bug must not kill the program, whose other leases and checkpoints go on.
func (p *Processor) handle(ctx context.Context, b Batch) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Lease: b.LeaseToken, Value: v}
			p.e.log.Error("handler panicked", "lease", b.LeaseToken, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
		}
	}()
	return p.h(ctx, b)
}
