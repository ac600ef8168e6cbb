package render

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/cfp-dev/cfp/internal/leases"
)

// EstimateView is one estimate of `cfp estimate -o json` (and one line per interval with
// --watch in a pipe); a public contract (docs/scripting.md): fields are added, never renamed.
type EstimateView struct {
	Time    string          `json:"time"`
	Prefix  string          `json:"prefix"`
	Leases  []EstimateLease `json:"leases"`
	Summary EstimateSummary `json:"summary"`
}

// EstimateLease is the estimate of one lease.
type EstimateLease struct {
	Lease          string        `json:"lease"`
	Range          *leases.Range `json:"range"`
	Owner          *string       `json:"owner"`
	State          string        `json:"state"`
	CheckpointLSN  *int64        `json:"checkpoint_lsn"`
	LatestLSN      *int64        `json:"latest_lsn"`
	Lag            int64         `json:"lag"`
	Sentinel       *string       `json:"sentinel"`
	TimeLagSeconds *float64      `json:"time_lag_seconds"`
	AgeSeconds     *float64      `json:"age_seconds"`
	Progress       string        `json:"progress"`
	// Failure is the permanent read failure the owner reports when Progress is "failing".
	Failure      string   `json:"failure,omitempty"`
	StuckSeconds *float64 `json:"stuck_seconds"`
	// Verdict is the lease's verdict: ok, lagging, stuck, stalled, rewound, idle or failing
	// (docs/scripting.md). Since is since when it holds (RFC 3339, null when unknown),
	// SinceSeconds how long that is, SinceBasis where the time comes from (progress,
	// in-flight, failure, renewal or watch).
	Verdict      string   `json:"verdict"`
	Since        *string  `json:"since"`
	SinceSeconds *float64 `json:"since_seconds"`
	SinceBasis   *string  `json:"since_basis"`
	// OldestPending is the _ts of the oldest pending change (RFC 3339), null when none or
	// unknown.
	OldestPending *string `json:"oldest_pending"`
	// LastFailure is the owner's record of the failure of the lease's current batch (null when
	// none): the delegate's error, exit status and stderr, or a batch in flight.
	LastFailure *leases.Failure `json:"last_failure"`
}

// EstimateSummary sums up an estimate.
type EstimateSummary struct {
	TotalLag          int64   `json:"total_lag"`
	Leases            int     `json:"leases"`
	Owned             int     `json:"owned"`
	LiveOwners        int     `json:"live_owners"`
	MaxTimeLagSeconds float64 `json:"max_time_lag_seconds"`
	RequestCharge     float64 `json:"request_charge"`
	Stuck             int     `json:"stuck"`
	MaxStuckSeconds   float64 `json:"max_stuck_seconds"`
	// Verdicts counts the leases of each verdict present.
	Verdicts map[string]int `json:"verdicts"`
}

// The sort orders of lease rows in the live views (SortEstimateLeases).
const (
	SortRange   = "range"
	SortLag     = "lag"
	SortTimeLag = "time-lag"
	SortOwner   = "owner"
)

// SortEstimateLeases returns ls (in range order) ordered by the named sort: lag or time lag
// highest first, owner by name with unowned leases last, range as given. Ties keep the range
// order.
func SortEstimateLeases(ls []EstimateLease, by string) []EstimateLease {
	out := slices.Clone(ls)
	slices.SortStableFunc(out, func(a, b EstimateLease) int {
		switch by {
		case SortLag:
			return cmp.Compare(b.Lag, a.Lag)
		case SortTimeLag:
			return cmp.Compare(orZero(b.TimeLagSeconds), orZero(a.TimeLagSeconds))
		case SortOwner:
			ao, bo := orZero(a.Owner), orZero(b.Owner)
			if (ao == "") != (bo == "") {
				if ao == "" {
					return 1 // unowned last
				}
				return -1
			}
			return strings.Compare(ao, bo)
		}
		return 0
	})
	return out
}

