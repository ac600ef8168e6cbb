package query

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func decode(t testing.TB, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("decode %s: %v", s, err)
	}
	return m
}

func TestMatch(t *testing.T) {
	t.Parallel()
	doc := `{"id":"lease-1","pk":"p","n":5,"f":1.5,"ok":true,"nul":null,"my-pk":"x",
		"a":{"b":"deep","c":[1,"two",{"d":3}]},"tags":["x","y"],"owner":"Host-A","_ts":1700000000}`
	params := map[string]any{"@prefix": "lease-", "@five": 5.0, "@s": "p", "@t": true, "@n": nil,
		"@arr": []any{"x", "y"}, "@int": 5, "@num": json.Number("1.5")}
	tests := []struct {
		sql  string
		want bool
	}{
		{"SELECT * FROM c", true},
		{"select * from c where c.id = 'lease-1'", true},
		{`SELECT * FROM c WHERE c.id = "lease-1"`, true},
		{"SELECT * FROM c WHERE c.id = 'lease-2'", false},
		{"SELECT * FROM c WHERE STARTSWITH(c.id, @prefix)", true},
		{"SELECT * FROM c WHERE STARTSWITH(c.id, 'LEASE')", false},
		{"SELECT * FROM c WHERE STARTSWITH(c.id, 'LEASE', true)", true},
		{"SELECT * FROM c WHERE STARTSWITH(c.id, 'LEASE', false)", false},
		{"SELECT * FROM c WHERE startswith(c.owner, 'host', true)", true},
		{"SELECT * FROM c WHERE STARTSWITH(c.n, '5')", false},
		{"SELECT * FROM c WHERE NOT STARTSWITH(c.n, '5')", false}, // undefined stays undefined
		{"SELECT * FROM c WHERE ENDSWITH(c.id, '-1')", true},
		{"SELECT * FROM c WHERE CONTAINS(c.id, 'ASE', true)", true},
		{"SELECT * FROM c WHERE c.n = @five", true},
		{"SELECT * FROM c WHERE c.n = @int", true},
		{"SELECT * FROM c WHERE c.f = @num", true},
		{"SELECT * FROM c WHERE c.n = 5.0", true},
		{"SELECT * FROM c WHERE c.n = '5'", false},
		{"SELECT * FROM c WHERE NOT (c.n = '5')", false}, // cross-type: undefined
		{"SELECT * FROM c WHERE c.n != '5'", false},
		{"SELECT * FROM c WHERE c.n != 6", true},
		{"SELECT * FROM c WHERE c.n <> 5", false},
		{"SELECT * FROM c WHERE c.n > 4 AND c.n >= 5 AND c.n < 6 AND c.n <= 5", true},
		{"SELECT * FROM c WHERE c.n > 5", false},
		{"SELECT * FROM c WHERE c.n > -1", true},
		{"SELECT * FROM c WHERE c.id > 'lease-0' AND c.id < 'lease-2'", true},
		{"SELECT * FROM c WHERE c.ok", true},
		{"SELECT * FROM c WHERE c.ok = @t", true},
		{"SELECT * FROM c WHERE c.ok > false", true},
		{"SELECT * FROM c WHERE NOT c.ok", false},
		{"SELECT * FROM c WHERE c.nul = null", true},
		{"SELECT * FROM c WHERE c.nul = @n", true},
		{"SELECT * FROM c WHERE IS_NULL(c.nul)", true},
		{"SELECT * FROM c WHERE IS_NULL(c.missing)", false},
		{"SELECT * FROM c WHERE IS_DEFINED(c.nul)", true},
		{"SELECT * FROM c WHERE IS_DEFINED(c.missing)", false},
		{"SELECT * FROM c WHERE NOT IS_DEFINED(c.missing)", true},
		{"SELECT * FROM c WHERE c.missing = null", false},
		{"SELECT * FROM c WHERE NOT (c.missing = 1)", false},
		{"SELECT * FROM c WHERE c.missing != 1", false},
		{"SELECT * FROM c WHERE c.missing = 1 OR c.n = 5", true},
		{"SELECT * FROM c WHERE c.missing = 1 AND c.n = 5", false},
		{"SELECT * FROM c WHERE NOT (c.n = 5 AND c.missing = 1)", false},
		{"SELECT * FROM c WHERE NOT (c.n = 6 AND c.missing = 1)", true}, // false AND undefined = false
		{"SELECT * FROM c WHERE c.a.b = 'deep'", true},
		{`SELECT * FROM c WHERE c["a"]["b"] = 'deep'`, true},
		{`SELECT * FROM c WHERE c["my-pk"] = 'x'`, true},
		{"SELECT * FROM c WHERE c.a.c[1] = 'two'", true},
		{"SELECT * FROM c WHERE c.a.c[2].d = 3", true},
		{"SELECT * FROM c WHERE IS_DEFINED(c.a.c[3])", false},
		{"SELECT * FROM c WHERE IS_DEFINED(c.id.x)", false},
		{"SELECT * FROM c WHERE c.tags = @arr", true},
		{"SELECT * FROM c WHERE c.tags != @arr", false},
		{"SELECT * FROM c WHERE c.a = c.a", true},
		{"SELECT * FROM c WHERE IS_ARRAY(c.tags) AND IS_OBJECT(c.a) AND IS_STRING(c.id) AND IS_NUMBER(c.n) AND IS_BOOL(c.ok) AND IS_PRIMITIVE(c.nul)", true},
		{"SELECT * FROM c WHERE IS_PRIMITIVE(c.a)", false},
		{"SELECT * FROM c WHERE c.id IN ('a', 'lease-1')", true},
		{"SELECT * FROM c WHERE c.id IN ('a', 'b')", false},
		{"SELECT * FROM c WHERE c.id NOT IN ('a', 'b')", true},
		{"SELECT * FROM c WHERE c.id NOT IN (1, 'b')", false}, // 1 vs string: undefined
		{"SELECT * FROM c WHERE c.n IN (1, 5)", true},
		{"SELECT * FROM c WHERE c.missing IN (1, 5)", false},
		{"SELECT * FROM c WHERE (c.id = 'x' OR c.pk = 'p') AND NOT c.n = 4", true},
		{"SELECT * FROM c WHERE c.id = 'x' OR c.pk = 'p' AND c.n = 4", false}, // AND binds tighter
		{"SELECT * FROM c WHERE NOT NOT c.ok", true},
		{"SELECT * FROM c WHERE true", true},
		{"SELECT * FROM c WHERE 1", false},
		{"SELECT * FROM c WHERE undefined = undefined", false},
		{"SELECT * FROM root r WHERE r.id = 'lease-1'", true},
		{"SELECT * FROM c AS x WHERE x.pk = @s", true},
		{"SELECT TOP 1 * FROM c WHERE c._ts > 0 ORDER BY c._ts DESC", true},
		{`SELECT * FROM c WHERE c.id = 'lea\u0073e-1'`, true},
		{`SELECT * FROM c WHERE c.id = 'it\'s'`, false},
	}
	for _, tc := range tests {
		q, err := Parse(tc.sql)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.sql, err)
			continue
		}
		got, err := q.Match(decode(t, doc), params)
		if err != nil {
			t.Errorf("Match(%q): %v", tc.sql, err)
			continue
		}
		if got != tc.want {
			t.Errorf("Match(%q) = %v, want %v", tc.sql, got, tc.want)
		}
	}
}

