package feed

import (
	"time"

	"github.com/cfp-dev/cfp/internal/leases"
)

// Verdicts: what an estimate concludes about each lease, after the status rules of LinkedIn's
// Burrow for consumer lag (docs/user-guide.md, "When something is stuck"). Burrow judges a
// consumer over a window of its committed offsets; a lease keeps no such window, so the
// verdicts are read from what the lease documents and the feed hold at one moment: the
// lease's timestamp (renewals), the time its continuation last advanced (the cfpProgressAt
// stamp cfp hosts write, leases.ProgressOf), the _ts of the oldest pending change, and the
// failure its owner recorded. One estimate, a watch, the metrics and the exit code agree.
const (
	// VerdictIdle: nothing to read (a measured lag of 0).
	VerdictIdle = "idle"
	// VerdictOK: changes pending, a live owner, the oldest pending change younger than the
	// lagging threshold (or a sentinel lag, which says nothing about age). Burrow's OK.
	VerdictOK = "ok"
	// VerdictLagging: changes pending and a live owner whose continuation moves, but the oldest
	// pending change has waited longer than the lagging threshold. Burrow's WARN.
	VerdictLagging = "lagging"
	// VerdictStuck: changes pending, a live owner that keeps renewing the lease, and a
	// continuation that has not moved for longer than the stuck threshold (since Since).
	// Burrow's STALL (committing, but the offset does not move).
	VerdictStuck = "stuck"
	// VerdictStalled: changes pending and no live owner: unowned, or its owner stopped
	// renewing it (since Since, its last write). Burrow's STOP.
	VerdictStalled = "stalled"
	// VerdictRewound: the continuation went backwards (a reset, another host's older
	// checkpoint) and has not advanced since. Burrow's REWIND.
	VerdictRewound = "rewound"
	// VerdictFailing: the owner recorded that the lease's reads fail permanently, or that its
	// current batch fails in the handler (the record's error says why, Since since when).
	// Burrow has no such status: it cannot see the consumer's errors.
	VerdictFailing = "failing"
)

// Verdicts lists every verdict, in the order documentation and metrics use.
var Verdicts = []string{VerdictOK, VerdictLagging, VerdictStuck, VerdictStalled, VerdictRewound, VerdictIdle, VerdictFailing}

// DefaultLagThreshold is the default of `cfp estimate --lag-threshold`: a lease whose oldest
// pending change has waited longer is lagging.
const DefaultLagThreshold = 30 * time.Second

// Thresholds are the times the verdicts compare with; zero fields take the defaults.
type Thresholds struct {
	// Stuck: a live owner's lease whose continuation has not moved for longer, with changes
	// pending, is stuck (default DefaultStuckThreshold).
	Stuck time.Duration
	// Lagging: a lease whose oldest pending change has waited longer is lagging (default
	// DefaultLagThreshold).
	Lagging time.Duration
}

func (t Thresholds) withDefaults() Thresholds {
	if t.Stuck <= 0 {
		t.Stuck = DefaultStuckThreshold
	}
	if t.Lagging <= 0 {
		t.Lagging = DefaultLagThreshold
	}
	return t
}

// Since says where a verdict's time comes from (LeaseLag.SinceBasis).
const (
	// SinceProgress: the lease's progress stamp (cfpProgressAt), or the oldest pending change
	// when it is younger.
	SinceProgress = "progress"
	// SinceInFlight: the owner's record of a batch in flight.
	SinceInFlight = "in-flight"
	// SinceFailure: the owner's failure record.
	SinceFailure = "failure"
	// SinceRenewal: the lease's last write (stalled).
	SinceRenewal = "renewal"
	// SinceWatch: the estimates of a watch that saw the continuation unmoved (a lease without
	// a progress stamp: written by .NET or Java hosts).
	SinceWatch = "watch"
)

// LeaseFacts are what Judge reads about one lease.
type LeaseFacts struct {
	Lease *leases.Lease
	// State is the ownership state (leases.StateOwned, StateExpired, StateUnowned).
	State string
	// Lag is the estimated lag; Measured is false when it is a sentinel.
	Lag      int64
	Measured bool
	// OldestPending is the _ts of the oldest pending change (zero when unknown).
	OldestPending time.Time
	Now           time.Time
}

