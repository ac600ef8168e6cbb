package cmd

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/leases"
	"github.com/cfp-dev/cfp/internal/render"
)

type leasesListOptions struct {
	f          *factory
	Check      bool
	Expiration time.Duration
	// Leases are the --lease tokens: list only those leases (all when empty).
	Leases []string
}

// leaseView is one lease in `cfp leases list -o json`; a public contract (docs/scripting.md).
type leaseView struct {
	Lease         string        `json:"lease"`
	ID            string        `json:"id"`
	Range         *leases.Range `json:"range"`
	Owner         *string       `json:"owner"`
	State         string        `json:"state"`
	Continuation  *string       `json:"continuation"`
	CheckpointLSN *int64        `json:"checkpoint_lsn"`
	LastUpdate    *string       `json:"last_update"`
	Family        string        `json:"family"`
	// Mode is the lease's Mode field (.NET) or its state's Mode (Java EPK), null when absent.
	Mode *string `json:"mode"`
	// Start is a Java EPK lease's start setting (its state's StartFrom type), null otherwise.
	Start *string `json:"start"`
	// ContinuationError says why the continuation cannot be decoded, null when it can.
	ContinuationError *string `json:"continuation_error"`
	// ReadFailure is the permanent read failure the lease's live owner (a cfp host) reports
	// (feed.ReadFailure), present only then.
	ReadFailure *string `json:"read_failure,omitempty"`
	// Failure is the failure of the lease's current batch its cfp owner recorded (the
	// delegate's error, exit status and stderr, or a batch in flight), present only while the
	// continuation has not moved since.
	Failure *leases.Failure `json:"failure,omitempty"`
}

// processorView is one processor in `cfp leases list -o json` without -p; a public contract.
type processorView struct {
	Processor    *string  `json:"processor"`
	Prefix       string   `json:"prefix"`
	Family       string   `json:"family"`
	Leases       int      `json:"leases"`
	Owners       []string `json:"owners"`
	LastActivity *string  `json:"last_activity"`
	Initialized  bool     `json:"initialized"`
}

func newLeasesListCmd(f *factory) *cobra.Command {
	opts := &leasesListOptions{f: f}
	c := &cobra.Command{
		Use:   "list [-p NAME | --lease-id-prefix P] [--check]",
		Short: "List the processors of a lease container, or one processor's leases",
		Long: `List the processors of a lease container, or one processor's leases.

Without -p or --lease-id-prefix, list every processor that keeps leases in the lease
container: its prefix, lease family, number of leases, owners and last activity.

With -p (and -d, -c) or --lease-id-prefix, list that processor's leases, one row each:
token, EPK range, owner, state, checkpoint LSN, last update and family, then a summary
per owner. STATE is owned (the owner renewed within --lease-expiration), expired (the
owner stopped renewing; any instance may take the lease) or unowned. The summary also
lists the cfp instances that own no lease yet, from their presence records.

MODE is the lease's Mode as .NET writes it ("Incremental Feed", "Full-Fidelity Feed"), or a
Java EPK lease's mode and start setting (INCREMENTAL, start BEGINNING); "-" when the lease
has none (incremental). A lease whose continuation cfp cannot decode (a Java state of a newer
version) is listed with "continuation undecodable"; cfp never processes or rewrites it.

--check adds hygiene findings on stderr: gaps and overlaps in the coverage of the key
space, duplicate lease tokens, split parents left next to their children, owners stale
past expiry, timestamps in the future, a Mode .NET refuses to start on ("IncrementalFeed",
"LatestVersion", ""), continuations cfp cannot decode, a missing .info marker, or a .lock
older than its ttl (a lease container without time to live keeps it forever; the finding
names the command that removes it). cfp exits 3 when it finds an error or a warning. A
document under the prefix that is not a lease is skipped with a warning.

--lease TOKEN (repeatable) lists only those leases, the tokens as the table shows them with
--wide (as cfp leases show and estimate --lease take them); --check still checks the whole
lease set.`,
		Example: `  # Every processor in the lease container "leases" of database shop
  cfp leases list -d shop

  # The leases of one processor, checked
  cfp leases list -d shop -c orders -p orders-proj --check

  # Leases without an owner, for a script
  cfp leases list -d shop -c orders -p orders-proj -o json | jq -r '.[] | select(.owner == null) | .lease'`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return runLeasesList(contextOf(c), opts)
		},
	}
	c.Flags().StringArrayVar(&opts.Leases, "lease", nil, "list only the lease with this `TOKEN` (repeatable; default all)")
	c.Flags().BoolVar(&opts.Check, "check", false, "report gaps, overlaps, duplicates, orphan parents, stale owners and locks, refused modes, undecodable continuations and future timestamps (exit 3 when found)")
	positiveDurationVar(c.Flags(), &opts.Expiration, "lease-expiration", leases.DefaultExpiration, "an owner that has not renewed for this long is expired")
	return c
}