// TestMatch_ReadManyItemsShapes runs the three query shapes azcosmos's
// ReadManyItems generates (docs/protocol-gateway.md, "Queries") over a few documents.
func TestMatch_ReadManyItemsShapes(t *testing.T) {
	t.Parallel()
	docs := []map[string]any{
		decode(t, `{"id":"a","pk":"a"}`),
		decode(t, `{"id":"b","pk":"p1"}`),
		decode(t, `{"id":"c","pk":"p2"}`),
		decode(t, `{"id":"d","pk":null}`),
		decode(t, `{"id":"e","my-pk":"q"}`),
	}
	tests := []struct {
		sql    string
		params map[string]any
		want   []string
	}{
		{"SELECT * FROM c WHERE c.id IN (@param_id0, @param_id1)",
			map[string]any{"@param_id0": "a", "@param_id1": "c"}, []string{"a", "c"}},
		{"SELECT * FROM c WHERE c.pk = @pk0 AND c.id IN (@param_id0, @param_id1)",
			map[string]any{"@pk0": "p1", "@param_id0": "a", "@param_id1": "b"}, []string{"b"}},
		{"SELECT * FROM c WHERE (c.id = @param_id0 AND c.pk = @param_pk00) OR (c.id = @param_id1 AND IS_NULL(c.pk))",
			map[string]any{"@param_id0": "c", "@param_pk00": "p2", "@param_id1": "d"}, []string{"c", "d"}},
		{`SELECT * FROM c WHERE (c.id = @param_id0 AND c["my-pk"] = @param_pk00)`,
			map[string]any{"@param_id0": "e", "@param_pk00": "q"}, []string{"e"}},
	}
	for _, tc := range tests {
		q, err := Parse(tc.sql)
		if err != nil {
			t.Fatalf("Parse(%q): %v", tc.sql, err)
		}
		var got []string
		for _, d := range docs {
			ok, err := q.Match(d, tc.params)
			if err != nil {
				t.Fatalf("Match(%q): %v", tc.sql, err)
			}
			if ok {
				got = append(got, d["id"].(string))
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s matched %v, want %v", tc.sql, got, tc.want)
		}
	}
}

func TestMatch_MissingParameter(t *testing.T) {
	t.Parallel()
	q, err := Parse("SELECT * FROM c WHERE STARTSWITH(c.id, @prefix)")
	if err != nil {
		t.Fatal(err)
	}
	_, err = q.Match(map[string]any{"id": "x"}, map[string]any{"@other": "x"})
	if err == nil || !strings.Contains(err.Error(), "@prefix") {
		t.Errorf("Match without @prefix = %v, want an error naming @prefix", err)
	}
}

func TestParse_Clauses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		sql     string
		alias   string
		top     int
		orderBy []OrderBy
	}{
		{"SELECT * FROM c", "c", -1, nil},
		{"SELECT TOP 10 * FROM c", "c", 10, nil},
		{"select top 0 * from items i", "i", 0, nil},
		{"SELECT * FROM c ORDER BY c._ts", "c", -1, []OrderBy{{Path: []string{"_ts"}}}},
		{"SELECT * FROM c WHERE c.a = 1 ORDER BY c._ts ASC", "c", -1, []OrderBy{{Path: []string{"_ts"}}}},
		{`SELECT TOP 3 * FROM c ORDER BY c.a["b c"] desc`, "c", 3, []OrderBy{{Path: []string{"a", "b c"}, Desc: true}}},
		{"SELECT * FROM c ORDER BY c.a DESC, c.b", "c", -1, []OrderBy{{Path: []string{"a"}, Desc: true}, {Path: []string{"b"}}}},
	}
	for _, tc := range tests {
		q, err := Parse(tc.sql)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.sql, err)
			continue
		}
		if q.Alias != tc.alias || q.Top != tc.top {
			t.Errorf("Parse(%q): alias %q top %d, want %q %d", tc.sql, q.Alias, q.Top, tc.alias, tc.top)
		}
		if !slices.EqualFunc(q.OrderBy, tc.orderBy, func(a, b OrderBy) bool { return slices.Equal(a.Path, b.Path) && a.Desc == b.Desc }) {
			t.Errorf("Parse(%q).OrderBy = %+v, want %+v", tc.sql, q.OrderBy, tc.orderBy)
		}
	}
}

