package cmd

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/cfp-dev/cfp/changefeed"
	"github.com/cfp-dev/cfp/internal/leases"
	"github.com/cfp-dev/cfp/internal/render"
)

// estimateTimeoutRefusal says why --timeout does not apply to an estimate that keeps running.
func estimateTimeoutRefusal(c *cobra.Command) string {
	if c.Flags().Changed("watch") || c.Flags().Changed("metrics-addr") {
		return "applies to one estimate: with --watch each interval is bounded by --request-timeout"
	}
	return ""
}

// defaultWatchInterval is the .NET push estimator's period.
const defaultWatchInterval = 5 * time.Second

type estimateOptions struct {
	f                 *factory
	AllowEmpty        bool
	Watch             time.Duration
	watching          bool
	Count             int
	MaxLag            int64
	maxLagSet         bool
	MaxStuck          time.Duration
	maxStuckSet       bool
	StuckAfter        int
	StuckThreshold    time.Duration
	LagThreshold      time.Duration
	FailOn            []string
	Leases            []string
	MetricsAddr       string
	Concurrency       int
	Expiration        time.Duration
	ReadFromBeginning bool
	Formula           string

	// metricsReady, when set, is told the metrics server's address (tests).
	metricsReady func(addr string)
}

// The views of an estimate (JSON and table) live in render.
type estimateView = render.EstimateView

