// Package query owns the emulator's SQL subset: parsing
// `SELECT [TOP n] <list> FROM <alias> [WHERE <expr>] [ORDER BY <path> [ASC|DESC]]`,
// where <list> is *, expressions with optional AS names, or VALUE <expr>, and the
// aggregates COUNT, SUM, MIN, MAX and AVG may appear in its expressions; evaluating
// the WHERE clause against decoded JSON documents with Cosmos DB's semantics, where
// comparing mismatched types or absent properties is undefined rather than false;
// projecting and folding the results; and the query plan that clients fanning a
// query out over partitions merge by (Plan; docs/protocol-gateway.md, "Queries").
//
// Supported in expressions: AND, OR, NOT, parentheses; = != <> < <= > >=;
// x [NOT] IN (a, b, ...); property paths (c.id, c.a.b, c["x"], c.tags[0]);
// parameters (@p); string (single or double quoted), number, boolean, null
// and undefined literals; STARTSWITH, ENDSWITH, CONTAINS (with an optional
// ignoreCase argument), IS_DEFINED, IS_NULL, IS_BOOL, IS_NUMBER, IS_STRING,
// IS_ARRAY, IS_OBJECT and IS_PRIMITIVE; array and object constructors.
// Everything else is rejected with an *UnsupportedError (wrapping ErrUnsupported).
package query

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrUnsupported is wrapped by Parse errors for valid Cosmos DB SQL that the
// emulator does not implement (JOIN, other functions).
// Other Parse errors are syntax errors. Both deserve a 400.
var ErrUnsupported = errors.New("unsupported")

// Query is a parsed query. It is immutable and safe for concurrent use.
type Query struct {
	// Alias is the name the query gives the container's items ("c" in
	// SELECT * FROM c).
	Alias string
	// Top is the TOP n limit, or -1 when the query has none (or TOP @n before Bind).
	Top int
	// OrderBy holds the keys of the ORDER BY clause in order, none without one.
	OrderBy []OrderBy

	// Value is true for SELECT VALUE: each result is the value of the one expression, not an
	// object.
	Value bool
	// Aggregate is the aggregate function of SELECT VALUE COUNT(...) (SUM, MIN, MAX, AVG), ""
	// when the select list is anything else.
	Aggregate string

	where   node         // nil without WHERE
	fields  []projection // nil for SELECT *
	aggs    []aggNode    // the aggregates of the select list; with any, the query yields one result
	groupBy []node       // the GROUP BY expressions: one result per group of equal values

	// Distinct is SELECT DISTINCT: equal results are returned once, at their first place.
	Distinct bool
	// Offset and Limit are OFFSET n LIMIT m, both -1 when the query has none (or before Bind,
	// for parameters).
	Offset, Limit int

	topParam, offsetParam, limitParam string // parameters of TOP, OFFSET and LIMIT, until Bind
}

// counts are the parameters Bind resolves, with where each goes.
func (q *Query) counts() []struct {
	what  string
	param *string
	dst   *int
} {
	return []struct {
		what  string
		param *string
		dst   *int
	}{{"TOP", &q.topParam, &q.Top}, {"OFFSET", &q.offsetParam, &q.Offset}, {"LIMIT", &q.limitParam, &q.Limit}}
}

// RowLimit is the most results the query yields: TOP n or LIMIT m, -1 without either.
func (q *Query) RowLimit() int {
	if q.Offset >= 0 {
		return q.Limit
	}
	return q.Top
}

// Bind returns q with what it takes from its parameters resolved (TOP @n): q itself when there
// is nothing to resolve, else a copy. A parameter that is missing, or not a count, is an error.
func (q *Query) Bind(params map[string]any) (*Query, error) {
	if q.topParam == "" && q.offsetParam == "" && q.limitParam == "" {
		return q, nil
	}
	b := *q
	for _, c := range b.counts() {
		if *c.param == "" {
			continue
		}
		v, ok := params[*c.param]
		if !ok {
			return nil, fmt.Errorf("parameter %s of %s is not defined", *c.param, c.what)
		}
		f, isNum := normalize(v).(float64)
		if !isNum || f != float64(int(f)) || f < 0 || f > 1<<31 {
			return nil, fmt.Errorf("parameter %s of %s must be a non-negative integer, got %v", *c.param, c.what, v)
		}
		*c.dst, *c.param = int(f), ""
	}
	return &b, nil
}

// count parses the count after TOP, OFFSET or LIMIT: a non-negative integer or a parameter.
func (p *parser) count(what string, dst *int, param *string) error {
	t := p.next()
	switch {
	case t.kind == tokParam:
		*param = t.text
	case t.kind != tokNumber || t.num != float64(int(t.num)) || t.num < 0 || t.num > 1<<31:
		return fmt.Errorf("offset %d: %s needs a non-negative integer, found %s", t.pos, what, t)
	default:
		*dst = int(t.num)
	}
	return nil
}

