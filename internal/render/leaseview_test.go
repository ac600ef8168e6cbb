package render

import (
	"fmt"
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"

	"github.com/cfp-dev/cfp/internal/leases"
)

var testSorts = []LiveSort{{Key: "r", Name: SortRange}, {Key: "l", Name: SortLag}, {Key: "t", Name: SortTimeLag}, {Key: "o", Name: SortOwner}}

// leaseViewFixture is the estimate fixture in a view, with trends and a long stuck time.
func leaseViewFixture() LeaseViewModel {
	v := estimateFixture()
	// A verdict text as long as they get: stuck for over a day.
	long := 26*3600.0 + 17*60 + 41
	v.Leases[1].SinceSeconds = &long
	return LeaseViewModel{
		Data: LeaseViewData{
			Title:    "cfp estimate  shop/orders  processor proj  12:00:00  every 5s",
			Estimate: &v,
			Trends: map[string][]int64{
				"0": {0, 2, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4}, "0800000000000000000000000000000A-FF": {80, 81, 82, 83, 83, 83, 83, 83, 83, 83, 83, 83},
				"9F86D081884C7D659A2FEAA0C55AD015": {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, "A0-FF": {2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2},
			},
		},
		Sorts: testSorts,
	}
}

// TestLeaseView_Golden: the live view at 80 and 120 columns, 24 lines: no line wider than the
// terminal, and every lease's verdict (with its time), lag and time lag shown whole at both.
func TestLeaseView_Golden(t *testing.T) {
	t.Parallel()
	for _, width := range []int{80, 120} {
		m := leaseViewFixture()
		got := m.Render(width, 24)
		lines := strings.Split(got, "\n")
		if len(lines) != 24 {
			t.Errorf("%d columns: %d lines, want 24", width, len(lines))
		}
		for _, line := range lines {
			if w := ansi.StringWidth(line); w > width {
				t.Errorf("%d columns: a line of %d: %q", width, w, line)
			}
		}
		for _, l := range m.Data.Estimate.Leases {
			row := rowOf(t, lines, l)
			for _, want := range []string{VerdictText(l), fmt.Sprint(l.Lag), Seconds(l.TimeLagSeconds)} {
				if !strings.Contains(row, want) {
					t.Errorf("%d columns: lease %s's row %q does not show %q whole", width, l.Lease, row, want)
				}
			}
		}
		golden(t, fmt.Sprintf("lease_view_%d", width), []byte(got+"\n"))
	}
}

// rowOf finds the table line of lease l (by its verdict, unique in the fixture).
func rowOf(t *testing.T, lines []string, l EstimateLease) string {
	t.Helper()
	v := " " + l.Verdict
	for _, line := range lines {
		if strings.HasPrefix(line, "  ") || strings.HasPrefix(line, "> ") {
			if strings.Contains(line, v) {
				return line
			}
		}
	}
	t.Fatalf("no row of lease %s (%s) in:\n%s", l.Lease, l.Verdict, strings.Join(lines, "\n"))
	return ""
}

// TestLeaseView_NarrowTerminalsCutOtherColumnsFirst: from 120 down to 60 columns, a column is
// only ever dropped before lag, time lag and verdict, which stay whole down to the narrowest
// width that holds them.
func TestLeaseView_NarrowTerminalsCutOtherColumnsFirst(t *testing.T) {
	t.Parallel()
	m := leaseViewFixture()
	for width := 120; width >= 60; width-- {
		lines := strings.Split(m.Render(width, 24), "\n")
		header := ""
		for _, l := range lines {
			if strings.Contains(l, "LEASE") {
				header = l
			}
		}
		for _, col := range []string{"LAG", "TIME-LAG", "VERDICT"} {
			if !strings.Contains(header, col) {
				t.Errorf("%d columns: %s dropped: %q", width, col, header)
			}
		}
		for _, l := range m.Data.Estimate.Leases {
			if row := rowOf(t, lines, l); !strings.Contains(row, VerdictText(l)) {
				t.Errorf("%d columns: verdict %q cut: %q", width, VerdictText(l), row)
			}
		}
	}
}

// TestLeaseView_Keys: the view's key handling, a pure function of the model and a key.
func TestLeaseView_Keys(t *testing.T) {
	t.Parallel()
	base := leaseViewFixture()
	type check func(t *testing.T, m LeaseViewModel, act LeaseViewAction)
	is := func(want LeaseViewAction) check {
		return func(t *testing.T, _ LeaseViewModel, act LeaseViewAction) {
			if act != want {
				t.Errorf("action %d, want %d", act, want)
			}
		}
	}
	selected := func(token string) check {
		return func(t *testing.T, m LeaseViewModel, _ LeaseViewAction) {
			rows := m.Rows()
			if got := rows[m.selectedIndex(rows)].Lease; got != token {
				t.Errorf("selected %q, want %q", got, token)
			}
		}
	}
	shown := func(tokens ...string) check {
		return func(t *testing.T, m LeaseViewModel, _ LeaseViewAction) {
			var got []string
			for _, r := range m.Rows() {
				got = append(got, r.Lease)
			}
			if strings.Join(got, " ") != strings.Join(tokens, " ") {
				t.Errorf("rows %v, want %v", got, tokens)
			}
		}
	}
	state := func(what string, ok func(LeaseViewModel) bool) check {
		return func(t *testing.T, m LeaseViewModel, _ LeaseViewAction) {
			if !ok(m) {
				t.Errorf("not %s: %+v", what, m)
			}
		}
	}
	screen := func(want string) check {
		return func(t *testing.T, m LeaseViewModel, _ LeaseViewAction) {
			if s := m.Render(80, 24); !strings.Contains(s, want) {
				t.Errorf("the screen does not show %q:\n%s", want, s)
			}
		}
	}
	const stuckLease, stalledLease, failingLease = "0800000000000000000000000000000A-FF", "9F86D081884C7D659A2FEAA0C55AD015", "A0-FF"
	for _, tt := range []struct {
		name   string
		keys   []string
		checks []check
	}{
		{"first row selected at start", nil, []check{selected("0"), is(LeaseViewNone)}},
		{"q quits", []string{"q"}, []check{is(LeaseViewQuit)}},
		{"ctrl+c interrupts", []string{"ctrl+c"}, []check{is(LeaseViewInterrupt)}},
		{"esc does not quit the table", []string{"esc"}, []check{is(LeaseViewNone)}},
		{"down selects the next", []string{"down"}, []check{selected(stuckLease)}},
		{"j k move too", []string{"j", "j", "k"}, []check{selected(stuckLease)}},
		{"down stops at the last", []string{"down", "down", "down", "down", "down"}, []check{selected(failingLease)}},
		{"up stops at the first", []string{"up"}, []check{selected("0")}},
		{"G and g", []string{"G"}, []check{selected(failingLease)}},
		{"? shows the keys", []string{"?"}, []check{state("help", func(m LeaseViewModel) bool { return m.Help }), screen("filter by lease, owner or verdict")}},
		{"esc closes the keys", []string{"?", "esc"}, []check{state("the table", func(m LeaseViewModel) bool { return !m.Help }), screen("LEASE")}},
		{"q quits from the keys", []string{"?", "q"}, []check{is(LeaseViewQuit)}},
		{"/ starts a filter", []string{"/"}, []check{state("filtering", func(m LeaseViewModel) bool { return m.Filtering }), screen("/▏  (4 of 4 leases)")}},
		{"a filter by verdict", []string{"/", "s", "t", "u", "c", "k"}, []check{shown(stuckLease), selected(stuckLease), screen("/stuck▏  (1 of 4 leases)")}},
		{"a filter by owner", []string{"/", "w", "o", "r", "k"}, []check{shown(stuckLease)}},
		{"a filter by lease", []string{"/", "a", "0"}, []check{shown(failingLease)}},
		{"words of a filter all match", []string{"/", "f", "f", " ", "s", "t", "a"}, []check{shown()}},
		{"q is text in a filter", []string{"/", "q"}, []check{is(LeaseViewNone), state("filter q", func(m LeaseViewModel) bool { return m.Filter == "q" })}},
		{"backspace edits a filter", []string{"/", "s", "t", "u", "x", "backspace"}, []check{shown(stuckLease)}},
		{"enter keeps a filter", []string{"/", "f", "a", "i", "l", "enter"}, []check{shown(failingLease), state("kept", func(m LeaseViewModel) bool { return !m.Filtering && m.Filter == "fail" }), screen("/fail  (1 of 4 leases)")}},
		{"esc clears a filter being typed", []string{"/", "f", "a", "i", "l", "esc"}, []check{shown("0", stuckLease, stalledLease, failingLease)}},
		{"esc clears a kept filter", []string{"/", "f", "a", "i", "l", "enter", "esc"}, []check{shown("0", stuckLease, stalledLease, failingLease), selected(failingLease)}},
		{"no match", []string{"/", "z", "z"}, []check{shown(), screen("no lease matches the filter")}},
		{"enter opens the selected lease", []string{"down", "enter"}, []check{is(LeaseViewLoad), state("open", func(m LeaseViewModel) bool { return m.Open == stuckLease }), screen("reading the lease…")}},
		{"enter on a filtered list opens what is shown", []string{"/", "s", "t", "a", "l", "enter", "enter"}, []check{is(LeaseViewLoad), state("open", func(m LeaseViewModel) bool { return m.Open == stalledLease })}},
		{"esc goes back from a lease", []string{"down", "enter", "esc"}, []check{is(LeaseViewNone), state("back", func(m LeaseViewModel) bool { return m.Open == "" }), selected(stuckLease), screen("LEASE")}},
		{"q quits from a lease", []string{"enter", "q"}, []check{is(LeaseViewQuit)}},
		{"l sorts by lag", []string{"l"}, []check{shown(stuckLease, "0", failingLease, stalledLease), screen("s sort:lag")}},
		{"the selection follows its lease across a sort", []string{"down", "down", "down", "l"}, []check{selected(failingLease)}},
		{"s cycles the sorts", []string{"s", "s"}, []check{state("time-lag", func(m LeaseViewModel) bool { return m.SortName() == SortTimeLag })}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m, act := base, LeaseViewNone
			for _, k := range tt.keys {
				m, act = m.Key(k)
			}
			for _, c := range tt.checks {
				c(t, m, act)
			}
		})
	}
}

