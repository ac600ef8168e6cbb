// Package query owns the emulator's SQL subset: parsing
// `SELECT [TOP n] <list> FROM <alias> [WHERE <expr>] [ORDER BY <path> [ASC|DESC]]`,
// where <list> is *, expressions with optional AS names, VALUE <expr>, or
// VALUE COUNT|SUM|MIN|MAX|AVG(<expr>); evaluating the WHERE clause against
// decoded JSON documents with Cosmos DB's semantics, where comparing mismatched
// types or absent properties is undefined rather than false; and projecting
// and folding the results (docs/protocol-gateway.md, "Queries").
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
// emulator does not implement (DISTINCT, JOIN, GROUP BY, OFFSET LIMIT, other
// functions).
// Other Parse errors are syntax errors. Both deserve a 400.
var ErrUnsupported = errors.New("unsupported")

// Query is a parsed query. It is immutable and safe for concurrent use.
type Query struct {
	// Alias is the name the query gives the container's items ("c" in
	// SELECT * FROM c).
	Alias string
	// Top is the TOP n limit, or -1 when the query has none (or TOP names a parameter: see
	// TopParam and BindTop).
	Top int
	// TopParam is the parameter of TOP @p, with its '@'; "" when TOP is a number or absent.
	TopParam string
	// OrderBy is the ORDER BY clause, or nil when the query has none.
	OrderBy *OrderBy

	// Value is true for SELECT VALUE: each result is the value of the one expression, not an
	// object.
	Value bool
	// Aggregate is the aggregate function of SELECT VALUE COUNT(...) (SUM, MIN, MAX, AVG), ""
	// without one. Such a query yields one result, folded over every match.
	Aggregate string

	where  node         // nil without WHERE
	fields []projection // nil for SELECT *
	aggArg node         // the aggregate's argument
}

