package feed_test

import (
	"testing"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/leases"
)

// TestJudge: each verdict from the lease document and the feed at one moment, with the time it
// holds since.
func TestJudge(t *testing.T) {
	now := time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	stamp := func(at time.Time, lsn string) map[string]string {
		return map[string]string{leases.PropProgressAt: at.Format(time.RFC3339Nano), leases.PropProgressLSN: lsn}
	}
	withFailure := func(props map[string]string, cont string, f leases.Failure) map[string]string {
		l := &leases.Lease{Properties: props}
		f.Checkpoint = cont
		leases.SetFailure(l, &f)
		return l.Properties
	}
	inFlight := ago(2 * time.Minute)
	tests := []struct {
		name      string
		owner     string
		cont      string
		props     map[string]string
		state     string
		lag       int64
		sentinel  bool
		oldest    time.Time
		want      string
		wantSince time.Time
	}{
		{name: "nothing pending", cont: `"10"`, props: stamp(ago(time.Hour), "10"), state: leases.StateOwned, lag: 0, want: feed.VerdictIdle},
		{name: "fresh backlog", cont: `"10"`, props: stamp(ago(time.Hour), "10"), state: leases.StateOwned, lag: 3, oldest: ago(5 * time.Second), want: feed.VerdictOK},
		{name: "moving but behind", cont: `"10"`, props: stamp(ago(10*time.Second), "10"), state: leases.StateOwned, lag: 300, oldest: ago(45 * time.Second), want: feed.VerdictLagging},
		{name: "unmoved past the threshold", cont: `"10"`, props: stamp(ago(5*time.Minute), "10"), state: leases.StateOwned, lag: 3, oldest: ago(77 * time.Second), want: feed.VerdictStuck, wantSince: ago(77 * time.Second)},
		{name: "unmoved since the stamp", cont: `"10"`, props: stamp(ago(90*time.Second), "10"), state: leases.StateOwned, lag: 3, oldest: ago(5 * time.Minute), want: feed.VerdictStuck, wantSince: ago(90 * time.Second)},
		{name: "stale stamp: .NET moved it since", cont: `"12"`, props: stamp(ago(5*time.Minute), "10"), state: leases.StateOwned, lag: 3, oldest: ago(5 * time.Second), want: feed.VerdictOK},
		{name: "no stamp: one estimate cannot tell", cont: `"10"`, state: leases.StateOwned, lag: 3, oldest: ago(5 * time.Minute), want: feed.VerdictLagging},
		{name: "batch in flight without a stamp", cont: `"10"`,
			props: withFailure(nil, `"10"`, leases.Failure{Error: "in flight", InFlightSince: &inFlight}),
			state: leases.StateOwned, lag: 3, oldest: ago(5 * time.Second), want: feed.VerdictStuck, wantSince: inFlight},
		{name: "no live owner", cont: `"10"`, props: stamp(ago(time.Hour), "10"), state: leases.StateExpired, lag: 3, want: feed.VerdictStalled, wantSince: ago(2 * time.Minute)},
		{name: "unowned, sentinel lag", state: leases.StateUnowned, lag: 1, sentinel: true, want: feed.VerdictStalled, wantSince: ago(2 * time.Minute)},
		{name: "went backwards", cont: `"4"`, props: stamp(ago(time.Hour), "10"), state: leases.StateOwned, lag: 9, want: feed.VerdictRewound, wantSince: ago(2 * time.Minute)},
		{name: "handler failing", cont: `"10"`,
			props: withFailure(stamp(ago(time.Hour), "10"), `"10"`, leases.Failure{Error: "exit 3", Attempts: 4, Since: ago(3 * time.Minute)}),
			state: leases.StateUnowned, lag: 3, want: feed.VerdictFailing, wantSince: ago(3 * time.Minute)},
		{name: "an old failure, the lease moved on", cont: `"11"`,
			props: withFailure(stamp(ago(time.Second), "11"), `"10"`, leases.Failure{Error: "exit 3", Attempts: 4, Since: ago(3 * time.Minute)}),
			state: leases.StateOwned, lag: 3, oldest: ago(time.Second), want: feed.VerdictOK},
		{name: "reads failing", cont: `"10"`, props: map[string]string{"cfpReadFailure": "HTTP 400"}, state: leases.StateOwned, lag: 3, want: feed.VerdictFailing},
		{name: "reads failing, said by the owner", owner: "cfp-a", cont: `"10"`,
			props: map[string]string{"cfpReadFailure": "HTTP 400", "cfpReadFailureOwner": "CFP-A"}, state: leases.StateOwned, lag: 3, want: feed.VerdictFailing},
		// A .NET or Java host that took the lease over keeps its properties: the mark is not its
		// own (found by review: "failing" until a cfp host read the lease again).
		{name: "a read failure said by an earlier owner", owner: "dotnet-host", cont: `"10"`,
			props: map[string]string{"cfpReadFailure": "HTTP 400", "cfpReadFailureOwner": "cfp-a"}, state: leases.StateOwned, lag: 3, oldest: ago(time.Second), want: feed.VerdictOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := &leases.Lease{Token: "0", Owner: tt.owner, Continuation: tt.cont, Properties: tt.props, Timestamp: ago(2 * time.Minute)}
			j := feed.Judge(feed.LeaseFacts{Lease: l, State: tt.state, Lag: tt.lag, Measured: !tt.sentinel, OldestPending: tt.oldest, Now: now}, feed.Thresholds{})
			if j.Verdict != tt.want || !j.Since.Equal(tt.wantSince) {
				t.Errorf("Judge() = %s since %v, want %s since %v", j.Verdict, j.Since, tt.want, tt.wantSince)
			}
		})
	}
}
