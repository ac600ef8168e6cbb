package changefeed

import "github.com/cfp-dev/cfp/internal/feed"

// EventType names a lifecycle event. The values are those of `cfp process --events jsonl`.
type EventType = feed.EventType

// Event types.
const (
	EventAcquired   = feed.EventAcquired   // this host took a lease
	EventReleased   = feed.EventReleased   // this host gave a lease up (shutdown, split, rebalance)
	EventLost       = feed.EventLost       // another host took the lease, or it expired
	EventError      = feed.EventError      // the handler (CauseUser) or the service (CauseInfra) failed
	EventBatch      = feed.EventBatch      // a batch was handled successfully
	EventCheckpoint = feed.EventCheckpoint // a continuation was written to a lease
	EventSplit      = feed.EventSplit      // a lease was replaced by child leases (its partition split)
	EventMerge      = feed.EventMerge      // a lease was replaced by one over its part of a merged partition
)

// Cause says whose failure an EventError reports.
type Cause = feed.Cause

// Causes.
const (
	CauseUser  = feed.CauseUser  // the handler returned an error
	CauseInfra = feed.CauseInfra // the lease container or the change feed failed
)

// Event is a lifecycle notification (Config.OnEvent, Hooks): the engine's own type. Fields that
// do not apply to its Type are zero. Lease is the lease token, Owner this host's Instance; Err
// is the failure of an EventError (errors.Is works: ErrThrottled, ErrLeaseLost, ...) or why a
// lease was lost (an EventLost, a *LeaseLostError), and Permanent marks a change-feed failure
// that retrying does not fix; Items is the size of an EventBatch's batch; Continuation the
// position written by an EventCheckpoint or reached by an EventBatch; Children the leases that
// replaced Lease (EventSplit, EventMerge).
type Event = feed.Event
