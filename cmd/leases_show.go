package cmd

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/leases"
	"github.com/cfp-dev/cfp/internal/render"
)

type leasesShowOptions struct {
	f              *factory
	Token          string
	Expiration     time.Duration
	StuckThreshold time.Duration
	LagThreshold   time.Duration
}

// leaseShowView is `cfp leases show -o json` (render.LeaseShow, shared with the live view).
type leaseShowView = render.LeaseShow

// pendingChangeView is the first pending change of a lease.
type pendingChangeView = render.PendingChange

func newLeasesShowCmd(f *factory) *cobra.Command {
	opts := &leasesShowOptions{f: f}
	c := &cobra.Command{
		Use:   "show -p NAME LEASE",
		Short: "Show one lease whole: owner, verdict, checkpoint, lag, first pending change, last failure",
		Long: `Show one lease whole: its range, its owner and whether that host is alive (its presence
record), its state and verdict (as cfp estimate gives it, with since when), its checkpoint
with the LSN and the time the continuation last advanced, the partition's latest LSN, the
lag, the first change not yet processed (id, _lsn, _ts, partition key) and the last
failure its owner recorded (the delegate's error, exit status and the end of its stderr,
attempts, since when, or a batch in flight).

LEASE is the lease token, as 'cfp leases list' and 'cfp estimate' show it. One change-feed
read of at most one change, from the lease's continuation.

To get past a poison document, stop the host that owns the lease, then
'cfp leases reset --lease LEASE --to-lsn N --execute' with N the first pending change's
LSN: the lease resumes after it.`,
		Example: `  # Why is lease 0 stuck?
  cfp leases show -d shop -c orders -p orders-proj 0

  # The first pending change's LSN, for a reset past it
  cfp leases show -d shop -c orders -p orders-proj 0 -o json --jq .first_pending.lsn`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErrorf("leases show takes one lease token, got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			opts.Token = args[0]
			return runLeasesShow(contextOf(c), opts)
		},
	}
	fs := c.Flags()
	positiveDurationVar(fs, &opts.Expiration, "lease-expiration", leases.DefaultExpiration, "an owner that has not renewed for this long is expired")
	positiveDurationVar(fs, &opts.StuckThreshold, "stuck-threshold", feed.DefaultStuckThreshold, "a lease whose owner renews it, with changes pending and a continuation unmoved for longer, is stuck")
	positiveDurationVar(fs, &opts.LagThreshold, "lag-threshold", feed.DefaultLagThreshold, "a lease whose oldest pending change has waited longer is lagging")
	return c
}

func runLeasesShow(ctx context.Context, opts *leasesShowOptions) error {
	f := opts.f
	if err := f.requireProcessor(); err != nil {
		return err
	}
	p, t, err := f.openLeaseCommand(ctx)
	if err != nil {
		return err
	}
	if t.monitored == nil {
		return usageErrorf("leases show needs the monitored container: give -d and -c")
	}
	st := t.store()
	all, err := st.List(ctx)
	if err != nil {
		return err
	}
	if len(all) == 0 {
		return t.noLeases(ctx, f)
	}
	v, err := showLease(ctx, f, t, st, all, opts.Token, opts.Expiration, feed.Thresholds{Stuck: opts.StuckThreshold, Lagging: opts.LagThreshold})
	if err != nil {
		return err
	}
	now := f.Now()
	if p.Format == render.FormatTable && p.Query == nil {
		return writeLeaseShow(f.IO, v, now)
	}
	return p.Print(ctx, v, nil)
}

