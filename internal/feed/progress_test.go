package feed

import (
	"testing"
	"time"

	"github.com/cfp-dev/cfp/internal/leases"
)

func TestTrackProgress(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	owned := func(owner, cont string, lag int64, s int) LeaseSighting {
		return LeaseSighting{State: leases.StateOwned, Owner: owner, Continuation: cont, Lag: lag, Measured: true, At: at(s)}
	}
	type step struct {
		s        LeaseSighting
		want     string
		stuckFor time.Duration
	}
	tests := []struct {
		name       string
		stuckAfter int
		steps      []step
	}{
		{"an owner that renews but never checkpoints is stuck after N more estimates", 3, []step{
			{owned("a", `"10"`, 5, 0), ProgressActive, 0},
			{owned("a", `"10"`, 6, 5), ProgressActive, 0},
			{owned("a", `"10"`, 7, 10), ProgressActive, 0},
			{owned("a", `"10"`, 7, 15), ProgressStuck, 15 * time.Second},
			{owned("a", `"10"`, 9, 20), ProgressStuck, 20 * time.Second},
		}},
		{"a moving continuation is never stuck", 2, []step{
			{owned("a", `"10"`, 5, 0), ProgressActive, 0},
			{owned("a", `"12"`, 5, 5), ProgressActive, 0},
			{owned("a", `"14"`, 5, 10), ProgressActive, 0},
			{owned("a", `"16"`, 5, 15), ProgressActive, 0},
		}},
		{"moving again after being stuck is active, and the count starts again", 1, []step{
			{owned("a", `"10"`, 5, 0), ProgressActive, 0},
			{owned("a", `"10"`, 5, 5), ProgressStuck, 5 * time.Second},
			{owned("a", `"11"`, 4, 10), ProgressActive, 0},
			{owned("a", `"11"`, 4, 15), ProgressStuck, 5 * time.Second},
		}},
		{"nothing to read is idle, however long the continuation stays", 1, []step{
			{owned("a", `"10"`, 0, 0), ProgressIdle, 0},
			{owned("a", `"10"`, 0, 5), ProgressIdle, 0},
			{owned("a", `"10"`, 0, 10), ProgressIdle, 0},
		}},
		{"idle in between restarts the count", 2, []step{
			{owned("a", `"10"`, 3, 0), ProgressActive, 0},
			{owned("a", `"10"`, 0, 5), ProgressIdle, 0},
			{owned("a", `"10"`, 3, 10), ProgressActive, 0},
			{owned("a", `"10"`, 3, 15), ProgressActive, 0},
		}},
		{"a new owner gets N estimates of its own", 1, []step{
			{owned("a", `"10"`, 5, 0), ProgressActive, 0},
			{owned("a", `"10"`, 5, 5), ProgressStuck, 5 * time.Second},
			{owned("B", `"10"`, 5, 10), ProgressActive, 0},
			{owned("b", `"10"`, 5, 15), ProgressStuck, 5 * time.Second},
		}},
		{"no live owner is waiting, not stuck", 1, []step{
			{LeaseSighting{State: leases.StateExpired, Owner: "a", Continuation: `"10"`, Lag: 5, Measured: true, At: at(0)}, ProgressWaiting, 0},
			{LeaseSighting{State: leases.StateExpired, Owner: "a", Continuation: `"10"`, Lag: 5, Measured: true, At: at(5)}, ProgressWaiting, 0},
			{LeaseSighting{State: leases.StateUnowned, Continuation: `"10"`, Lag: 5, Measured: true, At: at(10)}, ProgressWaiting, 0},
			{LeaseSighting{State: leases.StateUnowned, Lag: 0, Measured: true, At: at(15)}, ProgressIdle, 0},
		}},
		{"a sentinel lag says nothing: active while owned, never stuck", 1, []step{
			{LeaseSighting{State: leases.StateOwned, Owner: "a", Lag: 1, At: at(0)}, ProgressActive, 0},
			{LeaseSighting{State: leases.StateOwned, Owner: "a", Lag: 1, At: at(5)}, ProgressActive, 0},
			{LeaseSighting{State: leases.StateOwned, Owner: "a", Lag: 1, At: at(10)}, ProgressActive, 0},
		}},
		{"stuckAfter below 1 counts as 1", 0, []step{
			{owned("a", `"10"`, 5, 0), ProgressActive, 0},
			{owned("a", `"10"`, 5, 5), ProgressStuck, 5 * time.Second},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var track LeaseTrack
			for i, st := range tt.steps {
				var got string
				var stuckFor time.Duration
				got, stuckFor, track = TrackProgress(track, st.s, tt.stuckAfter)
				if got != st.want || stuckFor != st.stuckFor {
					t.Errorf("step %d: progress %s stuck for %s, want %s stuck for %s", i+1, got, stuckFor, st.want, st.stuckFor)
				}
			}
		})
	}
}
