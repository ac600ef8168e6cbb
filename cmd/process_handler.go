package cmd

import (
	"context"
	"errors"
	"sync"

	"github.com/cfp-dev/cfp/changefeed"
	"github.com/cfp-dev/cfp/changefeed/prom"
	"github.com/cfp-dev/cfp/internal/sink"
)

// observedHandler reports every failed attempt of the delegate as an error event with cause
// user (the processor only sees what the error policy returns) and records each processed
// batch's lag for the metrics. It forwards the per-lease calls of an ExecLines delegate.
type observedHandler struct {
	h       batchHandler
	events  *processEvents
	metrics *prom.Metrics

	mu       sync.Mutex
	attempts map[string]failures // by lease token
}

// failures counts the failed attempts of the batch that ends at continuation.
type failures struct {
	continuation string
	n            int
}

var _ changefeed.LeaseHandler = (*observedHandler)(nil)

func (o *observedHandler) Handle(ctx context.Context, b changefeed.Batch) error {
	o.metrics.OnBatchStart(b)
	err := o.h.Handle(ctx, b)
	var stop *changefeed.StopError
	switch {
	case err == nil || errors.Is(err, changefeed.ErrNoCheckpoint):
		o.mu.Lock()
		delete(o.attempts, b.LeaseToken)
		o.mu.Unlock()
		o.metrics.OnBatchEnd(b, err)
	case ctx.Err() != nil || errors.As(err, &stop):
	default:
		o.mu.Lock()
		fl := o.attempts[b.LeaseToken]
		if fl.continuation != b.Continuation {
			fl = failures{continuation: b.Continuation}
		}
		fl.n++
		o.attempts[b.LeaseToken] = fl
		o.mu.Unlock()
		e := changefeed.Event{Type: changefeed.EventError, Lease: b.LeaseToken, Range: b.Range,
			Owner: b.Owner, Err: err, Cause: changefeed.CauseUser, Items: len(b.Items), Continuation: b.Continuation}
		o.events.attemptFailed(e, fl.n)
		o.metrics.OnEvent(e)
	}
	return err
}

func (o *observedHandler) OpenLease(ctx context.Context, l changefeed.LeaseInfo) error {
	return sink.OpenLease(ctx, o.h, l)
}

func (o *observedHandler) CloseLease(ctx context.Context, l changefeed.LeaseInfo, reason changefeed.CloseReason) error {
	return sink.CloseLease(ctx, o.h, l, reason)
}
