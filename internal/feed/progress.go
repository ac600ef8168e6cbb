package feed

import (
	"strings"
	"time"

	"github.com/cfp-dev/cfp/internal/leases"
)

// Progress values: whether a lease's changes are being worked off, beside its ownership state
// (owned, expired, unowned). LeaseLag.Progress holds one; docs/scripting.md documents them.
const (
	// ProgressIdle: there is nothing to read (the measured lag is 0).
	ProgressIdle = "idle"
	// ProgressActive: there is something to read and a live owner, whose continuation moved
	// within the last StuckAfter estimates (or whose lag is a sentinel, which cannot tell).
	ProgressActive = "active"
	// ProgressStuck: there is something to read (a measured lag > 0) and the lease's owner keeps
	// renewing it, but its continuation has not moved for StuckAfter consecutive estimates.
	ProgressStuck = "stuck"
	// ProgressWaiting: there is something to read and no live owner (expired or unowned).
	ProgressWaiting = "waiting"
	// ProgressFailing: the lease's live owner (a cfp host) reports that the reads of its range
	// fail with an error retrying does not fix (ReadFailure says which): nothing is processed.
	ProgressFailing = "failing"
)

// Progresses lists every progress value, in the order documentation and metrics use.
var Progresses = []string{ProgressIdle, ProgressActive, ProgressStuck, ProgressWaiting, ProgressFailing}

// DefaultStuckAfter is how many consecutive estimates must see an owned lease with pending
// changes and an unchanged continuation before it is stuck.
const DefaultStuckAfter = 3

// LeaseSighting is one observation of a lease, the input of TrackProgress.
type LeaseSighting struct {
	// State is the ownership state (leases.StateOwned, StateExpired, StateUnowned) and Owner
	// the lease's owner.
	State, Owner string
	// Continuation is the lease's continuation token.
	Continuation string
	// Lag is the estimated lag; Measured is false when it is a sentinel (no continuation, a
	// split partition, an unparsable LSN), which says nothing about progress.
	Lag      int64
	Measured bool
	// At is when the lease was observed.
	At time.Time
	// Failure is the permanent read failure the lease's owner reported (see ReadFailure).
	Failure string
}

// LeaseTrack is what TrackProgress remembers about a lease between two observations. The zero
// value is a lease not seen before.
type LeaseTrack struct {
	// Pending is true when the last observation found a live owner with a measured lag > 0;
	// Owner and Continuation are then that observation's.
	Pending             bool
	Owner, Continuation string
	// Unmoved counts the consecutive pending observations after the first that found the same
	// owner and continuation.
	Unmoved int
	// Since is when the first of them was made.
	Since time.Time
}

// TrackProgress classifies one observation of a lease given what earlier observations left in
// prev, and returns the track to pass next time. A lease is ProgressStuck when it is owned by
// a live owner, its measured lag is > 0, and stuckAfter consecutive observations before this
// one found the same owner and continuation with a lag > 0 too (stuckAfter < 1 counts as 1).
// A new owner, a moved continuation, or an observation that is not pending (idle, no live
// owner, a sentinel lag) starts the count again. stuckFor is how long the continuation has not
// moved (since the first of those observations), set only when stuck.
func TrackProgress(prev LeaseTrack, s LeaseSighting, stuckAfter int) (progress string, stuckFor time.Duration, next LeaseTrack) {
	switch {
	case s.Failure != "" && s.State == leases.StateOwned:
		return ProgressFailing, 0, LeaseTrack{}
	case s.Measured && s.Lag == 0:
		return ProgressIdle, 0, LeaseTrack{}
	case s.State != leases.StateOwned:
		return ProgressWaiting, 0, LeaseTrack{}
	case !s.Measured:
		return ProgressActive, 0, LeaseTrack{}
	}
	next = LeaseTrack{Pending: true, Owner: s.Owner, Continuation: s.Continuation, Since: s.At}
	if prev.Pending && strings.EqualFold(prev.Owner, s.Owner) && prev.Continuation == s.Continuation {
		next.Unmoved, next.Since = prev.Unmoved+1, prev.Since
	}
	if next.Unmoved >= max(stuckAfter, 1) {
		return ProgressStuck, max(0, s.At.Sub(next.Since)), next
	}
	return ProgressActive, 0, next
}

// ProgressTracker classifies the leases of successive estimates of one lease set with
// TrackProgress. It is not safe for concurrent use: one estimate loop owns it.
type ProgressTracker struct {
	// StuckAfter is the number of estimates without movement that make a lease stuck
	// (DefaultStuckAfter when 0).
	StuckAfter int

	tracks map[string]LeaseTrack // by lease token
}

// Observe completes the verdicts of lags, an estimate made at at, with what the earlier
// estimates saw, and forgets the leases that are gone. The lease documents decide first (see
// Judge): the tracker only makes stuck a lease that is ok or lagging without a record of its
// progress (a lease of .NET or Java hosts, which write none) once StuckAfter estimates found
// its continuation unmoved, and sets Since from the first of them (SinceWatch).
func (t *ProgressTracker) Observe(lags []LeaseLag, at time.Time) {
	n := t.StuckAfter
	if n == 0 {
		n = DefaultStuckAfter
	}
	next := make(map[string]LeaseTrack, len(lags))
	for i := range lags {
		l := &lags[i]
		progress, stuckFor, track := TrackProgress(t.tracks[l.Token], l.sighting(at), n)
		next[l.Token] = track
		if l.Verdict == "" {
			// Not judged (a LeaseLag made by hand): the tracker's progress is all there is.
			l.Progress, l.StuckFor = progress, stuckFor
			continue
		}
		if progress == ProgressStuck && l.SinceBasis == "" && (l.Verdict == VerdictOK || l.Verdict == VerdictLagging) {
			l.Verdict, l.Since, l.SinceBasis = VerdictStuck, at.Add(-stuckFor), SinceWatch
		}
		l.settle(at)
	}
	t.tracks = next
}

// sighting is the lease's observation for TrackProgress.
func (l *LeaseLag) sighting(at time.Time) LeaseSighting {
	s := LeaseSighting{State: l.State, Owner: l.Owner, Lag: l.Lag, Measured: l.Sentinel == "", At: at}
	if l.Lease != nil {
		s.Continuation, s.Failure = l.Lease.Continuation, ReadFailure(l.Lease)
	}
	return s
}