func TestBind_TopParameter(t *testing.T) {
	t.Parallel()
	q, err := Parse("SELECT TOP @n * FROM c ORDER BY c.a")
	if err != nil {
		t.Fatal(err)
	}
	if got := q.String(); got != "SELECT TOP @n * FROM c ORDER BY c[\"a\"] ASC" {
		t.Errorf("String() = %s", got)
	}
	b, err := q.Bind(map[string]any{"@n": 3.0})
	if err != nil || b.Top != 3 {
		t.Errorf("Bind(@n=3) = %v, %v; want TOP 3", b, err)
	}
	for _, params := range []map[string]any{{}, {"@n": -1.0}, {"@n": 1.5}, {"@n": "3"}} {
		if _, err := q.Bind(params); err == nil {
			t.Errorf("Bind(%v) succeeded, want an error", params)
		}
	}
	q, err = Parse("SELECT * FROM c ORDER BY c.a OFFSET @o LIMIT @l")
	if err != nil {
		t.Fatal(err)
	}
	if got := q.String(); got != "SELECT * FROM c ORDER BY c[\"a\"] ASC OFFSET @o LIMIT @l" {
		t.Errorf("String() = %s", got)
	}
	b, err = q.Bind(map[string]any{"@o": 2, "@l": 5.0})
	if err != nil || b.Offset != 2 || b.Limit != 5 || b.RowLimit() != 5 || q.Offset != -1 {
		t.Errorf("Bind(@o=2, @l=5) = %+v, %v; want OFFSET 2 LIMIT 5, q unchanged", b, err)
	}
	if _, err := q.Bind(map[string]any{"@o": 2}); err == nil || !strings.Contains(err.Error(), "@l of LIMIT") {
		t.Errorf("Bind without @l: %v", err)
	}
}

