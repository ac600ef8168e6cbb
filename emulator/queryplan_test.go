package emulator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cfp-dev/cfp/emulator"
)

// planClient runs cross-partition queries the way the SDKs with a query pipeline do (JS,
// Python, .NET, gocosmos): fetch the plan, run its rewritten query (or the query) on every
// partition key range in pages, and merge the pages client-side as the plan says. It
// checks the plan's content, not only that a plan comes back.
type planClient struct {
	t    *testing.T
	e    *emulator.Emulator
	coll string // /dbs/db/colls/c
	page int
}

// planInfo is the part of the plan the merge reads.
type planInfo struct {
	QueryInfo struct {
		DistinctType   string             `json:"distinctType"`
		Top            *int               `json:"top"`
		Offset         *int               `json:"offset"`
		Limit          *int               `json:"limit"`
		OrderBy        []string           `json:"orderBy"`
		Aggregates     []string           `json:"aggregates"`
		GroupBy        []string           `json:"groupByExpressions"`
		AliasTypes     map[string]*string `json:"groupByAliasToAggregateType"`
		RewrittenQuery string             `json:"rewrittenQuery"`
		HasSelectValue bool               `json:"hasSelectValue"`
	} `json:"queryInfo"`
	QueryRanges []struct {
		Min string `json:"min"`
		Max string `json:"max"`
	} `json:"queryRanges"`
}

func queryBody(sql string, params map[string]any) string {
	type param struct {
		Name  string `json:"name"`
		Value any    `json:"value"`
	}
	ps := []param{}
	for k, v := range params {
		ps = append(ps, param{k, v})
	}
	b, _ := json.Marshal(map[string]any{"query": sql, "parameters": ps})
	return string(b)
}

// plan fetches the query plan; a refusal comes back as its status and message.
func (c *planClient) plan(sql string, params map[string]any) (*planInfo, int, string) {
	resp, body := rawRequest(c.t, c.e, http.MethodPost, c.coll+"/docs", map[string]string{
		"x-ms-cosmos-is-query-plan-request": "True",
		"x-ms-documentdb-isquery":           "True",
		"Content-Type":                      "application/query+json",
	}, queryBody(sql, params))
	if resp.StatusCode != http.StatusOK {
		var eb struct{ Message string }
		_ = json.Unmarshal(body, &eb)
		return nil, resp.StatusCode, eb.Message
	}
	var p planInfo
	if err := json.Unmarshal(body, &p); err != nil {
		c.t.Fatalf("plan of %q: %v: %s", sql, err, body)
	}
	return &p, resp.StatusCode, ""
}

// rangeIDs lists the container's partition key ranges.
func (c *planClient) rangeIDs() []string {
	resp, body := rawRequest(c.t, c.e, http.MethodGet, c.coll+"/pkranges", nil, "")
	if resp.StatusCode != http.StatusOK {
		c.t.Fatalf("read pkranges: %d %s", resp.StatusCode, body)
	}
	var out struct {
		PartitionKeyRanges []struct {
			ID string `json:"id"`
		}
	}
	if err := json.Unmarshal(body, &out); err != nil {
		c.t.Fatal(err)
	}
	var ids []string
	for _, r := range out.PartitionKeyRanges {
		ids = append(ids, r.ID)
	}
	return ids
}

// drainRange runs sql on one partition key range, page by page; a 400 "not supported by cfp
// emulator" ends it with the refusal.
func (c *planClient) drainRange(rangeID, sql string, params map[string]any) ([]any, string) {
	var out []any
	cont := ""
	for pages := 0; ; pages++ {
		if pages > 1000 {
			c.t.Fatalf("%q on range %s does not end", sql, rangeID)
		}
		h := map[string]string{
			"x-ms-documentdb-isquery":                    "True",
			"Content-Type":                               "application/query+json",
			"x-ms-documentdb-partitionkeyrangeid":        rangeID,
			"x-ms-documentdb-query-enablecrosspartition": "True",
			"x-ms-max-item-count":                        strconv.Itoa(c.page),
		}
		if cont != "" {
			h["x-ms-continuation"] = cont
		}
		resp, body := rawRequest(c.t, c.e, http.MethodPost, c.coll+"/docs", h, queryBody(sql, params))
		if resp.StatusCode == http.StatusBadRequest && strings.Contains(string(body), `"not supported by cfp emulator: `) {
			var e struct{ Message string }
			_ = json.Unmarshal(body, &e)
			return nil, e.Message
		}
		if resp.StatusCode != http.StatusOK {
			c.t.Fatalf("%q on range %s: %d %s", sql, rangeID, resp.StatusCode, body)
		}
		var page struct{ Documents []any }
		if err := json.Unmarshal(body, &page); err != nil {
			c.t.Fatal(err)
		}
		out = append(out, page.Documents...)
		if cont = resp.Header.Get("x-ms-continuation"); cont == "" {
			return out, ""
		}
	}
}

