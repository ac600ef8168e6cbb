package query

import (
	"fmt"
	"slices"
	"strings"
)

// User-defined functions: udf.name(args...) calls the container's UDF name, a JavaScript function
// the caller runs (UDFs). A call is evaluated for one document at a time, in WHERE and in the
// select list, so a query with one is exact on each partition and through the query plan (whose
// rewritten query keeps the call). Inside an aggregate or a GROUP BY expression it is refused:
// those are folded across partitions by the client.

// UDFs runs the user-defined function name with args (decoded JSON values) and returns its
// result as a decoded JSON value; nil and ok false for undefined.
type UDFs func(name string, args []any) (v any, ok bool, err error)

// udfsKey is the params entry that carries the UDFs: no parameter name starts with a NUL.
const udfsKey = "\x00udfs"

// WithUDFs returns params with fn as the user-defined functions the query's udf.name(...) calls
// run. params is not changed.
func WithUDFs(params map[string]any, fn UDFs) map[string]any {
	out := make(map[string]any, len(params)+1)
	for k, v := range params {
		out[k] = v
	}
	out[udfsKey] = fn
	return out
}

type udfNode struct {
	name string
	args []node
}

func (n udfNode) eval(e *env) (any, error) {
	fn, _ := e.params[udfsKey].(UDFs)
	if fn == nil {
		return nil, fmt.Errorf("the user-defined function udf.%s is not available here", n.name)
	}
	args := make([]any, len(n.args))
	for i, a := range n.args {
		v, err := a.eval(e)
		if err != nil {
			return nil, err
		}
		if _, undef := v.(undefined); undef {
			v = nil
		}
		args[i] = v
	}
	v, ok, err := fn(n.name, args)
	if err != nil {
		return nil, err
	}
	if !ok {
		return undefined{}, nil
	}
	return normalize(v), nil
}

func (n udfNode) String() string {
	parts := make([]string, len(n.args))
	for i, a := range n.args {
		parts[i] = a.String()
	}
	return "udf." + n.name + "(" + strings.Join(parts, ", ") + ")"
}

// udfCall parses udf.name(args) after the identifier udf.
func (p *parser) udfCall(udf token) (node, error) {
	p.next() // .
	name := p.next()
	if name.kind != tokIdent {
		return nil, fmt.Errorf("offset %d: expected a user-defined function's name after udf., found %s", name.pos, name)
	}
	if err := p.expect("("); err != nil {
		return nil, err
	}
	n := udfNode{name: name.text}
	if !p.accept(")") {
		for {
			a, err := p.or()
			if err != nil {
				return nil, err
			}
			n.args = append(n.args, a)
			if !p.accept(",") {
				break
			}
		}
		if err := p.expect(")"); err != nil {
			return nil, err
		}
	}
	return n, nil
}

// hasUDF reports whether n is or contains a user-defined function call.
func hasUDF(n node) bool {
	if _, ok := n.(udfNode); ok {
		return true
	}
	for _, k := range children(n) {
		if hasUDF(k) {
			return true
		}
	}
	return false
}

// checkUDFs refuses user-defined functions where a cross-partition answer would not be exact.
func (q *Query) checkUDFs() error {
	for _, a := range q.aggs {
		if hasUDF(a) {
			return &UnsupportedError{Pos: -1, What: "a user-defined function inside an aggregate"}
		}
	}
	for _, g := range q.groupBy {
		if hasUDF(g) {
			return &UnsupportedError{Pos: -1, What: "a user-defined function in GROUP BY"}
		}
	}
	return nil
}

// UDFNames returns the names of the user-defined functions the query calls, sorted.
func (q *Query) UDFNames() []string {
	var names []string
	var walk func(n node)
	walk = func(n node) {
		if n == nil {
			return
		}
		if u, ok := n.(udfNode); ok && !slices.Contains(names, u.name) {
			names = append(names, u.name)
		}
		for _, k := range children(n) {
			walk(k)
		}
	}
	walk(q.where)
	for _, f := range q.fields {
		walk(f.expr)
	}
	slices.Sort(names)
	return names
}