func runLeasesList(ctx context.Context, opts *leasesListOptions) error {
	f := opts.f
	if f.Global.Processor == "" && f.Global.LeaseIDPrefix == "" {
		if len(opts.Leases) > 0 {
			return usageErrorf("--lease needs the processor: give -p NAME (or --lease-id-prefix)")
		}
		return runLeasesDiscover(ctx, opts)
	}
	p, t, err := f.openLeaseCommand(ctx)
	if err != nil {
		return err
	}
	set, err := t.leaseSet(ctx)
	if err != nil {
		return err
	}
	parts, err := t.partitions(ctx)
	if err != nil {
		return err
	}
	now := f.Now()
	resolveRanges(set.Leases, parts)
	leases.Sort(set.Leases)
	if len(set.Leases) == 0 {
		return t.noLeases(ctx, f)
	}
	shown, err := selectLeases(set.Leases, opts.Leases)
	if err != nil {
		return err
	}

	views := make([]leaseView, 0, len(shown))
	for _, l := range shown {
		views = append(views, newLeaseView(l, now, opts.Expiration))
	}
	err = p.Print(ctx, views, func(tb *render.Table) {
		*tb = *render.NewLeaseTable(f.IO, "last update", "family", "mode")
		// MODE, then FAMILY, are the first to go on a narrow terminal.
		tb.Optional(len(render.LeaseColumns) + 2).Optional(len(render.LeaseColumns) + 1)
		for i, v := range views {
			cells := render.LeaseCells(v.Lease, v.Range, v.Owner, v.State, v.CheckpointLSN)
			tb.Row(append(cells, f.IO.Timestamp(shown[i].Timestamp, now), v.Family, modeCell(v))...)
		}
	})
	if err != nil {
		return err
	}
	if p.Format == render.FormatTable && p.Query == nil && len(views) > 0 {
		fmt.Fprintln(f.IO.Out)
		if err := ownerSummary(f.IO, shown, set.Hosts, now, opts.Expiration).Render(); err != nil {
			return err
		}
	}
	if !opts.Check {
		return nil
	}
	var cparts []leases.Partition
	for _, pt := range parts {
		cparts = append(cparts, leases.Partition{ID: pt.ID, Range: pt.Range, Parents: pt.Parents})
	}
	checkOpts := []leases.CheckOption{leases.WithMarkers(set.HasInfo, set.LockTime), leases.WithLockTTL(set.LockTTL), leases.WithHosts(set.Hosts)}
	if parts != nil {
		checkOpts = append(checkOpts, leases.WithPartitions(cparts))
	}
	findings := leases.Check(set.Leases, now, opts.Expiration, checkOpts...)
	if t.monitored != nil {
		findings = append(findings, leases.BeyondLatest(set.Leases, latestLSNs(ctx, f, t.monitored, set.Leases))...)
	}
	return checkResult(f.IO, printFindings(f.IO, "", findings, f.lockFix(t.prefix)))
}

// leaseSet reads the leases and markers of t's prefix with one prefix query. Documents under
// "<prefix>.." that are not leases are skipped with a warning.
func (t *leaseTarget) leaseSet(ctx context.Context) (leases.Set, error) {
	docs, err := t.docs.QueryPrefix(ctx, t.prefix)
	if err != nil {
		return leases.Set{}, fmt.Errorf("list leases of %s: %w", t.prefix, err)
	}
	return leases.SetOf(docs, t.prefix, t.skip), nil
}

// resolveRanges fills the range of PK-range leases without FeedRange from the live partition
// that serves them (feed.Route).
func resolveRanges(ls []*leases.Lease, parts []feed.Partition) {
	for _, l := range ls {
		if l.HasRange() {
			continue
		}
		if rt, err := feed.Route(l, parts); err == nil {
			l.Range = rt.Partition.Range
		}
	}
}

func newLeaseView(l *leases.Lease, now time.Time, expiration time.Duration) leaseView {
	v := leaseView{
		Lease: l.Token, ID: l.ID, State: l.State(now, expiration), Family: string(l.Family),
		Owner: nonZero(l.Owner), Continuation: nonZero(l.Continuation), LastUpdate: timeView(l.Timestamp),
	}
	if l.HasRange() {
		v.Range = new(l.Range)
	}
	if n, ok := l.LSN(); ok {
		v.CheckpointLSN = &n
	}
	if m, ok := l.ModeValue(); ok {
		v.Mode = &m
	}
	if st := l.JavaState(); st != nil && st.StartFrom.Type != "" {
		start := st.StartFrom.Type
		if !st.StartFrom.PointInTime.IsZero() {
			start += " " + st.StartFrom.PointInTime.UTC().Format(time.RFC3339Nano)
		}
		v.Start = &start
	}
	if l.StateError != nil {
		v.ContinuationError = new(l.StateError.Error())
	}
	if f := feed.ReadFailure(l); f != "" && v.State == leases.StateOwned {
		v.ReadFailure = &f
	}
	v.Failure = leases.CurrentFailure(l)
	return v
}

