package cmd

import (
	"runtime/debug"
	"testing"
)

func TestProcessGCPercent(t *testing.T) {
	t.Parallel()
	const mb = 1 << 20
	for _, tc := range []struct {
		live uint64
		want int
	}{
		{0, 400},         // before the first collection
		{8 * mb, 400},    // a few leases: the heap goal 40 MB
		{25 * mb, 400},   // 5 x 25 = 125 MB, within the budget
		{32 * mb, 300},   // 4 x 32 = 128 MB
		{50 * mb, 150},   // 2.5 x 50 = 125 MB
		{64 * mb, 100},   // the default from half the budget on
		{1024 * mb, 100}, // never below the default: a big live heap is not collected more often
	} {
		got := processGCPercent(tc.live)
		if got != tc.want {
			t.Errorf("processGCPercent(%d MB) = %d, want %d", tc.live/mb, got, tc.want)
		}
		if goal := tc.live * uint64(100+got) / 100; got > 100 && goal > processGCBudget {
			t.Errorf("processGCPercent(%d MB) = %d: heap goal %d MB is over the budget", tc.live/mb, got, goal/mb)
		}
	}
}

// TestTuneProcessGC_LeavesTheEnvironmentsSettings checks that GOGC or GOMEMLIMIT in the
// environment turn the tuning off, and that stopping it restores the previous GOGC. Not
// parallel: it reads the process-wide GOGC.
func TestTuneProcessGC_LeavesTheEnvironmentsSettings(t *testing.T) {
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)
	for _, env := range []string{"GOGC", "GOMEMLIMIT"} {
		stop := tuneProcessGC(func(k string) string { return map[string]string{env: "200"}[k] })
		if p := debug.SetGCPercent(100); p != 100 {
			t.Errorf("with %s set, GOGC became %d", env, p)
		}
		stop()
	}
	stop := tuneProcessGC(func(string) string { return "" })
	p := debug.SetGCPercent(-1)
	debug.SetGCPercent(p)
	if p <= 100 {
		t.Errorf("tuned GOGC = %d, want above 100 for this test's small heap", p)
	}
	stop()
	if p := debug.SetGCPercent(100); p != 100 {
		t.Errorf("after stop GOGC = %d, want the previous 100", p)
	}
}