// TestLeaseView_OpenedLeaseShowsItWhole: an opened lease shows what leases show shows, and a
// read of another lease that ends late does not replace it.
func TestLeaseView_OpenedLeaseShowsItWhole(t *testing.T) {
	t.Parallel()
	m, _ := leaseViewFixture().Key("enter")
	d := &LeaseShow{Lease: "0", State: StateOwned, Verdict: "stuck", Lag: 4,
		FirstPending: &PendingChange{ID: new("o17"), LSN: new(int64(11)), TS: new("2026-12-01T11:59:48Z"), PartitionKey: []byte(`"c3"`)}}
	m = m.SetDetail("other", &LeaseShow{Lease: "other"}, nil)
	if m.Detail != nil {
		t.Fatal("a read of another lease was shown")
	}
	m = m.SetDetail("0", d, nil)
	s := m.Render(80, 24)
	for _, want := range []string{"lease 0", "VERDICT         stuck", "FIRST PENDING   id o17, lsn 11, ts 2026-12-01T11:59:48Z, partition key \"c3\"", "esc back"} {
		if !strings.Contains(s, want) {
			t.Errorf("the opened lease does not show %q:\n%s", want, s)
		}
	}
	m = m.SetDetail("0", nil, fmt.Errorf("read lease: 503"))
	if s := m.Render(80, 24); !strings.Contains(s, "read lease: 503") {
		t.Errorf("a failed read is not shown:\n%s", s)
	}
}

