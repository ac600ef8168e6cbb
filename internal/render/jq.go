package render

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/itchyny/gojq"
)

// Query is a compiled --jq expression. It is compiled once and run on every value printed.
// The expression cannot read the environment ($ENV and env are empty), so it cannot print an
// account key.
type Query struct {
	src  string
	code *gojq.Code
}

// CompileQuery parses and compiles a jq expression. Its errors are the user's (a usage error).
func CompileQuery(expr string) (*Query, error) {
	q, err := gojq.Parse(expr)
	if err != nil {
		return nil, fmt.Errorf("invalid --jq expression %q: %w", expr, err)
	}
	code, err := gojq.Compile(q, gojq.WithEnvironLoader(func() []string { return nil }))
	if err != nil {
		return nil, fmt.Errorf("invalid --jq expression %q: %w", expr, err)
	}
	return &Query{src: expr, code: code}, nil
}

// String returns the expression as the user wrote it.
func (q *Query) String() string { return q.src }

// Run evaluates the query on v (any value encoding/json can marshal) and writes each result on
// its own line as soon as it is produced (one Write per line): strings raw, like jq -r,
// everything else as compact JSON. Results are never collected, so an expression with many or
// endless results ('.[]' on a large array, 'range(infinite)') streams in bounded memory; the
// results written before an error stay written.
func (q *Query) Run(ctx context.Context, w io.Writer, v any) error {
	return q.run(ctx, w, v, false)
}

// run is Run for w, a terminal when terminal is set: then raw strings are escaped (Safe) and
// JSON results escape what a terminal would obey (appendTerminalJSON).
func (q *Query) run(ctx context.Context, w io.Writer, v any, terminal bool) error {
	in, err := toGeneric(v)
	if err != nil {
		return err
	}
	iter := q.code.RunWithContext(ctx, in)
	var buf bytes.Buffer
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		out, ok := iter.Next()
		if !ok {
			break
		}
		if err, ok := out.(error); ok {
			var halt *gojq.HaltError
			if errors.As(err, &halt) && halt.Value() == nil {
				break
			}
			return fmt.Errorf("--jq %s: %w", q.src, err)
		}
		switch s, isString := out.(string); {
		case isString && terminal:
			buf.WriteString(Safe(s))
		case isString:
			buf.WriteString(s)
		default:
			b, err := gojq.Marshal(out)
			if err != nil {
				return fmt.Errorf("--jq %s: %w", q.src, err)
			}
			if terminal {
				buf.Write(appendTerminalJSON(nil, b))
			} else {
				buf.Write(b)
			}
		}
		buf.WriteByte('\n')
		if _, err := w.Write(buf.Bytes()); err != nil {
			return err
		}
		buf.Reset()
	}
	return nil
}

// toGeneric turns v into the plain maps, slices, strings, json.Numbers, bools and nils that
// gojq works on, keeping large integers (LSNs) exact.
func toGeneric(v any) (any, error) {
	var b []byte
	switch x := v.(type) {
	case json.RawMessage:
		b = x
	case []byte:
		b = x
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			return nil, fmt.Errorf("encode output as json: %w", err)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var out any
	if err := dec.Decode(&out); err != nil {
		return nil, fmt.Errorf("decode output as json: %w", err)
	}
	return out, nil
}