// showLease reads one lease of all (chosen by token, as selectLeases matches it) whole: its
// estimate, its owner's presence and its first pending change. leases show and the live view's
// opened lease share it.
func showLease(ctx context.Context, f *factory, t *leaseTarget, st *leases.Store, all []*leases.Lease, token string, expiration time.Duration, th feed.Thresholds) (leaseShowView, error) {
	ls, err := selectLeases(all, []string{token})
	if err != nil {
		return leaseShowView{}, err
	}
	l := ls[0]
	lags, _, err := feed.Estimate(ctx, t.monitored, ls, feed.EstimateOptions{
		Expiration: expiration, Now: f.Now, Logger: f.Log,
		Thresholds: th,
	})
	if err != nil {
		return leaseShowView{}, err
	}
	now := f.Now()
	ev := render.NewEstimateView(t.prefix, lags, feed.Summarize(lags), now).Leases[0]
	v := leaseShowView{
		Lease: l.Token, ID: l.ID, Range: ev.Range, Owner: ev.Owner, State: ev.State, Family: string(l.Family),
		LastUpdate: timeView(l.Timestamp), Verdict: ev.Verdict, Since: ev.Since, SinceSeconds: ev.SinceSeconds,
		SinceBasis: ev.SinceBasis, Continuation: nonZero(l.Continuation), CheckpointLSN: ev.CheckpointLSN,
		LatestLSN: ev.LatestLSN, Lag: ev.Lag, Sentinel: ev.Sentinel, TimeLagSeconds: ev.TimeLagSeconds,
		ReadFailure: nonZero(feed.ReadFailure(l)), LastFailure: leases.FailureOf(l),
	}
	v.FailureCurrent = leases.CurrentFailure(l) != nil
	if pr, ok := leases.ProgressOf(l); ok && ev.CheckpointLSN != nil && pr.LSN == *ev.CheckpointLSN {
		v.CheckpointTime = new(pr.At.UTC().Format(time.RFC3339))
	}
	if l.Owner != "" {
		v.OwnerPresence = new(ownerPresence(ctx, st, l.Owner, now, expiration))
	}
	if raw := lags[0].FirstPending; raw != nil {
		v.FirstPending = pendingChange(ctx, t, raw)
	}
	return v, nil
}

// ownerPresence says whether owner's presence record is fresh: live, gone or none.
func ownerPresence(ctx context.Context, st *leases.Store, owner string, now time.Time, expiration time.Duration) string {
	h, err := st.ReadHost(ctx, owner)
	switch {
	case err != nil:
		return "none"
	case h.Expired(now, expiration):
		return "gone"
	}
	return "live"
}

// pendingChange picks the id, _lsn, _ts and partition key out of a change.
func pendingChange(ctx context.Context, t *leaseTarget, raw json.RawMessage) *pendingChangeView {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(raw, &doc); err != nil {
		return &pendingChangeView{}
	}
	v := &pendingChangeView{}
	var id string
	if json.Unmarshal(doc["id"], &id) == nil {
		v.ID = &id
	}
	var lsn int64
	if json.Unmarshal(doc["_lsn"], &lsn) == nil {
		v.LSN = &lsn
	}
	var ts int64
	if json.Unmarshal(doc["_ts"], &ts) == nil && ts > 0 {
		v.TS = new(time.Unix(ts, 0).UTC().Format(time.RFC3339))
	}
	if info, err := t.monitored.Info(ctx); err == nil {
		var comps []json.RawMessage
		for _, path := range info.PartitionKeyPaths {
			comps = append(comps, valueAt(raw, path))
		}
		if len(comps) == 1 {
			v.PartitionKey = comps[0]
		} else if b, err := json.Marshal(comps); err == nil {
			v.PartitionKey = b
		}
	}
	return v
}

// valueAt returns the value at a partition key path such as /customer/id in doc, JSON null
// when absent.
func valueAt(doc json.RawMessage, path string) json.RawMessage {
	cur := doc
	for seg := range strings.SplitSeq(strings.TrimPrefix(path, "/"), "/") {
		var m map[string]json.RawMessage
		if json.Unmarshal(cur, &m) != nil {
			return json.RawMessage("null")
		}
		next, ok := m[strings.ReplaceAll(strings.ReplaceAll(seg, "~1", "/"), "~0", "~")]
		if !ok {
			return json.RawMessage("null")
		}
		cur = next
	}
	return cur
}

// writeLeaseShow writes the lease as "FIELD  value" lines, for eyes.
func writeLeaseShow(ios *render.IOStreams, v leaseShowView, _ time.Time) error {
	return render.WriteLeaseShow(ios.Out, v)
}