// run answers sql as a plan-driven SDK would, or returns the refusal of the plan request.
func (c *planClient) run(sql string, params map[string]any) ([]any, string) {
	p, status, msg := c.plan(sql, params)
	if p == nil {
		if status != http.StatusBadRequest || !strings.HasPrefix(msg, "not supported by cfp emulator: ") {
			c.t.Fatalf("plan of %q: %d %q, want a plan or a 400 refusal", sql, status, msg)
		}
		return nil, msg
	}
	qi := p.QueryInfo
	if len(p.QueryRanges) == 0 || (qi.Offset == nil) != (qi.Limit == nil) {
		c.t.Fatalf("plan of %q asks for what this client does not merge: %+v", sql, p)
	}
	rq := sql
	if qi.RewrittenQuery != "" {
		rq = strings.ReplaceAll(qi.RewrittenQuery, "{documentdb-formattableorderbyquery-filter}", "true")
	}
	var perRange [][]any
	for _, id := range c.rangeIDs() {
		rows, refused := c.drainRange(id, rq, params)
		if refused != "" {
			return nil, refused
		}
		perRange = append(perRange, rows)
	}
	var out []any
	switch {
	case len(qi.OrderBy) > 0:
		// k-way merge on orderByItems, key by key in each key's direction, then the payloads.
		less := func(a, b any) bool {
			ia, ib := a.(map[string]any)["orderByItems"].([]any), b.(map[string]any)["orderByItems"].([]any)
			if len(ia) != len(qi.OrderBy) || len(ib) != len(qi.OrderBy) {
				c.t.Fatalf("%q: orderByItems %v and %v for %d keys", sql, ia, ib, len(qi.OrderBy))
			}
			for k, dir := range qi.OrderBy {
				cmp := compareJSON(ia[k].(map[string]any)["item"], ib[k].(map[string]any)["item"])
				if dir == "Descending" {
					cmp = -cmp
				}
				if cmp != 0 {
					return cmp < 0
				}
			}
			return false
		}
		for {
			best := -1
			for i, rs := range perRange {
				if len(rs) == 0 {
					continue
				}
				if best < 0 {
					best = i
					continue
				}
				if less(rs[0], perRange[best][0]) {
					best = i
				}
			}
			if best < 0 {
				break
			}
			out = append(out, perRange[best][0].(map[string]any)["payload"])
			perRange[best] = perRange[best][1:]
		}
	case len(qi.GroupBy) > 0 || len(qi.AliasTypes) > 0:
		// Groups by groupByItems; in each, the payload's aggregates fold their partials and
		// the other values keep the first seen.
		if len(qi.Aggregates) > 1 || (len(qi.Aggregates) == 1 && !qi.HasSelectValue) {
			c.t.Fatalf("plan of %q: aggregates %v, hasSelectValue %v", sql, qi.Aggregates, qi.HasSelectValue)
		}
		type grp struct {
			value  *mergeAcc
			fields map[string]*mergeAcc
			names  []string
		}
		groups := map[string]*grp{}
		var order []*grp
		for _, rs := range perRange {
			for _, r := range rs {
				row := r.(map[string]any)
				key := canon([]any{row["groupByItems"]})[0]
				g := groups[key]
				if g == nil {
					g = &grp{fields: map[string]*mergeAcc{}}
					groups[key] = g
					order = append(order, g)
				}
				if qi.HasSelectValue {
					if g.value == nil {
						g.value = &mergeAcc{}
						if len(qi.Aggregates) == 1 {
							g.value.typ = qi.Aggregates[0]
						}
					}
					if g.value.typ != "" {
						g.value.fold(row["payload"].([]any)[0].(map[string]any)["item"])
					} else {
						g.value.fold(row["payload"])
					}
					continue
				}
				for name, v := range row["payload"].(map[string]any) {
					a := g.fields[name]
					if a == nil {
						a = &mergeAcc{}
						if t := qi.AliasTypes[name]; t != nil {
							a.typ = *t
						}
						g.fields[name] = a
						g.names = append(g.names, name)
					}
					if a.typ != "" {
						a.fold(v.(map[string]any)["item"])
					} else {
						a.fold(v)
					}
				}
			}
		}
		if len(order) == 0 && len(qi.GroupBy) == 0 && !qi.HasSelectValue {
			c.t.Fatalf("plan of %q: no row from any range for an aggregate without GROUP BY", sql)
		}
		for _, g := range order {
			if qi.HasSelectValue {
				if v, ok := g.value.result(); ok {
					out = append(out, v)
				}
				continue
			}
			m := map[string]any{}
			for _, name := range g.names {
				if v, ok := g.fields[name].result(); ok {
					m[name] = v
				}
			}
			out = append(out, m)
		}
	case len(qi.Aggregates) > 0:
		if len(qi.Aggregates) != 1 || !qi.HasSelectValue {
			c.t.Fatalf("plan of %q: aggregates %v, hasSelectValue %v", sql, qi.Aggregates, qi.HasSelectValue)
		}
		acc := &mergeAcc{typ: qi.Aggregates[0]}
		for _, rs := range perRange {
			for _, r := range rs {
				acc.fold(r.([]any)[0].(map[string]any)["item"])
			}
		}
		if v, ok := acc.result(); ok {
			out = append(out, v)
		}
	default:
		for _, rs := range perRange {
			out = append(out, rs...)
		}
	}
	switch qi.DistinctType {
	case "None":
	case "Unordered", "Ordered":
		// Unordered keeps each value's first occurrence; Ordered drops a value equal to the
		// one before it, which is right only when equal values are adjacent.
		seen := map[string]bool{}
		last := ""
		var d []any
		for i, v := range out {
			k := canon([]any{v})[0]
			if (qi.DistinctType == "Unordered" && seen[k]) || (qi.DistinctType == "Ordered" && i > 0 && k == last) {
				continue
			}
			seen[k], last = true, k
			d = append(d, v)
		}
		out = d
	default:
		c.t.Fatalf("plan of %q: distinctType %q", sql, qi.DistinctType)
	}
	if qi.Top != nil && len(out) > *qi.Top {
		out = out[:*qi.Top]
	}
	if qi.Offset != nil {
		out = out[min(*qi.Offset, len(out)):]
		out = out[:min(*qi.Limit, len(out))]
	}
	return out, ""
}