func TestParse_Errors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		sql         string
		unsupported bool
		mention     string // the message names what is wrong
	}{
		{"SELECT * FROM c WHERE COUNT(1) > 1", true, "aggregate outside the select list"},
		{"SELECT VALUE COUNT(MAX(c.n)) FROM c", true, "inside another"},
		{"SELECT VALUE COUNT(1) FROM c ORDER BY c.id", true, "ORDER BY with an aggregate"},
		{"SELECT DISTINCT VALUE COUNT(1) FROM c", true, "DISTINCT with an aggregate"},
		{"SELECT * FROM c JOIN t IN c.tags", true, "JOIN"},
		{"SELECT * FROM c WHERE ARRAY_CONTAINS(c.tags, 'x')", true, "ARRAY_CONTAINS"},
		{"SELECT * FROM c WHERE LOWER(c.id) = 'x'", true, "LOWER"},
		{"SELECT * FROM c WHERE c.n BETWEEN 1 AND 2", true, "BETWEEN"},
		{"SELECT * FROM c WHERE c.id LIKE 'a%'", true, "LIKE"},
		{"SELECT * FROM c GROUP BY c.pk", false, "SELECT * is invalid"},
		{"SELECT c.id, COUNT(1) AS n FROM c GROUP BY c.pk", false, "not contained in either an aggregate function or the GROUP BY clause"},
		{"SELECT c.pk FROM c GROUP BY c.pk ORDER BY c.pk", true, "ORDER BY with GROUP BY"},
		{"SELECT c.pk FROM c GROUP BY c.pk OFFSET 0 LIMIT 1", true, "OFFSET LIMIT with an aggregate or GROUP BY"},
		{"SELECT DISTINCT c.pk FROM c GROUP BY c.pk", true, "DISTINCT with an aggregate or GROUP BY"},
		{"SELECT * FROM c ORDER BY c.a[0]", true, "array element"},
		{"SELECT * FROM c ORDER BY LOWER(c.a)", true, "LOWER"},
		{"SELECT * FROM c ORDER BY 1", true, "property path"},
		{"SELECT VALUE COUNT(1) FROM c OFFSET 0 LIMIT 1", true, "OFFSET LIMIT with an aggregate"},
		{"SELECT TOP 1 * FROM c OFFSET 1 LIMIT 2", false, "cannot be used together"},
		{"SELECT * FROM c OFFSET 1", false, "expected LIMIT"},
		{"SELECT * FROM c OFFSET -1 LIMIT 2", false, "non-negative integer"},
		{"SELECT VALUE {c.id: 1} FROM c", false, "quoted property name"},
		{"SELECT VALUE [1, 2 FROM c", false, "expected FROM"},
		{"SELECT * FROM c WHERE c[@p] = 1", true, "parameters"},
		{"", false, "SELECT"},
		{"DELETE FROM c", false, "SELECT"},
		{"SELECT * c", false, "FROM"},
		{"SELECT * FROM", false, "container name"},
		{"SELECT * FROM c WHERE", false, "expected a value"},
		{"SELECT * FROM c WHERE d.id = 1", false, "unknown identifier"},
		{"SELECT * FROM c WHERE c.id = 'x", false, "unterminated string"},
		{"SELECT * FROM c WHERE c.id = 'x\\q'", false, "escape"},
		{"SELECT * FROM c WHERE (c.id = 1", false, "expected )"},
		{"SELECT * FROM c WHERE c.id = 1 extra", false, "unexpected"},
		{"SELECT * FROM c WHERE STARTSWITH(c.id)", false, "2 or 3 arguments"},
		{"SELECT * FROM c WHERE IS_DEFINED(c.a, c.b)", false, "1 arguments"},
		{"SELECT * FROM c WHERE c.id = @", false, "parameter name"},
		{"SELECT * FROM c WHERE c.n = 1e999", false, "invalid number"},
		{"SELECT * FROM c WHERE c.n = 12abc", false, "invalid number"},
		{"SELECT * FROM c WHERE c.id = 1 ; DROP", false, "unexpected character"},
		{"SELECT TOP 1.5 * FROM c", false, "non-negative integer"},
		{"SELECT * FROM c WHERE c. = 1", false, "property name"},
		{"SELECT * FROM c WHERE " + strings.Repeat("(", 500) + "1" + strings.Repeat(")", 500), false, "nested too deeply"},
	}
	for _, tc := range tests {
		_, err := Parse(tc.sql)
		if err == nil {
			t.Errorf("Parse(%q) succeeded, want an error", tc.sql)
			continue
		}
		if got := errors.Is(err, ErrUnsupported); got != tc.unsupported {
			t.Errorf("Parse(%q) = %v; errors.Is(ErrUnsupported) = %v, want %v", tc.sql, err, got, tc.unsupported)
		}
		if !strings.Contains(err.Error(), tc.mention) {
			t.Errorf("Parse(%q) = %q, want it to mention %q", tc.sql, err, tc.mention)
		}
	}
}

