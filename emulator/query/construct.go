package query

import (
	"fmt"
	"strings"
)

// arrayNode is an array constructor, [a, b, ...]: undefined elements are left out.
type arrayNode struct{ elems []node }

// objectNode is an object constructor, {"k": v, ...}: undefined values are left out.
type objectNode struct {
	keys []string
	vals []node
}

// aggNode is an aggregate call in a select list (COUNT, SUM, MIN, MAX, AVG): its value is the
// fold over every matching document, which the Aggregator computes; idx is its place in
// Query.aggs.
type aggNode struct {
	fn  string
	arg node
	idx int
}

func (n arrayNode) eval(e *env) (any, error) {
	out := make([]any, 0, len(n.elems))
	for _, el := range n.elems {
		v, err := el.eval(e)
		if err != nil {
			return nil, err
		}
		if _, undef := v.(undefined); !undef {
			out = append(out, v)
		}
	}
	return out, nil
}

func (n arrayNode) String() string {
	parts := make([]string, len(n.elems))
	for i, el := range n.elems {
		parts[i] = el.String()
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func (n objectNode) eval(e *env) (any, error) {
	out := make(map[string]any, len(n.keys))
	for i, k := range n.keys {
		v, err := n.vals[i].eval(e)
		if err != nil {
			return nil, err
		}
		if _, undef := v.(undefined); !undef {
			out[k] = v
		}
	}
	return out, nil
}

func (n objectNode) String() string {
	parts := make([]string, len(n.keys))
	for i, k := range n.keys {
		parts[i] = formatValue(k) + ": " + n.vals[i].String()
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func (n aggNode) eval(e *env) (any, error) {
	if e.aggs == nil {
		return nil, fmt.Errorf("aggregate %s outside a select list", n.fn)
	}
	return e.aggs[n.idx], nil
}

func (n aggNode) String() string { return n.fn + "(" + n.arg.String() + ")" }

// array parses an array constructor after its '['.
func (p *parser) array() (node, error) {
	var n arrayNode
	if p.accept("]") {
		return n, nil
	}
	for {
		el, err := p.or()
		if err != nil {
			return nil, err
		}
		n.elems = append(n.elems, el)
		if !p.accept(",") {
			break
		}
	}
	if err := p.expect("]"); err != nil {
		return nil, err
	}
	return n, nil
}

// object parses an object constructor after its '{'.
func (p *parser) object() (node, error) {
	var n objectNode
	if p.accept("}") {
		return n, nil
	}
	for {
		t := p.next()
		if t.kind != tokString {
			return nil, fmt.Errorf("offset %d: expected a quoted property name in { }, found %s", t.pos, t)
		}
		if err := p.expect(":"); err != nil {
			return nil, err
		}
		v, err := p.or()
		if err != nil {
			return nil, err
		}
		n.keys, n.vals = append(n.keys, t.str), append(n.vals, v)
		if !p.accept(",") {
			break
		}
	}
	if err := p.expect("}"); err != nil {
		return nil, err
	}
	return n, nil
}

// aggState folds one aggregate over the matches.
type aggState struct {
	count int
	sum   float64
	best  any
	typed bool // SUM and AVG saw only numbers so far
}

func (s *aggState) add(fn string, v any) {
	if _, undef := v.(undefined); undef {
		return
	}
	switch fn {
	case "COUNT":
		s.count++
	case "SUM", "AVG":
		f, ok := v.(float64)
		if !ok {
			s.typed = false
			return
		}
		s.sum += f
		s.count++
	case "MIN", "MAX":
		if typeRank(v) >= typeRank([]any{}) {
			return
		}
		if s.count == 0 {
			s.best = v
		} else if c := compareForSort(v, s.best); (fn == "MIN" && c < 0) || (fn == "MAX" && c > 0) {
			s.best = v
		}
		s.count++
	}
}

// result is the aggregate's value, undefined{} where Cosmos DB leaves it undefined: SUM or AVG
// over non-numbers, MIN, MAX and AVG over nothing.
func (s *aggState) result(fn string) any {
	switch fn {
	case "COUNT":
		return float64(s.count)
	case "SUM":
		if !s.typed {
			return undefined{}
		}
		return s.sum
	case "AVG":
		if !s.typed || s.count == 0 {
			return undefined{}
		}
		return s.sum / float64(s.count)
	default:
		if s.count == 0 {
			return undefined{}
		}
		return s.best
	}
}