// mergeAcc merges one aggregate's partials across ranges (typ is the plan's aggregate type), or
// keeps the first value seen (typ "").
type mergeAcc struct {
	typ        string
	val        any
	set        bool
	sum, count float64
}

func (a *mergeAcc) fold(item any) {
	switch a.typ {
	case "":
		if !a.set {
			a.val, a.set = item, true
		}
	case "Count", "Sum":
		if f, ok := item.(float64); ok {
			a.sum += f
			a.set = true
		}
	case "Min", "Max":
		if item == nil {
			return
		}
		if !a.set || (a.typ == "Min" && compareJSON(item, a.val) < 0) || (a.typ == "Max" && compareJSON(item, a.val) > 0) {
			a.val, a.set = item, true
		}
	case "Average":
		if m, ok := item.(map[string]any); ok {
			if s, ok := m["sum"].(float64); ok {
				a.sum += s
				a.count += m["count"].(float64)
			}
		}
	default:
		panic("aggregate type " + a.typ)
	}
}

func (a *mergeAcc) result() (any, bool) {
	switch a.typ {
	case "Count", "Sum":
		return a.sum, a.set
	case "Average":
		if a.count == 0 {
			return nil, false
		}
		return a.sum / a.count, true
	}
	return a.val, a.set && a.val != nil
}

// compareJSON orders decoded JSON values as Cosmos DB sorts them: null, booleans, numbers,
// strings.
func compareJSON(a, b any) int {
	rank := func(v any) int {
		switch v.(type) {
		case nil:
			return 0
		case bool:
			return 1
		case float64:
			return 2
		case string:
			return 3
		}
		return 4
	}
	if ra, rb := rank(a), rank(b); ra != rb {
		return ra - rb
	}
	switch x := a.(type) {
	case bool:
		y := b.(bool)
		switch {
		case x == y:
			return 0
		case !x:
			return -1
		}
		return 1
	case float64:
		y := b.(float64)
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		}
	case string:
		return strings.Compare(x, b.(string))
	}
	return 0
}

// pdoc is a generated document: v and s are unique (ORDER BY on them has no ties), g has
// many ties, opt is absent from some documents.
type pdoc struct {
	ID  string `json:"id"`
	PK  string `json:"pk"`
	V   int    `json:"v"`
	S   string `json:"s"`
	G   int    `json:"g"`
	Opt *int   `json:"opt,omitempty"`
}

// okey is one ORDER BY key of a generated query.
type okey struct {
	prop string // v, s, id or g
	desc bool
}

// qshape is a generated query, with a plain Go evaluation of it.
type qshape struct {
	filter   int    // 0 none, 1 c.v < n, 2 STARTSWITH(c.s, x), 3 IS_DEFINED(c.opt), 4 c.v >= n AND c.pk != p
	n        int    // the filter's bound
	prefix   string // the STARTSWITH prefix
	orderBy  []okey // ends with a unique key, so the order is total
	top      int    // -1 without TOP
	topArg   bool   // TOP @n rather than TOP n
	offset   int    // OFFSET offset LIMIT limit; offset -1 without
	limit    int
	offArg   bool // OFFSET @o LIMIT @l
	sel      int  // 0 *, 1 VALUE c.id, 2 c.id, c.v, 3 VALUE c.g, 4 c.g, c.pk
	distinct bool
	agg      string // "" or COUNT SUM MIN MAX AVG (SELECT VALUE AGG(c.v)); overrides sel and ORDER BY
	// group is 1 for SELECT c.g, COUNT(1) AS n, AGG(c.v) AS a ... GROUP BY c.g, 2 for SELECT
	// VALUE AGG(c.v) ... GROUP BY c.g, 3 for SELECT VALUE c.g ... GROUP BY c.g, 4 for SELECT
	// COUNT(1) AS n, AGG(c.v) AS a (no GROUP BY); 0 otherwise.
	group int
}