// projection is one expression of a select list, with its output name.
type projection struct {
	name string
	expr node
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

func validTop(n float64) bool { return n == float64(int(n)) && n >= 0 && n <= 1<<31 }

// BindTop returns the query with TOP @p replaced by the value of p in params (the Java Change
// Feed Processor asks for SELECT TOP @Top ...), or q itself when TOP names no parameter. The
// value must be a non-negative integer, as the service requires.
func (q *Query) BindTop(params map[string]any) (*Query, error) {
	if q.TopParam == "" {
		return q, nil
	}
	v, ok := params[q.TopParam]
	if !ok {
		return nil, fmt.Errorf("TOP names the parameter %s, which the query does not give", q.TopParam)
	}
	n, ok := v.(float64)
	if !ok || !validTop(n) {
		return nil, fmt.Errorf("the parameter %s of TOP must be a non-negative integer, found %v", q.TopParam, v)
	}
	bound := *q
	bound.Top, bound.TopParam = int(n), ""
	return &bound, nil
}

// String returns the query in a normalised form that parses to an equivalent
// query.
func (q *Query) String() string {
	var b strings.Builder
	b.WriteString("SELECT ")
	if q.TopParam != "" {
		b.WriteString("TOP " + q.TopParam + " ")
	} else if q.Top >= 0 {
		fmt.Fprintf(&b, "TOP %d ", q.Top)
	}
	switch {
	case q.Aggregate != "":
		b.WriteString("VALUE " + q.Aggregate + "(" + q.aggArg.String() + ")")
	case q.Value:
		b.WriteString("VALUE " + q.fields[0].expr.String())
	case q.fields != nil:
		for i, f := range q.fields {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(f.expr.String())
			if !strings.HasPrefix(f.name, "$") {
				b.WriteString(" AS " + f.name)
			}
		}
	default:
		b.WriteString("*")
	}
	b.WriteString(" FROM ")
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
		switch {
		case t.kind == tokParam:
			q.TopParam = t.text
		case t.kind != tokNumber || !validTop(t.num):
			return nil, fmt.Errorf("offset %d: TOP needs a non-negative integer, found %s", t.pos, t)
		default:
			q.Top = int(t.num)
		}
	}
	// The select list refers to the alias, which FROM names later: read FROM first, then parse
	// the list with the alias known.
	selectPos := p.pos
	if err := p.skipToFrom(); err != nil {
		return nil, err
	}
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
	afterFrom := p.pos
	p.pos = selectPos
	if err := p.selectList(q); err != nil {
		return nil, err
	}
	p.pos = afterFrom
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
	if q.Aggregate != "" && q.OrderBy != nil {
		return nil, unsupported(p.peek(), "ORDER BY with an aggregate")
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

// skipToFrom moves to the FROM that ends the select list (outside parentheses).
func (p *parser) skipToFrom() error {
	depth := 0
	for {
		t := p.peek()
		switch {
		case t.kind == tokEOF:
			return p.expect("FROM")
		case t.is("("), t.is("["), t.is("{"):
			depth++
		case t.is(")"), t.is("]"), t.is("}"):
			depth--
		case depth == 0 && t.is("FROM"):
			return nil
		}
		p.next()
	}
}

// aggregates are the aggregate functions SELECT VALUE accepts.
var aggregates = map[string]bool{"COUNT": true, "SUM": true, "MIN": true, "MAX": true, "AVG": true}

// selectList parses what follows SELECT [TOP n] up to FROM: *, VALUE expr, VALUE AGG(expr), or
// a list of property paths with optional AS names.
func (p *parser) selectList(q *Query) error {
	if p.accept("*") {
		return nil
	}
	if t := p.peek(); t.is("DISTINCT") {
		return unsupported(t, "SELECT DISTINCT")
	}
	if p.accept("VALUE") {
		q.Value = true
		t := p.peek()
		if t.kind == tokIdent && aggregates[strings.ToUpper(t.text)] && p.toks[p.pos+1].is("(") {
			p.next()
			p.next()
			arg, err := p.or()
			if err != nil {
				return err
			}
			if err := p.expect(")"); err != nil {
				return err
			}
			q.Aggregate, q.aggArg = strings.ToUpper(t.text), arg
			return nil
		}
		n, err := p.or()
		if err != nil {
			return err
		}
		q.fields = []projection{{expr: n}}
		return nil
	}
	for {
		start := p.peek()
		if start.kind == tokIdent && aggregates[strings.ToUpper(start.text)] {
			return unsupported(start, "aggregates without SELECT VALUE")
		}
		n, err := p.or()
		if err != nil {
			return err
		}
		name := ""
		if path, ok := n.(pathNode); ok && len(path.segs) > 0 && path.segs[len(path.segs)-1].index < 0 {
			name = path.segs[len(path.segs)-1].name
		}
		if p.accept("AS") {
			t := p.next()
			if t.kind != tokIdent {
				return fmt.Errorf("offset %d: expected a name after AS, found %s", t.pos, t)
			}
			name = t.text
		}
		if name == "" {
			name = "$" + strconv.Itoa(len(q.fields)+1)
		}
		q.fields = append(q.fields, projection{name: name, expr: n})
		if !p.accept(",") {
			break
		}
	}
	if t := p.peek(); !t.is("FROM") {
		return fmt.Errorf("offset %d: expected FROM after the select list, found %s", t.pos, t)
	}
	return nil
}

// NeedsQueryPlan reports whether the query must be run by the client over every partition (ORDER
// BY, an aggregate): the service's gateway serves it only within one partition key.
func (q *Query) NeedsQueryPlan() bool { return q.OrderBy != nil || q.Aggregate != "" }

// Projects reports whether results differ from the matched documents (a select list or VALUE).
func (q *Query) Projects() bool { return q.fields != nil }

// Project returns the result of the select list for a matching document (SELECT * returns doc
// itself); ok is false when SELECT VALUE's expression is undefined (the document yields no result).
func (q *Query) Project(doc map[string]any, params map[string]any) (v any, ok bool, err error) {
	if q.fields == nil {
		return doc, true, nil
	}
	e := &env{doc: doc, params: params}
	if q.Value {
		v, err := q.fields[0].expr.eval(e)
		if err != nil {
			return nil, false, err
		}
		if _, undef := v.(undefined); undef {
			return nil, false, nil
		}
		return v, true, nil
	}
	out := make(map[string]any, len(q.fields))
	for _, f := range q.fields {
		v, err := f.expr.eval(e)
		if err != nil {
			return nil, false, err
		}
		if _, undef := v.(undefined); !undef {
			out[f.name] = v
		}
	}
	return out, true, nil
}

// Aggregator folds the matches of an aggregate query into its one result.
type Aggregator struct {
	q      *Query
	params map[string]any
	count  int
	sum    float64
	best   any
	typed  bool // SUM and AVG saw only numbers so far
}

// NewAggregator returns an aggregator for q (which must have an Aggregate).
func (q *Query) NewAggregator(params map[string]any) *Aggregator {
	return &Aggregator{q: q, params: params, typed: true}
}

// Add folds one matching document in.
func (a *Aggregator) Add(doc map[string]any) error {
	v, err := a.q.aggArg.eval(&env{doc: doc, params: a.params})
	if err != nil {
		return err
	}
	if _, undef := v.(undefined); undef {
		return nil
	}
	switch a.q.Aggregate {
	case "COUNT":
		a.count++
	case "SUM", "AVG":
		f, ok := v.(float64)
		if !ok {
			a.typed = false
			return nil
		}
		a.sum += f
		a.count++
	case "MIN", "MAX":
		if typeRank(v) >= typeRank([]any{}) {
			return nil
		}
		if a.best == nil && a.count == 0 {
			a.best = v
		} else if c := compareForSort(v, a.best); (a.q.Aggregate == "MIN" && c < 0) || (a.q.Aggregate == "MAX" && c > 0) {
			a.best = v
		}
		a.count++
	}
	return nil
}

// Result returns the aggregate's value; ok is false when it is undefined (no result row), as
// for SUM or AVG over non-numbers, or MIN, MAX and AVG over nothing.
func (a *Aggregator) Result() (v any, ok bool) {
	switch a.q.Aggregate {
	case "COUNT":
		return float64(a.count), true
	case "SUM":
		return a.sum, a.typed
	case "AVG":
		if !a.typed || a.count == 0 {
			return nil, false
		}
		return a.sum / float64(a.count), true
	default:
		return a.best, a.count > 0
	}
}

// Equality returns the value that the WHERE clause requires the property path to equal (c.pk =
// 'x' in a conjunction at the top), with parameters resolved; ok is false when there is none.
func (q *Query) Equality(path []string, params map[string]any) (v any, ok bool) {
	var walk func(n node) (any, bool)
	walk = func(n node) (any, bool) {
		switch n := n.(type) {
		case parenNode:
			return walk(n.n)
		case andNode:
			if v, ok := walk(n.left); ok {
				return v, ok
			}
			return walk(n.right)
		case cmpNode:
			if n.op != "=" {
				return nil, false
			}
			for _, pair := range [][2]node{{n.left, n.right}, {n.right, n.left}} {
				pn, isPath := pair[0].(pathNode)
				if !isPath || len(pn.segs) != len(path) {
					continue
				}
				same := true
				for i, s := range pn.segs {
					if s.index >= 0 || s.name != path[i] {
						same = false
					}
				}
				if !same {
					continue
				}
				switch o := pair[1].(type) {
				case literal:
					return o.v, true
				case paramNode:
					v, ok := params[o.name]
					return v, ok
				}
			}
		}
		return nil, false
	}
	if q.where == nil {
		return nil, false
	}
	return walk(q.where)
}
