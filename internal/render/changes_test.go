package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
)

// changesFixture is a latest-version change, one written with newlines, and an all-versions
// delete, at fixed times (UTC, so the terminal line's clock is fixed by TZ-independent tests
// only where it shows --:--:--).
func changesFixture() []feed.Change {
	return []feed.Change{
		{Item: json.RawMessage(`{"id":"order-7","_rid":"x","_ts":1767225600,"_lsn":12,"customer":"c42","total":19.5}`),
			PartitionID: "2", Range: feed.Range{Min: "", Max: "30"}, LSN: 12},
		{Item: json.RawMessage("{\n  \"id\": \"order-8\",\n  \"customer\": \"c7\"\n}"),
			Range: feed.Range{Min: "", Max: "30"}, LSN: 13},
		{Item: json.RawMessage(`{"current":{},"previous":{"id":"o1","total":3},"metadata":{"operationType":"delete","lsn":6,"id":"o1"}}`),
			PartitionID: "1", Range: feed.Range{Min: "30", Max: "FF"}, LSN: 6, Operation: "delete"},
	}
}

// TestChangePrinters_Golden: each output format of cfp tail, at 80 columns without colour, and
// the terminal line with colour, for the same changes.
func TestChangePrinters_Golden(t *testing.T) {
	t.Parallel()
	q, err := CompileQuery("[.id // .metadata.id, ._lsn]")
	if err != nil {
		t.Fatal(err)
	}
	envQ, err := CompileQuery("[.lsn, .operation]")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name     string
		format   Format
		query    *Query
		envelope bool
		color    bool
	}{
		{"changes_jsonl", FormatJSONL, nil, false, false},
		{"changes_jsonl_envelope", FormatJSONL, nil, true, false},
		{"changes_json", FormatJSON, nil, false, false},
		{"changes_json_envelope", FormatJSON, nil, true, false},
		{"changes_jq", FormatJSONL, q, false, false},
		{"changes_jq_envelope", FormatJSON, envQ, true, false}, // -o json --jq: the query's output only
		{"changes_line_80", FormatTable, nil, false, false},
		{"changes_line_80_color", FormatTable, nil, false, true},
	} {
		ios, _, out, _ := Test()
		ios.Width, ios.ColorEnabled = 80, tt.color
		w := NewChangeWriter(ios, NewChangePrinter(ios, tt.format, tt.query, tt.envelope))
		for _, ch := range changesFixture() {
			if err := w.Emit(ch); err != nil {
				t.Fatalf("%s: %v", tt.name, err)
			}
		}
		if err := w.Close(false, time.Second); err != nil {
			t.Fatal(err)
		}
		if w.Written() != 3 {
			t.Errorf("%s: Written() = %d, want 3", tt.name, w.Written())
		}
		if tt.format == FormatJSON && tt.query == nil {
			var arr []json.RawMessage
			if err := json.Unmarshal(out.Bytes(), &arr); err != nil || len(arr) != 3 {
				t.Errorf("%s: not a JSON array of 3: %v\n%s", tt.name, err, out)
			}
		}
		golden(t, tt.name, out.Bytes())
	}
}

func TestChangeWriter_InvalidJSONIsAnOutputError(t *testing.T) {
	t.Parallel()
	ios, _, _, _ := Test()
	w := NewChangeWriter(ios, NewChangePrinter(ios, FormatJSONL, nil, false))
	err := w.Emit(feed.Change{Item: json.RawMessage("{\n")})
	if !errors.Is(err, ErrOutput) {
		t.Errorf("Emit of invalid JSON: %v, want ErrOutput", err)
	}
}

func TestChangeWriter_EmptyJSONArray(t *testing.T) {
	t.Parallel()
	ios, _, out, _ := Test()
	w := NewChangeWriter(ios, NewChangePrinter(ios, FormatJSON, nil, false))
	if err := w.Close(false, time.Second); err != nil || out.String() != "[]\n" {
		t.Errorf("no changes as -o json: %q, %v; want []", out, err)
	}
}

