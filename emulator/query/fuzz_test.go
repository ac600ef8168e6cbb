package query

import (
	"strings"
	"testing"
)

// FuzzParse checks that Parse never panics, that the normalised form of a
// parsed query parses again to the same normalised form, that matching and
// aggregating never panic, and that the rewritten query of a plan parses (a
// client sends it to every partition key range).
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"SELECT * FROM c",
		"SELECT * FROM c WHERE STARTSWITH(c.id, @prefix)",
		"SELECT * FROM c WHERE c.id IN (@param_id0, @param_id1)",
		`SELECT * FROM c WHERE (c.id = @param_id0 AND c["my-pk"] = @param_pk00) OR (c.id = @param_id1 AND IS_NULL(c.pk))`,
		"select top 5 * from root r where not r.a.b[0] <> -1.5e3 order by r._ts desc",
		`SELECT * FROM c WHERE c.s = 'it\'s' OR c.t = "\u00e9\ud83d\ude00"`,
		"SELECT * FROM c WHERE c.x NOT IN (1, 'a', true, null, undefined)",
		"SELECT c.id FROM c",
		"SELECT DISTINCT TOP @n VALUE c.a FROM c ORDER BY c.a DESC, c.id",
		"SELECT c.pk, COUNT(1) AS n, AVG(c.n) AS m FROM c WHERE c.n > 0 GROUP BY c.pk",
		`SELECT VALUE [{"item": MAX(c.n)}] FROM c`,
		"SELECT * FROM c ORDER BY c.id OFFSET @o LIMIT 3",
	} {
		f.Add(seed)
	}
	doc := map[string]any{"id": "x", "pk": "p", "n": 1.0, "a": map[string]any{"b": []any{1.0, "s"}}, "_ts": 5.0}
	params := map[string]any{"@prefix": "x", "@param_id0": "x", "@param_id1": 2.0, "@param_pk00": nil, "@n": 2.0, "@o": 1.0}
	f.Fuzz(func(t *testing.T, sql string) {
		q, err := Parse(sql)
		if err != nil {
			return
		}
		s := q.String()
		q2, err := Parse(s)
		if err != nil {
			t.Fatalf("Parse(%q) ok but its String %q fails: %v", sql, s, err)
		}
		if s2 := q2.String(); s2 != s {
			t.Fatalf("String not stable for %q:\n%s\n%s", sql, s, s2)
		}
		m1, err1 := q.Match(doc, params)
		m2, err2 := q2.Match(doc, params)
		if m1 != m2 || (err1 == nil) != (err2 == nil) {
			t.Fatalf("%q and its String %q match differently: %v/%v vs %v/%v", sql, s, m1, err1, m2, err2)
		}
		q.Compare(doc, map[string]any{})
		b, err := q.Bind(params)
		if err != nil {
			return
		}
		if b.IsAggregate() {
			a := b.NewAggregator(params)
			if a.Add(doc) == nil {
				_, _ = a.Results()
			}
		}
		plan, err := b.Plan()
		if err != nil || plan.QueryInfo.RewrittenQuery == "" {
			return
		}
		rq := strings.ReplaceAll(plan.QueryInfo.RewrittenQuery, OrderByFilter, "true")
		if _, err := Parse(rq); err != nil {
			t.Fatalf("the plan of %q rewrites it as %q, which does not parse: %v", sql, rq, err)
		}
	})
}

func BenchmarkMatch(b *testing.B) {
	b.ReportAllocs()
	q, err := Parse(`SELECT * FROM c WHERE STARTSWITH(c.id, @prefix) AND (c.owner = @o OR NOT IS_DEFINED(c.owner))`)
	if err != nil {
		b.Fatal(err)
	}
	doc := map[string]any{"id": "cfp.lease.0", "owner": "host-a", "continuationToken": "\"42\""}
	params := map[string]any{"@prefix": "cfp.", "@o": "host-b"}
	for b.Loop() {
		if _, err := q.Match(doc, params); err != nil {
			b.Fatal(err)
		}
	}
}
