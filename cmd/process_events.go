package cmd

import (
	"errors"
	"io"
	"sync"
	"time"

	"github.com/cfp-dev/cfp/changefeed"
	"github.com/cfp-dev/cfp/internal/render"
)

// The view and printers of events live in render.
type processEventView = render.EventView

// Event types cfp process adds to the engine's (changefeed.EventType values).
const (
	eventStarted = render.EventStarted
	eventSummary = render.EventSummary
)

// processEvents writes the processor's lifecycle notifications to stderr, as text or JSON
// lines, and keeps the totals of the summary. It is safe for concurrent use.
type processEvents struct {
	w       io.Writer
	printer render.EventPrinter
	redact  func(string) string
	now     func() time.Time
	// also, when set, is given every event too (the --app-protocol channel), whatever --events.
	also func(render.EventView)

	mu      sync.Mutex
	began   time.Time
	batches int64
	items   int64
	errs    int64
}

func newProcessEvents(w io.Writer, format string, redact func(string) string, now func() time.Time) *processEvents {
	return &processEvents{w: w, printer: render.NewEventPrinter(format), redact: redact, now: now, began: now()}
}

// notify handles one engine event.
func (p *processEvents) notify(e changefeed.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch e.Type {
	case changefeed.EventBatch:
		p.batches++
		p.items += int64(e.Items)
	case changefeed.EventError:
		var stop *changefeed.StopError
		if e.Cause == changefeed.CauseUser && errors.As(e.Err, &stop) {
			// The failed attempts were reported already; the summary says why the host stopped.
			return
		}
		p.errs++
	}
	p.write(render.EventViewOf(e, p.redact))
}

// attemptFailed reports one failed delivery of a batch to the delegate.
func (p *processEvents) attemptFailed(e changefeed.Event, attempt int) {
	e.Time = p.now()
	v := render.EventViewOf(e, p.redact)
	v.Attempt = attempt
	p.mu.Lock()
	defer p.mu.Unlock()
	p.errs++
	p.write(v)
}

// started reports that the host bootstrapped the lease store and starts balancing.
func (p *processEvents) started(instance, processor, prefix string, boot changefeed.BootstrapResult) {
	created := boot.Created
	p.mu.Lock()
	defer p.mu.Unlock()
	p.write(processEventView{Type: eventStarted, Time: p.now(), Owner: instance, Processor: processor,
		Prefix: prefix, LeasesCreated: &created})
}

// summary reports the end of the run.
func (p *processEvents) summary(instance string, runErr error, ru *requestUnits) {
	byKind, total := ru.totals()
	p.mu.Lock()
	defer p.mu.Unlock()
	secs := p.now().Sub(p.began).Seconds()
	batches, items, errs := p.batches, p.items, p.errs
	v := processEventView{Type: eventSummary, Time: p.now(), Owner: instance,
		Batches: &batches, Processed: &items, Errors: &errs, Seconds: &secs, Reason: "shutdown",
		RequestCharge: &total, RequestUnits: byKind}
	if runErr != nil {
		v.Reason, v.Error = "stopped", p.redact(runErr.Error())
	}
	p.write(v)
}

// write prints v; p.mu is held.
func (p *processEvents) write(v processEventView) {
	if p.also != nil {
		p.also(v)
	}
	if p.w == nil || p.printer == nil {
		return
	}
	p.printer.Print(p.w, v)
}