// countString is a count as written: its parameter, or its number.
func countString(n int, param string) string {
	if param != "" {
		return param
	}
	return strconv.Itoa(n)
}

// projection is one expression of a select list, with its output name.
type projection struct {
	name string
	expr node
}

// OrderBy is one key of an ORDER BY clause.
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
	if q.Distinct {
		b.WriteString("DISTINCT ")
	}
	if q.Top >= 0 || q.topParam != "" {
		b.WriteString("TOP " + countString(q.Top, q.topParam) + " ")
	}
	b.WriteString(q.selectList())
	b.WriteString(" FROM ")
	b.WriteString(q.Alias)
	if q.where != nil {
		b.WriteString(" WHERE ")
		b.WriteString(q.where.String())
	}
	if len(q.groupBy) > 0 {
		b.WriteString(" GROUP BY " + q.groupByList())
	}
	if len(q.OrderBy) > 0 {
		b.WriteString(" ORDER BY " + q.orderByList(true))
	}
	if q.Offset >= 0 || q.offsetParam != "" {
		b.WriteString(" OFFSET " + countString(q.Offset, q.offsetParam) + " LIMIT " + countString(q.Limit, q.limitParam))
	}
	return b.String()
}

// selectList is the select list as written after SELECT [TOP n].
func (q *Query) selectList() string {
	switch {
	case q.Value:
		return "VALUE " + q.fields[0].expr.String()
	case q.fields == nil:
		return "*"
	}
	var b strings.Builder
	for i, f := range q.fields {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(f.expr.String())
		if !strings.HasPrefix(f.name, "$") {
			b.WriteString(" AS " + f.name)
		}
	}
	return b.String()
}

// groupByList is the GROUP BY expressions as written after GROUP BY.
func (q *Query) groupByList() string {
	parts := make([]string, len(q.groupBy))
	for i, g := range q.groupBy {
		parts[i] = g.String()
	}
	return strings.Join(parts, ", ")
}

// orderByList is the ORDER BY keys as written after ORDER BY; explicit spells ASC out.
func (q *Query) orderByList(explicit bool) string {
	parts := make([]string, len(q.OrderBy))
	for i, k := range q.OrderBy {
		parts[i] = q.orderKey(k)
		if k.Desc {
			parts[i] += " DESC"
		} else if explicit {
			parts[i] += " ASC"
		}
	}
	return strings.Join(parts, ", ")
}

// orderKey is the expression of an ORDER BY key.
func (q *Query) orderKey(k OrderBy) string {
	return pathNode{alias: q.Alias, segs: stringSegs(k.Path)}.String()
}

// Compare orders two documents by the ORDER BY clause, key by key, directions
// included: it returns a negative number when a comes first, positive when b
// does, 0 when they tie (use a stable sort). Values order by type first, as
// Cosmos DB does: undefined, null, false, true, numbers, strings, then arrays
// and objects (which tie). Compare returns 0 when the query has no ORDER BY.
func (q *Query) Compare(a, b map[string]any) int {
	for _, k := range q.OrderBy {
		segs := stringSegs(k.Path)
		c := compareForSort(resolve(a, segs), resolve(b, segs))
		if k.Desc {
			c = -c
		}
		if c != 0 {
			return c
		}
	}
	return 0
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
	toks     []token
	pos      int
	alias    string
	depth    int
	q        *Query
	inSelect bool // aggregates are allowed
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
	return &UnsupportedError{Pos: t.pos, What: what}
}

// UnsupportedError is valid Cosmos DB SQL, or a query plan, that the emulator does not
// implement; it wraps ErrUnsupported.
type UnsupportedError struct {
	Pos  int    // byte offset in the query; -1 for the query as a whole
	What string // what is not supported
}

func (e *UnsupportedError) Error() string {
	if e.Pos < 0 {
		return ErrUnsupported.Error() + ": " + e.What
	}
	return fmt.Sprintf("offset %d: %s: %s", e.Pos, ErrUnsupported, e.What)
}

