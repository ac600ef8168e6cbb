package render

import (
	"strings"
	"testing"

	"github.com/charmbracelet/lipgloss"

	"github.com/cfp-dev/cfp/internal/leases"
)

func estimateFixture() EstimateView {
	owner1, owner2 := "orders-projector-7d9f8c6b5-x2x4q", "worker-1"
	sentinel := "no_continuation"
	lsn := func(n int64) *int64 { return &n }
	secs := func(s float64) *float64 { return &s }
	return EstimateView{
		Time: "2026-12-01T12:00:00Z", Prefix: "proj",
		Leases: []EstimateLease{
			{Lease: "0", Range: &leases.Range{Min: "", Max: "0800000000000000000000000000000A"}, Owner: &owner1, State: StateOwned,
				CheckpointLSN: lsn(10), LatestLSN: lsn(14), Lag: 4, TimeLagSeconds: secs(12), AgeSeconds: secs(3), Progress: "active",
				Verdict: "ok"},
			{Lease: "0800000000000000000000000000000A-FF", Range: &leases.Range{Min: "0800000000000000000000000000000A", Max: "FF"},
				Owner: &owner2, State: StateExpired, CheckpointLSN: lsn(7), LatestLSN: lsn(90), Lag: 83,
				TimeLagSeconds: secs(95), AgeSeconds: secs(70), Progress: "stuck", StuckSeconds: secs(65),
				Verdict: "stuck", Since: new("2026-12-01T11:58:55Z"), SinceSeconds: secs(65), SinceBasis: new("in-flight"),
				LastFailure: &leases.Failure{Error: "batch of 1 change(s) in the handler since 2026-12-01T11:58:55Z, not returned"}},
			{Lease: "9F86D081884C7D659A2FEAA0C55AD015", State: "unowned", Lag: 1, Sentinel: &sentinel, Progress: "waiting", Verdict: "stalled"},
			{Lease: "A0-FF", Range: &leases.Range{Min: "A0", Max: "FF"}, State: "unowned", CheckpointLSN: lsn(3), LatestLSN: lsn(5), Lag: 2,
				TimeLagSeconds: secs(200), AgeSeconds: secs(180), Progress: "failing", Verdict: "failing",
				Since: new("2026-12-01T11:56:40Z"), SinceSeconds: secs(200), SinceBasis: new("failure"),
				LastFailure: &leases.Failure{Error: "exec for lease A0-FF: command exited with status 3", ExitStatus: new(3), Attempts: 4,
					Stderr: []string{"order o2: total is not a number"}}},
		},
		Summary: EstimateSummary{TotalLag: 90, Leases: 4, Owned: 1, LiveOwners: 1, Stuck: 1, MaxStuckSeconds: 65},
	}
}

// TestEstimateTable_Golden: the estimate table and its summary at 80 columns without colour,
// and with --wide.
func TestEstimateTable_Golden(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		wide bool
	}{{"estimate_table_80", false}, {"estimate_table_wide", true}} {
		ios, _, out, _ := Test()
		ios.IsStdoutTTY, ios.Width, ios.Wide = true, 80, tt.wide
		v := estimateFixture()
		if err := EstimateTable(ios, v, EstimateTableOptions{}).Render(); err != nil {
			t.Fatal(err)
		}
		if err := WriteEstimateSummary(out, v); err != nil {
			t.Fatal(err)
		}
		if !tt.wide {
			for line := range strings.Lines(out.String()) {
				if strings.HasPrefix(line, "  ") {
					continue // a failure's own words: wrapped by the terminal
				}
				if w := lipgloss.Width(strings.TrimSuffix(line, "\n")); w > 80 {
					t.Errorf("a %d-column line wraps at 80: %q", w, line)
				}
			}
		}
		golden(t, tt.name, out.Bytes())
	}
}

func TestSortEstimateLeases(t *testing.T) {
	t.Parallel()
	v := estimateFixture()
	for _, tt := range []struct{ by, want string }{
		{SortRange, "0 0800000000000000000000000000000A-FF 9F86D081884C7D659A2FEAA0C55AD015 A0-FF"},
		{SortLag, "0800000000000000000000000000000A-FF 0 A0-FF 9F86D081884C7D659A2FEAA0C55AD015"},
		{SortTimeLag, "A0-FF 0800000000000000000000000000000A-FF 0 9F86D081884C7D659A2FEAA0C55AD015"},
		{SortOwner, "0 0800000000000000000000000000000A-FF 9F86D081884C7D659A2FEAA0C55AD015 A0-FF"}, // unowned last
	} {
		var got []string
		for _, l := range SortEstimateLeases(v.Leases, tt.by) {
			got = append(got, l.Lease)
		}
		if strings.Join(got, " ") != tt.want {
			t.Errorf("by %s: %v, want %s", tt.by, got, tt.want)
		}
	}
}

func TestSparkline(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in   []int64
		want string
	}{
		{nil, Empty},
		{[]int64{0, 0, 0}, "▁▁▁"},
		{[]int64{0, 1, 4, 8}, "▁▂▅█"},
		{[]int64{5, 5}, "██"},
	} {
		if got := Sparkline(tt.in); got != tt.want {
			t.Errorf("Sparkline(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestFitFrame_NeverWrapsOrScrolls(t *testing.T) {
	t.Parallel()
	frame := "title\n" + strings.Repeat("x", 100) + "\n\x1b[1m" + strings.Repeat("y", 90) + "\x1b[0m\nfour\nfive\nsix\n"
	got := FitFrame(frame, 40, 4)
	lines := strings.Split(got, "\n")
	if len(lines) != 4 || lines[3] != "… 3 more lines" {
		t.Errorf("FitFrame kept %d lines, want 3 and a note:\n%s", len(lines), got)
	}
	for _, l := range lines {
		if w := lipgloss.Width(l); w > 40 {
			t.Errorf("a %d-column line at width 40: %q", w, l)
		}
	}
	if !strings.HasSuffix(lines[1], "…") || !strings.Contains(lines[2], "\x1b[1m") {
		t.Errorf("cut lines lose their end mark or their style: %q", lines[1:3])
	}
}
