package render

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
)

// EventView is one line of `cfp process --events jsonl`: a public contract
// (docs/scripting.md); fields are added, never renamed. Fields that do not apply to a type are
// omitted.
type EventView struct {
	Type  string    `json:"type"`
	Time  time.Time `json:"time"`
	Owner string    `json:"owner,omitempty"`
	Lease string    `json:"lease,omitempty"`
	// Range is {"min","max"} in hex EPKs, as in every cfp JSON view (a "min-max" string
	// before).
	Range *feed.Range `json:"range,omitempty"`
	// Items is the batch size of batch and error events.
	Items int `json:"items,omitempty"`
	// Continuation is the batch's end (batch, error) or the checkpointed position (checkpoint).
	Continuation string `json:"continuation,omitempty"`
	// Cause is "user" (the delegate failed) or "infra" (the service failed) for error events.
	Cause string `json:"cause,omitempty"`
	Error string `json:"error,omitempty"`
	// Permanent marks an infra error that retrying does not fix (a refused continuation, a
	// deleted container, refused credentials): the lease is not processed until it is fixed.
	Permanent bool `json:"permanent,omitempty"`
	// Attempt counts the failed deliveries of the same batch (error events with cause user).
	Attempt  int      `json:"attempt,omitempty"`
	Children []string `json:"children,omitempty"`

	// started
	Processor string `json:"processor,omitempty"`
	Prefix    string `json:"prefix,omitempty"`
	// LeasesCreated is how many leases this host created while initializing the lease store.
	LeasesCreated *int `json:"leases_created,omitempty"`

	// summary
	Batches   *int64   `json:"batches,omitempty"`
	Processed *int64   `json:"processed,omitempty"`
	Errors    *int64   `json:"errors,omitempty"`
	Seconds   *float64 `json:"seconds,omitempty"`
	Reason    string   `json:"reason,omitempty"`
	// RequestCharge is the request units (RU) the host spent; RequestUnits splits it by kind
	// of request (change_feed, lease_read, lease_list, renew, checkpoint, acquire, release,
	// presence, other), every kind present.
	RequestCharge *float64           `json:"request_charge,omitempty"`
	RequestUnits  map[string]float64 `json:"request_units,omitempty"`
}

// Event types cfp process adds to the engine's (feed.EventType values).
const (
	EventStarted = "started"
	EventSummary = "summary"
)

// The formats of cfp process --events.
const (
	EventsText  = "text"
	EventsJSONL = "jsonl"
	EventsNone  = "none"
)

// EventPrinter writes lifecycle events in one format. Print is called with the caller's lock
// held, one event at a time.
type EventPrinter interface {
	Print(w io.Writer, v EventView)
}

// NewEventPrinter chooses the printer of the --events format: JSON lines (every event), text
// (lifecycle events only), or none (nil).
func NewEventPrinter(format string) EventPrinter {
	switch format {
	case EventsJSONL:
		return jsonEvents{}
	case EventsText:
		return textEvents{}
	}
	return nil
}

// jsonEvents writes each event as one JSON line.
type jsonEvents struct{}

func (jsonEvents) Print(w io.Writer, v EventView) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	_, _ = w.Write(append(b, '\n'))
}

// textEvents writes lifecycle events for a person (TextEvent); batches and checkpoints would
// flood a terminal and are left out.
type textEvents struct{}

func (textEvents) Print(w io.Writer, v EventView) {
	if isLifecycle(v.Type) {
		_, _ = io.WriteString(w, TextEvent(v))
	}
}

// isLifecycle reports whether an event type is shown in text mode (batches and checkpoints are
// JSON-lines only: they would flood a terminal).
func isLifecycle(t string) bool {
	return t != string(feed.EventBatch) && t != string(feed.EventCheckpoint)
}

// EventViewOf is the view of an engine event, its error redacted and on one line.
func EventViewOf(e feed.Event, redact func(string) string) EventView {
	v := EventView{
		Type: string(e.Type), Time: e.Time.UTC(), Owner: e.Owner, Lease: e.Lease,
		Items: e.Items, Continuation: e.Continuation, Cause: string(e.Cause), Children: e.Children,
		Permanent: e.Permanent,
	}
	if e.Range != (feed.Range{}) {
		r := e.Range
		v.Range = &r
	}
	if e.Err != nil {
		// One line: an error that carries a child's output or a wrapped message with line ends
		// must not break a text event or a reader that splits on them.
		v.Error = eventLine(redact(e.Err.Error()))
	}
	return v
}

// TextEvent renders an event for a person: "cfp: <time> <type> lease=<token> ...".
func TextEvent(v EventView) string {
	var b strings.Builder
	fmt.Fprintf(&b, "cfp: %s %s", v.Time.UTC().Format(time.RFC3339), v.Type)
	kv := func(k, val string) {
		if val != "" {
			fmt.Fprintf(&b, " %s=%s", k, Safe(val))
		}
	}
	kv("owner", v.Owner)
	kv("processor", v.Processor)
	kv("lease", v.Lease)
	if v.Range != nil {
		kv("range", RangeText(v.Range.Min, v.Range.Max))
	}
	if v.Items > 0 {
		kv("items", fmt.Sprint(v.Items))
	}
	kv("cause", v.Cause)
	if v.Permanent {
		kv("permanent", "true")
	}
	if v.Attempt > 0 {
		kv("attempt", fmt.Sprint(v.Attempt))
	}
	if len(v.Children) > 0 {
		kv("children", strings.Join(v.Children, ","))
	}
	if v.LeasesCreated != nil && *v.LeasesCreated > 0 {
		kv("created", fmt.Sprint(*v.LeasesCreated))
	}
	if v.Batches != nil {
		kv("batches", fmt.Sprint(*v.Batches))
		kv("processed", fmt.Sprint(*v.Processed))
		kv("errors", fmt.Sprint(*v.Errors))
		kv("seconds", fmt.Sprintf("%.1f", *v.Seconds))
	}
	if v.RequestCharge != nil {
		kv("ru", fmt.Sprintf("%.2f", *v.RequestCharge))
		kinds := make([]string, 0, len(v.RequestUnits))
		for k, ru := range v.RequestUnits {
			if ru > 0 {
				kinds = append(kinds, fmt.Sprintf("%s:%.2f", k, ru))
			}
		}
		sort.Strings(kinds)
		kv("ru_by_kind", strings.Join(kinds, ","))
	}
	kv("reason", v.Reason)
	if v.Error != "" && v.Type != EventSummary {
		// A summary's error is the line cfp exits with, right after it: not twice.
		fmt.Fprintf(&b, " error=%q", eventLine(v.Error)) // %q escapes control characters
	}
	b.WriteByte('\n')
	return b.String()
}

// eventLine joins the words of s with single spaces: one line, whatever s held.
func eventLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