func (e *UnsupportedError) Unwrap() error { return ErrUnsupported }

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
	q := &Query{Top: -1, Offset: -1, Limit: -1}
	p.q = q
	if err := p.expect("SELECT"); err != nil {
		return nil, err
	}
	q.Distinct = p.accept("DISTINCT")
	if p.accept("TOP") {
		if err := p.count("TOP", &q.Top, &q.topParam); err != nil {
			return nil, err
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
	if p.accept("GROUP") {
		if err := p.expect("BY"); err != nil {
			return nil, err
		}
		for {
			g, err := p.or()
			if err != nil {
				return nil, err
			}
			q.groupBy = append(q.groupBy, g)
			if !p.accept(",") {
				break
			}
		}
	}
	if t := p.peek(); len(q.groupBy) > 0 && t.is("ORDER") {
		return nil, unsupported(t, "ORDER BY with GROUP BY")
	}
	if p.accept("ORDER") {
		if err := p.expect("BY"); err != nil {
			return nil, err
		}
		for {
			start := p.peek()
			n, err := p.operand()
			if err != nil {
				return nil, err
			}
			path, ok := n.(pathNode)
			if !ok || len(path.segs) == 0 {
				return nil, unsupported(start, "ORDER BY over anything but a property path")
			}
			var ob OrderBy
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
			q.OrderBy = append(q.OrderBy, ob)
			if !p.accept(",") {
				break
			}
		}
	}
	if q.Distinct && q.IsAggregate() {
		return nil, unsupported(p.peek(), "DISTINCT with an aggregate or GROUP BY")
	}
	if q.IsAggregate() {
		for _, f := range q.fields {
			if err := q.grouped(f.expr); err != nil {
				return nil, err
			}
		}
		if q.fields == nil {
			return nil, fmt.Errorf("SELECT * is invalid with GROUP BY")
		}
	}
	if len(q.aggs) > 0 && len(q.OrderBy) > 0 {
		return nil, unsupported(p.peek(), "ORDER BY with an aggregate")
	}
	if t := p.peek(); p.accept("OFFSET") {
		if err := p.count("OFFSET", &q.Offset, &q.offsetParam); err != nil {
			return nil, err
		}
		if err := p.expect("LIMIT"); err != nil {
			return nil, err
		}
		if err := p.count("LIMIT", &q.Limit, &q.limitParam); err != nil {
			return nil, err
		}
		switch {
		case q.Top >= 0 || q.topParam != "":
			return nil, fmt.Errorf("offset %d: TOP and OFFSET LIMIT cannot be used together", t.pos)
		case q.IsAggregate():
			return nil, unsupported(t, "OFFSET LIMIT with an aggregate or GROUP BY")
		}
	}
	if t := p.peek(); t.kind != tokEOF {
		return nil, fmt.Errorf("offset %d: unexpected %s", t.pos, t)
	}
	if err := q.checkUDFs(); err != nil {
		return nil, err
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
		return p.array()
	case t.is("{"):
		return p.object()
	case t.kind == tokIdent && strings.EqualFold(t.text, "udf") && p.peek().is("."):
		return p.udfCall(t)
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
	if aggregates[fn] {
		return p.aggregate(name, fn)
	}
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

// aggregate parses an aggregate call after its name: allowed in the select list only, and not
// nested in another.
func (p *parser) aggregate(name token, fn string) (node, error) {
	if !p.inSelect {
		return nil, unsupported(name, "an aggregate outside the select list, or inside another")
	}
	p.next() // (
	p.inSelect = false
	arg, err := p.or()
	p.inSelect = true
	if err != nil {
		return nil, err
	}
	if err := p.expect(")"); err != nil {
		return nil, err
	}
	n := aggNode{fn: fn, arg: arg, idx: len(p.q.aggs)}
	p.q.aggs = append(p.q.aggs, n)
	return n, nil
}

// selectList parses what follows SELECT [TOP n] up to FROM: *, VALUE expr, or a list of
// expressions with optional AS names; aggregates may appear in the expressions.
func (p *parser) selectList(q *Query) error {
	if p.accept("*") {
		return nil
	}
	p.inSelect = true
	defer func() { p.inSelect = false }()
	if p.accept("VALUE") {
		q.Value = true
		n, err := p.or()
		if err != nil {
			return err
		}
		q.fields = []projection{{expr: n}}
		if a, ok := n.(aggNode); ok {
			q.Aggregate = a.fn
		}
		return nil
	}
	for {
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
func (q *Query) NeedsQueryPlan() bool {
	return len(q.OrderBy) > 0 || q.IsAggregate() || q.Offset >= 0 || q.Distinct
}

// IsAggregate reports whether the select list has aggregates: the query yields one result,
// folded over every match (Aggregator).
func (q *Query) IsAggregate() bool { return len(q.aggs) > 0 || len(q.groupBy) > 0 }

// children returns the operands of n.
func children(n node) []node {
	switch n := n.(type) {
	case parenNode:
		return []node{n.n}
	case notNode:
		return []node{n.n}
	case andNode:
		return []node{n.left, n.right}
	case orNode:
		return []node{n.left, n.right}
	case cmpNode:
		return []node{n.left, n.right}
	case inNode:
		return append([]node{n.x}, n.list...)
	case callNode:
		return n.args
	case arrayNode:
		return n.elems
	case objectNode:
		return n.vals
	case aggNode:
		return []node{n.arg}
	case udfNode:
		return n.args
	}
	return nil
}

// hasAggregate reports whether n is or contains an aggregate.
func hasAggregate(n node) bool {
	if _, ok := n.(aggNode); ok {
		return true
	}
	for _, k := range children(n) {
		if hasAggregate(k) {
			return true
		}
	}
	return false
}

// grouped checks that a select expression of an aggregate query refers to documents only
// inside aggregates or through a GROUP BY expression, as Cosmos DB requires.
func (q *Query) grouped(n node) error {
	for _, g := range q.groupBy {
		if g.String() == n.String() {
			return nil
		}
	}
	switch n := n.(type) {
	case aggNode:
		return nil
	case pathNode:
		return fmt.Errorf("property reference %s is invalid in the select list because it is not contained in either an aggregate function or the GROUP BY clause", n)
	}
	kids := children(n)
	for _, k := range kids {
		if err := q.grouped(k); err != nil {
			return err
		}
	}
	return nil
}

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

// Aggregator folds the matches of an aggregate query: into one result, or with GROUP BY into one
// per group of equal GROUP BY values.
type Aggregator struct {
	q      *Query
	params map[string]any
	groups map[string]*group
	order  []*group // in the order of their first document
}

// group is one group of an aggregate query: a document of it (for the GROUP BY expressions in
// the select list) and its aggregates' states.
type group struct {
	doc    map[string]any
	states []aggState
}

// NewAggregator returns an aggregator for q (which must be an aggregate query).
func (q *Query) NewAggregator(params map[string]any) *Aggregator {
	a := &Aggregator{q: q, params: params, groups: map[string]*group{}}
	if len(q.groupBy) == 0 {
		// Without GROUP BY there is one group, matches or not.
		a.group("", nil)
	}
	return a
}

func (a *Aggregator) group(key string, doc map[string]any) *group {
	g := a.groups[key]
	if g == nil {
		g = &group{doc: doc, states: make([]aggState, len(a.q.aggs))}
		for i := range g.states {
			g.states[i].typed = true
		}
		a.groups[key] = g
		a.order = append(a.order, g)
	}
	return g
}

// groupKey is the key of doc's group: its GROUP BY values, undefined apart from every JSON value.
func (a *Aggregator) groupKey(e *env) (string, error) {
	var b strings.Builder
	for _, n := range a.q.groupBy {
		v, err := n.eval(e)
		if err != nil {
			return "", err
		}
		if _, undef := v.(undefined); undef {
			b.WriteString("U;")
			continue
		}
		j, err := json.Marshal(v)
		if err != nil {
			return "", err
		}
		b.WriteString("J")
		b.Write(j)
		b.WriteString(";")
	}
	return b.String(), nil
}

// Add folds one matching document in.
func (a *Aggregator) Add(doc map[string]any) error {
	e := &env{doc: doc, params: a.params}
	key, err := a.groupKey(e)
	if err != nil {
		return err
	}
	g := a.group(key, doc)
	for i, n := range a.q.aggs {
		v, err := n.arg.eval(e)
		if err != nil {
			return err
		}
		g.states[i].add(n.fn, v)
	}
	return nil
}

// NonNumeric reports whether a SUM or AVG of some group met a value that is not a number, which
// makes it undefined (not merely empty).
func (a *Aggregator) NonNumeric() bool {
	for _, g := range a.order {
		for i := range g.states {
			if !g.states[i].typed {
				return true
			}
		}
	}
	return false
}

// Len is the number of groups so far.
func (a *Aggregator) Len() int { return len(a.order) }

// Result returns the one result of a query without GROUP BY; ok is false when there is none, as
// for SELECT VALUE of an undefined aggregate (SUM or AVG over non-numbers, or MIN, MAX and AVG
// over nothing).
func (a *Aggregator) Result() (v any, ok bool, err error) {
	if len(a.order) == 0 {
		return nil, false, nil
	}
	return a.result(a.order[0])
}

// Results returns the results of every group, in the order of their first document.
func (a *Aggregator) Results() ([]any, error) {
	var out []any
	for _, g := range a.order {
		v, ok, err := a.result(g)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, v)
		}
	}
	return out, nil
}

func (a *Aggregator) result(g *group) (v any, ok bool, err error) {
	e := &env{doc: g.doc, params: a.params, aggs: make([]any, len(g.states))}
	for i, n := range a.q.aggs {
		e.aggs[i] = g.states[i].result(n.fn)
	}
	if a.q.Value {
		v, err := a.q.fields[0].expr.eval(e)
		if err != nil {
			return nil, false, err
		}
		if _, undef := v.(undefined); undef {
			return nil, false, nil
		}
		return v, true, nil
	}
	out := make(map[string]any, len(a.q.fields))
	for _, f := range a.q.fields {
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
