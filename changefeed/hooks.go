package changefeed

import (
	"context"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/leases"
)

// Hook is a value that observes a Processor (Config.Hooks): the processor calls every hook
// interface below that the value implements, and ignores the others, as franz-go's kgo does
// with its hooks. A hook is called synchronously, from several goroutines: it must be quick,
// safe for concurrent use, and must not call back into the processor. The package changefeed/prom
// is a hook that serves Prometheus metrics and health probes.
type Hook any

// HookEvent is told every lifecycle event (the same ones as Config.OnEvent).
type HookEvent interface {
	OnEvent(Event)
}

// HookBatchStart is told that a batch is handed to the Handler.
type HookBatchStart interface {
	OnBatchStart(Batch)
}

// HookBatchEnd is told the Handler's answer for a batch: nil, ErrNoCheckpoint (processed, not
// yet checkpointed), a *PanicError, or another error (the batch comes again).
type HookBatchEnd interface {
	OnBatchEnd(b Batch, err error)
}

// HookCycleDone is told the end of each acquire cycle (every Config.AcquireInterval) that was
// not cut off by shutdown: nil when the host listed the leases, the listing's error when the
// lease container did not answer, or a *ReadsFailingError when the leases listed but the reads
// of leases this host holds fail permanently. The first call says the host finished its first
// cycle: health checks use it.
type HookCycleDone interface {
	OnCycleDone(err error)
}

// HookRequestCharge is told the request units of every request the host makes, by kind of
// request and for one lease (lease "" when the request was for none, as a lease listing).
type HookRequestCharge interface {
	OnRequestCharge(kind ChargeKind, lease string, ru float64)
}

// ChargeKind is what a request was for: ChargeChangeFeed, or one of the lease container's
// reads and writes (ChargeKinds lists them all).
type ChargeKind = leases.ChargeKind

// ChargeKinds are every ChargeKind, in a fixed order.
var ChargeKinds = leases.ChargeKinds

// ChargeChangeFeed is the kind of the change-feed reads.
const ChargeChangeFeed = leases.ChargeChangeFeed

// ReadsFailingError is what HookCycleDone is told when the reads of leases this host holds fail
// whatever the retries (a refused continuation, credentials refused): Leases names them, Err is
// the first one's failure.
type ReadsFailingError = feed.ReadsFailingError

// hooks are a Processor's hooks, sorted by interface.
type hooks struct {
	event  []HookEvent
	start  []HookBatchStart
	end    []HookBatchEnd
	cycle  []HookCycleDone
	charge []HookRequestCharge
}

func newHooks(cfg Config) hooks {
	var h hooks
	if cfg.OnEvent != nil {
		h.event = append(h.event, eventFunc(cfg.OnEvent))
	}
	for _, v := range cfg.Hooks {
		if x, ok := v.(HookEvent); ok {
			h.event = append(h.event, x)
		}
		if x, ok := v.(HookBatchStart); ok {
			h.start = append(h.start, x)
		}
		if x, ok := v.(HookBatchEnd); ok {
			h.end = append(h.end, x)
		}
		if x, ok := v.(HookCycleDone); ok {
			h.cycle = append(h.cycle, x)
		}
		if x, ok := v.(HookRequestCharge); ok {
			h.charge = append(h.charge, x)
		}
	}
	return h
}

type eventFunc func(Event)

func (f eventFunc) OnEvent(e Event) { f(e) }

// options sets the engine's callbacks of the hooks that need them.
func (h hooks) options(o *feed.ProcessorOptions) {
	if len(h.event) > 0 {
		o.Notify = func(e Event) {
			for _, x := range h.event {
				x.OnEvent(e)
			}
		}
	}
	if len(h.cycle) > 0 {
		o.OnAcquireCycle = func(err error) {
			for _, x := range h.cycle {
				x.OnCycleDone(err)
			}
		}
	}
}

// context returns ctx with the charge recorder of the request-charge hooks.
func (h hooks) context(ctx context.Context) context.Context {
	if len(h.charge) == 0 {
		return ctx
	}
	return leases.WithChargeRecorder(ctx, func(kind ChargeKind, lease string, ru float64) {
		for _, x := range h.charge {
			x.OnRequestCharge(kind, lease, ru)
		}
	})
}

// handle runs h between the batch hooks.
func (h hooks) handle(ctx context.Context, b Batch, handle func(context.Context, Batch) error) error {
	for _, x := range h.start {
		x.OnBatchStart(b)
	}
	err := handle(ctx, b)
	for _, x := range h.end {
		x.OnBatchEnd(b, err)
	}
	return err
}

// ErrNoCheckpoint, returned (possibly wrapped) by a Handler, says the batch was processed but
// its checkpoint may wait: the host moves on to the next batch and writes the checkpoint with
// the next batch answered nil (or at release). Batches held this way come again after a
// handler error, a lost lease or a restart.
var ErrNoCheckpoint = feed.ErrNoCheckpoint