func TestChangeLine_TerminalLineShowsTheOperation(t *testing.T) {
	t.Parallel()
	ios, _, out, _ := Test()
	ios.SetTTY(true)
	ios.Width = 80
	w := NewChangeWriter(ios, NewChangePrinter(ios, FormatTable, nil, false))
	for _, ch := range []feed.Change{
		{Item: json.RawMessage(`{"current":{"id":"o1","_lsn":5,"total":3},"metadata":{"operationType":"replace","lsn":5}}`), PartitionID: "1", LSN: 5, Operation: "replace"},
		{Item: json.RawMessage(`{"current":{},"previous":{"id":"o1","total":3},"metadata":{"operationType":"delete","lsn":6,"id":"o1","partitionKey":{"pk":"a"}}}`), PartitionID: "1", LSN: 6, Operation: "delete", TS: time.Unix(1767225600, 0)},
	} {
		if err := w.Emit(ch); err != nil {
			t.Fatal(err)
		}
	}
	want := "--:--:-- p1 #5 replace o1 {\"total\":3}\n" + time.Unix(1767225600, 0).Local().Format("15:04:05") + " p1 #6 delete  o1 {}\n"
	if out.String() != want {
		t.Errorf("terminal got %q, want %q", out.String(), want)
	}
}

func TestChangeLine_TerminalLine(t *testing.T) {
	t.Parallel()
	ios, _, out, _ := Test()
	ios.SetTTY(true)
	ios.Width = 60
	w := NewChangeWriter(ios, NewChangePrinter(ios, FormatTable, nil, false))
	ch := feed.Change{
		Item:        json.RawMessage(`{"id":"order-7","_rid":"x","_ts":1767225600,"_lsn":12,"customer":"c42","total":19.5,"lines":[1,2,3,4,5,6,7,8,9,10,11,12,13,14]}`),
		PartitionID: "2", Range: feed.Range{Min: "20", Max: "30"}, LSN: 12, TS: time.Unix(1767225600, 0),
	}
	if err := w.Emit(ch); err != nil {
		t.Fatal(err)
	}
	line := strings.TrimSuffix(out.String(), "\n")
	want := time.Unix(1767225600, 0).Local().Format("15:04:05") + " p2 #12 order-7 {"
	if !strings.HasPrefix(line, want) {
		t.Errorf("line = %q, want prefix %q", line, want)
	}
	if strings.Contains(line, "_rid") || !strings.Contains(line, `"customer":"c42"`) {
		t.Errorf("line = %q: want the body without system properties", line)
	}
	if n := len([]rune(line)); n > 60 || !strings.HasSuffix(line, "…") {
		t.Errorf("line of %d runes = %q, want it cut to the width of 60 with …", n, line)
	}
}

// On a terminal the status line is cleared before each change and drawn again below it, so
// changes never print after the status text.
func TestChangeLine_TerminalStatusStaysBelowChanges(t *testing.T) {
	t.Parallel()
	var term bytes.Buffer
	ios := &IOStreams{In: strings.NewReader(""), Out: &term, ErrOut: &term, Width: 80}
	ios.SetTTY(true)
	w := NewChangeWriter(ios, NewChangePrinter(ios, FormatTable, nil, false))
	w.SetStatus(NewStatus(ios), "caught up on 1/4 ranges")
	ch := feed.Change{Item: json.RawMessage(`{"id":"a1","v":1}`), PartitionID: "0", LSN: 3}
	if err := w.Emit(ch); err != nil {
		t.Fatal(err)
	}
	const clear = "\r\x1b[K"
	want := clear + "caught up on 1/4 ranges" + clear + "--:--:-- p0 #3 a1 {\"v\":1}\n" + clear + "caught up on 1/4 ranges"
	if term.String() != want {
		t.Errorf("terminal got %q, want %q", term.String(), want)
	}
}
