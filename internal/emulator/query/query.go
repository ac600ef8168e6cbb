// Package query owns the emulator's SQL subset: parsing
// `SELECT [TOP n] * FROM <alias> [WHERE <expr>] [ORDER BY <path> [ASC|DESC]]`
// and evaluating the WHERE clause against decoded JSON documents with Cosmos
// DB's semantics, where comparing mismatched types or absent properties is
// undefined rather than false (spec/cosmos-gateway.md §6).
//
// Supported in expressions: AND, OR, NOT, parentheses; = != <> < <= > >=;
// x [NOT] IN (a, b, ...); property paths (c.id, c.a.b, c["x"], c.tags[0]);
// parameters (@p); string (single or double quoted), number, boolean, null
// and undefined literals; STARTSWITH, ENDSWITH, CONTAINS (with an optional
// ignoreCase argument), IS_DEFINED, IS_NULL, IS_BOOL, IS_NUMBER, IS_STRING,
// IS_ARRAY, IS_OBJECT and IS_PRIMITIVE. Everything else is rejected with an
// error wrapping ErrUnsupported.
package query

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrUnsupported is wrapped by Parse errors for valid Cosmos DB SQL that the
// emulator does not implement (projections, JOIN, GROUP BY, other functions).
// Other Parse errors are syntax errors. Both deserve a 400.
var ErrUnsupported = errors.New("unsupported")

// Query is a parsed query. It is immutable and safe for concurrent use.
type Query struct {
	// Alias is the name the query gives the container's items ("c" in
	// SELECT * FROM c).
	Alias string
	// Top is the TOP n limit, or -1 when the query has none.
	Top int
	// OrderBy is the ORDER BY clause, or nil when the query has none.
	OrderBy *OrderBy

	where node // nil without WHERE
}

// OrderBy is a single-property ORDER BY clause.
type OrderBy struct {
	// Path is the property path below the alias: ["_ts"] for c._ts,
	// ["a", "b"] for c.a.b.
	Path []string
	// Desc is true for DESC.
	Desc bool
}

// Parse parses sql. Keywords and function names are case-insensitive;
// identifiers and parameter names are not.
func Parse(sql string) (*Query, error) {
	toks, err := lex(sql)
	if err != nil {
		return nil, fmt.Errorf("parse query: %w", err)
	}
	p := &parser{toks: toks}
	q, err := p.query()
	if err != nil {
		return nil, fmt.Errorf("parse query: %w", err)
	}
	return q, nil
}

// Match reports whether doc satisfies the WHERE clause (always true without
// one). params maps parameter names, with their '@', to decoded JSON values.
// Match fails only when the query uses a parameter that params lacks.
func (q *Query) Match(doc map[string]any, params map[string]any) (bool, error) {
	if q.where == nil {
		return true, nil
	}
	v, err := q.where.eval(&env{doc: doc, params: params})
	if err != nil {
		return false, err
	}
	return v == true, nil
}

// String returns the query in a normalised form that parses to an equivalent
// query.
func (q *Query) String() string {
	var b strings.Builder
	b.WriteString("SELECT ")
	if q.Top >= 0 {
		fmt.Fprintf(&b, "TOP %d ", q.Top)
	}
	b.WriteString("* FROM ")
	b.WriteString(q.Alias)
	if q.where != nil {
		b.WriteString(" WHERE ")
		b.WriteString(q.where.String())
	}
	if q.OrderBy != nil {
		b.WriteString(" ORDER BY ")
		b.WriteString(pathNode{alias: q.Alias, segs: stringSegs(q.OrderBy.Path)}.String())
		if q.OrderBy.Desc {
			b.WriteString(" DESC")
		} else {
			b.WriteString(" ASC")
		}
	}
	return b.String()
}

// Compare orders two documents by the ORDER BY clause, direction included: it
// returns a negative number when a comes first, positive when b does, 0 when
// they tie (use a stable sort). Values order by type first, as Cosmos DB
// does: undefined, null, false, true, numbers, strings, then arrays and
// objects (which tie). Compare returns 0 when the query has no ORDER BY.
func (q *Query) Compare(a, b map[string]any) int {
	if q.OrderBy == nil {
		return 0
	}
	segs := stringSegs(q.OrderBy.Path)
	c := compareForSort(resolve(a, segs), resolve(b, segs))
	if q.OrderBy.Desc {
		return -c
	}
	return c
}

func stringSegs(path []string) []seg {
	segs := make([]seg, len(path))
	for i, name := range path {
		segs[i] = seg{name: name, index: -1}
	}
	return segs
}

// parser is a recursive-descent parser over the token slice.
type parser struct {
	toks  []token
	pos   int
	alias string
	depth int
}

const maxDepth = 200

func (p *parser) peek() token { return p.toks[p.pos] }

func (p *parser) next() token {
	t := p.toks[p.pos]
	if t.kind != tokEOF {
		p.pos++
	}
	return t
}

func (p *parser) accept(s string) bool {
	if p.peek().is(s) {
		p.pos++
		return true
	}
	return false
}

