package render

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite golden files")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden (run go test -update): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from golden:\n--- got ---\n%s\n--- want ---\n%s", name, got, want)
	}
}

func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func TestColorPolicy(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  func(string) string
		tty  bool
		want bool
	}{
		{"tty", env(), true, true},
		{"pipe", env(), false, false},
		{"NO_COLOR on tty", env("NO_COLOR", "1"), true, false},
		{"NO_COLOR beats CLICOLOR_FORCE", env("NO_COLOR", "1", "CLICOLOR_FORCE", "1"), true, false},
		{"CLICOLOR=0 on tty", env("CLICOLOR", "0"), true, false},
		{"CLICOLOR_FORCE in pipe", env("CLICOLOR_FORCE", "1"), false, true},
		{"CLICOLOR_FORCE=0 in pipe", env("CLICOLOR_FORCE", "0"), false, false},
		{"dumb terminal", env("TERM", "dumb"), true, false},
	}
	for _, tt := range tests {
		if got := ColorPolicy(tt.env, tt.tty); got != tt.want {
			t.Errorf("%s: ColorPolicy = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestFormat_ParseAndResolve(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]Format{"": FormatAuto, "table": FormatTable, "JSON": FormatJSON, " jsonl ": FormatJSONL} {
		got, err := ParseFormat(in)
		if err != nil || got != want {
			t.Errorf("ParseFormat(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseFormat("yaml"); err == nil || !strings.Contains(err.Error(), "table, json, jsonl") {
		t.Errorf("ParseFormat(yaml) error = %v, want one listing the formats", err)
	}
	if got := FormatAuto.Resolve(true, FormatJSONL); got != FormatTable {
		t.Errorf("auto on a tty = %q, want table", got)
	}
	if got := FormatAuto.Resolve(false, FormatJSONL); got != FormatJSONL {
		t.Errorf("auto in a pipe = %q, want the command's pipe default jsonl", got)
	}
	if got := FormatJSON.Resolve(true, FormatJSONL); got != FormatJSON {
		t.Errorf("explicit json on a tty = %q, want json", got)
	}
}

func TestQuery(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	run := func(expr string, v any) (string, error) {
		q, err := CompileQuery(expr)
		if err != nil {
			return "", err
		}
		var b bytes.Buffer
		err = q.Run(ctx, &b, v)
		return b.String(), err
	}
	type lease struct {
		Token string `json:"token"`
		LSN   uint64 `json:"lsn"`
	}
	leases := []lease{{"0", 9007199254740993}, {"1", 7}}

	if got, err := run(".[].token", leases); err != nil || got != "0\n1\n" {
		t.Errorf("strings print raw, one per line: got %q, %v", got, err)
	}
	if got, err := run(".[0].lsn", leases); err != nil || got != "9007199254740993\n" {
		t.Errorf("large integers stay exact: got %q, %v", got, err)
	}
	if got, err := run("map(.lsn)", leases); err != nil || got != "[9007199254740993,7]\n" {
		t.Errorf("non-strings print as compact json: got %q, %v", got, err)
	}
	if got, err := run(`[.[] | select(.token == "9")] | length`, leases); err != nil || got != "0\n" {
		t.Errorf("select: got %q, %v", got, err)
	}
	if got, err := run("$ENV | length", nil); err != nil || got != "0\n" {
		t.Errorf("$ENV must be empty (keys live in the environment): got %q, %v", got, err)
	}
	if _, err := run(".[", nil); err == nil || !strings.Contains(err.Error(), "invalid --jq expression") {
		t.Errorf("parse error = %v, want invalid --jq expression", err)
	}
	if _, err := run(".a.b", []int{1}); err == nil || !strings.Contains(err.Error(), "--jq .a.b") {
		t.Errorf("runtime error = %v, want one naming the expression", err)
	}
	if got, err := run("tojson", json.RawMessage(`{"a":1}`)); err != nil || got != "{\"a\":1}\n" {
		t.Errorf("raw message input: got %q, %v", got, err)
	}
}

type row struct {
	Name  string    `json:"name"`
	Lag   int       `json:"lag"`
	Owner string    `json:"owner,omitempty"`
	When  time.Time `json:"when"`
}

var (
	now  = time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	rows = []row{
		{"orders-0", 12, "host-a", now.Add(-3 * time.Minute)},
		{"orders-1", 0, "", now.Add(-26 * time.Hour)},
		{"orders-10", 1234567, "host-b-with-a-long-name", time.Time{}},
	}
)

func fill(ios *IOStreams) func(*Table) {
	return func(t *Table) {
		*t = *NewTable(ios, "lease", "lag", "owner", "updated")
		for _, r := range rows {
			t.Row(r.Name, strconv.Itoa(r.Lag), r.Owner, ios.Timestamp(r.When, now))
		}
	}
}

func TestPrinter_Formats(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		name   string
		format Format
		tty    bool
		jq     string
	}{
		{"table_tty", FormatTable, true, ""},
		{"table_pipe", FormatTable, false, ""},
		{"json", FormatJSON, false, ""},
		{"jsonl", FormatJSONL, false, ""},
		{"jsonl_jq", FormatJSONL, false, ".name"},
		{"json_jq", FormatJSON, false, "map(.lag) | add"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ios, _, out, _ := Test()
			ios.IsStdoutTTY = tt.tty
			var q *Query
			if tt.jq != "" {
				var err error
				if q, err = CompileQuery(tt.jq); err != nil {
					t.Fatal(err)
				}
			}
			if err := NewPrinter(ios, tt.format, q).Print(ctx, rows, fill(ios)); err != nil {
				t.Fatal(err)
			}
			golden(t, "printer_"+tt.name, out.Bytes())
		})
	}
}

func TestPrinter_LineCompactsRawJSON(t *testing.T) {
	t.Parallel()
	ios, _, out, _ := Test()
	p := NewPrinter(ios, FormatJSONL, nil)
	if err := p.Line(context.Background(), json.RawMessage("{\n  \"id\": \"a\"\n}")); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != "{\"id\":\"a\"}\n" {
		t.Errorf("Line = %q, want one compact line", got)
	}
}

func TestTable_TruncatesToWidth(t *testing.T) {
	t.Parallel()
	ios, _, out, _ := Test()
	ios.IsStdoutTTY = true
	ios.Width = 40
	tbl := NewTable(ios, "token", "continuation").Truncatable(1)
	tbl.Row("0", strings.Repeat("x", 100))
	tbl.Row("1", "")
	if err := tbl.Render(); err != nil {
		t.Fatal(err)
	}
	golden(t, "table_truncated", out.Bytes())
	for _, line := range strings.Split(strings.TrimRight(out.String(), "\n"), "\n") {
		if w := len([]rune(line)); w > 40 {
			t.Errorf("line %q is %d columns wide, want at most 40", line, w)
		}
	}
}

func TestTable_ColorOnlyWhenEnabled(t *testing.T) {
	t.Parallel()
	for _, color := range []bool{false, true} {
		ios, _, out, _ := Test()
		ios.IsStdoutTTY, ios.ColorEnabled = true, color
		tbl := NewTable(ios, "a")
		tbl.Row("x")
		if err := tbl.Render(); err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(out.String(), "\x1b["); got != color {
			t.Errorf("color=%v: escape sequences present = %v", color, got)
		}
	}
}

func TestTable_TooManyCells(t *testing.T) {
	t.Parallel()
	ios, _, _, _ := Test()
	tbl := NewTable(ios, "a")
	tbl.Row("x", "y")
	if err := tbl.Render(); err == nil {
		t.Error("Render with more cells than headers succeeded, want an error")
	}
}

func TestTable_TSVCleansCells(t *testing.T) {
	t.Parallel()
	ios, _, out, _ := Test()
	tbl := NewTable(ios, "a", "b")
	tbl.Row("x\ty", "line1\nline2")
	if err := tbl.Render(); err != nil {
		t.Fatal(err)
	}
	// Control characters are escaped (Safe), so a cell can neither split a column nor a row.
	if want := "A\tB\nx\\ty\tline1\\nline2\n"; out.String() != want {
		t.Errorf("TSV = %q, want %q", out.String(), want)
	}
}

func TestAge(t *testing.T) {
	t.Parallel()
	tests := []struct {
		t    time.Time
		want string
	}{
		{time.Time{}, "-"},
		{now, "just now"},
		{now.Add(-45 * time.Second), "45s ago"},
		{now.Add(-3*time.Minute - 59*time.Second), "3m ago"},
		{now.Add(-5 * time.Hour), "5h ago"},
		{now.Add(-47 * time.Hour), "47h ago"},
		{now.Add(-72 * time.Hour), "3d ago"},
		{now.Add(3 * time.Minute), "in 3m"},
	}
	for _, tt := range tests {
		if got := Age(tt.t, now); got != tt.want {
			t.Errorf("Age(now-%v) = %q, want %q", now.Sub(tt.t), got, tt.want)
		}
	}
}

func TestTimestamp_TTYvsPipe(t *testing.T) {
	t.Parallel()
	ios, _, _, _ := Test()
	at := time.Date(2026, 1, 2, 16, 0, 0, 0, time.FixedZone("CET", 3600))
	if got := ios.Timestamp(at, at.Add(2*time.Hour)); got != "2026-01-02T15:00:00Z" {
		t.Errorf("pipe timestamp = %q, want RFC 3339 UTC", got)
	}
	ios.IsStdoutTTY = true
	if got := ios.Timestamp(at, at.Add(2*time.Hour)); got != "2h ago" {
		t.Errorf("tty timestamp = %q, want 2h ago", got)
	}
}

func TestStatus(t *testing.T) {
	t.Parallel()
	ios, _, _, errOut := Test()
	s := NewStatus(ios)
	s.Update("caught up on %d/%d ranges", 1, 4)
	s.Done("caught up on %d/%d ranges", 4, 4)
	if got := errOut.String(); got != "caught up on 4/4 ranges\n" {
		t.Errorf("pipe: stderr = %q, want only the final line", got)
	}

	ios, _, _, errOut = Test()
	ios.IsStderrTTY = true
	ios.Width = 12
	s = NewStatus(ios)
	s.Update("reading %d", 1)
	s.Update("a very long status line")
	s.Println("lease 0 acquired")
	s.Done("")
	want := "\r\x1b[Kreading 1" + "\r\x1b[Ka very long" + "\r\x1b[Klease 0 acquired\n"
	if got := errOut.String(); got != want {
		t.Errorf("tty: stderr = %q, want %q", got, want)
	}
}

// cancelAfter is a writer that counts its writes and cancels a context after n of them.
type cancelAfter struct {
	n      int
	lines  []string
	cancel context.CancelFunc
}

func (w *cancelAfter) Write(p []byte) (int, error) {
	w.lines = append(w.lines, string(p))
	if len(w.lines) == w.n {
		w.cancel()
	}
	return len(p), nil
}

func TestQuery_StreamsResults(t *testing.T) {
	t.Parallel()
	// Results written before an error stay written, one line per write.
	q, err := CompileQuery(`.[] | if . == 3 then error("boom") else . end`)
	if err != nil {
		t.Fatal(err)
	}
	w := &cancelAfter{n: -1, cancel: func() {}}
	if err := q.Run(context.Background(), w, []int{1, 2, 3, 4}); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("Run = %v, want the expression's error", err)
	}
	if strings.Join(w.lines, "") != "1\n2\n" || len(w.lines) != 2 {
		t.Errorf("written before the error: %q, want the lines 1 and 2, one write each", w.lines)
	}
	// An endless expression streams: the writer sees results while it runs, and ends it.
	q, err = CompileQuery(`range(infinite)`)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w = &cancelAfter{n: 5, cancel: cancel}
	if err := q.Run(ctx, w, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
	if len(w.lines) != 5 || w.lines[4] != "4\n" {
		t.Errorf("lines %q, want 0..4", w.lines)
	}
}