// modeCell is the MODE column: the mode as the lease spells it ("" quoted, "-" when absent),
// a Java lease's start setting after it, "undecodable" for a continuation cfp cannot read.
func modeCell(v leaseView) string {
	cell := "-"
	if v.Mode != nil {
		cell = *v.Mode
		if cell == "" {
			cell = `""`
		}
	}
	if v.Start != nil {
		cell += ", start " + *v.Start
	}
	if v.ContinuationError != nil {
		cell += ", continuation undecodable"
	}
	if v.ReadFailure != nil {
		cell += ", reads failing"
	}
	switch {
	case v.Failure != nil && v.Failure.InFlightSince != nil:
		cell += ", batch in flight since " + v.Failure.InFlightSince.UTC().Format(time.RFC3339)
	case v.Failure != nil:
		cell += ", batch failing"
	}
	return cell
}

// ownerSummary is the per-owner table under the lease table; cfp hosts that own no lease are
// listed from their presence records, with 0 leases.
func ownerSummary(ios *render.IOStreams, ls []*leases.Lease, hosts []leases.Host, now time.Time, expiration time.Duration) *render.Table {
	type row struct {
		owner, state string
		n            int
	}
	var rows []*row
	byOwner := map[string]*row{}
	for _, l := range ls {
		state := l.State(now, expiration)
		r := byOwner[l.Owner]
		if r == nil {
			r = &row{owner: l.Owner, state: state}
			byOwner[l.Owner] = r
			rows = append(rows, r)
		}
		r.n++
		if state == leases.StateOwned {
			r.state = leases.StateOwned
		}
	}
	for _, h := range hosts {
		if slices.ContainsFunc(rows, func(r *row) bool { return strings.EqualFold(r.owner, h.Instance) }) {
			continue
		}
		rows = append(rows, &row{owner: h.Instance, state: hostState(h, now, expiration)})
	}
	slices.SortFunc(rows, func(a, b *row) int { return strings.Compare(a.owner, b.owner) })
	t := render.NewTable(ios, "owner", "leases", "state")
	for _, r := range rows {
		owner := r.owner
		if owner == "" {
			owner = "(none)"
		}
		state := "live"
		switch r.state {
		case leases.StateExpired:
			state = "expired"
		case leases.StateUnowned:
			state = "-"
		}
		t.Row(owner, strconv.Itoa(r.n), state)
	}
	return t
}

// checkResult ends --check: "no problems found", or an exit-3 error counting the errors and
// warnings.
func checkResult(ios *render.IOStreams, serious int) error {
	if serious == 0 {
		fmt.Fprintln(ios.ErrOut, "check: no problems found")
		return nil
	}
	return &ExitError{Code: exitThreshold, Err: fmt.Errorf("check found %d problem(s)", serious)}
}

// printFindings writes hygiene findings to stderr, one a line ("check: [prefix: ]severity
// kind: message"), and returns how many are errors or warnings.
func printFindings(ios *render.IOStreams, prefix string, findings []leases.Finding, fix func(leases.Finding) string) int {
	serious := 0
	st := ios.StderrStyles()
	for _, fd := range findings {
		where := ""
		if prefix != "" {
			where = prefix + ": "
		}
		label := string(fd.Severity)
		switch fd.Severity {
		case leases.SeverityError:
			label = st.Error.Render(label)
			serious++
		case leases.SeverityWarning:
			label = st.Warning.Render(label)
			serious++
		}
		fmt.Fprintf(ios.ErrOut, "check: %s%s %s: %s\n", where, label, fd.Kind, fd.Message)
		if hint := fix(fd); hint != "" {
			fmt.Fprintf(ios.ErrOut, "check: %sTry: %s\n", where, hint)
		}
	}
	return serious
}

// lockFix returns the hint of a stale-lock finding under prefix: the command that removes the
// lock (and nothing else).
func (f *factory) lockFix(prefix string) func(leases.Finding) string {
	return func(fd leases.Finding) string {
		if fd.Kind != leases.FindingStaleLock {
			return ""
		}
		return fmt.Sprintf("cfp leases delete --lock -d %s --lease-id-prefix '%s' --execute (once no processor is starting)", f.leaseDatabase(), prefix)
	}
}
