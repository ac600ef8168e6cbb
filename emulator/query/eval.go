package query

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// undefined is the value of an absent property or of an expression Cosmos DB
// leaves undefined (comparing mismatched types). Only true matches a WHERE.
type undefined struct{}

type env struct {
	doc    map[string]any
	params map[string]any
	aggs   []any // the aggregates' results, when projecting an aggregate query
}

type node interface {
	eval(e *env) (any, error)
	String() string
}

type literal struct{ v any }

type paramNode struct{ name string }

type seg struct {
	name  string
	index int // >= 0 for an array index, -1 for a property name
}

type pathNode struct {
	alias string
	segs  []seg
}

type parenNode struct{ n node }

type notNode struct{ n node }

type andNode struct{ left, right node }

type orNode struct{ left, right node }

type cmpNode struct {
	op          string
	left, right node
}

type inNode struct {
	x    node
	list []node
}

type callNode struct {
	fn   string
	args []node
}

func (n literal) eval(*env) (any, error) { return n.v, nil }

func (n literal) String() string { return formatValue(n.v) }

func formatValue(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return strconv.FormatBool(v)
	case float64:
		if v < 0 || (v == 0 && math.Signbit(v)) {
			return "-" + strconv.FormatFloat(-v, 'g', -1, 64)
		}
		return strconv.FormatFloat(v, 'g', -1, 64)
	case string:
		b, _ := json.Marshal(v) // a valid query string literal
		return string(b)
	default:
		return "undefined"
	}
}

func (n paramNode) eval(e *env) (any, error) {
	v, ok := e.params[n.name]
	if !ok {
		return nil, fmt.Errorf("parameter %s is not defined", n.name)
	}
	return normalize(v), nil
}

func (n paramNode) String() string { return n.name }

func (n pathNode) eval(e *env) (any, error) { return resolve(e.doc, n.segs), nil }

func (n pathNode) String() string {
	var b strings.Builder
	b.WriteString(n.alias)
	for _, s := range n.segs {
		if s.index >= 0 {
			fmt.Fprintf(&b, "[%d]", s.index)
		} else {
			b.WriteByte('[')
			b.WriteString(formatValue(s.name))
			b.WriteByte(']')
		}
	}
	return b.String()
}

// resolve follows segs from doc; a missing step gives undefined.
func resolve(doc map[string]any, segs []seg) any {
	if doc == nil {
		return undefined{}
	}
	var cur any = doc
	for _, s := range segs {
		switch c := cur.(type) {
		case map[string]any:
			if s.index >= 0 {
				return undefined{}
			}
			v, ok := c[s.name]
			if !ok {
				return undefined{}
			}
			cur = v
		case []any:
			if s.index < 0 || s.index >= len(c) {
				return undefined{}
			}
			cur = c[s.index]
		default:
			return undefined{}
		}
	}
	return normalize(cur)
}

// normalize maps numbers of every Go type to float64.
func normalize(v any) any {
	switch n := v.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(string(n), 64)
		if err != nil {
			return undefined{}
		}
		return f
	case int:
		return float64(n)
	case int64:
		return float64(n)
	case int32:
		return float64(n)
	case float32:
		return float64(n)
	case uint64:
		return float64(n)
	}
	return v
}

func (n parenNode) eval(e *env) (any, error) { return n.n.eval(e) }

func (n parenNode) String() string { return "(" + n.n.String() + ")" }

func (n notNode) eval(e *env) (any, error) {
	v, err := n.n.eval(e)
	if err != nil {
		return nil, err
	}
	if b, ok := v.(bool); ok {
		return !b, nil
	}
	return undefined{}, nil
}

func (n notNode) String() string { return "NOT " + n.n.String() }

// evalBoth evaluates the two operands of a binary node, left first.
func evalBoth(e *env, left, right node) (l, r any, err error) {
	if l, err = left.eval(e); err != nil {
		return nil, nil, err
	}
	if r, err = right.eval(e); err != nil {
		return nil, nil, err
	}
	return l, r, nil
}

func (n andNode) eval(e *env) (any, error) {
	l, r, err := evalBoth(e, n.left, n.right)
	if err != nil {
		return nil, err
	}
	if l == false || r == false {
		return false, nil
	}
	if l == true && r == true {
		return true, nil
	}
	return undefined{}, nil
}

func (n andNode) String() string { return n.left.String() + " AND " + n.right.String() }

func (n orNode) eval(e *env) (any, error) {
	l, r, err := evalBoth(e, n.left, n.right)
	if err != nil {
		return nil, err
	}
	if l == true || r == true {
		return true, nil
	}
	if l == false && r == false {
		return false, nil
	}
	return undefined{}, nil
}

func (n orNode) String() string { return n.left.String() + " OR " + n.right.String() }

func (n cmpNode) eval(e *env) (any, error) {
	l, r, err := evalBoth(e, n.left, n.right)
	if err != nil {
		return nil, err
	}
	return compare(n.op, l, r), nil
}

func (n cmpNode) String() string { return n.left.String() + " " + n.op + " " + n.right.String() }

func (n inNode) eval(e *env) (any, error) {
	x, err := n.x.eval(e)
	if err != nil {
		return nil, err
	}
	var result any = false
	for _, item := range n.list {
		v, err := item.eval(e)
		if err != nil {
			return nil, err
		}
		switch compare("=", x, v) {
		case true:
			result = true
		case false:
		default:
			if result == false {
				result = undefined{}
			}
		}
	}
	return result, nil
}

