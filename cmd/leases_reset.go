package cmd

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/leases"
	"github.com/cfp-dev/cfp/internal/render"
)

type leasesResetOptions struct {
	f *factory
	mutationFlags
	// To is the target position (--to): beginning, now, a time, -<duration> or @export-file.
	To          string
	ToLSN       int64
	toLSNSet    bool
	Leases      []string
	Expiration  time.Duration
	Concurrency int
}

// resetStepView is one planned lease change in `cfp leases reset -o json`; a public contract.
type resetStepView struct {
	Lease   string  `json:"lease"`
	Owner   *string `json:"owner"`
	Live    bool    `json:"live"`
	From    *string `json:"from"`
	To      *string `json:"to"`
	FromLSN *int64  `json:"from_lsn"`
	ToLSN   *int64  `json:"to_lsn"`
	Changed bool    `json:"changed"`
	Error   *string `json:"error"`
}

func newLeasesResetCmd(f *factory) *cobra.Command {
	opts := &leasesResetOptions{f: f}
	c := &cobra.Command{
		Use:   "reset (--to POSITION | --to-lsn N) [--lease TOKEN]... [--execute]",
		Short: "Move lease continuations to another position of the change feed",
		Long: `Move lease continuations to another position of the change feed.

Choose exactly one target: --to POSITION, in the position grammar of every cfp command,
or --to-lsn N. Each becomes a concrete continuation, computed from the change feed of the
lease's own range and written in the lease's own family format:

  --to beginning   before the first change still in the feed (replay everything)
  --to now         after the latest change (skip everything pending)
  --to TIME        before the first change at or after TIME (RFC 3339, e.g.
                   2026-01-02T15:04:05Z)
  --to -1h         the same, that long before now (-90m, -2h30m)
  --to @FILE       the continuations saved by 'cfp leases export' in FILE, matched by token
  --to-lsn N       after LSN N, for every targeted lease; an N past a partition's latest
                   LSN (which would skip the changes up to it) is marked in the plan and
                   refused with --execute unless --force

[details]

The spellings of earlier versions (--to-beginning, --to-now, --to-time T, --by-duration D,
--from-file F) still work, with a warning: see 'cfp help deprecated'.

--lease TOKEN (repeatable) limits the reset to some leases; the default is all of them.

Without --execute, reset only prints the plan: each lease's continuation old -> new.
With --execute it applies the plan, asking first on a terminal unless --yes (it never
asks when stdin is not a terminal). A lease whose owner is alive would overwrite the
reset at its next checkpoint, so reset refuses to write while any targeted lease has a
live owner, unless --force; every write clears the owner in the same If-Match replace,
so the owner loses the lease and a processor resumes it from the new position. When
some writes fail, cfp exits 3.`,
		Example: `  # Plan a replay of the last 30 minutes for every lease
  cfp leases reset -d shop -c orders -p orders-proj --to -30m

  # Skip the backlog of two leases, with the processors stopped
  cfp leases reset -d shop -c orders -p orders-proj --to now --lease 0 --lease 3 --execute

  # Restore the positions saved before a deployment
  cfp leases export -d shop -c orders -p orders-proj > before.json
  cfp leases reset -d shop -c orders -p orders-proj --to @before.json --execute --yes`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			opts.toLSNSet = c.Flags().Changed("to-lsn")
			if opts.toLSNSet && opts.ToLSN < 0 {
				return usageErrorf("--to-lsn must not be negative")
			}
			return runLeasesReset(contextOf(c), opts)
		},
	}
	fs := c.Flags()
	fs.StringVar(&opts.To, "to", "", "reset to `POSITION`: beginning, now, an RFC 3339 time, -<duration> or @EXPORT-FILE")
	fs.Int64Var(&opts.ToLSN, "to-lsn", 0, "reset to after `LSN`")
	fs.StringArrayVar(&opts.Leases, "lease", nil, "reset only the lease with this `TOKEN` (repeatable; default all)")
	opts.mutationFlags.add(c, "reset leases whose owner is alive too (the owner loses the lease)")
	positiveDurationVar(fs, &opts.Expiration, "lease-expiration", leases.DefaultExpiration, "an owner that has not renewed for this long is expired")
	fs.IntVar(&opts.Concurrency, "concurrency", feed.DefaultEstimateConcurrency, "change-feed reads in flight")
	// Two different targets (--to twice, or --to and an old spelling, in either order) are
	// refused: the last one would win silently.
	to := c.Flags().Lookup("to")
	to.Value = &onceValue{Value: to.Value, err: errors.New("more than one target: give one --to")}
	c.MarkFlagsMutuallyExclusive("to", "to-lsn")
	c.MarkFlagsOneRequired("to", "to-lsn")
	// The targets of earlier versions, each a spelling of --to.
	oldTo := func(name, arg, use string, to func(string) (string, error)) {
		deprecateFlag(f, c, name, arg, use, func(v string) error {
			p, err := to(v)
			if err != nil {
				return err
			}
			return c.Flags().Set("to", p)
		})
	}
	oldTo("to-beginning", "", "--to beginning", func(string) (string, error) { return "beginning", nil })
	oldTo("to-now", "", "--to now", func(string) (string, error) { return "now", nil })
	oldTo("to-time", "TIME", "--to TIME", func(v string) (string, error) { return v, nil })
	oldTo("by-duration", "DURATION", "--to -DURATION", func(v string) (string, error) {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return "", fmt.Errorf("want a positive duration such as 1h or 90m")
		}
		return "-" + d.String(), nil
	})
	oldTo("from-file", "FILE", "--to @FILE", func(v string) (string, error) { return "@" + v, nil })
	return c
}

