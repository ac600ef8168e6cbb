package render

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/lipgloss"
)

func demoFixture() (DemoSetup, DemoView) {
	s := DemoSetup{Duration: 10 * time.Second, Instances: []string{"worker-1", "worker-2"}, Try: "cfp --local=DIR leases list -p demo"}
	v := DemoView{Written: 199, Processed: map[string]int64{"worker-1": 101, "worker-2": 99}, Duplicates: 4, Pending: 3,
		Split:  &DemoSplitView{Partition: "0", Children: []string{"4", "5"}, LeasesBefore: 4, LeasesAfter: 5},
		Leases: estimateFixture().Leases[:3], Data: "demo-data", Seconds: 10.04}
	return s, v
}

// TestDemoViews_Golden: the demo's summary and a live frame at 80x24 without colour; no line
// wraps and the frame fits the height.
func TestDemoViews_Golden(t *testing.T) {
	t.Parallel()
	ios, _, out, _ := Test()
	ios.IsStdoutTTY, ios.Width = true, 80
	s, v := demoFixture()
	if err := WriteDemoSummary(out, ios, s, v); err != nil {
		t.Fatal(err)
	}
	golden(t, "demo_summary_80", out.Bytes())
	events := []string{"  1.0s  worker-1 acquired lease 0", "  5.0s  the emulator split partition 0 into 4 and 5"}
	frame := DemoLiveFrame(ios, s, &v, events, time.Date(2026, 12, 1, 12, 0, 0, 0, time.Local), 23, SortLag)
	golden(t, "demo_frame_80", []byte(frame))
	for _, b := range [][]byte{out.Bytes(), []byte(frame)} {
		for line := range strings.Lines(string(b)) {
			if w := lipgloss.Width(strings.TrimSuffix(line, "\n")); w > 80 {
				t.Errorf("a %d-column line wraps at 80: %q", w, line)
			}
		}
	}
	if n := strings.Count(frame, "\n"); n > 23 || !bytes.Contains([]byte(frame), []byte("split partition 0")) {
		t.Errorf("the frame has %d lines for 23, or lost its events:\n%s", n, frame)
	}
}

// TestDemoSummary_ShowsWhetherItAddsUp: the summary shows written = deliveries - duplicates +
// lost (+ pending) with each term, and says so when an order was delivered that was not
// counted as written (issue 22: 599 written, 600 deliveries, 0 duplicates).
func TestDemoSummary_ShowsWhetherItAddsUp(t *testing.T) {
	t.Parallel()
	s := DemoSetup{Duration: 10 * time.Second, Instances: []string{"worker-1", "worker-2"}}
	for _, tc := range []struct {
		v    DemoView
		want string
	}{
		{DemoView{Written: 600, Processed: map[string]int64{"worker-1": 301, "worker-2": 302}, Duplicates: 3},
			"\nadds up           600 = 603 deliveries - 3 duplicates + 0 lost\n"},
		{DemoView{Written: 600, Processed: map[string]int64{"worker-1": 290, "worker-2": 300}, Lost: 2, Pending: 8},
			"\nadds up           600 = 590 deliveries - 0 duplicates + 2 lost + 8 pending\n"},
		{DemoView{Written: 599, Processed: map[string]int64{"worker-1": 300, "worker-2": 300}},
			"\ndoes not add up   599 != 600 deliveries - 0 duplicates + 0 lost\n"},
	} {
		ios, _, out, _ := Test()
		if err := WriteDemoSummary(out, ios, s, tc.v); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), tc.want) {
			t.Errorf("summary of %+v lacks %q:\n%s", tc.v, tc.want, out)
		}
		if got, want := tc.v.AddsUp(), !strings.Contains(tc.want, "not"); got != want {
			t.Errorf("AddsUp() of %+v = %t, want %t", tc.v, got, want)
		}
	}
}