func (n inNode) String() string {
	parts := make([]string, len(n.list))
	for i, item := range n.list {
		parts[i] = item.String()
	}
	return n.x.String() + " IN (" + strings.Join(parts, ", ") + ")"
}

func (n callNode) eval(e *env) (any, error) {
	args := make([]any, len(n.args))
	for i, a := range n.args {
		v, err := a.eval(e)
		if err != nil {
			return nil, err
		}
		args[i] = v
	}
	switch n.fn {
	case "STARTSWITH", "ENDSWITH", "CONTAINS":
		s, ok1 := args[0].(string)
		sub, ok2 := args[1].(string)
		if !ok1 || !ok2 {
			return undefined{}, nil
		}
		if len(args) == 3 {
			ignoreCase, ok := args[2].(bool)
			if !ok {
				return undefined{}, nil
			}
			if ignoreCase {
				s, sub = strings.ToLower(s), strings.ToLower(sub)
			}
		}
		switch n.fn {
		case "STARTSWITH":
			return strings.HasPrefix(s, sub), nil
		case "ENDSWITH":
			return strings.HasSuffix(s, sub), nil
		default:
			return strings.Contains(s, sub), nil
		}
	case "IS_DEFINED":
		_, undef := args[0].(undefined)
		return !undef, nil
	case "IS_NULL":
		return args[0] == nil, nil
	case "IS_BOOL":
		_, ok := args[0].(bool)
		return ok, nil
	case "IS_NUMBER":
		_, ok := args[0].(float64)
		return ok, nil
	case "IS_STRING":
		_, ok := args[0].(string)
		return ok, nil
	case "IS_ARRAY":
		_, ok := args[0].([]any)
		return ok, nil
	case "IS_OBJECT":
		_, ok := args[0].(map[string]any)
		return ok, nil
	case "IS_PRIMITIVE":
		switch args[0].(type) {
		case nil, bool, float64, string:
			return true, nil
		}
		return false, nil
	}
	return nil, fmt.Errorf("function %s is not implemented", n.fn) // unreachable: Parse checks names
}

func (n callNode) String() string {
	parts := make([]string, len(n.args))
	for i, a := range n.args {
		parts[i] = a.String()
	}
	return n.fn + "(" + strings.Join(parts, ", ") + ")"
}

// typeRank orders JSON types the way Cosmos DB's ORDER BY does.
func typeRank(v any) int {
	switch v := v.(type) {
	case undefined:
		return 0
	case nil:
		return 1
	case bool:
		if v {
			return 3
		}
		return 2
	case float64:
		return 4
	case string:
		return 5
	case []any:
		return 6
	case map[string]any:
		return 7
	}
	return 0
}

// compare applies a comparison operator with Cosmos DB's semantics: undefined
// when either side is undefined or the types differ, and for ordering
// operators (and !=) on arrays and objects.
func compare(op string, l, r any) any {
	l, r = normalize(l), normalize(r)
	rl, rr := typeRank(l), typeRank(r)
	if rl == 0 || rr == 0 {
		return undefined{}
	}
	if rl == 2 || rl == 3 {
		rl = 2 // one type, bool
	}
	if rr == 2 || rr == 3 {
		rr = 2
	}
	if rl != rr {
		return undefined{}
	}
	if rl >= 6 {
		if op == "=" {
			return deepEqual(l, r)
		}
		return undefined{}
	}
	c := scalarCompare(l, r)
	switch op {
	case "=":
		return c == 0
	case "!=":
		return c != 0
	case "<":
		return c < 0
	case "<=":
		return c <= 0
	case ">":
		return c > 0
	default: // ">="
		return c >= 0
	}
}

// scalarCompare compares two scalars of the same JSON type.
func scalarCompare(l, r any) int {
	switch l := l.(type) {
	case bool:
		rb := r.(bool)
		switch {
		case l == rb:
			return 0
		case !l:
			return -1
		default:
			return 1
		}
	case float64:
		rf := r.(float64)
		switch {
		case l < rf:
			return -1
		case l > rf:
			return 1
		default:
			return 0
		}
	case string:
		return strings.Compare(l, r.(string))
	}
	return 0 // null = null
}

func deepEqual(l, r any) bool {
	l, r = normalize(l), normalize(r)
	switch lv := l.(type) {
	case []any:
		rv, ok := r.([]any)
		if !ok || len(lv) != len(rv) {
			return false
		}
		for i := range lv {
			if !deepEqual(lv[i], rv[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		rv, ok := r.(map[string]any)
		if !ok || len(lv) != len(rv) {
			return false
		}
		for k, x := range lv {
			y, ok := rv[k]
			if !ok || !deepEqual(x, y) {
				return false
			}
		}
		return true
	}
	if typeRank(l) != typeRank(r) || typeRank(l) == 0 {
		return false
	}
	return scalarCompare(l, r) == 0
}

// compareForSort orders any two values for ORDER BY.
func compareForSort(a, b any) int {
	ra, rb := typeRank(a), typeRank(b)
	if ra != rb {
		return ra - rb
	}
	if ra >= 6 || ra == 0 {
		return 0
	}
	return scalarCompare(a, b)
}
