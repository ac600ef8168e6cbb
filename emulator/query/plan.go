package query

import (
	"fmt"
	"strings"
)

// OrderByFilter is the placeholder of an ORDER BY's rewritten query that clients replace with a
// filter ("true" on a first page, a resume condition on a continuation).
const OrderByFilter = "{documentdb-formattableorderbyquery-filter}"

// Plan is the query plan the gateway answers a query-plan request with (the
// partitionedQueryExecutionInfo of the .NET, Java, JS and Python SDKs): what a client that fans a
// query out over the partition key ranges must do to merge their results. Every field is
// written, as the gateway does; the SDKs read them without defaults.
type Plan struct {
	Version     int          `json:"partitionedQueryExecutionInfoVersion"`
	QueryInfo   QueryInfo    `json:"queryInfo"`
	QueryRanges []QueryRange `json:"queryRanges"`
}

// QueryInfo is the plan's description of the query.
type QueryInfo struct {
	// DistinctType is None, Ordered or Unordered.
	DistinctType string `json:"distinctType"`
	// Top is TOP n, applied again by the client over the merged results; nil without TOP.
	Top *int `json:"top"`
	// Offset and Limit are OFFSET n LIMIT m; nil without.
	Offset *int `json:"offset"`
	Limit  *int `json:"limit"`
	// OrderBy holds Ascending or Descending per ORDER BY key; OrderByExpressions the keys.
	OrderBy            []string `json:"orderBy"`
	OrderByExpressions []string `json:"orderByExpressions"`
	GroupByExpressions []string `json:"groupByExpressions"`
	GroupByAliases     []string `json:"groupByAliases"`
	// Aggregates are the aggregates of SELECT VALUE AGG(...): Count, Sum, Min, Max, Average.
	Aggregates []string `json:"aggregates"`
	// GroupByAliasToAggregateType maps each name of a select list with aggregates or GROUP BY
	// to its aggregate, or to null for a GROUP BY expression.
	GroupByAliasToAggregateType map[string]*string `json:"groupByAliasToAggregateType"`
	// RewrittenQuery is what the client sends to each partition key range instead of the query
	// ("" to send the query itself).
	RewrittenQuery         string `json:"rewrittenQuery"`
	HasSelectValue         bool   `json:"hasSelectValue"`
	DCountInfo             any    `json:"dCountInfo"`
	HasNonStreamingOrderBy bool   `json:"hasNonStreamingOrderBy"`
}

// QueryRange is a range of effective partition keys the query must visit.
type QueryRange struct {
	Min            string `json:"min"`
	Max            string `json:"max"`
	IsMinInclusive bool   `json:"isMinInclusive"`
	IsMaxInclusive bool   `json:"isMaxInclusive"`
}

// planAggregates names the aggregates as the plan does.
var planAggregates = map[string]string{"COUNT": "Count", "SUM": "Sum", "MIN": "Min", "MAX": "Max", "AVG": "Average"}

// Plan returns the query plan of q (bound: see Bind) over the whole key space. A query whose results a client
// could not merge correctly from a plan the emulator can express gets an error wrapping
// ErrUnsupported (aggregates other than SELECT VALUE AGG(...)), never a plan that would make
// the client answer wrong.
func (q *Query) Plan() (*Plan, error) {
	if q.topParam != "" || q.offsetParam != "" || q.limitParam != "" {
		return nil, fmt.Errorf("plan of a query with parameters in TOP or OFFSET LIMIT before Bind")
	}
	p := &Plan{
		Version: 2,
		QueryInfo: QueryInfo{
			DistinctType:                "None",
			OrderBy:                     []string{},
			OrderByExpressions:          []string{},
			GroupByExpressions:          []string{},
			GroupByAliases:              []string{},
			Aggregates:                  []string{},
			GroupByAliasToAggregateType: map[string]*string{},
			HasSelectValue:              q.Value,
		},
		QueryRanges: []QueryRange{{Min: "", Max: "FF", IsMinInclusive: true, IsMaxInclusive: false}},
	}
	qi := &p.QueryInfo
	if q.Distinct {
		if q.Top >= 0 || q.Offset >= 0 {
			// The JS SDK applies TOP and OFFSET LIMIT before DISTINCT: it would return fewer.
			return nil, &UnsupportedError{Pos: -1, What: "DISTINCT with TOP or OFFSET LIMIT across partitions (give the partition key to run the query in one partition)"}
		}
		qi.DistinctType = "Unordered"
		if len(q.OrderBy) == 1 && q.Value && q.fields[0].expr.String() == q.orderKey(q.OrderBy[0]) {
			// Equal results are adjacent in the merged order: the client compares each with
			// the previous one.
			qi.DistinctType = "Ordered"
		}
	}
	if q.Top >= 0 {
		top := q.Top
		qi.Top = &top
	}
	if q.Offset >= 0 {
		offset, limit := q.Offset, q.Limit
		qi.Offset, qi.Limit = &offset, &limit
		// Each range returns its first offset+limit results; the client skips and limits.
		qi.RewrittenQuery = q.rewrite(q.selectList(), false)
	}
	switch {
	case q.IsAggregate():
		if err := q.aggregatePlan(qi); err != nil {
			return nil, err
		}
	case len(q.OrderBy) > 0:
		items := make([]string, len(q.OrderBy))
		for i, k := range q.OrderBy {
			dir := "Ascending"
			if k.Desc {
				dir = "Descending"
			}
			qi.OrderBy = append(qi.OrderBy, dir)
			qi.OrderByExpressions = append(qi.OrderByExpressions, q.orderKey(k))
			items[i] = `{"item": ` + q.orderKey(k) + `}`
		}
		sel := pathNode{alias: q.Alias, segs: stringSegs([]string{"_rid"})}.String() +
			", [" + strings.Join(items, ", ") + "] AS orderByItems, " + q.payload() + " AS payload"
		qi.RewrittenQuery = q.rewrite(sel, true)
	}
	return p, nil
}