func newEstimateCmd(f *factory) *cobra.Command {
	opts := &estimateOptions{f: f}
	c := &cobra.Command{
		Use:   "estimate -d DATABASE -c CONTAINER -p NAME [--watch [INTERVAL]] [--max-lag N] [--formula dotnet|java]",
		Short: "Estimate the lag of every lease of a processor",
		Long: `Estimate how far each lease of a processor is behind its change feed, without running
a processor.

[details]

LAG is exactly the number of the .NET change feed estimator: one read of at most one
change from the lease's continuation gives the partition's latest LSN (from the session
token) and the first pending change's LSN; LAG = latest - first + 1, 0 when nothing is
pending. Its unit is LSNs, not documents: a transactional batch counts once, and an EPK
sub-range lease also counts writes to the rest of its partition. A lease without a
continuation, whose partition is gone, or whose range spans several partitions reports
the estimator's sentinel 1 (with --read-from-beginning, a lease without a continuation is
read from the beginning instead, like older SDKs).

--formula java computes, for every lease, the number Java's EPK processors report from
getCurrentState instead: a read of the lease's range from now gives the latest LSN (its
continuation), and LAG = latest - the lease's checkpoint LSN, or latest - 1 without a
continuation; a continuation that is not an LSN gives Java's -1, flagged as a sentinel and
left out of the total. The two formulas differ by design: the default (dotnet) is what .NET's
estimator and KEDA report, and it counts only changes pending in the lease's own range,
while Java counts every write to the partition since the checkpoint. Nothing pending is
read with java, so TIME-LAG is known only for a caught-up lease.

cfp adds TIME-LAG (the age of the oldest pending change), AGE (since the lease was last
written), OWNER and STATE (owned, expired or unowned), PROGRESS, and a summary: total lag
(1 when there are no leases, like the .NET push estimator, with --allow-empty), leases and
live owners. A processor without leases (a typo in -p) is an error: cfp exits 5 naming the
processors it found in the lease container, nearest first; --allow-empty reports the empty
lease set instead, total lag 1, for a script that expects the .NET estimator's answer. Reads
run in parallel, at most --concurrency at a time.

VERDICT says, from one estimate, whether each lease is worked off, after the consumer
statuses of LinkedIn's Burrow:
  idle      nothing to read
  ok        changes pending, a live owner, the oldest pending change younger than
            --lag-threshold (30s)
  lagging   changes pending and moving, the oldest waiting longer than --lag-threshold
  stuck     its owner keeps renewing it, changes are pending, and its continuation has
            not moved for longer than --stuck-threshold (1m): since when is shown
  stalled   changes pending and no live owner (unowned, or not renewed)
  rewound   its continuation went backwards (a reset, an older checkpoint)
  failing   its owner records that its reads fail, or that its current batch fails in
            the delegate: the error, exit status and stderr are shown
"Since when" comes from the lease container: cfp hosts stamp a lease when its
continuation advances (cfpProgressAt) and record a batch in the delegate for longer than
their --stuck-threshold, and the oldest pending change's _ts bounds it. Leases of .NET and
Java hosts carry no stamp: one estimate calls them ok or lagging, and --watch calls them
stuck once --stuck-after estimates (3) found the continuation unmoved. PROGRESS in the
JSON is the older, coarser form of the verdict (active, waiting, stuck, idle, failing).

--watch [INTERVAL] repeats the estimate (every 5s by default): on a terminal it is a live
view that owns the screen, with each lease's owner, state, lag, the trend of its lag over the
last estimates, time lag and verdict, a line of verdicts and one of hosts, redrawn at every
estimate and resize (cfp process shows the same view). ? lists the keys; / filters by lease,
owner or verdict (Esc clears); up/down (j/k) select; enter opens the selected lease whole, as
cfp leases show, and Esc goes back; r, l, t and o sort by range, lag, time lag and owner; q
quits (Ctrl-C interrupts, exit 130), and the last estimate stays on the screen. In a pipe it writes one JSON object per interval. --max-lag N exits 3 when the
total lag exceeds N (with --watch, when the last estimate did); --max-stuck D exits 3 when
a lease has been stuck for longer than D; --fail-on VERDICT,... exits 3 when a lease has one
of those verdicts (e.g. --fail-on stuck,failing,stalled). --metrics-addr serves the numbers for Prometheus
at /metrics, with /healthz and /readyz probes beside it, and implies --watch.`,
		Example: `  # Lag per lease, as a table
  cfp estimate -d shop -c orders -p orders-proj

  # Health check for cron: exit 3 above 10000 pending changes
  cfp estimate -d shop -c orders -p orders-proj --max-lag 10000 -o json > /dev/null

  # Total lag every 10s, as JSON lines
  cfp estimate -d shop -c orders -p orders-proj --watch 10s | jq .summary.total_lag

  # The lag Java's getCurrentState reports for a Java processor's leases
  cfp estimate -d shop -c orders -p orders-proj --formula java

[details]

  # Exit 3 once a lease has been stuck (owner renewing, not checkpointing) for over two minutes
  cfp estimate -d shop -c orders -p orders-proj --max-stuck 2m

  # Health check: exit 3 when a lease is stuck or its delegate fails
  cfp estimate -d shop -c orders -p orders-proj --fail-on stuck,failing -o json > /dev/null

  # Prometheus gauges per lease on :9464
  cfp estimate -d shop -c orders -p orders-proj --metrics-addr :9464`,
		// `--watch 10s` reads like the spec's `--watch [INTERVAL]`: pflag binds an optional value
		// only as --watch=10s, so a lone duration argument after --watch is taken as the interval.
		Args: func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return nil
			}
			if len(args) == 1 && c.Flags().Changed("watch") {
				if _, err := time.ParseDuration(args[0]); err == nil {
					return nil
				}
			}
			return fmt.Errorf("unexpected argument %q (write the watch interval as --watch 10s or --watch=10s)", args[0])
		},
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.Watch, _ = time.ParseDuration(args[0])
			}
			opts.watching = c.Flags().Changed("watch") || opts.MetricsAddr != ""
			if opts.watching && opts.Watch == 0 && !c.Flags().Changed("watch") {
				opts.Watch = defaultWatchInterval
			}
			opts.maxLagSet = c.Flags().Changed("max-lag")
			opts.maxStuckSet = c.Flags().Changed("max-stuck")
			if opts.maxStuckSet && opts.MaxStuck < 0 {
				return usageErrorf("--max-stuck must not be negative")
			}
			for _, v := range opts.FailOn {
				if !slices.Contains(changefeed.Verdicts, v) {
					return usageErrorf("--fail-on: unknown verdict %q (want %s)", v, strings.Join(changefeed.Verdicts, ", "))
				}
			}
			if opts.StuckAfter < 1 {
				return usageErrorf("--stuck-after must be at least 1")
			}
			if opts.watching && opts.Watch <= 0 {
				return usageErrorf("--watch interval must be positive")
			}
			if opts.maxLagSet && opts.MaxLag < 0 {
				return usageErrorf("--max-lag must not be negative")
			}
			if opts.Count < 0 {
				return usageErrorf("--count must not be negative")
			}
			if opts.Count > 0 && !opts.watching {
				return usageErrorf("--count needs --watch")
			}
			if opts.Concurrency <= 0 {
				return usageErrorf("--concurrency must be positive")
			}
			if opts.ReadFromBeginning && opts.Formula == changefeed.FormulaJava.String() {
				return usageErrorf("--read-from-beginning applies to --formula dotnet only (java always reads from now)")
			}
			return runEstimate(contextOf(c), opts)
		},
	}
	fs := c.Flags()
	fs.DurationVar(&opts.Watch, "watch", 0, "repeat the estimate every `INTERVAL` (5s when given without a value)")
	fs.Lookup("watch").NoOptDefVal = defaultWatchInterval.String()
	fs.IntVar(&opts.Count, "count", 0, "with --watch, stop after `N` estimates (0: until interrupted)")
	fs.Int64Var(&opts.MaxLag, "max-lag", 0, "exit 3 when the total lag exceeds `N` (LSNs)")
	fs.DurationVar(&opts.MaxStuck, "max-stuck", 0, "exit 3 when a lease has been stuck for longer than `D`")
	fs.StringArrayVar(&opts.Leases, "lease", nil, "estimate only the lease with this `TOKEN` (repeatable; default all)")
	fs.StringSliceVar(&opts.FailOn, "fail-on", nil, "exit 3 when a lease's verdict is one of `VERDICTS` (comma-separated: "+strings.Join(changefeed.Verdicts, ", ")+")")
	positiveDurationVar(fs, &opts.StuckThreshold, "stuck-threshold", changefeed.DefaultStuckThreshold, "a lease whose owner renews it, with changes pending and a continuation unmoved for longer, is stuck")
	positiveDurationVar(fs, &opts.LagThreshold, "lag-threshold", changefeed.DefaultLagThreshold, "a lease whose oldest pending change has waited longer is lagging")
	fs.IntVar(&opts.StuckAfter, "stuck-after", changefeed.DefaultStuckAfter, "with --watch, a lease without a progress stamp (.NET, Java hosts) whose continuation has not moved for `N` estimates, with lag > 0, is stuck")
	fs.StringVar(&opts.MetricsAddr, "metrics-addr", "", "serve Prometheus metrics and /healthz, /readyz at `ADDR` (e.g. :9464), implies --watch")
	fs.IntVar(&opts.Concurrency, "concurrency", changefeed.DefaultEstimateConcurrency, "change-feed reads in flight")
	positiveDurationVar(fs, &opts.Expiration, "lease-expiration", leases.DefaultExpiration, "an owner that has not renewed for this long is expired")
	fs.BoolVar(&opts.AllowEmpty, "allow-empty", false, "report a processor without leases (total lag 1, like the .NET estimator) instead of exiting 5")
	fs.BoolVar(&opts.ReadFromBeginning, "read-from-beginning", false, "read leases without a continuation from the beginning instead of reporting 1")
	enumFlag(fs, &opts.Formula, "formula", "", changefeed.FormulaDotNet.String(),
		"whose lag number: dotnet (.NET estimator, KEDA) or java (Java EPK getCurrentState)",
		changefeed.FormulaDotNet.String(), changefeed.FormulaJava.String())
	groupFlags(fs, "Threshold", "max-lag", "max-stuck", "fail-on", "stuck-threshold", "lag-threshold", "stuck-after", "lease-expiration")
	groupFlags(fs, "Watch", "watch", "count", "metrics-addr")
	return c
}