func (q qshape) sql() string {
	var b strings.Builder
	b.WriteString("SELECT ")
	if q.distinct {
		b.WriteString("DISTINCT ")
	}
	switch {
	case q.top >= 0 && q.topArg:
		b.WriteString("TOP @n ")
	case q.top >= 0:
		fmt.Fprintf(&b, "TOP %d ", q.top)
	}
	switch {
	case q.group == 1:
		b.WriteString("c.g, COUNT(1) AS n, " + q.agg + "(c.v) AS a")
	case q.group == 2:
		b.WriteString("VALUE " + q.agg + "(c.v)")
	case q.group == 3:
		b.WriteString("VALUE c.g")
	case q.group == 4:
		b.WriteString("COUNT(1) AS n, " + q.agg + "(c.v) AS a")
	case q.agg != "":
		b.WriteString("VALUE " + q.agg + "(c.v)")
	case q.sel == 1:
		b.WriteString("VALUE c.id")
	case q.sel == 2:
		b.WriteString("c.id, c.v")
	case q.sel == 3:
		b.WriteString("VALUE c.g")
	case q.sel == 4:
		b.WriteString("c.g, c.pk")
	default:
		b.WriteString("*")
	}
	b.WriteString(" FROM c")
	switch q.filter {
	case 1:
		fmt.Fprintf(&b, " WHERE c.v < %d", q.n)
	case 2:
		fmt.Fprintf(&b, " WHERE STARTSWITH(c.s, '%s')", q.prefix)
	case 3:
		b.WriteString(" WHERE IS_DEFINED(c.opt)")
	case 4:
		fmt.Fprintf(&b, " WHERE c.v >= %d AND c.pk != 'p1'", q.n)
	}
	if q.group >= 1 && q.group <= 3 {
		b.WriteString(" GROUP BY c.g")
	}
	if len(q.orderBy) > 0 && q.agg == "" {
		for i, k := range q.orderBy {
			if i == 0 {
				b.WriteString(" ORDER BY ")
			} else {
				b.WriteString(", ")
			}
			b.WriteString("c." + k.prop)
			if k.desc {
				b.WriteString(" DESC")
			}
		}
	}
	switch {
	case q.offset >= 0 && q.offArg:
		b.WriteString(" OFFSET @o LIMIT @l")
	case q.offset >= 0:
		fmt.Fprintf(&b, " OFFSET %d LIMIT %d", q.offset, q.limit)
	}
	return b.String()
}

func (q qshape) params() map[string]any {
	switch {
	case q.topArg:
		return map[string]any{"@n": q.top}
	case q.offArg:
		return map[string]any{"@o": q.offset, "@l": q.limit}
	}
	return nil
}

func (q qshape) match(d pdoc) bool {
	switch q.filter {
	case 1:
		return d.V < q.n
	case 2:
		return strings.HasPrefix(d.S, q.prefix)
	case 3:
		return d.Opt != nil
	case 4:
		return d.V >= q.n && d.PK != "p1"
	}
	return true
}

// eval is the expected answer over docs (in creation order), as JSON values.
func (q qshape) eval(docs []pdoc) []any {
	var m []pdoc
	for _, d := range docs {
		if q.match(d) {
			m = append(m, d)
		}
	}
	// fold is AGG(c.v) over ds, ok false when undefined.
	fold := func(ds []pdoc) (float64, bool) {
		if len(ds) == 0 && q.agg != "COUNT" && q.agg != "SUM" {
			return 0, false
		}
		sum, best := 0.0, 0.0
		for i, d := range ds {
			v := float64(d.V)
			sum += v
			if i == 0 || (q.agg == "MIN" && v < best) || (q.agg == "MAX" && v > best) {
				best = v
			}
		}
		switch q.agg {
		case "COUNT":
			return float64(len(ds)), true
		case "SUM":
			return sum, true
		case "AVG":
			return sum / float64(len(ds)), true
		}
		return best, true
	}
	if q.group > 0 {
		var keys []int
		byG := map[int][]pdoc{}
		for _, d := range m {
			if _, ok := byG[d.G]; !ok {
				keys = append(keys, d.G)
			}
			byG[d.G] = append(byG[d.G], d)
		}
		if q.group == 4 {
			keys, byG = []int{0}, map[int][]pdoc{0: m}
		}
		var out []any
		for _, g := range keys {
			ds := byG[g]
			a, ok := fold(ds)
			switch q.group {
			case 1, 4:
				row := map[string]any{"n": float64(len(ds))}
				if q.group == 1 {
					row["g"] = float64(g)
				}
				if ok {
					row["a"] = a
				}
				out = append(out, row)
			case 2:
				if ok {
					out = append(out, a)
				}
			case 3:
				out = append(out, float64(g))
			}
		}
		return out
	}
	if q.agg != "" {
		a, ok := fold(m)
		if !ok || q.top == 0 {
			return nil
		}
		return []any{a}
	}
	if len(q.orderBy) > 0 {
		key := func(d pdoc, prop string) string {
			switch prop {
			case "v":
				return fmt.Sprintf("%08d", d.V)
			case "g":
				return fmt.Sprintf("%08d", d.G)
			case "s":
				return d.S
			}
			return d.ID
		}
		sort.SliceStable(m, func(i, j int) bool {
			for _, k := range q.orderBy {
				a, b := key(m[i], k.prop), key(m[j], k.prop)
				if a != b {
					return (a < b) != k.desc
				}
			}
			return false
		})
	}
	out := make([]any, 0, len(m))
	seen := map[string]bool{}
	for _, d := range m {
		var v any
		switch q.sel {
		case 1:
			v = d.ID
		case 2:
			v = map[string]any{"id": d.ID, "v": float64(d.V)}
		case 3:
			v = float64(d.G)
		case 4:
			v = map[string]any{"g": float64(d.G), "pk": d.PK}
		default:
			b, _ := json.Marshal(d)
			_ = json.Unmarshal(b, &v)
		}
		if k := canon([]any{v})[0]; q.distinct {
			if seen[k] {
				continue
			}
			seen[k] = true
		}
		out = append(out, v)
	}
	if q.top >= 0 && len(out) > q.top {
		out = out[:q.top]
	}
	if q.offset >= 0 {
		out = out[min(q.offset, len(out)):]
		out = out[:min(q.limit, len(out))]
	}
	return out
}

