package render

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
)

// ChangePrinter writes the changes of a tail in one output format, one change at a time into
// a buffer (see ChangeWriter). Each format is one printer type, chosen in NewChangePrinter; a
// printer is not safe for concurrent use.
type ChangePrinter interface {
	// Open appends what comes before the first change ("[" for a JSON array).
	Open(dst []byte) []byte
	// Append appends change n (counted from 0) to dst. Its errors that mean "the change cannot
	// be written" wrap ErrOutput; a --jq expression's runtime error comes as it is.
	Append(ctx context.Context, dst []byte, ch feed.Change, n int64) ([]byte, error)
	// Close appends what ends the output after n changes ("]" for a JSON array).
	Close(dst []byte, n int64) []byte
}

// NewChangePrinter chooses the printer of changes for the resolved format f: with a --jq
// query, the query's output; FormatTable, one line per change for a terminal, cut to the
// width; FormatJSON, one JSON array; otherwise JSON lines. envelope wraps every change in its
// Envelope (for the query too).
func NewChangePrinter(ios *IOStreams, f Format, q *Query, envelope bool) ChangePrinter {
	switch {
	case q != nil:
		return &jqChanges{query: q, envelope: envelope, terminal: ios.IsStdoutTTY}
	case f == FormatTable:
		return lineChanges{width: ios.Width, styles: ios.Styles()}
	case f == FormatJSON:
		return jsonArrayChanges{envelope: envelope, terminal: ios.IsStdoutTTY}
	}
	return jsonLinesChanges{envelope: envelope, terminal: ios.IsStdoutTTY}
}

// jsonLinesChanges writes each change as one line of JSON, exactly as the feed returned it
// (on a terminal with what it would obey escaped: appendTerminalJSON).
type jsonLinesChanges struct{ envelope, terminal bool }

func (jsonLinesChanges) Open(dst []byte) []byte { return dst }

func (p jsonLinesChanges) Append(_ context.Context, dst []byte, ch feed.Change, _ int64) ([]byte, error) {
	dst, err := appendJSON(dst, ch, p.envelope, p.terminal)
	if err != nil {
		return dst, err
	}
	return append(dst, '\n'), nil
}

func (jsonLinesChanges) Close(dst []byte, _ int64) []byte { return dst }

// jsonArrayChanges writes the changes as one JSON array, a change a line.
type jsonArrayChanges struct{ envelope, terminal bool }

func (jsonArrayChanges) Open(dst []byte) []byte { return append(dst, '[') }

func (p jsonArrayChanges) Append(_ context.Context, dst []byte, ch feed.Change, n int64) ([]byte, error) {
	if n > 0 {
		dst = append(dst, ',')
	}
	return appendJSON(append(dst, '\n'), ch, p.envelope, p.terminal)
}

func (jsonArrayChanges) Close(dst []byte, n int64) []byte {
	if n > 0 {
		dst = append(dst, '\n')
	}
	return append(dst, "]\n"...)
}

// appendJSON appends the change, or its envelope, as compact JSON; for a terminal, with what
// it would obey escaped (appendTerminalJSON).
func appendJSON(dst []byte, ch feed.Change, envelope, terminal bool) ([]byte, error) {
	start := len(dst)
	var err error
	if envelope {
		dst, err = appendEnvelope(dst, ch)
	} else {
		dst, err = appendCompact(dst, ch.Item)
	}
	if err != nil || !terminal || !mayNeedTerminalEscape(dst[start:]) {
		return dst, err
	}
	return appendTerminalJSON(dst[:start], slices.Clone(dst[start:])), nil
}

// jqChanges writes what a --jq query makes of each change (or its envelope).
type jqChanges struct {
	query    *Query
	envelope bool
	terminal bool
	out      bytes.Buffer
}

func (*jqChanges) Open(dst []byte) []byte { return dst }

func (p *jqChanges) Append(ctx context.Context, dst []byte, ch feed.Change, _ int64) ([]byte, error) {
	var v any = ch.Item
	if p.envelope {
		v = EnvelopeOf(ch)
	}
	p.out.Reset()
	if err := p.query.run(ctx, &p.out, v, p.terminal); err != nil {
		return dst, err
	}
	return append(dst, p.out.Bytes()...), nil
}

func (*jqChanges) Close(dst []byte, _ int64) []byte { return dst }

// lineChanges writes one line per change for a person on a terminal (see appendLine).
type lineChanges struct {
	width  int
	styles Styles
}

func (lineChanges) Open(dst []byte) []byte { return dst }

func (p lineChanges) Append(_ context.Context, dst []byte, ch feed.Change, _ int64) ([]byte, error) {
	return p.appendLine(dst, ch), nil
}

func (lineChanges) Close(dst []byte, _ int64) []byte { return dst }

// Envelope is one change of cfp tail --envelope: a public contract (docs/scripting.md).
type Envelope struct {
	Range     feed.Range      `json:"range"`
	Partition string          `json:"partition,omitempty"`
	LSN       int64           `json:"lsn"`
	TS        string          `json:"ts,omitempty"`
	Operation string          `json:"operation"`
	Item      json.RawMessage `json:"item"`
}

