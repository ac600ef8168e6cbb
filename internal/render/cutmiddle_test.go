package render

import (
	"strings"
	"testing"
)

// renderOwners renders a three-column table of owners, cut in the middle, at width columns,
// and returns the owner cell of each row.
func renderOwners(t *testing.T, width int, owners []string) (cells []string, table string) {
	t.Helper()
	ios, _, out, _ := Test()
	ios.IsStdoutTTY, ios.Width = true, width
	tb := NewTable(ios, "lease", "owner", "note").TruncateMiddle(1)
	for i, o := range owners {
		tb.Row("lease"+string(rune('0'+i)), o, "a note that takes room")
	}
	if err := tb.Render(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != len(owners)+1 {
		t.Fatalf("want a header and %d rows:\n%s", len(owners), out)
	}
	for _, l := range lines[1:] {
		cells = append(cells, strings.Fields(l)[1])
	}
	return cells, out.String()
}

// TestTable_MiddleCutKeepsValuesApart: owners that differ only near one end stay told apart
// when a narrow terminal cuts them (both showed as "host…er-0", one owner to the eye), and
// equal values still cut alike; the table still fits.
func TestTable_MiddleCutKeepsValuesApart(t *testing.T) {
	t.Parallel()
	owners := []string{"host-a-projector-worker-0", "host-b-projector-worker-0", "host-a-projector-worker-0"}
	cells, out := renderOwners(t, 40, owners)
	if !strings.Contains(cells[0], Ellipsis) {
		t.Fatalf("owner not cut at 40 columns (the test needs a cut):\n%s", out)
	}
	if cells[0] == cells[1] {
		t.Errorf("two owners show as one, %q:\n%s", cells[0], out)
	}
	if cells[0] != cells[2] {
		t.Errorf("one owner shows as %q and %q:\n%s", cells[0], cells[2], out)
	}
	for l := range strings.Lines(out) {
		if w := len([]rune(strings.TrimSuffix(l, "\n"))); w > 40 {
			t.Errorf("a %d-column line at 40:\n%s", w, out)
		}
	}
}

// TestTable_MiddleCutWidensWhenItMust: when no cut of the planned width tells two owners
// apart, the column gets wider rather than show them alike.
func TestTable_MiddleCutWidensWhenItMust(t *testing.T) {
	t.Parallel()
	owners := []string{"cfp-prod-westeurope-host-0", "cfp-prod-northeurope-host-0"}
	cells, out := renderOwners(t, 40, owners)
	if cells[0] == cells[1] {
		t.Errorf("two owners show as one, %q:\n%s", cells[0], out)
	}
	for i, c := range cells {
		if head, tail, ok := strings.Cut(c, Ellipsis); ok && (!strings.HasPrefix(owners[i], head) || !strings.HasSuffix(owners[i], tail)) {
			t.Errorf("%q is no cut of %q:\n%s", c, owners[i], out)
		}
	}
}