func runEstimate(ctx context.Context, opts *estimateOptions) error {
	f := opts.f
	pipe := render.FormatJSON
	if opts.watching {
		pipe = render.FormatJSONL
	}
	p, err := f.printer(pipe)
	if err != nil {
		return err
	}
	e := &estimator{f: f, opts: opts}
	if !opts.watching {
		if err := e.open(ctx); err != nil {
			return err
		}
	}
	formula, err := changefeed.ParseFormula(cmp.Or(opts.Formula, changefeed.FormulaDotNet.String()))
	if err != nil {
		return usageErrorf("--formula: %v", err)
	}
	e.eopts = changefeed.EstimateOptions{
		Formula:           formula,
		Concurrency:       opts.Concurrency,
		Expiration:        opts.Expiration,
		ReadFromBeginning: opts.ReadFromBeginning,
		Thresholds:        changefeed.Thresholds{Stuck: opts.StuckThreshold, Lagging: opts.LagThreshold},
		Now:               f.Now,
		Logger:            f.Log,
	}
	e.tracker = &changefeed.ProgressTracker{StuckAfter: opts.StuckAfter}

	if opts.watching {
		return watchEstimate(ctx, opts, p, e)
	}
	v, err := e.estimate(ctx)
	if err != nil {
		return err
	}
	if err := printEstimate(ctx, f, p, v); err != nil {
		return err
	}
	return opts.check(v)
}