// refusedAcross reports whether the plan is refused: DISTINCT with TOP or OFFSET LIMIT (the JS
// SDK would apply them before DISTINCT).
func (q qshape) refusedAcross() bool { return q.distinct && (q.top >= 0 || q.offset >= 0) }

// unorderedTop reports whether the answer is any subset of the matches of a given size (TOP or
// OFFSET LIMIT without ORDER BY: which ones is up to the service).
func (q qshape) unorderedTop() bool {
	return (q.top >= 0 || q.offset >= 0) && len(q.orderBy) == 0 && q.agg == ""
}

func randomShape(r *rand.Rand, ndocs int) qshape {
	q := qshape{filter: r.IntN(5), n: r.IntN(ndocs), prefix: string(rune('a' + r.IntN(4))), top: -1, offset: -1, sel: r.IntN(5), distinct: r.IntN(4) == 0}
	if r.IntN(2) == 0 {
		unique := func() okey { return okey{[]string{"v", "s", "id"}[r.IntN(3)], r.IntN(2) == 0} }
		switch r.IntN(3) {
		case 0:
			q.orderBy = []okey{unique()}
		case 1:
			q.orderBy = []okey{{"g", r.IntN(2) == 0}, unique()}
		default:
			q.orderBy = []okey{unique(), {"g", r.IntN(2) == 0}}
		}
	}
	switch r.IntN(6) {
	case 0, 1:
		q.top, q.topArg = r.IntN(8), r.IntN(2) == 0
	case 2:
		q.offset, q.limit, q.offArg = r.IntN(12), r.IntN(8), r.IntN(2) == 0
	}
	if r.IntN(4) == 0 {
		q.agg = []string{"COUNT", "SUM", "MIN", "MAX", "AVG"}[r.IntN(5)]
		q.top, q.offset, q.distinct = -1, -1, false
		if r.IntN(2) == 0 {
			q.group, q.orderBy = 1+r.IntN(4), nil
		}
	}
	return q
}

// strip removes the system properties the service adds, so results compare with the documents
// as written.
func strip(vs []any) []any {
	for _, v := range vs {
		if m, ok := v.(map[string]any); ok {
			for k := range m {
				if strings.HasPrefix(k, "_") {
					delete(m, k)
				}
			}
		}
	}
	return vs
}

func canon(vs []any) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		b, _ := json.Marshal(v)
		out[i] = string(b)
	}
	return out
}

// sameAnswer compares got with want: in order, or for TOP without ORDER BY as a subset of the
// matches of the right size.
func sameAnswer(q qshape, docs []pdoc, got []any) (bool, string) {
	g := canon(strip(got))
	if !q.unorderedTop() {
		w := canon(q.eval(docs))
		if len(q.orderBy) == 0 && (q.agg == "" || q.group > 0) {
			slices.Sort(g)
			slices.Sort(w)
		}
		return slices.Equal(g, w), strings.Join(w, ",")
	}
	all := q
	all.top, all.offset = -1, -1
	w := canon(all.eval(docs))
	want := min(q.top, len(w))
	if q.offset >= 0 {
		want = min(q.limit, max(0, len(w)-q.offset))
	}
	if len(g) != want {
		return false, fmt.Sprintf("%d of %s", want, strings.Join(w, ","))
	}
	// A sub-multiset of the matches: no result more often than it matches.
	left := map[string]int{}
	for _, x := range w {
		left[x]++
	}
	for _, x := range g {
		if left[x]--; left[x] < 0 {
			return false, fmt.Sprintf("%d of %s", want, strings.Join(w, ","))
		}
	}
	return true, ""
}

func seedDocs(t *testing.T, cc *azcosmos.ContainerClient, r *rand.Rand, n int) []pdoc {
	t.Helper()
	vs := r.Perm(n)
	docs := make([]pdoc, n)
	for i := range docs {
		d := pdoc{ID: fmt.Sprintf("d%03d", i), PK: fmt.Sprintf("p%d", r.IntN(7)), V: vs[i], S: fmt.Sprintf("%c%03d", 'a'+r.IntN(5), i), G: r.IntN(4)}
		if r.IntN(3) == 0 {
			o := r.IntN(10)
			d.Opt = &o
		}
		b, _ := json.Marshal(d)
		if _, err := cc.CreateItem(context.Background(), azcosmos.NewPartitionKeyString(d.PK), b, nil); err != nil {
			t.Fatal(err)
		}
		docs[i] = d
	}
	return docs
}