func orZero[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// EstimateTableOptions shape the estimate table.
type EstimateTableOptions struct {
	// Sort orders the rows (SortRange when empty).
	Sort string
	// Trends, when not nil, adds a TREND column: each lease's recent lags, oldest first, as a
	// sparkline (the live view of estimate --watch).
	Trends map[string][]int64
}

// EstimateTable is the table of an estimate: the lease columns, then LATEST, LAG (with * for a
// sentinel), TREND (live view only), TIME-LAG, AGE and PROGRESS. LATEST and AGE are the first
// columns to go on a narrow terminal.
func EstimateTable(ios *IOStreams, v EstimateView, o EstimateTableOptions) *Table {
	extra := []string{"latest", "lag"}
	if o.Trends != nil {
		extra = append(extra, "trend")
	}
	extra = append(extra, "time-lag", "age", "verdict")
	tb := NewLeaseTable(ios, extra...)
	tb.Optional(len(LeaseColumns)).Optional(len(LeaseColumns) + len(extra) - 2)
	for _, l := range SortEstimateLeases(v.Leases, o.Sort) {
		lag := strconv.FormatInt(l.Lag, 10)
		if l.Sentinel != nil {
			lag += "*"
		}
		progress := VerdictText(l)
		row := append(LeaseCells(l.Lease, l.Range, l.Owner, l.State, l.CheckpointLSN), LSN(l.LatestLSN), lag)
		if o.Trends != nil {
			row = append(row, Sparkline(o.Trends[l.Lease]))
		}
		tb.Row(append(row, Seconds(l.TimeLagSeconds), Seconds(l.AgeSeconds), progress)...)
	}
	return tb
}

// VerdictText is a lease's verdict in a table cell: the verdict, and for stuck, stalled,
// failing and rewound how long it has held when that is known ("stuck 1m17s").
func VerdictText(l EstimateLease) string {
	v := cmp.Or(l.Verdict, l.Progress)
	switch {
	case l.SinceSeconds != nil && v != "ok" && v != "lagging" && v != "idle":
		return v + " " + Seconds(l.SinceSeconds)
	case l.Verdict == "" && l.StuckSeconds != nil:
		return v + " " + Seconds(l.StuckSeconds)
	}
	return v
}

// WhyLines are the lines that say why a lease is stuck or failing, from its owner's failure
// record: "lease 0 stuck since 2026-12-02T14:02:03Z: ...". None for the other leases.
func WhyLines(l EstimateLease) []string {
	if l.Verdict != "stuck" && l.Verdict != "failing" {
		return nil
	}
	head := "lease " + l.Lease + " " + l.Verdict
	if l.Since != nil {
		head += " since " + *l.Since
	}
	f := l.LastFailure
	switch {
	case f != nil:
		if f.Attempts > 0 {
			head += fmt.Sprintf(" (%d failed attempt(s))", f.Attempts)
		}
		why := f.Error
		if f.ExitStatus != nil && !strings.Contains(why, "status") {
			why += fmt.Sprintf(" (exit status %d)", *f.ExitStatus)
		}
		out := []string{head + ":", "  " + why}
		for _, s := range f.Stderr {
			out = append(out, "  stderr: "+s)
		}
		return out
	case l.Failure != "":
		return []string{head + ":", "  reads fail: " + l.Failure}
	case l.Verdict == "stuck":
		return []string{head + ":", "  renewed, but the continuation does not move"}
	}
	return []string{head}
}

// WriteEstimateSummary writes the lines under the estimate table: the totals, why the stuck
// and failing leases are, and what the sentinels mean.
func WriteEstimateSummary(w io.Writer, v EstimateView) error {
	s := v.Summary
	var b strings.Builder
	fmt.Fprintf(&b, "Total lag %d (LSNs) over %d lease(s); %d owned by %d live owner(s).\n",
		s.TotalLag, s.Leases, s.Owned, s.LiveOwners)
	if s.Stuck > 0 {
		fmt.Fprintf(&b, "%d lease(s) stuck: renewed, but the continuation does not move (longest %s).\n",
			s.Stuck, Seconds(&s.MaxStuckSeconds))
	}
	for _, l := range v.Leases {
		for _, line := range WhyLines(l) {
			b.WriteString(line + "\n")
		}
	}
	if slices.ContainsFunc(v.Leases, func(l EstimateLease) bool { return l.Lag >= 0 && l.Sentinel != nil }) {
		b.WriteString("* the estimator's sentinel 1: no continuation yet, or a split or merge.\n")
	}
	if slices.ContainsFunc(v.Leases, func(l EstimateLease) bool { return l.Lag < 0 && l.Sentinel != nil }) {
		b.WriteString("* -1 is Java's sentinel for an LSN it cannot parse (not in the total).\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// sparks are the eight heights of a sparkline.
var sparks = []rune("▁▂▃▄▅▆▇█")

// Sparkline draws values, oldest first, as one bar each, scaled between 0 and their maximum
// (a lag of 0 is the lowest bar); Empty when there are none.
func Sparkline(values []int64) string {
	if len(values) == 0 {
		return Empty
	}
	top := slices.Max(values)
	var b strings.Builder
	for _, v := range values {
		i := 0
		if top > 0 && v > 0 {
			i = int((v*int64(len(sparks)-1) + top - 1) / top)
		}
		b.WriteRune(sparks[min(max(i, 0), len(sparks)-1)])
	}
	return b.String()
}
