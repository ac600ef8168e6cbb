// Package feed is cfp's engine: the change-feed reader, the processor host (balancing in
// processor_acquire.go and processor_balance.go, handoffs, presence, renewals, workers, splits and merges), the lag
// estimator, the tail driver, the replay driver (Replay: a window of history through a handler,
// its progress under its own lease prefix), and positions (ParsePosition for the position
// grammar of every command; PositionAt, the continuation just before a time). It speaks only
// its own domain types; internal/cosmos adapts azcosmos to the Source interface declared here,
// and internal/leases provides the lease model and store.
package feed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/cfp-dev/cfp/internal/leases"
)

// Range is an EPK range [Min, Max).
type Range = leases.Range

// Partition is one live physical partition (partition key range) of a container.
type Partition struct {
	ID      string
	Range   Range
	Parents []string
}

// StartKind says where a read starts when there is no continuation.
type StartKind int

// Start kinds.
const (
	StartNow StartKind = iota
	StartBeginning
	StartTime
	StartContinuation
)

// StartFrom is a start position: the beginning, now, a point in time, or a raw continuation
// (the change-feed ETag of the last processed page, e.g. `"42"` with the quotes).
type StartFrom struct {
	Kind         StartKind
	Time         time.Time
	Continuation string
}

// FeedMode is a change-feed mode.
type FeedMode int

// Change-feed modes.
const (
	// LatestVersion returns each changed item once, at its latest version; deletes are not seen.
	LatestVersion FeedMode = iota
	// AllVersionsAndDeletes returns every create, replace and delete as the service's
	// {"current","previous","metadata"} object (wire format 2021-09-15). It starts from now or a
	// continuation only: the service refuses the beginning and a point in time.
	AllVersionsAndDeletes
)

// String returns the mode as cfp's flags spell it: "latest" or "all-versions".
func (m FeedMode) String() string {
	if m == AllVersionsAndDeletes {
		return "all-versions"
	}
	return "latest"
}

// leaseMode is the mode's name in lease documents, as .NET writes it: leases.ModeIncremental
// or leases.ModeFullFidelity.
func (m FeedMode) leaseMode() string {
	if m == AllVersionsAndDeletes {
		return leases.ModeFullFidelity
	}
	return leases.ModeIncremental
}

// ParseFeedMode parses "latest" (or "") and "all-versions".
func ParseFeedMode(s string) (FeedMode, error) {
	switch s {
	case "", "latest":
		return LatestVersion, nil
	case "all-versions":
		return AllVersionsAndDeletes, nil
	}
	return 0, fmt.Errorf("unknown change feed mode %q (want latest or all-versions)", s)
}

// ReadRequest asks for one change-feed page of one physical partition.
type ReadRequest struct {
	// PartitionID is the physical partition (partition key range id) to read.
	PartitionID string
	// Range restricts the page to documents whose EPK lies in it; the zero value or the whole
	// partition's range means no restriction (a sub-range is sent as x-ms-start-epk/end-epk).
	Range Range
	// Start is where to begin when Continuation is empty.
	Start StartFrom
	// MaxItems bounds the page (0: the service default).
	MaxItems int
	// PartitionKey, when set, scopes the read to one logical partition (JSON array form).
	PartitionKey json.RawMessage
	// Mode is the change-feed mode (default LatestVersion). With AllVersionsAndDeletes, Start
	// must be now or a continuation; an empty continuation means now.
	Mode FeedMode
	// Reuse says the caller calls the page's Release once it no longer reads its Items and
	// keeps no reference into them: the source may then reuse their memory for a later page.
	Reuse bool
}

// Page is one change-feed response.
type Page struct {
	// Items are the changed documents, raw, in LSN order.
	Items []json.RawMessage
	// Continuation is the raw ETag to resume after this page.
	Continuation string
	// LatestLSN is the partition's current LSN, from the session token (0 if unknown).
	LatestLSN int64
	// RequestCharge is the page's RU cost.
	RequestCharge float64
	// NotModified is true when nothing was new (HTTP 304).
	NotModified bool
	// Release, when not nil (a page read with ReadRequest.Reuse), hands the memory of Items
	// back to the source; nothing may read Items after it. A second call does nothing.
	Release func()
}

// Source is a container's change feed. Implementations must be safe for concurrent use.
type Source interface {
	// Partitions lists the live physical partitions, sorted by range.
	Partitions(ctx context.Context) ([]Partition, error)
	// ReadPage reads one page. Errors: *RangeGoneError when the partition was split or merged,
	// *ThrottledError when the service asked to slow down, ErrNotFound when the container is gone.
	ReadPage(ctx context.Context, req ReadRequest) (Page, error)
}

// ErrNotFound means the container (or database) does not exist.
var ErrNotFound = leases.ErrNotFound

// RangeGoneError reports that a partition no longer exists: the service answered 410 with
// substatus 1002 (partition key range gone) or 1007 (completing a split), the two .NET's
// processor counts as a split (ChangeFeedProcessor/DocDBErrors/ExceptionClassifier.cs, line 16),
// or cfp's routing found no partition (Substatus 0). 410/1008 (completing a partition
// migration) is no split: .NET classifies it Undefined and throws it as a CosmosException
// (FeedProcessing/FeedProcessorCore.cs, lines 113-118), so it is a *StaleRouteError here.
type RangeGoneError struct {
	PartitionID string
	// Substatus is the service's x-ms-substatus (1002 or 1007), 0 when cfp found the range
	// gone by itself (a routing map without the partition, or a range over several).
	Substatus int
}

func (e *RangeGoneError) Error() string {
	return fmt.Sprintf("partition %s is gone (split or merged)", e.PartitionID)
}

// ErrThrottled matches every *ThrottledError with errors.Is.
var ErrThrottled = errors.New("throttled")

// ThrottledError reports a 429 (throttled) or 503 (service unavailable) that the request policy
// gave up retrying; wait RetryAfter and retry.
type ThrottledError struct {
	Status     int
	RetryAfter time.Duration
}

func (e *ThrottledError) Error() string {
	if e.Status == http.StatusServiceUnavailable {
		return fmt.Sprintf("service unavailable (HTTP %d), retry after %s", e.Status, e.RetryAfter)
	}
	return fmt.Sprintf("throttled (HTTP %d), retry after %s", e.Status, e.RetryAfter)
}

// Is reports whether target is ErrThrottled.
func (e *ThrottledError) Is(target error) bool { return target == ErrThrottled }

// StaleRouteError reports a 410 Gone that does not say the partition is gone (substatus 1000,
// the gateway's name cache is stale, and any other): the caller's routing is stale; list the
// partitions again and retry.
type StaleRouteError struct {
	PartitionID string
	Substatus   int
}

func (e *StaleRouteError) Error() string {
	return fmt.Sprintf("partition %s answered gone (HTTP 410.%d): stale routing, retry", e.PartitionID, e.Substatus)
}

// IsStaleRoute reports whether err is a *StaleRouteError.
func IsStaleRoute(err error) bool {
	var s *StaleRouteError
	return errors.As(err, &s)
}

// IsRangeGone reports whether err is a *RangeGoneError.
func IsRangeGone(err error) bool {
	var g *RangeGoneError
	return errors.As(err, &g)
}
