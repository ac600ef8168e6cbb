package render

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/charmbracelet/lipgloss"

	"github.com/cfp-dev/cfp/internal/leases"
)

func TestRangeText_EmptyMinimumOneWay(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ min, max, want string }{
		{"", "FF", `""-FF`},
		{"", "", `""-FF`},
		{"", "08000000000000000000000000000000", `""-08000000000000000000000000000000`},
		{"3F", "7F", "3F-7F"},
	} {
		if got := RangeText(tt.min, tt.max); got != tt.want {
			t.Errorf("RangeText(%q, %q) = %q, want %q", tt.min, tt.max, got, tt.want)
		}
	}
}

func TestAbbreviateColumn(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		kind Abbrev
		in   []string
		want []string
	}{
		{"short tokens stay whole", AbbrevToken, []string{"0", "12", "4"}, []string{"0", "12", "4"}},
		{"merged tokens to 8 hex", AbbrevToken,
			[]string{"9F86D081884C7D659A2FEAA0C55AD015", "A665A45920422F9D417E4867EFDC4FB8", "1"},
			[]string{"9F86D081…", "A665A459…", "1"}},
		{"a shared prefix makes them longer", AbbrevToken,
			[]string{"9F86D081884C7D659A2FEAA0C55AD015", "9F86D081884C7D65FFFFFFFFFFFFFFFF"},
			[]string{"9F86D081884C7D659…", "9F86D081884C7D65F…"}},
		{"a token equal to a prefix of another", AbbrevToken,
			[]string{"9F86D081", "9F86D0818", "9F86D081884C7D659A2FEAA0C55AD015"},
			[]string{"9F86D081", "9F86D0818", "9F86D08188…"}},
		{"EPK lease tokens are ranges", AbbrevToken,
			[]string{"-08000000000000000000000000000000", "08000000000000000000000000000000-10000000000000000000000000000000", "3", "A665A45920422F9D417E4867EFDC4FB8"},
			[]string{"-0800…", "0800…-1000…", "3", "A665A459…"}},
		{"ranges of a split", AbbrevRange,
			[]string{`""-08000000000000000000000000000000`, "08000000000000000000000000000000-10000000000000000000000000000000",
				"10000000000000000000000000000000-FF"},
			[]string{`""-0800…`, "0800…-1000…", "1000…-FF"}},
		{"neighbouring bounds keep the digits that differ", AbbrevRange,
			[]string{"05C1C9CD673398-05C1D9CD673398", "05C1D9CD673398-05C1E9CD673398"},
			[]string{"05C1C…-05C1D…", "05C1D…-05C1E…"}},
		{"no range", AbbrevRange, []string{Empty, "3F-7F"}, []string{Empty, "3F-7F"}},
	} {
		got := abbreviateColumn(tt.in, tt.kind)
		if strings.Join(got, " ") != strings.Join(tt.want, " ") {
			t.Errorf("%s: abbreviateColumn(%q) = %q, want %q", tt.name, tt.in, got, tt.want)
		}
	}
}

// wideLeaseTable is a lease table with what makes rows wide: 67-character ranges, 32-hex
// merged-lease tokens and long owner names.
func wideLeaseTable(ios *IOStreams) *Table {
	tb := NewLeaseTable(ios, "latest", "lag", "time-lag", "age", "progress")
	tb.Optional(len(LeaseColumns)).Optional(len(LeaseColumns) + 3)
	bounds := []string{"", "0AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "15555555555555555555555555555555", "20000000000000000000000000000000", "FF"}
	tokens := []string{"9F86D081884C7D659A2FEAA0C55AD015", "A665A45920422F9D417E4867EFDC4FB8", "2", "3"}
	owners := []string{"orders-projector-7d9f8c6b5-x2x4q", "orders-projector-7d9f8c6b5-k8v9w", "", "worker-1"}
	for i, tok := range tokens {
		cp, latest := int64(1000*i+7), int64(1000*i+19)
		var owner *string
		if owners[i] != "" {
			owner = &owners[i]
		}
		tl, age := 93.0, 4.0
		cells := LeaseCells(tok, &leases.Range{Min: bounds[i], Max: bounds[i+1]}, owner, StateOwned, &cp)
		tb.Row(append(cells, LSN(&latest), fmt.Sprint(latest-cp), Seconds(&tl), Seconds(&age), "active")...)
	}
	return tb
}

func TestLeaseTable_FitsEightyColumns(t *testing.T) {
	t.Parallel()
	for _, color := range []bool{false, true} {
		ios, _, out, _ := Test()
		ios.IsStdoutTTY, ios.ColorEnabled, ios.Width = true, color, 80
		if err := wideLeaseTable(ios).Render(); err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(out.String()) {
			if w := lipgloss.Width(strings.TrimSuffix(line, "\n")); w > 80 {
				t.Errorf("colour %v: a %d-column line wraps at 80:\n%s", color, w, out)
			}
		}
		// Every lease is still one row, and each identifier is told apart from the others.
		if n := strings.Count(out.String(), "\n"); n != 5 {
			t.Errorf("colour %v: %d lines, want a header and 4 rows:\n%s", color, n, out)
		}
		for _, want := range []string{"9F86D081…", "A665A459…", `""-0AAA…`, "2000…-FF"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("colour %v: table lacks %q:\n%s", color, want, out)
			}
		}
		if !color {
			golden(t, "lease_table_80", out.Bytes())
		}
	}
}

func TestLeaseTable_WideAndPipeShowIdentifiersWhole(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name      string
		tty, wide bool
	}{{"wide", true, true}, {"pipe", false, false}} {
		ios, _, out, _ := Test()
		ios.IsStdoutTTY, ios.Wide, ios.Width = tt.tty, tt.wide, 80
		if err := wideLeaseTable(ios).Render(); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"9F86D081884C7D659A2FEAA0C55AD015", `""-0AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA`,
			"orders-projector-7d9f8c6b5-x2x4q", "LATEST", "AGE"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%s: table lacks %q:\n%s", tt.name, want, out)
			}
		}
		if bytes.Contains(out.Bytes(), []byte(Ellipsis)) {
			t.Errorf("%s: table abbreviates:\n%s", tt.name, out)
		}
	}
}
