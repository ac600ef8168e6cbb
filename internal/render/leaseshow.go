package render

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/cfp-dev/cfp/internal/leases"
)

// LeaseShow is one lease whole: `cfp leases show -o json`, and what the live view shows when a
// lease is opened. A public contract (docs/scripting.md): fields are added, never renamed.
type LeaseShow struct {
	Lease string        `json:"lease"`
	ID    string        `json:"id"`
	Range *leases.Range `json:"range"`
	Owner *string       `json:"owner"`
	// OwnerPresence is what the owner's presence record says: live, gone (not refreshed within
	// the lease expiration), none (no record: a .NET or Java host, or an older cfp), null when
	// the lease has no owner.
	OwnerPresence *string `json:"owner_presence"`
	State         string  `json:"state"`
	Family        string  `json:"family"`
	LastUpdate    *string `json:"last_update"`
	// Verdict, Since, SinceSeconds and SinceBasis are the estimate's (see cfp estimate).
	Verdict      string   `json:"verdict"`
	Since        *string  `json:"since"`
	SinceSeconds *float64 `json:"since_seconds"`
	SinceBasis   *string  `json:"since_basis"`
	Continuation *string  `json:"continuation"`
	// CheckpointLSN is the checkpoint's LSN, CheckpointTime when the continuation last
	// advanced to it (the cfpProgressAt stamp; null when the lease has none that matches).
	CheckpointLSN  *int64   `json:"checkpoint_lsn"`
	CheckpointTime *string  `json:"checkpoint_time"`
	LatestLSN      *int64   `json:"latest_lsn"`
	Lag            int64    `json:"lag"`
	Sentinel       *string  `json:"sentinel"`
	TimeLagSeconds *float64 `json:"time_lag_seconds"`
	// FirstPending is the oldest change not yet processed, null when none.
	FirstPending *PendingChange `json:"first_pending"`
	// ReadFailure is the permanent read failure the owner reports; LastFailure the last
	// failure of a batch the owner recorded, current or not (FailureCurrent: the
	// continuation has not moved since).
	ReadFailure    *string         `json:"read_failure"`
	LastFailure    *leases.Failure `json:"last_failure"`
	FailureCurrent bool            `json:"failure_current"`
}

// PendingChange is the first pending change of a lease.
type PendingChange struct {
	ID           *string         `json:"id"`
	LSN          *int64          `json:"lsn"`
	TS           *string         `json:"ts"`
	PartitionKey json.RawMessage `json:"partition_key"`
}

// WriteLeaseShow writes the lease as "FIELD  value" lines, for eyes.
func WriteLeaseShow(w io.Writer, v LeaseShow) error {
	_, err := io.WriteString(w, strings.Join(LeaseShowLines(v), "\n")+"\n")
	return err
}

// LeaseShowLines are the lines of WriteLeaseShow.
func LeaseShowLines(v LeaseShow) []string {
	var out []string
	row := func(k, val string) { out = append(out, fmt.Sprintf("%-15s %s", k, val)) }
	row("LEASE", v.Lease)
	rng := Empty
	if v.Range != nil {
		rng = RangeText(v.Range.Min, v.Range.Max)
	}
	row("RANGE", rng)
	owner := Empty
	if v.Owner != nil {
		owner = *v.Owner + " (presence: " + orZero(v.OwnerPresence) + ")"
	}
	row("OWNER", owner)
	row("STATE", v.State)
	verdict := v.Verdict
	if v.Since != nil {
		verdict += " since " + *v.Since + " (" + Seconds(v.SinceSeconds) + ")"
	}
	row("VERDICT", verdict)
	cp := LSN(v.CheckpointLSN)
	if v.CheckpointTime != nil {
		cp += " at " + *v.CheckpointTime
	}
	row("CHECKPOINT", cp)
	row("LATEST", LSN(v.LatestLSN))
	lag := strconv.FormatInt(v.Lag, 10)
	if v.Sentinel != nil {
		lag += " (sentinel: " + *v.Sentinel + ")"
	}
	row("LAG", lag)
	row("TIME-LAG", Seconds(v.TimeLagSeconds))
	pending := Empty
	if fp := v.FirstPending; fp != nil {
		pending = fmt.Sprintf("id %s, lsn %s, ts %s, partition key %s", orZero(fp.ID), LSN(fp.LSN), orZero(fp.TS), string(fp.PartitionKey))
	}
	row("FIRST PENDING", pending)
	if v.ReadFailure != nil {
		row("READS FAILING", *v.ReadFailure)
	}
	fl := v.LastFailure
	if fl == nil {
		row("LAST FAILURE", Empty)
		return out
	}
	when := "since " + fl.Since.UTC().Format(time.RFC3339)
	if !v.FailureCurrent {
		when += ", not current: the lease moved since"
	}
	row("LAST FAILURE", fl.Error)
	if fl.ExitStatus != nil {
		row("", fmt.Sprintf("exit status %d", *fl.ExitStatus))
	}
	if fl.Attempts > 0 {
		when = fmt.Sprintf("%d failed attempt(s), %s", fl.Attempts, when)
	}
	row("", when+", recorded by "+fl.Owner)
	if fl.InFlightSince != nil {
		row("", "batch in flight since "+fl.InFlightSince.UTC().Format(time.RFC3339))
	}
	for _, s := range fl.Stderr {
		row("", "stderr: "+s)
	}
	return out
}