func TestQuery_Compare(t *testing.T) {
	t.Parallel()
	docs := []map[string]any{
		decode(t, `{"id":"str","v":"b"}`),
		decode(t, `{"id":"num2","v":2}`),
		decode(t, `{"id":"missing"}`),
		decode(t, `{"id":"obj","v":{}}`),
		decode(t, `{"id":"true","v":true}`),
		decode(t, `{"id":"null","v":null}`),
		decode(t, `{"id":"num10","v":10}`),
		decode(t, `{"id":"arr","v":[]}`),
		decode(t, `{"id":"false","v":false}`),
		decode(t, `{"id":"stra","v":"a"}`),
	}
	ids := func(sql string) []string {
		q, err := Parse(sql)
		if err != nil {
			t.Fatal(err)
		}
		sorted := slices.Clone(docs)
		slices.SortStableFunc(sorted, q.Compare)
		var out []string
		for _, d := range sorted {
			out = append(out, d["id"].(string))
		}
		return out
	}
	asc := []string{"missing", "null", "false", "true", "num2", "num10", "stra", "str", "arr", "obj"}
	if got := ids("SELECT * FROM c ORDER BY c.v"); !slices.Equal(got, asc) {
		t.Errorf("ORDER BY c.v = %v, want %v", got, asc)
	}
	desc := []string{"obj", "arr", "str", "stra", "num10", "num2", "true", "false", "null", "missing"}
	if got := ids("SELECT * FROM c ORDER BY c.v DESC"); !slices.Equal(got, desc) {
		t.Errorf("ORDER BY c.v DESC = %v, want %v", got, desc)
	}
	var original []string
	for _, d := range docs {
		original = append(original, d["id"].(string))
	}
	if got := ids("SELECT * FROM c"); !slices.Equal(got, original) {
		t.Errorf("without ORDER BY the order changed: %v", got)
	}
}

