package feed

import "time"

// EventType names a processor lifecycle notification.
type EventType string

// Event types. Their string values are part of the `cfp process --events jsonl` contract.
const (
	EventAcquired   EventType = "acquired"   // this host took a lease
	EventReleased   EventType = "released"   // this host gave a lease up (shutdown, split, rebalance)
	EventLost       EventType = "lost"       // another host took the lease or it expired under us
	EventError      EventType = "error"      // a handler (Cause user) or the service (Cause infra) failed
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
	CauseInfra Cause = "infra" // the lease store or the change feed failed
)

// Event is one processor notification. Fields that do not apply to a type are zero.
type Event struct {
	Type  EventType
	Time  time.Time
	Lease string // lease token
	Range Range
	Owner string // this host's instance name
	// Err is the failure of an EventError or the reason of an EventLost.
	Err   error
	Cause Cause
	// Permanent marks an EventError of the change feed that retrying does not fix (see
	// IsPermanent): the lease is not processed until its cause is.
	Permanent bool
	// Items is the batch size of EventBatch.
	Items int
	// Continuation is the checkpointed position of EventCheckpoint and the handled batch's end
	// of EventBatch.
	Continuation string
	// Children are the tokens of the leases that replaced Lease in EventSplit and EventMerge.
	Children []string
}