// cannotMerge is the refusal of an aggregate query whose select list the SDKs cannot merge.
var cannotMerge = &UnsupportedError{Pos: -1, What: "an aggregate inside an expression across partitions (SELECT VALUE AGG(x), or AGG(x) AS name alone, merge; give the partition key to run the query in one partition)"}

// aggregatePlan fills the plan of an aggregate or GROUP BY query: SELECT VALUE AGG(x) without
// GROUP BY lists the aggregate, and each range returns [{"item": partial}]; otherwise each range
// returns its groups as {"groupByItems": [{"item": g}, ...], "payload": ...}, where the payload
// of SELECT VALUE is the value (or [{"item": partial}] for VALUE AGG(x)), and the payload of a
// select list is an object with each name's partial (aggregates, in groupByAliasToAggregateType)
// or value (GROUP BY expressions). No TOP on the ranges: it applies to the merged groups.
func (q *Query) aggregatePlan(qi *QueryInfo) error {
	for _, g := range q.groupBy {
		qi.GroupByExpressions = append(qi.GroupByExpressions, g.String())
	}
	var payload string
	if q.Value {
		expr := q.fields[0].expr
		switch a, ok := expr.(aggNode); {
		case ok:
			qi.Aggregates = []string{planAggregates[a.fn]}
			payload = "[" + partialAggregate(a) + "]"
		case hasAggregate(expr):
			return cannotMerge
		default:
			payload = expr.String()
		}
		if len(q.groupBy) == 0 {
			qi.RewrittenQuery = q.rewrite("VALUE "+payload, false)
			return nil
		}
	} else {
		parts := make([]string, len(q.fields))
		for i, f := range q.fields {
			qi.GroupByAliases = append(qi.GroupByAliases, f.name)
			switch a, ok := f.expr.(aggNode); {
			case ok:
				t := planAggregates[a.fn]
				qi.GroupByAliasToAggregateType[f.name] = &t
				parts[i] = formatValue(f.name) + ": " + partialAggregate(a)
			case hasAggregate(f.expr):
				return cannotMerge
			default:
				qi.GroupByAliasToAggregateType[f.name] = nil
				parts[i] = formatValue(f.name) + ": " + f.expr.String()
			}
		}
		payload = "{" + strings.Join(parts, ", ") + "}"
	}
	sel := payload + " AS payload"
	if len(q.groupBy) > 0 {
		items := make([]string, len(q.groupBy))
		for i, g := range q.groupBy {
			items[i] = `{"item": ` + g.String() + `}`
		}
		sel = "[" + strings.Join(items, ", ") + "] AS groupByItems, " + sel
	}
	qi.RewrittenQuery = q.rewrite(sel, false)
	return nil
}

// partialAggregate is what a range returns for AGG(x), in the form the SDKs merge:
// {"item": partial}, where AVG's partial is its sum and count, and MIN and MAX carry
// item2 {"min"|"max": v, "count": n} for the clients that read it (JS).
func partialAggregate(a aggNode) string {
	arg := a.arg.String()
	switch a.fn {
	case "AVG":
		return `{"item": {"sum": SUM(` + arg + `), "count": COUNT(` + arg + `)}}`
	case "MIN", "MAX":
		k := strings.ToLower(a.fn)
		return `{"item": ` + a.fn + `(` + arg + `), "item2": {"` + k + `": ` + a.fn + `(` + arg + `), "count": COUNT(` + arg + `)}}`
	default:
		return `{"item": ` + a.String() + `}`
	}
}

// payload is the select list of q as one expression: the document, the VALUE expression, or an
// object of the named expressions.
func (q *Query) payload() string {
	switch {
	case q.fields == nil:
		return q.Alias
	case q.Value:
		return q.fields[0].expr.String()
	}
	parts := make([]string, len(q.fields))
	for i, f := range q.fields {
		parts[i] = formatValue(f.name) + ": " + f.expr.String()
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// rewrite returns the per-range query of q with sel as its select list, TOP n kept and OFFSET n
// LIMIT m made TOP n+m, and with the ORDER BY filter placeholder and the ORDER BY itself when
// orderBy is set.
func (q *Query) rewrite(sel string, orderBy bool) string {
	var b strings.Builder
	b.WriteString("SELECT ")
	switch {
	case q.IsAggregate():
	case q.Offset >= 0:
		fmt.Fprintf(&b, "TOP %d ", q.Offset+q.Limit)
	case q.Top >= 0:
		fmt.Fprintf(&b, "TOP %d ", q.Top)
	}
	b.WriteString(sel + " FROM " + q.Alias)
	switch {
	case orderBy && q.where != nil:
		b.WriteString(" WHERE (" + q.where.String() + ") AND (" + OrderByFilter + ")")
	case orderBy:
		b.WriteString(" WHERE (" + OrderByFilter + ")")
	case q.where != nil:
		b.WriteString(" WHERE " + q.where.String())
	}
	if len(q.groupBy) > 0 {
		b.WriteString(" GROUP BY " + q.groupByList())
	}
	if orderBy {
		b.WriteString(" ORDER BY " + q.orderByList(false))
	}
	return b.String()
}