func TestQuery_StringRoundTrip(t *testing.T) {
	t.Parallel()
	for _, sql := range []string{
		"select top 5 * from root r where startswith(r.id, 'x', true) and not r.a.b[0] <> -1.5e3 order by r._ts desc",
		`SELECT * FROM c WHERE (c.id = @param_id0 AND c["my-pk"] = @param_pk00) OR (c.id = @param_id1 AND IS_NULL(c.pk))`,
		`SELECT * FROM c WHERE c.s IN ("a\"b", 'c\'d', "\u00e9", -0, null, undefined, false) AND NOT c.x NOT IN (1)`,
	} {
		q, err := Parse(sql)
		if err != nil {
			t.Fatalf("Parse(%q): %v", sql, err)
		}
		q2, err := Parse(q.String())
		if err != nil {
			t.Fatalf("Parse(%q) (from String): %v", q.String(), err)
		}
		if q2.String() != q.String() {
			t.Errorf("String not stable:\n%s\n%s", q.String(), q2.String())
		}
	}
}

func TestProject_ValueFieldsAndAggregates(t *testing.T) {
	t.Parallel()
	docs := []map[string]any{
		decode(t, `{"id":"1","pk":"a","n":3,"o":{"x":1}}`),
		decode(t, `{"id":"2","pk":"a","n":5}`),
		decode(t, `{"id":"3","pk":"b","s":"z"}`),
	}
	project := func(sql string) []any {
		q, err := Parse(sql)
		if err != nil {
			t.Fatalf("Parse(%q): %v", sql, err)
		}
		var out []any
		for _, d := range docs {
			if v, ok, err := q.Project(d, nil); err != nil {
				t.Fatal(err)
			} else if ok {
				out = append(out, v)
			}
		}
		return out
	}
	if got := fmt.Sprint(project("SELECT VALUE c.id FROM c")); got != "[1 2 3]" {
		t.Errorf("SELECT VALUE c.id = %s", got)
	}
	if got := fmt.Sprint(project("SELECT VALUE c.n FROM c")); got != "[3 5]" {
		t.Errorf("SELECT VALUE c.n skips undefined: got %s", got)
	}
	if got := fmt.Sprint(project("SELECT c.id, c.o.x AS x FROM docs c")); got != "[map[id:1 x:1] map[id:2] map[id:3]]" {
		t.Errorf("SELECT c.id, c.o.x AS x = %s", got)
	}
	agg := func(sql string) (any, bool) {
		q, err := Parse(sql)
		if err != nil {
			t.Fatalf("Parse(%q): %v", sql, err)
		}
		if !q.NeedsQueryPlan() {
			t.Errorf("%q does not need the query plan", sql)
		}
		a := q.NewAggregator(nil)
		for _, d := range docs {
			if ok, _ := q.Match(d, nil); ok {
				if err := a.Add(d); err != nil {
					t.Fatal(err)
				}
			}
		}
		v, ok, err := a.Result()
		if err != nil {
			t.Fatal(err)
		}
		return v, ok
	}
	for sql, want := range map[string]string{
		"SELECT VALUE COUNT(1) FROM c":                                           "3 true",
		"SELECT VALUE COUNT(c.n) FROM c":                                         "2 true",
		"SELECT VALUE SUM(c.n) FROM c WHERE c.pk = 'a'":                          "8 true",
		"SELECT VALUE AVG(c.n) FROM c WHERE c.pk = 'a'":                          "4 true",
		"SELECT VALUE MIN(c.n) FROM c":                                           "3 true",
		"SELECT VALUE MAX(c.id) FROM c":                                          "3 true",
		"SELECT VALUE SUM(c.s) FROM c":                                           "<nil> false",
		"SELECT COUNT(1) AS n, MAX(c.n) AS m FROM c":                             "map[m:5 n:3] true",
		"SELECT MAX(c.n) AS m FROM c WHERE c.pk = 'none'":                        "map[] true",
		`SELECT VALUE [{"item": COUNT(1)}] FROM c`:                               "[map[item:3]] true",
		"SELECT VALUE COUNT(1) FROM c GROUP BY c.pk":                             "2 true",
		`SELECT VALUE [{"item": {"sum": SUM(c.n), "count": COUNT(c.n)}}] FROM c`: "[map[item:map[count:2 sum:8]]] true",
		"SELECT VALUE MAX(c.n) FROM c WHERE c.pk = 'none'":                       "<nil> false",
	} {
		v, ok := agg(sql)
		if got := fmt.Sprint(v, " ", ok); got != want {
			t.Errorf("%s = %s, want %s", sql, got, want)
		}
	}
}

