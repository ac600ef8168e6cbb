package cmd

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/render"
)

// processEventView is one line of `cfp process --events jsonl`: a public contract
// (docs/scripting.md); fields are added, never renamed. Fields that do not apply to a type are
// omitted.
type processEventView struct {
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
}

// Event types cfp process adds to the engine's (feed.EventType values).
const (
	eventStarted = "started"
	eventSummary = "summary"
)

// processEvents writes the processor's lifecycle notifications to stderr, as text or JSON
// lines, and keeps the totals of the summary. It is safe for concurrent use.
type processEvents struct {
	w      io.Writer
	format string
	redact func(string) string
	now    func() time.Time

	mu      sync.Mutex
	began   time.Time
	batches int64
	items   int64
	errs    int64
}

func newProcessEvents(w io.Writer, format string, redact func(string) string, now func() time.Time) *processEvents {
	return &processEvents{w: w, format: format, redact: redact, now: now, began: now()}
}

// notify handles one engine event.
func (p *processEvents) notify(e feed.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch e.Type {
	case feed.EventBatch:
		p.batches++
		p.items += int64(e.Items)
	case feed.EventError:
		var stop *feed.StopError
		if e.Cause == feed.CauseUser && errors.As(e.Err, &stop) {
			// The failed attempts were reported already; the summary says why the host stopped.
			return
		}
		p.errs++
	}
	p.write(viewOf(e, p.redact), isLifecycle(e.Type))
}

// attemptFailed reports one failed delivery of a batch to the delegate.
func (p *processEvents) attemptFailed(e feed.Event, attempt int) {
	e.Time = p.now()
	v := viewOf(e, p.redact)
	v.Attempt = attempt
	p.mu.Lock()
	defer p.mu.Unlock()
	p.errs++
	p.write(v, true)
}

// started reports that the host bootstrapped the lease store and starts balancing.
func (p *processEvents) started(instance, processor, prefix string, boot feed.BootstrapResult) {
	created := boot.Created
	p.mu.Lock()
	defer p.mu.Unlock()
	p.write(processEventView{Type: eventStarted, Time: p.now(), Owner: instance, Processor: processor,
		Prefix: prefix, LeasesCreated: &created}, true)
}

// summary reports the end of the run.
func (p *processEvents) summary(instance string, runErr error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	secs := p.now().Sub(p.began).Seconds()
	batches, items, errs := p.batches, p.items, p.errs
	v := processEventView{Type: eventSummary, Time: p.now(), Owner: instance,
		Batches: &batches, Processed: &items, Errors: &errs, Seconds: &secs, Reason: "shutdown"}
	if runErr != nil {
		v.Reason, v.Error = "stopped", p.redact(runErr.Error())
	}
	p.write(v, true)
}

// isLifecycle reports whether an event type is shown in text mode (batches and checkpoints are
// JSON-lines only: they would flood a terminal).
func isLifecycle(t feed.EventType) bool {
	return t != feed.EventBatch && t != feed.EventCheckpoint
}

func viewOf(e feed.Event, redact func(string) string) processEventView {
	v := processEventView{
		Type: string(e.Type), Time: e.Time.UTC(), Owner: e.Owner, Lease: e.Lease,
		Items: e.Items, Continuation: e.Continuation, Cause: string(e.Cause), Children: e.Children,
	}
	if e.Range != (feed.Range{}) {
		r := e.Range
		v.Range = &r
	}
	if e.Err != nil {
		// One line: an error that carries a child's output or a wrapped message with line ends
		// must not break a text event or a reader that splits on them.
		v.Error = oneLine(redact(e.Err.Error()))
	}
	return v
}

// write prints v; p.mu is held.
func (p *processEvents) write(v processEventView, lifecycle bool) {
	if p.w == nil {
		return
	}
	switch p.format {
	case eventsJSONL:
		b, err := json.Marshal(v)
		if err != nil {
			return
		}
		p.w.Write(append(b, '\n'))
	case eventsText:
		if lifecycle {
			io.WriteString(p.w, textEvent(v))
		}
	}
}

// textEvent renders an event for a person: "cfp: <time> <type> lease=<token> ...".
func textEvent(v processEventView) string {
	var b strings.Builder
	fmt.Fprintf(&b, "cfp: %s %s", v.Time.UTC().Format(time.RFC3339), v.Type)
	kv := func(k, val string) {
		if val != "" {
			fmt.Fprintf(&b, " %s=%s", k, render.Safe(val))
		}
	}
	kv("owner", v.Owner)
	kv("processor", v.Processor)
	kv("lease", v.Lease)
	if v.Range != nil {
		kv("range", render.RangeText(v.Range.Min, v.Range.Max))
	}
	if v.Items > 0 {
		kv("items", fmt.Sprint(v.Items))
	}
	kv("cause", v.Cause)
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
		kv("reason", v.Reason)
	}
	if v.Error != "" && v.Type != eventSummary {
		// A summary's error is the line cfp exits with, right after it: not twice.
		fmt.Fprintf(&b, " error=%q", oneLine(v.Error)) // %q escapes control characters
	}
	b.WriteByte('\n')
	return b.String()
}