// check applies the thresholds that exit 3 (--max-lag, --max-stuck, --fail-on) to one
// estimate.
func (o *estimateOptions) check(v estimateView) error {
	return errors.Join(o.checkMaxLag(v), o.checkMaxStuck(v), o.checkFailOn(v))
}

// checkFailOn fails when a lease's verdict is one of --fail-on.
func (o *estimateOptions) checkFailOn(v estimateView) error {
	var found []string
	for _, l := range v.Leases {
		if slices.Contains(o.FailOn, l.Verdict) {
			found = append(found, "lease "+l.Lease+" "+render.VerdictText(l))
		}
	}
	if len(found) == 0 {
		return nil
	}
	return &ExitError{Code: exitThreshold, Err: fmt.Errorf("--fail-on %s: %s", strings.Join(o.FailOn, ","), strings.Join(found, ", "))}
}

// estimator runs the estimates of one `cfp estimate`: one, or one per interval of a watch.
type estimator struct {
	f       *factory
	opts    *estimateOptions
	eopts   changefeed.EstimateOptions
	tracker *changefeed.ProgressTracker

	// t and store are set once by open; mu guards them for the live view's reads.
	mu    sync.Mutex
	t     *leaseTarget
	store *leases.Store
	// fatal is a processor with no leases: the watch cannot recover from it.
	fatal error
}

// open resolves the lease target and checks the processor has leases, once. A watch calls it
// in every round until it succeeds, so an account that does not answer at start is one error
// line per interval, not the end of the watch.
func (e *estimator) open(ctx context.Context) error {
	if t, _ := e.target(); t != nil {
		return nil
	}
	lt, err := e.f.openLeaseTarget(ctx, true)
	if err != nil {
		return err
	}
	st := lt.store()
	if !e.opts.AllowEmpty {
		ls, err := st.List(ctx)
		if err != nil {
			return err
		}
		if len(ls) == 0 {
			e.fatal = lt.noLeases(ctx, e.f)
			return e.fatal
		}
	}
	e.mu.Lock()
	e.t, e.store = lt, st
	e.mu.Unlock()
	return nil
}

// target returns the lease target and store once open succeeded (nil before).
func (e *estimator) target() (*leaseTarget, *leases.Store) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.t, e.store
}

// estimate reads the leases and estimates their lag.
func (e *estimator) estimate(ctx context.Context) (estimateView, error) {
	if err := e.open(ctx); err != nil {
		return estimateView{}, err
	}
	ls, err := e.store.List(ctx)
	if err != nil {
		return estimateView{}, err
	}
	if len(e.opts.Leases) > 0 {
		if ls, err = selectLeases(ls, e.opts.Leases); err != nil {
			e.fatal = err
			return estimateView{}, err
		}
	}
	e.eopts.Partitions = nil
	lags, _, err := changefeed.EstimateLeases(ctx, e.t.monitored, ls, e.eopts)
	if err != nil {
		return estimateView{}, err
	}
	now := e.f.Now()
	e.tracker.Observe(lags, now)
	return render.NewEstimateView(e.t.prefix, lags, changefeed.Summarize(lags), now), nil
}

// checkMaxStuck fails with exit code 3 when a lease has been stuck for longer than --max-stuck.
func (o *estimateOptions) checkMaxStuck(v estimateView) error {
	if !o.maxStuckSet {
		return nil
	}
	for _, l := range v.Leases {
		if l.StuckSeconds != nil && *l.StuckSeconds > o.MaxStuck.Seconds() {
			return &ExitError{Code: exitThreshold, Err: fmt.Errorf("lease %s stuck for %s exceeds --max-stuck %s",
				l.Lease, render.Seconds(l.StuckSeconds), o.MaxStuck)}
		}
	}
	return nil
}

func (o *estimateOptions) checkMaxLag(v estimateView) error {
	if o.maxLagSet && v.Summary.TotalLag > o.MaxLag {
		return &ExitError{Code: exitThreshold, Err: fmt.Errorf("total lag %d exceeds --max-lag %d", v.Summary.TotalLag, o.MaxLag)}
	}
	return nil
}

func printEstimate(ctx context.Context, f *factory, p *render.Printer, v estimateView) error {
	table := p.Format == render.FormatTable && p.Query == nil
	err := p.Print(ctx, v, func(tb *render.Table) {
		*tb = *render.EstimateTable(f.IO, v, render.EstimateTableOptions{})
	})
	if err != nil || !table {
		return err
	}
	if _, err := fmt.Fprintln(f.IO.Out); err != nil {
		return err
	}
	return render.WriteEstimateSummary(f.IO.Out, v)
}