func (p *parser) expect(s string) error {
	if t := p.next(); !t.is(s) {
		return fmt.Errorf("offset %d: expected %s, found %s", t.pos, s, t)
	}
	return nil
}

func unsupported(t token, what string) error {
	return fmt.Errorf("offset %d: %w: %s", t.pos, ErrUnsupported, what)
}

var keywords = map[string]bool{
	"SELECT": true, "TOP": true, "FROM": true, "AS": true, "WHERE": true, "AND": true, "OR": true,
	"NOT": true, "IN": true, "ORDER": true, "BY": true, "ASC": true, "DESC": true, "TRUE": true,
	"FALSE": true, "NULL": true, "UNDEFINED": true, "VALUE": true, "DISTINCT": true, "JOIN": true,
	"GROUP": true, "OFFSET": true, "LIMIT": true, "BETWEEN": true, "LIKE": true, "EXISTS": true,
	"ARRAY": true,
}

func isKeyword(t token) bool {
	return t.kind == tokIdent && keywords[strings.ToUpper(t.text)]
}

func (p *parser) query() (*Query, error) {
	q := &Query{Top: -1}
	if err := p.expect("SELECT"); err != nil {
		return nil, err
	}
	if p.accept("TOP") {
		t := p.next()
		if t.kind != tokNumber || t.num != float64(int(t.num)) || t.num < 0 || t.num > 1<<31 {
			if t.kind == tokParam {
				return nil, unsupported(t, "TOP with a parameter")
			}
			return nil, fmt.Errorf("offset %d: TOP needs a non-negative integer, found %s", t.pos, t)
		}
		q.Top = int(t.num)
	}
	if t := p.peek(); !t.is("*") {
		switch {
		case t.is("VALUE"):
			return nil, unsupported(t, "SELECT VALUE")
		case t.is("DISTINCT"):
			return nil, unsupported(t, "SELECT DISTINCT")
		default:
			return nil, unsupported(t, "projections (only SELECT * is supported)")
		}
	}
	p.next()
	if err := p.expect("FROM"); err != nil {
		return nil, err
	}
	t := p.next()
	if t.kind != tokIdent || isKeyword(t) {
		return nil, fmt.Errorf("offset %d: expected a container name after FROM, found %s", t.pos, t)
	}
	q.Alias = t.text
	if p.accept("AS") || (p.peek().kind == tokIdent && !isKeyword(p.peek())) {
		t := p.next()
		if t.kind != tokIdent || isKeyword(t) {
			return nil, fmt.Errorf("offset %d: expected an alias, found %s", t.pos, t)
		}
		q.Alias = t.text
	}
	p.alias = q.Alias
	if t := p.peek(); t.is("JOIN") || t.is("IN") {
		return nil, unsupported(t, "JOIN and iteration")
	}
	if p.accept("WHERE") {
		w, err := p.or()
		if err != nil {
			return nil, err
		}
		q.where = w
	}
	if t := p.peek(); t.is("GROUP") {
		return nil, unsupported(t, "GROUP BY")
	}
	if p.accept("ORDER") {
		if err := p.expect("BY"); err != nil {
			return nil, err
		}
		start := p.peek()
		n, err := p.operand()
		if err != nil {
			return nil, err
		}
		path, ok := n.(pathNode)
		if !ok || len(path.segs) == 0 {
			return nil, unsupported(start, "ORDER BY over anything but a property path")
		}
		ob := &OrderBy{}
		for _, s := range path.segs {
			if s.index >= 0 {
				return nil, unsupported(start, "ORDER BY over an array element")
			}
			ob.Path = append(ob.Path, s.name)
		}
		if p.accept("DESC") {
			ob.Desc = true
		} else {
			p.accept("ASC")
		}
		if t := p.peek(); t.is(",") {
			return nil, unsupported(t, "ORDER BY over several properties")
		}
		q.OrderBy = ob
	}
	if t := p.peek(); t.is("OFFSET") {
		return nil, unsupported(t, "OFFSET LIMIT")
	}
	if t := p.peek(); t.kind != tokEOF {
		return nil, fmt.Errorf("offset %d: unexpected %s", t.pos, t)
	}
	return q, nil
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > maxDepth {
		return fmt.Errorf("offset %d: expression nested too deeply", p.peek().pos)
	}
	return nil
}

func (p *parser) or() (node, error) {
	left, err := p.and()
	if err != nil {
		return nil, err
	}
	for p.accept("OR") {
		right, err := p.and()
		if err != nil {
			return nil, err
		}
		left = orNode{left, right}
	}
	return left, nil
}

func (p *parser) and() (node, error) {
	left, err := p.not()
	if err != nil {
		return nil, err
	}
	for p.accept("AND") {
		right, err := p.not()
		if err != nil {
			return nil, err
		}
		left = andNode{left, right}
	}
	return left, nil
}

func (p *parser) not() (node, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer func() { p.depth-- }()
	if p.accept("NOT") {
		n, err := p.not()
		if err != nil {
			return nil, err
		}
		return notNode{n}, nil
	}
	return p.comparison()
}

var comparisonOps = []string{"=", "!=", "<>", "<", "<=", ">", ">="}