func runLeasesReset(ctx context.Context, opts *leasesResetOptions) error {
	f := opts.f
	p, err := f.printer(render.FormatJSON)
	if err != nil {
		return err
	}
	now := f.Now()
	var (
		start    *feed.StartFrom
		fromFile map[string]string
		file     string
	)
	if opts.To != "" {
		pos, err := feed.ParsePosition(opts.To, now)
		if err != nil {
			return briefUsageErrorf("invalid --to: %w", err)
		}
		if pos.Kind == feed.PositionFile {
			file = pos.File
			if fromFile, err = exportContinuations(file); err != nil {
				return err
			}
		} else {
			s, err := pos.StartFrom(now)
			if err != nil {
				return briefUsageErrorf("invalid --to: %w", err)
			}
			start = &s
		}
	}

	t, err := f.openLeaseTarget(ctx, start != nil)
	if err != nil {
		return err
	}
	store := t.store()
	all, err := store.List(ctx)
	if err != nil {
		return err
	}
	if len(all) == 0 {
		return t.noLeases(ctx, f)
	}
	sel, err := selectLeases(all, opts.Leases)
	if err != nil {
		return err
	}
	leases.Sort(sel)

	var target func(*leases.Lease) (string, error)
	switch {
	case start != nil:
		parts, err := t.partitions(ctx)
		if err != nil {
			return err
		}
		positions := map[*leases.Lease]feed.Position{}
		for _, p := range feed.PositionsAt(ctx, t.monitored, sel, parts, *start, opts.Concurrency) {
			positions[p.Lease] = p
		}
		target = func(l *leases.Lease) (string, error) {
			p := positions[l]
			return p.Continuation, explainRoute(l, p.Err)
		}
	case opts.toLSNSet:
		target = leases.ResetToLSN(opts.ToLSN)
	default:
		target = func(l *leases.Lease) (string, error) {
			c, ok := fromFile[l.Token]
			if !ok {
				return "", fmt.Errorf("not in %s", file)
			}
			return c, nil
		}
	}
	planOpts := []leases.ResetOption{leases.ResetClock(now, opts.Expiration)}
	if opts.Force {
		planOpts = append(planOpts, leases.ResetForce())
	}
	steps := leases.PlanReset(sel, target, planOpts...)
	// A target LSN past the partition's latest one (a typo) would skip every change written
	// until then: the plan says so, and --execute refuses it without --force.
	var beyond map[string]int64
	if opts.toLSNSet && t.monitored != nil {
		latest := latestLSNs(ctx, f, t.monitored, sel)
		for _, s := range steps {
			if to, ok := s.ToLSN(); ok && latest[s.Token] > 0 && to > latest[s.Token] {
				if beyond == nil {
					beyond = map[string]int64{}
				}
				beyond[s.Token] = latest[s.Token]
			}
		}
	}
	if err := printResetPlan(ctx, f, p, steps, beyond, opts.Force); err != nil {
		return err
	}
	if len(beyond) > 0 && !opts.Force {
		err := withHint(fmt.Errorf("--to-lsn %d is past the latest LSN of %d lease(s)' partitions (%s): the changes up to it would be skipped",
			opts.ToLSN, len(beyond), beyondList(beyond)), "check the LSN ('cfp estimate' shows each partition's latest), or pass --force to reset past it anyway")
		if opts.Execute {
			return err
		}
		f.warnf("%v", err)
	}

	m := mutation{f: f, flags: opts.mutationFlags, nameHeld: true, none: "Nothing to change.", done: "Reset %d lease(s)."}
	var failed []error
	for _, s := range steps {
		var h *leases.LeaseHeldError
		switch {
		case errors.As(s.Err, &h):
			m.held = append(m.held, fmt.Sprintf("%s (%s)", s.Token, s.Owner))
		case s.Err != nil:
			failed = append(failed, s.Err)
		case s.Changed() || s.Owner != "":
			m.changes = append(m.changes, func(ctx context.Context) error {
				if _, err := store.ApplyReset(ctx, s, opts.Force); err != nil {
					return fmt.Errorf("reset lease %s: %w", s.Token, err)
				}
				return nil
			})
		}
	}
	if len(failed) > 0 {
		return withHint(fmt.Errorf("cannot plan %d lease(s); first: %w", len(failed), failed[0]),
			"leave those leases out with --lease, or fix the cause and plan again")
	}
	m.question = fmt.Sprintf("Reset %d lease(s)?", len(m.changes))
	return m.run(ctx)
}

