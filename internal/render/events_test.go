package render

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
)

// TestEventPrinters_Golden: the events of cfp process --events text and jsonl for the same
// run: text shows lifecycle events only, on one line each, the empty EPK as "".
func TestEventPrinters_Golden(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	rng := feed.Range{Min: "", Max: "3F"}
	redact := func(s string) string { return s }
	created, batches, items, errs, secs := 4, int64(1), int64(3), int64(1), 2.5
	views := []EventView{
		{Type: EventStarted, Time: now, Owner: "h1", Processor: "proj", Prefix: "proj-", LeasesCreated: &created},
		EventViewOf(feed.Event{Type: feed.EventAcquired, Time: now, Lease: "0", Range: rng, Owner: "h1"}, redact),
		EventViewOf(feed.Event{Type: feed.EventBatch, Time: now, Lease: "0", Range: rng, Owner: "h1", Items: 3, Continuation: `"9"`}, redact),
		EventViewOf(feed.Event{Type: feed.EventCheckpoint, Time: now, Lease: "0", Range: rng, Owner: "h1", Continuation: `"9"`}, redact),
		EventViewOf(feed.Event{Type: feed.EventError, Time: now, Lease: "0", Owner: "h1", Cause: feed.CauseInfra,
			Err: errors.New("read failed:\nconnection\treset")}, redact),
		EventViewOf(feed.Event{Type: feed.EventSplit, Time: now, Lease: "0", Range: rng, Owner: "h1", Children: []string{"4", "5"}}, redact),
		{Type: EventSummary, Time: now, Owner: "h1", Batches: &batches, Processed: &items, Errors: &errs, Seconds: &secs, Reason: "shutdown"},
	}
	for _, format := range []string{EventsText, EventsJSONL} {
		var out bytes.Buffer
		p := NewEventPrinter(format)
		for _, v := range views {
			p.Print(&out, v)
		}
		golden(t, "events_"+format, out.Bytes())
	}
	if NewEventPrinter(EventsNone) != nil {
		t.Error("--events none has a printer")
	}
}