// OperationUpsert is the envelope's operation in latest-version mode, where a create and a
// replace cannot be told apart.
const OperationUpsert = "upsert"

// EnvelopeOf wraps a change in its envelope.
func EnvelopeOf(ch feed.Change) Envelope {
	env := Envelope{
		Range:     ch.Range,
		Partition: ch.PartitionID,
		LSN:       ch.LSN,
		Operation: OperationUpsert,
		Item:      ch.Item,
	}
	if ch.Operation != "" {
		env.Operation = ch.Operation
	}
	if !ch.TS.IsZero() {
		env.TS = ch.TS.UTC().Format(time.RFC3339)
	}
	return env
}

// appendCompact appends raw as one line of JSON: as it is when it holds no newline (the feed's
// items are compact), else compacted.
func appendCompact(dst []byte, raw json.RawMessage) ([]byte, error) {
	if bytes.IndexByte(raw, '\n') < 0 && bytes.IndexByte(raw, '\r') < 0 {
		return append(dst, raw...), nil
	}
	buf := bytes.NewBuffer(dst)
	if err := json.Compact(buf, raw); err != nil {
		return dst, fmt.Errorf("%w: change is not valid JSON: %w", ErrOutput, err)
	}
	return buf.Bytes(), nil
}

// appendEnvelope appends the envelope of ch without re-encoding the item.
func appendEnvelope(dst []byte, ch feed.Change) ([]byte, error) {
	env := EnvelopeOf(ch)
	env.Item = nil
	head, err := json.Marshal(env)
	if err != nil {
		return dst, fmt.Errorf("%w: %w", ErrOutput, err)
	}
	// head ends with `"item":null}`: put the raw item in place of null.
	head = bytes.TrimSuffix(head, []byte(`null}`))
	dst = append(dst, head...)
	dst, err = appendCompact(dst, ch.Item)
	if err != nil {
		return dst, err
	}
	return append(dst, '}'), nil
}

// hiddenProperties are the id and the properties the service adds; the terminal preview hides them.
var hiddenProperties = map[string]bool{"id": true, "_rid": true, "_self": true, "_etag": true,
	"_attachments": true, "_ts": true, "_lsn": true}

// appendLine appends the terminal line of a change: time, range, id and a body preview,
// cut to the terminal width. An all-versions change shows its operation before the id and
// previews its current image (nothing for a delete).
func (p lineChanges) appendLine(dst []byte, ch feed.Change) []byte {
	var item map[string]json.RawMessage
	var deletedID json.RawMessage
	if ch.Operation != "" {
		var av struct {
			Current  map[string]json.RawMessage `json:"current"`
			Metadata struct {
				ID json.RawMessage `json:"id"`
			} `json:"metadata"`
		}
		_ = json.Unmarshal(ch.Item, &av)
		item, deletedID = av.Current, av.Metadata.ID
	} else {
		_ = json.Unmarshal(ch.Item, &item)
	}
	id := "-"
	raw, ok := item["id"]
	if !ok && deletedID != nil {
		raw, ok = deletedID, true
	}
	if ok {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			id = s
		} else {
			id = string(raw)
		}
	}
	when := "--:--:--"
	if !ch.TS.IsZero() {
		when = ch.TS.Local().Format("15:04:05")
	}
	where := RangeText(ch.Range.Min, ch.Range.Max)
	if ch.PartitionID != "" {
		where = "p" + ch.PartitionID
	}
	var preview strings.Builder
	preview.WriteByte('{')
	first := true
	for _, k := range sortedKeys(item) {
		if hiddenProperties[k] {
			continue
		}
		if !first {
			preview.WriteByte(',')
		}
		first = false
		kb, _ := json.Marshal(k)
		preview.Write(kb)
		preview.WriteByte(':')
		var c bytes.Buffer
		if json.Compact(&c, item[k]) == nil {
			preview.Write(c.Bytes())
		} else {
			preview.Write(item[k])
		}
		if preview.Len() > p.width {
			break
		}
	}
	preview.WriteByte('}')
	lsn := fmt.Sprintf("#%d", ch.LSN)
	op := ""
	if ch.Operation != "" {
		op = fmt.Sprintf("%-7s ", ch.Operation)
	}
	used := len(when) + len(where) + len(lsn) + len(op) + len([]rune(id)) + 4
	body := []rune(preview.String())
	if room := p.width - used - 1; room < len(body) {
		if room < 4 {
			body = nil
		} else {
			body = append(body[:room-1], '…')
		}
	}
	s := p.styles
	switch ch.Operation {
	case feed.OperationCreate:
		op = s.Success.Render(op)
	case feed.OperationDelete:
		op = s.Error.Render(op)
	}
	line := fmt.Sprintf("%s %s %s %s%s %s\n", s.Muted.Render(when), s.Warning.Render(where), s.Muted.Render(lsn),
		op, s.Bold.Render(Safe(id)), Safe(string(body)))
	return append(dst, line...)
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