// TestQueryPlan_PlanDrivenClientsGetTheRightAnswer runs generated queries across 4 physical
// partitions the way plan-driven SDKs do, in pages of 3, and compares with a plain evaluation:
// before the plan carried TOP, ORDER BY and the aggregates, the merge returned ORDER BY out of
// order, one COUNT per partition, and TOP n per partition.
func TestQueryPlan_PlanDrivenClientsGetTheRightAnswer(t *testing.T) {
	t.Parallel()
	e := openEmu(t, emulator.Options{Partitions: 4})
	cc := setupContainer(t, newClient(t, e, ""), "db", "c")
	r := rand.New(rand.NewPCG(24, 1))
	docs := seedDocs(t, cc, r, 60)
	pc := &planClient{t: t, e: e, coll: "/dbs/db/colls/c", page: 3}

	shapes := []qshape{
		{orderBy: []okey{{"v", false}}, top: -1, offset: -1},
		{orderBy: []okey{{"s", true}}, top: 6, offset: -1, sel: 1},
		{orderBy: []okey{{"g", false}, {"v", true}}, top: -1, offset: -1, sel: 2},
		{orderBy: []okey{{"g", true}, {"id", false}}, top: 5, topArg: true, offset: -1},
		{top: 6, offset: -1},
		{top: 4, topArg: true, offset: -1},
		{orderBy: []okey{{"v", true}}, top: -1, offset: 5, limit: 7},
		{orderBy: []okey{{"id", false}}, top: -1, offset: 58, limit: 7, offArg: true},
		{top: -1, offset: 3, limit: 4},
		{distinct: true, sel: 3, top: -1, offset: -1},
		{distinct: true, sel: 3, orderBy: []okey{{"g", true}}, top: -1, offset: -1},
		{distinct: true, sel: 4, orderBy: []okey{{"v", false}}, top: -1, offset: -1},
		{agg: "COUNT", top: -1, offset: -1},
		{group: 1, agg: "AVG", top: -1, offset: -1},
		{group: 2, agg: "MIN", filter: 1, n: 20, top: -1, offset: -1},
		{group: 3, agg: "MAX", top: -1, offset: -1},
		{group: 4, agg: "MAX", filter: 2, prefix: "zz", top: -1, offset: -1},
		{agg: "AVG", filter: 1, n: 30, top: -1, offset: -1},
		{agg: "MAX", filter: 2, prefix: "zz", top: -1, offset: -1},
	}
	for range 60 {
		shapes = append(shapes, randomShape(r, len(docs)))
	}
	for _, q := range shapes {
		got, refused := pc.run(q.sql(), q.params())
		if q.refusedAcross() {
			if refused == "" {
				t.Errorf("%s: answered %s, want a refusal", q.sql(), strings.Join(canon(got), ","))
			}
			continue
		}
		if refused != "" {
			t.Errorf("%s: refused: %s", q.sql(), refused)
			continue
		}
		if ok, want := sameAnswer(q, docs, got); !ok {
			t.Errorf("%s:\n got %s\nwant %s", q.sql(), strings.Join(canon(got), ","), want)
		}
	}
}

// TestQueryPlan_SumOfNonNumbersAcrossPartitionsIsRefused: SUM and AVG over values that are not
// all numbers are undefined (no result), but a plan-driven client (this one, and the JavaScript
// SDK, found by test/jssdk's property check) skips a range's undefined partial and adds up the
// others: it answered the sum of the numbers. The range that met a non-number refuses instead;
// within one partition key, and with IS_NUMBER, the query is served.
func TestQueryPlan_SumOfNonNumbersAcrossPartitionsIsRefused(t *testing.T) {
	t.Parallel()
	e := openEmu(t, emulator.Options{Partitions: 4})
	cc := setupContainer(t, newClient(t, e, ""), "db", "c")
	for i := range 20 {
		d := map[string]any{"id": fmt.Sprint(i), "pk": fmt.Sprintf("p%d", i), "g": i % 2, "v": i}
		if i == 7 {
			d["v"] = "seven"
		}
		b, _ := json.Marshal(d)
		if _, err := cc.CreateItem(context.Background(), azcosmos.NewPartitionKeyString(d["pk"].(string)), b, nil); err != nil {
			t.Fatal(err)
		}
	}
	pc := &planClient{t: t, e: e, coll: "/dbs/db/colls/c", page: 3}
	for _, sql := range []string{
		"SELECT VALUE SUM(c.v) FROM c",
		"SELECT VALUE AVG(c.v) FROM c",
		"SELECT SUM(c.v) AS s, COUNT(1) AS n FROM c",
		"SELECT c.g, AVG(c.v) AS a FROM c GROUP BY c.g",
	} {
		got, refused := pc.run(sql, nil)
		if !strings.Contains(refused, "not all numbers") {
			t.Errorf("%s across partitions: %s (refusal %q), want a refusal: the answer has no sum", sql, strings.Join(canon(got), ","), refused)
		}
	}
	got, refused := pc.run("SELECT VALUE SUM(c.v) FROM c WHERE IS_NUMBER(c.v)", nil)
	if want := 190 - 7; refused != "" || len(got) != 1 || got[0] != float64(want) {
		t.Errorf("SUM over the numbers: %v (refusal %q), want [%d]", got, refused, want)
	}
	items, _, err := queryAll(t, cc, "SELECT VALUE SUM(c.v) FROM c", azcosmos.NewPartitionKeyString("p7"), nil)
	if err != nil || len(items) != 0 {
		t.Errorf("SUM in the partition key of the string: %d results, %v; want none (undefined)", len(items), err)
	}
}

