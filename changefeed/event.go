package changefeed

import (
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
)

// EventType names a lifecycle event. The values are those of `cfp process --events jsonl`.
type EventType string

// Event types.
const (
	EventAcquired   EventType = "acquired"   // this host took a lease
	EventReleased   EventType = "released"   // this host gave a lease up (shutdown, split, rebalance)
	EventLost       EventType = "lost"       // another host took the lease, or it expired
	EventError      EventType = "error"      // the handler (CauseUser) or the service (CauseInfra) failed
	EventBatch      EventType = "batch"      // a batch was handled successfully
	EventCheckpoint EventType = "checkpoint" // a continuation was written to a lease
	EventSplit      EventType = "split"      // a lease was replaced by child leases (its partition split)
	EventMerge      EventType = "merge"      // a lease was replaced by one over its part of a merged partition
)

// Cause says whose failure an EventError reports.
type Cause string

// Causes.
const (
	CauseUser  Cause = "user"  // the handler returned an error
	CauseInfra Cause = "infra" // the lease container or the change feed failed
)

// Event is a lifecycle notification (Config.OnEvent). Fields that do not apply to its Type are
// zero.
type Event struct {
	Type  EventType
	Time  time.Time
	Lease string // the lease token
	Range Range
	Owner string // this host's Instance
	// Err is the failure of an EventError (errors.Is works: ErrThrottled, ErrLeaseLost, ...) or
	// why a lease was lost (an EventLost, a *LeaseLostError).
	Err   error
	Cause Cause
	// Items is the size of the batch of an EventBatch.
	Items int
	// Continuation is the position written by an EventCheckpoint, or reached by an EventBatch.
	Continuation string
	// Children are the leases that replaced Lease (EventSplit, EventMerge).
	Children []string
}

func eventOf(e feed.Event) Event {
	return Event{
		Type: EventType(e.Type), Time: e.Time, Lease: e.Lease, Range: rangeOf(e.Range), Owner: e.Owner,
		Err: e.Err, Cause: Cause(e.Cause), Items: e.Items, Continuation: e.Continuation, Children: e.Children,
	}
}