// TestLeaseView_NoLeases: an empty lease set draws, and no key fails on it.
func TestLeaseView_NoLeases(t *testing.T) {
	t.Parallel()
	m := leaseViewFixture()
	v := *m.Data.Estimate
	v.Leases = nil
	m.Data.Estimate = &v
	for _, k := range []string{"down", "up", "enter", "/", "x", "esc", "G"} {
		var act LeaseViewAction
		if m, act = m.Key(k); act == LeaseViewLoad {
			t.Errorf("%s opened a lease of none", k)
		}
	}
	if s := m.Render(80, 24); !strings.Contains(s, "the processor has no leases") || !strings.Contains(s, "0 leases; total lag") {
		t.Errorf("the empty view:\n%s", s)
	}
}

// TestLeaseView_SelectionStaysInSight: with more leases than lines, the selected row is drawn.
func TestLeaseView_SelectionStaysInSight(t *testing.T) {
	t.Parallel()
	m := leaseViewFixture()
	v := *m.Data.Estimate
	v.Leases = nil
	for i := range 60 {
		v.Leases = append(v.Leases, EstimateLease{Lease: fmt.Sprint(i), State: "unowned", Verdict: "idle"})
	}
	m.Data.Estimate = &v
	for range 45 {
		m, _ = m.Key("down")
	}
	s := m.Render(80, 24)
	if !strings.Contains(s, "> 45 ") || len(strings.Split(s, "\n")) != 24 {
		t.Errorf("the selected lease 45 is not on the screen:\n%s", s)
	}
}

// TestLeaseView_OpenedLeaseWrapsLongValues: at 80 columns a long range or error of the opened
// lease wraps under its value instead of being cut.
func TestLeaseView_OpenedLeaseWrapsLongValues(t *testing.T) {
	t.Parallel()
	m, _ := leaseViewFixture().Key("enter")
	long := "exec for lease 0: command exited with status 3: " + strings.Repeat("x", 90) + " END"
	m = m.SetDetail("0", &LeaseShow{Lease: "0", Range: &leases.Range{Min: "20000000000000000000000000000000", Max: "28000000000000000000000000000000"},
		LastFailure: &leases.Failure{Error: long}}, nil)
	s := m.Render(80, 24)
	flat := strings.ReplaceAll(strings.ReplaceAll(s, "\n", ""), strings.Repeat(" ", 16), "")
	for _, want := range []string{"20000000000000000000000000000000-28000000000000000000000000000000", " END"} {
		if !strings.Contains(flat, want) {
			t.Errorf("the opened lease cut %q:\n%s", want, s)
		}
	}
	for _, line := range strings.Split(s, "\n") {
		if ansi.StringWidth(line) > 80 || strings.HasSuffix(line, "…") {
			t.Errorf("a line is cut or too wide: %q", line)
		}
	}
}