// latestLSNs reads each lease's partition's latest LSN the way estimate does (one read from the
// lease's position); a lease whose read failed is left out.
func latestLSNs(ctx context.Context, f *factory, src feed.Source, ls []*leases.Lease) map[string]int64 {
	lags, _, err := feed.Estimate(ctx, src, ls, feed.EstimateOptions{ReadFromBeginning: true, Now: f.Now, Logger: f.Log})
	out := map[string]int64{}
	if err != nil {
		return out
	}
	for _, l := range lags {
		if l.Latest > 0 {
			out[l.Token] = l.Latest
		}
	}
	return out
}

// beyondList writes "token (latest N)" for each lease, in token order.
func beyondList(beyond map[string]int64) string {
	var parts []string
	for _, tok := range slices.SortedFunc(maps.Keys(beyond), leases.CompareTokens) {
		parts = append(parts, fmt.Sprintf("%s latest %d", tok, beyond[tok]))
	}
	return strings.Join(parts, ", ")
}

func printResetPlan(ctx context.Context, f *factory, p *render.Printer, steps []leases.ResetStep, beyond map[string]int64, force bool) error {
	views := make([]resetStepView, 0, len(steps))
	for _, s := range steps {
		v := resetStepView{Lease: s.Token, Owner: nonZero(s.Owner), Live: s.Live, From: nonZero(s.From), Changed: s.Changed()}
		if n, ok := s.FromLSN(); ok {
			v.FromLSN = &n
		}
		if s.Err == nil || errors.Is(s.Err, leases.ErrLeaseHeld) {
			v.To = nonZero(s.To)
			if n, ok := s.ToLSN(); ok {
				v.ToLSN = &n
			}
		}
		if s.Err != nil {
			v.Error = new(s.Err.Error())
		}
		views = append(views, v)
	}
	return p.Print(ctx, views, func(tb *render.Table) {
		*tb = *render.NewTable(f.IO, "lease", "owner", "from", "to", "change", "note")
		tb.Truncatable(5).Abbreviated(0, render.AbbrevToken)
		for i, v := range views {
			s := steps[i]
			change := render.Empty
			if v.FromLSN != nil && v.ToLSN != nil {
				change = fmt.Sprintf("%+d", *v.ToLSN-*v.FromLSN)
			}
			note := ""
			switch {
			case s.Err != nil && errors.Is(s.Err, leases.ErrLeaseHeld) && !s.Live:
				note = s.Err.Error()
			case errors.Is(s.Err, leases.ErrLeaseHeld):
				note = "live owner: refused without --force"
			case s.Err != nil:
				note = s.Err.Error()
			case beyond[s.Token] > 0 && force:
				note = fmt.Sprintf("past the latest LSN %d (--force)", beyond[s.Token])
			case beyond[s.Token] > 0:
				note = fmt.Sprintf("past the latest LSN %d: refused without --force", beyond[s.Token])
			case s.Live:
				note = "live owner: taken (--force)"
			case !s.Changed():
				note = "unchanged"
			}
			tb.Row(v.Lease, deref(v.Owner), continuationCell(s.From), continuationCell(s.To), change, note)
		}
	})
}

// continuationCell shows a continuation's LSN when it is one, the raw value otherwise.
func continuationCell(c string) string {
	if n, ok := leases.ParseLSN(c); ok {
		return strconv.FormatInt(n, 10)
	}
	return orDash(c)
}

// explainRoute says, for a user, why no single live partition serves lease l when err is
// feed.Route's *RouteError; other errors pass unchanged.
func explainRoute(l *leases.Lease, err error) error {
	var rerr *feed.RouteError
	switch {
	case !errors.As(err, &rerr):
		return err
	case rerr.Gone:
		return fmt.Errorf("partition %s is gone (split or merged); let a processor split the lease first", l.Token)
	case rerr.NoRange:
		return fmt.Errorf("lease %s has no range", l.Token)
	case len(rerr.Over) == 0:
		return fmt.Errorf("no live partition serves range %s", l.Range)
	}
	return fmt.Errorf("range %s spans %d partitions; let a processor split the lease first", l.Range, len(rerr.Over))
}

// onceValue is a flag value that may be given again only with the same value.
type onceValue struct {
	pflag.Value
	set bool
	err error
}

func (o *onceValue) Set(v string) error {
	if o.set && v != o.Value.String() {
		return o.err
	}
	o.set = true
	return o.Value.Set(v)
}