// TestQuery_GeneratedShapesThroughAzcosmos runs the same generated queries through azcosmos in
// pages of 3: in one logical partition (the emulator serves every shape itself), and across
// partitions, where azcosmos v1.5.0 has no query pipeline and sends the query as it is: shapes
// that need a plan (ORDER BY, aggregates) get the gateway's 400/1004 with the plan attached, the
// others a complete answer.
func TestQuery_GeneratedShapesThroughAzcosmos(t *testing.T) {
	t.Parallel()
	e := openEmu(t, emulator.Options{Partitions: 4})
	cc := setupContainer(t, newClient(t, e, ""), "db", "c")
	r := rand.New(rand.NewPCG(24, 2))
	docs := seedDocs(t, cc, r, 50)
	inPK := map[string][]pdoc{}
	for _, d := range docs {
		inPK[d.PK] = append(inPK[d.PK], d)
	}
	run := func(q qshape, pk azcosmos.PartitionKey) ([]any, error) {
		opts := &azcosmos.QueryOptions{PageSizeHint: 3}
		for k, v := range q.params() {
			opts.QueryParameters = append(opts.QueryParameters, azcosmos.QueryParameter{Name: k, Value: v})
		}
		pager := cc.NewQueryItemsPager(q.sql(), pk, opts)
		var out []any
		for pager.More() {
			page, err := pager.NextPage(context.Background())
			if err != nil {
				return nil, err
			}
			for _, it := range page.Items {
				var v any
				if err := json.Unmarshal(it, &v); err != nil {
					t.Fatal(err)
				}
				out = append(out, v)
			}
		}
		return out, nil
	}
	for range 80 {
		q := randomShape(r, len(docs))
		pk := fmt.Sprintf("p%d", r.IntN(7))
		got, err := run(q, azcosmos.NewPartitionKeyString(pk))
		if err != nil {
			t.Errorf("%s in %s: %v", q.sql(), pk, err)
		} else if ok, want := sameAnswer(q, inPK[pk], got); !ok {
			t.Errorf("%s in %s:\n got %s\nwant %s", q.sql(), pk, strings.Join(canon(got), ","), want)
		}

		got, err = run(q, azcosmos.NewPartitionKey())
		if q.refusedAcross() {
			if statusOf(err) != 400 || !strings.Contains(err.Error(), "not supported by cfp emulator: ") {
				t.Errorf("%s across partitions: %v, want a 400 refusal", q.sql(), err)
			}
			continue
		}
		if len(q.orderBy) > 0 || q.agg != "" || q.offset >= 0 || q.distinct || q.group > 0 {
			var re *azcore.ResponseError
			if !asResponseError(err, &re) || re.StatusCode != 400 || re.RawResponse.Header.Get("x-ms-substatus") != "1004" ||
				!strings.Contains(err.Error(), "additionalErrorInfo") || !strings.Contains(err.Error(), "partitionedQueryExecutionInfoVersion") {
				t.Errorf("%s across partitions: %v, want 400/1004 with the plan as additionalErrorInfo", q.sql(), err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s across partitions: %v", q.sql(), err)
		} else if ok, want := sameAnswer(q, docs, got); !ok {
			t.Errorf("%s across partitions:\n got %s\nwant %s", q.sql(), strings.Join(canon(got), ","), want)
		}
	}
}

// Every query shape the emulator cannot answer right is refused with a 400 whose message starts
// "not supported by cfp emulator: ", on the plan request and on the query itself (in one
// partition or across them), instead of an answer a client would merge wrong.
func TestQueryPlan_UnsupportedShapesAreRefused(t *testing.T) {
	t.Parallel()
	e := openEmu(t, emulator.Options{Partitions: 4})
	cc := setupContainer(t, newClient(t, e, ""), "db", "c")
	sampleItems(t, cc)
	pc := &planClient{t: t, e: e, coll: "/dbs/db/colls/c", page: 3}
	for _, tc := range []struct {
		sql       string
		inOnePK   bool // the emulator serves it within one partition key
		mentioned string
	}{
		{"SELECT DISTINCT TOP 3 c.pk FROM c", true, "DISTINCT with TOP"},
		{"SELECT DISTINCT VALUE c.pk FROM c ORDER BY c.pk OFFSET 1 LIMIT 1", true, "DISTINCT with TOP or OFFSET LIMIT"},
		{"SELECT VALUE COUNT(1) FROM c OFFSET 0 LIMIT 1", false, "OFFSET LIMIT with an aggregate"},
		{"SELECT c.pk, COUNT(1) AS n FROM c GROUP BY c.pk ORDER BY c.pk", false, "ORDER BY with GROUP BY"},
		{"SELECT * FROM c ORDER BY LOWER(c.id)", false, "LOWER"},
		{"SELECT [COUNT(1)] AS n FROM c", true, "an aggregate inside an expression"},
		{"SELECT VALUE [COUNT(1)] FROM c", true, "an aggregate inside an expression"},
	} {
		got, refused := pc.run(tc.sql, map[string]any{"@n": 2})
		if refused == "" || !strings.Contains(refused, tc.mentioned) {
			t.Errorf("plan of %s: %v, refusal %q; want a refusal naming %s", tc.sql, got, refused, tc.mentioned)
		}
		opts := &azcosmos.QueryOptions{QueryParameters: []azcosmos.QueryParameter{{Name: "@n", Value: 2}}}
		_, _, err := queryAll(t, cc, tc.sql, azcosmos.NewPartitionKey(), opts)
		if statusOf(err) != 400 || !strings.Contains(err.Error(), `"not supported by cfp emulator: `) {
			t.Errorf("%s across partitions: %v, want 400 not supported by cfp emulator", tc.sql, err)
		}
		_, _, err = queryAll(t, cc, tc.sql, azcosmos.NewPartitionKeyString("1"), opts)
		if tc.inOnePK && err != nil {
			t.Errorf("%s in one partition key: %v", tc.sql, err)
		}
		if !tc.inOnePK && (statusOf(err) != 400 || !strings.Contains(err.Error(), `"not supported by cfp emulator: `)) {
			t.Errorf("%s in one partition key: %v, want 400 not supported by cfp emulator", tc.sql, err)
		}
	}
}

// TestQuery_MemoryBoundsOfTheNewShapes: DISTINCT keeps every match, GROUP BY every group, and the
// first page of OFFSET n its n skipped results; past --max-order-by each is a 400 that says so,
// not an emulator that grows without bound.
func TestQuery_MemoryBoundsOfTheNewShapes(t *testing.T) {
	t.Parallel()
	e := openEmu(t, emulator.Options{Partitions: 1, MaxOrderByItems: 12})
	cc := setupContainer(t, newClient(t, e, ""), "db", "c")
	for i := range 20 {
		upsert(t, cc, doc{ID: fmt.Sprintf("d%02d", i), PK: "p", V: i})
	}
	pk := azcosmos.NewPartitionKeyString("p")
	for sql, bound := range map[string]string{
		"SELECT DISTINCT VALUE c.v FROM c":                             "a DISTINCT query over more than 12 matches",
		"SELECT c.v, COUNT(1) AS n FROM c GROUP BY c.v":                "a GROUP BY query with more than 12 groups",
		"SELECT * FROM c OFFSET 10 LIMIT 5":                            "an OFFSET page beyond the first 12 results",
		"SELECT DISTINCT VALUE c.v FROM c WHERE c.v < 12":              "",
		"SELECT c.v, COUNT(1) AS n FROM c WHERE c.v < 12 GROUP BY c.v": "",
		"SELECT * FROM c OFFSET 5 LIMIT 5":                             "",
	} {
		_, _, err := queryAll(t, cc, sql, pk, &azcosmos.QueryOptions{PageSizeHint: 5})
		switch {
		case bound == "" && err != nil:
			t.Errorf("%s: %v", sql, err)
		case bound != "" && (statusOf(err) != 400 || !strings.Contains(err.Error(), "not supported by cfp emulator: "+bound)):
			t.Errorf("%s: %v, want a 400 naming the bound", sql, err)
		}
	}
}

// TestPages_NewShapesBoundedByTheResponseLimit: the pages of DISTINCT, GROUP BY and OFFSET
// queries fit in the service's 4 MB response limit too, and an OFFSET whose skipped results
// alone exceed a page still skips all of them (the continuation carries what is left to skip).
func TestPages_NewShapesBoundedByTheResponseLimit(t *testing.T) {
	t.Parallel()
	e := openEmu(t, emulator.Options{Partitions: 1})
	cc := setupContainer(t, newClient(t, e, ""), "db", "c")
	ids := bigItems(t, cc, 5)
	for q, want := range map[string][]string{
		"SELECT * FROM c OFFSET 3 LIMIT 2":                     ids[3:],
		"SELECT DISTINCT * FROM c":                             ids,
		"SELECT DISTINCT c.id, c.pad FROM c ORDER BY c.v DESC": {ids[4], ids[3], ids[2], ids[1], ids[0]},
		"SELECT c.id, MAX(c.pad) AS pad FROM c GROUP BY c.id":  ids,
		"SELECT * FROM c WHERE c.v >= 1 OFFSET 2 LIMIT 10":     ids[3:],
	} {
		var got []string
		cont := ""
		for pages := 0; ; pages++ {
			hdr := map[string]string{"Content-Type": "application/query+json", "x-ms-documentdb-isquery": "true",
				"x-ms-documentdb-partitionkey": `["p"]`, "x-ms-max-item-count": "100"}
			if cont != "" {
				hdr["x-ms-continuation"] = cont
			}
			resp, body := rawRequest(t, e, http.MethodPost, "/dbs/db/colls/c/docs", hdr, queryBody(q, nil))
			if resp.StatusCode != http.StatusOK || pages > 10 {
				t.Fatalf("%s page %d: %d %.300s", q, pages, resp.StatusCode, body)
			}
			got = append(got, pageIDs(t, q, body)...)
			if cont = resp.Header.Get("x-ms-continuation"); cont == "" {
				break
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", q, got, want)
		}
	}
}
