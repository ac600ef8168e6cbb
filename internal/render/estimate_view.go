package render

import (
	"slices"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/leases"
)

// NewEstimateView is the view of one estimate of the processor of prefix: the leases' lags in
// lease order (leases.Compare), the summary, and the time of the estimate.
func NewEstimateView(prefix string, lags []feed.LeaseLag, sum feed.EstimateSummary, now time.Time) EstimateView {
	v := EstimateView{
		Time:   now.UTC().Format(time.RFC3339Nano),
		Prefix: prefix,
		Leases: make([]EstimateLease, 0, len(lags)),
		Summary: EstimateSummary{
			TotalLag: sum.TotalLag, Leases: sum.Leases, Owned: sum.Owned, LiveOwners: sum.LiveOwners,
			MaxTimeLagSeconds: sum.MaxTimeLag.Seconds(), RequestCharge: sum.RequestCharge,
			Stuck: sum.Stuck, MaxStuckSeconds: sum.MaxStuckFor.Seconds(), Verdicts: sum.Verdicts,
		},
	}
	lags = slices.Clone(lags)
	slices.SortStableFunc(lags, func(a, b feed.LeaseLag) int { return leases.Compare(a.Lease, b.Lease) })
	for _, l := range lags {
		lv := EstimateLease{Lease: l.Token, Owner: optional(l.Owner), State: l.State, Lag: l.Lag, Sentinel: optional(l.Sentinel), Progress: l.Progress}
		if l.Progress == feed.ProgressStuck {
			lv.StuckSeconds = new(l.StuckFor.Seconds())
		}
		if l.Progress == feed.ProgressFailing {
			lv.Failure = feed.ReadFailure(l.Lease)
		}
		lv.Verdict, lv.SinceBasis, lv.LastFailure = l.Verdict, optional(l.SinceBasis), l.Failure
		if !l.Since.IsZero() {
			lv.Since = new(l.Since.UTC().Format(time.RFC3339))
			lv.SinceSeconds = new(max(0, now.Sub(l.Since)).Seconds())
		}
		if !l.OldestPending.IsZero() {
			lv.OldestPending = new(l.OldestPending.UTC().Format(time.RFC3339))
		}
		if l.Range.Max != "" {
			lv.Range = new(l.Range)
		}
		if l.HasCheckpoint {
			lv.CheckpointLSN = new(l.Checkpoint)
		}
		if l.PartitionID != "" {
			lv.LatestLSN = new(l.Latest)
		}
		switch {
		case !l.OldestPending.IsZero():
			lv.TimeLagSeconds = new(l.TimeLag.Seconds())
		case l.Sentinel == "" && l.Lag == 0:
			lv.TimeLagSeconds = new(0.0)
		}
		if !l.Lease.Timestamp.IsZero() {
			lv.AgeSeconds = new(l.Age.Seconds())
		}
		v.Leases = append(v.Leases, lv)
	}
	return v
}

// optional returns a pointer to a copy of v, or nil when v is the zero value: an optional field
// of a JSON view, null when unknown.
func optional[T comparable](v T) *T {
	var zero T
	if v == zero {
		return nil
	}
	return &v
}
