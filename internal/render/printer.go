package render

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
)

// Printer writes a command's results to stdout in one resolved Format, filtered by an optional
// --jq Query. Build one per command run; it is not safe for concurrent use.
type Printer struct {
	IO     *IOStreams
	Format Format
	// Query, when set, filters every JSON value before it is written (see Query.Run).
	Query *Query
}

// NewPrinter returns a printer for the resolved format f. A query makes sense only for JSON
// formats: callers resolve that conflict first (see the cmd package's output options).
func NewPrinter(ios *IOStreams, f Format, q *Query) *Printer {
	return &Printer{IO: ios, Format: f, Query: q}
}

// Print writes a result: with FormatJSON, v as one JSON document; with FormatJSONL, each
// element of v on its own line when v is a slice or array, else v as one line; with
// FormatTable, the table that fill builds. fill may be nil for results that have no table view,
// in which case the table format writes JSON.
func (p *Printer) Print(ctx context.Context, v any, fill func(*Table)) error {
	switch p.Format {
	case FormatJSONL:
		rv := reflect.ValueOf(v)
		if rv.Kind() == reflect.Slice || rv.Kind() == reflect.Array {
			if _, raw := v.(json.RawMessage); !raw {
				if _, b := v.([]byte); !b {
					for i := range rv.Len() {
						if err := p.Line(ctx, rv.Index(i).Interface()); err != nil {
							return err
						}
					}
					return nil
				}
			}
		}
		return p.Line(ctx, v)
	case FormatTable:
		if fill != nil && p.Query == nil {
			t := NewTable(p.IO)
			fill(t)
			return t.Render()
		}
	}
	return p.JSON(ctx, v)
}

// JSON writes v as one JSON document, indented for reading, or through the query.
func (p *Printer) JSON(ctx context.Context, v any) error {
	if p.Query != nil {
		return p.Query.run(ctx, p.IO.Out, v, p.IO.IsStdoutTTY)
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode output as json: %w", err)
	}
	return p.writeLine(b)
}

// Line writes v as one compact JSON line, or through the query. Streaming commands call it
// once per event; each call writes whole lines.
func (p *Printer) Line(ctx context.Context, v any) error {
	if p.Query != nil {
		return p.Query.run(ctx, p.IO.Out, v, p.IO.IsStdoutTTY)
	}
	var b []byte
	switch x := v.(type) {
	case json.RawMessage:
		var buf bytes.Buffer
		if err := json.Compact(&buf, x); err != nil {
			return fmt.Errorf("encode output as json: %w", err)
		}
		b = buf.Bytes()
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			return fmt.Errorf("encode output as json: %w", err)
		}
	}
	return p.writeLine(b)
}

// writeLine writes the JSON text b and a line end, escaping what a terminal would obey when
// stdout is one (appendTerminalJSON).
func (p *Printer) writeLine(b []byte) error {
	buf := make([]byte, 0, len(b)+1)
	if p.IO.IsStdoutTTY {
		buf = appendTerminalJSON(buf, b)
	} else {
		buf = append(buf, b...)
	}
	_, err := p.IO.Out.Write(append(buf, '\n'))
	return err
}
