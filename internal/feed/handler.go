package feed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// Batch is one non-empty change-feed page of one lease, handed to a Handler.
type Batch struct {
	// LeaseToken is the lease's token (a partition id for .NET v0 leases, "min-max" for v1).
	LeaseToken string
	// Range is the lease's EPK range.
	Range Range
	// Owner is the instance that delivers the batch.
	Owner string
	// Items are the changed documents exactly as the feed returned them, in LSN order.
	Items []json.RawMessage
	// Continuation is the raw ETag that resumes after this batch: the value the host checkpoints
	// once the handler succeeded.
	Continuation string
	// LatestLSN is the partition's latest LSN when the page was read (0 if unknown).
	LatestLSN int64
	// Attempt counts deliveries of a batch starting at the same position: 1 the first time, 2
	// after one failure, and so on.
	Attempt int
	// Checkpoint is the lease's continuation as stored when the batch was delivered (empty when
	// the lease has none): where processing resumes if this batch fails.
	Checkpoint string
	// Mode is the processor's change feed mode.
	Mode FeedMode
}

// Handler processes batches. Handle is called by one goroutine per lease, so an implementation
// shared by leases must be safe for concurrent use. Handle returns nil when every item of the
// batch was processed; the host then checkpoints b.Continuation. Any other error means "not
// processed": the same position is delivered again from the last checkpoint. Two sentinel
// answers change that: ErrNoCheckpoint (processed, but do not checkpoint yet) and an error
// built with Stop (stop the whole processor).
type Handler interface {
	Handle(ctx context.Context, b Batch) error
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, b Batch) error

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, b Batch) error { return f(ctx, b) }

// LeaseInfo describes a lease to a LeaseHandler.
type LeaseInfo struct {
	Token        string
	Range        Range
	Owner        string
	Continuation string
}

// CloseReason says why the host stopped delivering a lease's batches.
type CloseReason string

// Close reasons.
const (
	// CloseShutdown: the processor is stopping; the lease is released.
	CloseShutdown CloseReason = "shutdown"
	// CloseLeaseLost: another host took the lease (or it expired); nothing can be checkpointed.
	CloseLeaseLost CloseReason = "lease-lost"
	// CloseRebalance: another host asked for the lease; it is checkpointed and released.
	CloseRebalance CloseReason = "rebalance"
	// CloseSplit: the lease's range split or merged; child leases continue from its checkpoint.
	CloseSplit CloseReason = "split"
)

// LeaseHandler is implemented by handlers that keep per-lease state (one child process per
// lease, for example). The host calls OpenLease before the first batch of a lease and CloseLease
// after the last one; both run on the lease's worker goroutine, never concurrently with Handle
// for that lease. An OpenLease error is retried with backoff before any batch is delivered.
// CloseLease with CloseShutdown or CloseRebalance may answer nil to have the host checkpoint batches that were
// acknowledged with ErrNoCheckpoint, or ErrNoCheckpoint to leave them unrecorded; its answer is
// ignored for the other reasons, since the lease is no longer this host's to write.
type LeaseHandler interface {
	Handler
	OpenLease(ctx context.Context, l LeaseInfo) error
	CloseLease(ctx context.Context, l LeaseInfo, reason CloseReason) error
}

// ErrNoCheckpoint is returned (possibly wrapped) by a Handler that processed a batch but wants
// the host to hold its checkpoint: the host moves on to the next batch and writes the checkpoint
// with the next batch answered nil. Batches held this way come again after a handler error, a
// lost lease or a restart.
var ErrNoCheckpoint = errors.New("batch processed, checkpoint deferred")

// StopError asks the processor to stop: Run shuts down gracefully and returns it.
type StopError struct {
	Err error
}

func (e *StopError) Error() string { return fmt.Sprintf("handler stopped the processor: %v", e.Err) }

func (e *StopError) Unwrap() error { return e.Err }

// Stop wraps err so that the processor stops when a handler returns it.
func Stop(err error) error {
	if err == nil {
		err = errors.New("stop requested")
	}
	return &StopError{Err: err}
}
