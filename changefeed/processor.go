package changefeed

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
)

// Processor is one change feed processor host. Create it with NewProcessor and call Run.
type Processor struct {
	e     *engine
	h     Handler
	hooks hooks
	opts  feed.ProcessorOptions // without StartFrom, which Run anchors

	mu      sync.Mutex
	running bool
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
	opts := feed.ProcessorOptions{
		Instance:           cfg.Instance,
		AcquireInterval:    cfg.AcquireInterval,
		RenewInterval:      cfg.RenewInterval,
		Expiration:         cfg.Expiration,
		PollInterval:       cfg.PollInterval,
		MaxItems:           cfg.MaxItems,
		StartFrom:          cfg.StartFrom.s,
		Mode:               cfg.Mode,
		Logger:             e.log,
		ShutdownTimeout:    cfg.ShutdownTimeout,
		CheckpointInterval: cfg.CheckpointInterval,
	}
	hk := newHooks(cfg)
	hk.options(&opts)
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("changefeed: %w", err)
	}
	return &Processor{e: e, h: h, hooks: hk, opts: opts}, nil
}

// Run runs the host until ctx ends or a handler returns Stop(err). It opens the lease
// container, initializes the lease set on first use (one lease per partition, as .NET does),
// then balances leases with the other hosts, renews the ones it holds and processes them.
//
// It returns only after every batch in flight finished (or ShutdownTimeout passed), the last
// checkpoints were written and every lease it held was released, so other hosts take them over
// at their next acquire cycle; no goroutine it started is left. A shutdown because ctx ended
// returns nil. Errors: ErrNotFound (a container is missing, also the monitored container
// deleted while Run ran), ErrModeMismatch (the lease set is in the other mode), a *StopError
// from a handler, an error saying another live host runs under Config.Instance (or that the
// lease set was deleted while Run ran), or another failure to reach the account. Run may be
// called again after it returned, but not while it runs.
func (p *Processor) Run(ctx context.Context) error {
	p.mu.Lock()
	if p.running {
		p.mu.Unlock()
		return errors.New("changefeed: the processor is already running")
	}
	p.running = true
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.running = false
		p.mu.Unlock()
	}()

	ctx = p.hooks.context(ctx)
	opts := p.opts
	// "now" is this host's start, as in .NET and `cfp process` (see feed.AnchorNow).
	opts.StartFrom = feed.AnchorNow(opts.StartFrom, opts.Mode, time.Now())
	store, err := p.e.store(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	h := feed.HandlerFunc(func(ctx context.Context, b Batch) error { return p.hooks.handle(ctx, b, p.handle) })
	proc, err := feed.NewProcessor(p.e.monitored, store, h, opts)
	if err != nil {
		return fmt.Errorf("changefeed: %w", err)
	}
	if err := proc.Run(ctx); err != nil {
		var stop *feed.StopError
		if errors.As(err, &stop) {
			return err
		}
		return fmt.Errorf("changefeed: %w", err)
	}
	return nil
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
