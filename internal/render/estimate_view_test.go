package render

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/leases"
)

func TestNewEstimateView(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	l10 := &leases.Lease{Token: "10"}
	l2 := &leases.Lease{Token: "2", Timestamp: now.Add(-3 * time.Second)}
	lags := []feed.LeaseLag{
		// no continuation: a sentinel lag, no checkpoint, unknown time lag; nothing read
		{Lease: l10, Token: "10", State: StateOwned, Owner: "w1", Lag: 1, Sentinel: "no_continuation", Progress: feed.ProgressWaiting, Verdict: feed.VerdictOK},
		{Lease: l2, Token: "2", State: StateOwned, Owner: "w2", Range: leases.Range{Min: "", Max: "80"}, PartitionID: "2",
			Checkpoint: 5, HasCheckpoint: true, Latest: 9, Lag: 4, OldestPending: now.Add(-2 * time.Second), TimeLag: 2 * time.Second,
			Age: 3 * time.Second, Progress: feed.ProgressStuck, StuckFor: time.Minute,
			Verdict: feed.VerdictStuck, Since: now.Add(-time.Minute), SinceBasis: feed.SinceInFlight,
			Failure: &leases.Failure{Error: "in flight", Since: now.Add(-time.Minute), At: now, InFlightSince: new(now.Add(-time.Minute)), Checkpoint: `"5"`, Owner: "w2", Items: 1}},
	}
	sum := feed.EstimateSummary{TotalLag: 5, Leases: 2, Owned: 2, LiveOwners: 2, MaxTimeLag: 2 * time.Second, Stuck: 1, MaxStuckFor: time.Minute}
	v := NewEstimateView("proj", lags, sum, now)
	got, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"time":"2026-12-01T12:00:00Z","prefix":"proj","leases":[` +
		`{"lease":"2","range":{"min":"","max":"80"},"owner":"w2","state":"owned","checkpoint_lsn":5,"latest_lsn":9,"lag":4,"sentinel":null,"time_lag_seconds":2,"age_seconds":3,"progress":"stuck","stuck_seconds":60,` +
		`"verdict":"stuck","since":"2026-12-01T11:59:00Z","since_seconds":60,"since_basis":"in-flight","oldest_pending":"2026-12-01T11:59:58Z",` +
		`"last_failure":{"error":"in flight","attempts":0,"since":"2026-12-01T11:59:00Z","at":"2026-12-01T12:00:00Z","in_flight_since":"2026-12-01T11:59:00Z","checkpoint":"\"5\"","owner":"w2","items":1}},` +
		`{"lease":"10","range":null,"owner":"w1","state":"owned","checkpoint_lsn":null,"latest_lsn":null,"lag":1,"sentinel":"no_continuation","time_lag_seconds":null,"age_seconds":null,"progress":"waiting","stuck_seconds":null,` +
		`"verdict":"ok","since":null,"since_seconds":null,"since_basis":null,"oldest_pending":null,"last_failure":null}],` +
		`"summary":` + mustJSON(t, v.Summary) + `}`
	if string(got) != want {
		t.Errorf("view =\n%s\nwant\n%s", got, want)
	}
	if v.Summary.TotalLag != 5 || v.Summary.MaxStuckSeconds != 60 || v.Summary.Stuck != 1 {
		t.Errorf("summary = %+v", v.Summary)
	}
	if lags[0].Token != "10" {
		t.Error("NewEstimateView reordered the caller's slice")
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