func (p *parser) comparison() (node, error) {
	left, err := p.operand()
	if err != nil {
		return nil, err
	}
	t := p.peek()
	for _, op := range comparisonOps {
		if t.is(op) {
			p.next()
			right, err := p.operand()
			if err != nil {
				return nil, err
			}
			if op == "<>" {
				op = "!="
			}
			return cmpNode{op: op, left: left, right: right}, nil
		}
	}
	negate := false
	if t.is("NOT") && p.toks[p.pos+1].is("IN") {
		p.next()
		negate = true
	}
	if p.accept("IN") {
		if err := p.expect("("); err != nil {
			return nil, err
		}
		in := inNode{x: left}
		for {
			v, err := p.operand()
			if err != nil {
				return nil, err
			}
			in.list = append(in.list, v)
			if !p.accept(",") {
				break
			}
		}
		if err := p.expect(")"); err != nil {
			return nil, err
		}
		if negate {
			return notNode{in}, nil
		}
		return in, nil
	}
	for _, kw := range []string{"BETWEEN", "LIKE"} {
		if t.is(kw) {
			return nil, unsupported(t, kw)
		}
	}
	return left, nil
}

func (p *parser) operand() (node, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer func() { p.depth-- }()
	t := p.next()
	switch {
	case t.kind == tokString:
		return literal{t.str}, nil
	case t.kind == tokNumber:
		return literal{t.num}, nil
	case t.kind == tokParam:
		return paramNode{t.text}, nil
	case t.is("-"):
		n := p.next()
		if n.kind != tokNumber {
			return nil, unsupported(t, "unary minus on anything but a number")
		}
		return literal{-n.num}, nil
	case t.is("("):
		n, err := p.or()
		if err != nil {
			return nil, err
		}
		if err := p.expect(")"); err != nil {
			return nil, err
		}
		return parenNode{n}, nil
	case t.is("TRUE"):
		return literal{true}, nil
	case t.is("FALSE"):
		return literal{false}, nil
	case t.is("NULL"):
		return literal{nil}, nil
	case t.is("UNDEFINED"):
		return literal{undefined{}}, nil
	case t.is("["):
		return nil, unsupported(t, "array literals")
	case t.is("{"):
		return nil, unsupported(t, "object literals")
	case t.kind == tokIdent && p.peek().is("("):
		return p.call(t)
	case t.kind == tokIdent && !isKeyword(t):
		if t.text != p.alias {
			return nil, fmt.Errorf("offset %d: unknown identifier %q (the alias is %q)", t.pos, t.text, p.alias)
		}
		return p.path()
	}
	return nil, fmt.Errorf("offset %d: expected a value, found %s", t.pos, t)
}

// path parses the accessors after the alias.
func (p *parser) path() (node, error) {
	n := pathNode{alias: p.alias}
	for {
		switch {
		case p.accept("."):
			t := p.next()
			if t.kind != tokIdent {
				return nil, fmt.Errorf("offset %d: expected a property name after '.', found %s", t.pos, t)
			}
			n.segs = append(n.segs, seg{name: t.text, index: -1})
		case p.accept("["):
			t := p.next()
			switch {
			case t.kind == tokString:
				n.segs = append(n.segs, seg{name: t.str, index: -1})
			case t.kind == tokNumber && t.num >= 0 && t.num == float64(int(t.num)) && t.num < 1<<31:
				n.segs = append(n.segs, seg{index: int(t.num)})
			case t.kind == tokParam:
				return nil, unsupported(t, "parameters inside [ ]")
			default:
				return nil, fmt.Errorf("offset %d: expected a property name or array index in [ ], found %s", t.pos, t)
			}
			if err := p.expect("]"); err != nil {
				return nil, err
			}
		default:
			return n, nil
		}
	}
}

// functions maps supported function names to their arity range.
var functions = map[string][2]int{
	"STARTSWITH": {2, 3}, "ENDSWITH": {2, 3}, "CONTAINS": {2, 3},
	"IS_DEFINED": {1, 1}, "IS_NULL": {1, 1}, "IS_BOOL": {1, 1}, "IS_NUMBER": {1, 1},
	"IS_STRING": {1, 1}, "IS_ARRAY": {1, 1}, "IS_OBJECT": {1, 1}, "IS_PRIMITIVE": {1, 1},
}

func (p *parser) call(name token) (node, error) {
	fn := strings.ToUpper(name.text)
	arity, ok := functions[fn]
	if !ok {
		return nil, unsupported(name, "function "+name.text)
	}
	p.next() // (
	c := callNode{fn: fn}
	if !p.accept(")") {
		for {
			a, err := p.or()
			if err != nil {
				return nil, err
			}
			c.args = append(c.args, a)
			if !p.accept(",") {
				break
			}
		}
		if err := p.expect(")"); err != nil {
			return nil, err
		}
	}
	if len(c.args) < arity[0] || len(c.args) > arity[1] {
		want := strconv.Itoa(arity[0])
		if arity[1] != arity[0] {
			want += " or " + strconv.Itoa(arity[1])
		}
		return nil, fmt.Errorf("offset %d: %s takes %s arguments, got %d", name.pos, fn, want, len(c.args))
	}
	return c, nil
}