func TestAggregator_GroupBy(t *testing.T) {
	t.Parallel()
	docs := []map[string]any{
		{"id": "1", "pk": "a", "n": 3.0},
		{"id": "2", "pk": "b", "n": 5.0},
		{"id": "3", "pk": "a", "n": 4.0},
		{"id": "4"},
	}
	for sql, want := range map[string]string{
		"SELECT c.pk, COUNT(1) AS n, SUM(c.n) AS s FROM c GROUP BY c.pk":                                     "[map[n:2 pk:a s:7] map[n:1 pk:b s:5] map[n:1 s:0]]",
		"SELECT VALUE c.pk FROM c GROUP BY c.pk":                                                             "[a b]",
		"SELECT VALUE MAX(c.n) FROM c WHERE IS_DEFINED(c.pk) GROUP BY c.pk":                                  "[4 5]",
		`SELECT [{"item": c.pk}] AS groupByItems, {"n": {"item": COUNT(1)}} AS payload FROM c GROUP BY c.pk`: "[map[groupByItems:[map[item:a]] payload:map[n:map[item:2]]] map[groupByItems:[map[item:b]] payload:map[n:map[item:1]]] map[groupByItems:[map[]] payload:map[n:map[item:1]]]]",
		"SELECT COUNT(1) AS n FROM c WHERE c.pk = 'none'":                                                    "[map[n:0]]",
		"SELECT VALUE COUNT(1) FROM c WHERE c.pk = 'none' GROUP BY c.pk":                                     "[]",
	} {
		q, err := Parse(sql)
		if err != nil {
			t.Fatalf("Parse(%q): %v", sql, err)
		}
		a := q.NewAggregator(nil)
		for _, d := range docs {
			if ok, _ := q.Match(d, nil); ok {
				if err := a.Add(d); err != nil {
					t.Fatal(err)
				}
			}
		}
		got, err := a.Results()
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != want {
			t.Errorf("%s = %v, want %s", sql, got, want)
		}
	}
}

func TestEquality(t *testing.T) {
	t.Parallel()
	for sql, want := range map[string]string{
		"SELECT * FROM c WHERE c.pk = '1' ORDER BY c.id": "1 true",
		"SELECT * FROM c WHERE c.x > 1 AND ('2' = c.pk)": "2 true",
		"SELECT * FROM c WHERE c.pk = @p":                "3 true",
		"SELECT * FROM c WHERE c.pk = '1' OR c.pk = '2'": "<nil> false",
		"SELECT * FROM c WHERE c.pk != '1'":              "<nil> false",
		"SELECT * FROM c":                                "<nil> false",
	} {
		q, err := Parse(sql)
		if err != nil {
			t.Fatal(err)
		}
		v, ok := q.Equality([]string{"pk"}, map[string]any{"@p": "3"})
		if got := fmt.Sprint(v, " ", ok); got != want {
			t.Errorf("Equality(%q) = %s, want %s", sql, got, want)
		}
	}
}