// Judgement is a lease's verdict and what it rests on.
type Judgement struct {
	Verdict string
	// Since is since when the verdict holds, when known: the continuation unmoved (stuck),
	// the last renewal (stalled), the first failure (failing).
	Since time.Time
	// Basis says where Since comes from (SinceProgress, ...), "" when unknown.
	Basis string
	// Failure is the owner's current failure record (nil when none); ReadFailure the
	// permanent read failure it reports ("" when none).
	Failure     *leases.Failure
	ReadFailure string
}

// Judge gives the verdict of one lease from its facts. It is pure: the same lease documents
// and feed give the same verdict wherever it is computed.
//
// The rules, in order: a measured lag of 0 is idle. A live owner's permanent read failure, or
// a current handler failure record (not a batch in flight) whatever the ownership, is
// failing. A checkpoint below the progress stamp's LSN is rewound. Changes pending (or a
// sentinel lag) without a live owner is stalled. With a live owner, the continuation has
// been unmoved since the later of the progress stamp and the oldest pending change (or since
// the in-flight record's start); longer than th.Stuck is stuck. A lease without either record
// (.NET and Java hosts write none) cannot be stuck in one estimate: a watch tells (see
// ProgressTracker). Otherwise the oldest pending change older than th.Lagging is lagging, and
// anything else ok.
func Judge(f LeaseFacts, th Thresholds) Judgement {
	th = th.withDefaults()
	l := f.Lease
	j := Judgement{ReadFailure: ReadFailure(l), Failure: leases.CurrentFailure(l)}
	owned := f.State == leases.StateOwned
	if f.Measured && f.Lag == 0 {
		j.Verdict = VerdictIdle
		return j
	}
	if j.ReadFailure != "" && owned {
		j.Verdict = VerdictFailing
		if j.Failure != nil && j.Failure.InFlightSince == nil {
			j.Since, j.Basis = j.Failure.Since, SinceFailure
		}
		return j
	}
	if j.Failure != nil && j.Failure.InFlightSince == nil {
		j.Verdict, j.Since, j.Basis = VerdictFailing, j.Failure.Since, SinceFailure
		return j
	}
	prog, stamped := leases.ProgressOf(l)
	lsn, hasLSN := l.LSN()
	if stamped && hasLSN && lsn < prog.LSN {
		j.Verdict = VerdictRewound
		if !l.Timestamp.IsZero() {
			j.Since, j.Basis = l.Timestamp, SinceRenewal
		}
		return j
	}
	if !owned {
		j.Verdict = VerdictStalled
		if !l.Timestamp.IsZero() {
			j.Since, j.Basis = l.Timestamp, SinceRenewal
		}
		return j
	}
	if !f.Measured {
		j.Verdict = VerdictOK
		return j
	}
	switch {
	case stamped && hasLSN && lsn == prog.LSN:
		j.Since, j.Basis = prog.At, SinceProgress
		if f.OldestPending.After(j.Since) {
			j.Since = f.OldestPending
		}
	case j.Failure != nil && j.Failure.InFlightSince != nil:
		j.Since, j.Basis = *j.Failure.InFlightSince, SinceInFlight
	}
	if !j.Since.IsZero() && f.Now.Sub(j.Since) > th.Stuck {
		j.Verdict = VerdictStuck
		return j
	}
	if j.Basis != SinceInFlight {
		j.Since, j.Basis = time.Time{}, ""
	}
	if !f.OldestPending.IsZero() && f.Now.Sub(f.OldestPending) > th.Lagging {
		j.Verdict = VerdictLagging
		return j
	}
	j.Verdict = VerdictOK
	return j
}

// progressOf maps a verdict to the older progress value (LeaseLag.Progress, kept for the
// scripts and metrics that read it).
func progressOf(verdict string) string {
	switch verdict {
	case VerdictIdle:
		return ProgressIdle
	case VerdictStuck:
		return ProgressStuck
	case VerdictStalled:
		return ProgressWaiting
	case VerdictFailing:
		return ProgressFailing
	}
	return ProgressActive
}
