package cmd

import (
	"context"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/cfp-dev/cfp/emulator"
	"github.com/cfp-dev/cfp/internal/render"
)

type emulatorFaultsOptions struct {
	f              *factory
	Status         int
	Substatus      int
	RetryAfter     time.Duration
	Latency        time.Duration
	Count          int
	Fraction       float64
	ChangeFeedOnly bool
	IncludeAccount bool
	Clear          bool
}

// faultsView is the JSON of `cfp emulator faults`: how many fault rules are active.
type faultsView struct {
	FaultRules int `json:"fault_rules"`
}

func newEmulatorFaultsCmd(f *factory) *cobra.Command {
	opts := &emulatorFaultsOptions{f: f}
	c := &cobra.Command{
		Use:   "faults [--status 429|500|503|410] [--latency D] [--count N | --fraction F] | --clear",
		Short: "Make a running emulator throttle, fail or slow down requests",
		Long: `Add a fault rule to a running 'cfp emulator' (reached with --endpoint or --connection-string),
to test how processors and tools behave when Cosmos DB throttles (429 with a retry-after),
fails (500), is unavailable (503) or reports a partition gone (410), or is slow (--latency).

A rule applies to data-plane requests (everything under /dbs, and the account read that
clients send first with --include-account; never to the admin API), to the next --count requests or to a --fraction of them, or to all of them
until --clear. Rules are checked in the order they were added; they live in the serving
process and end with it.`,
		Example: `  # Throttle the next 20 requests
  cfp --endpoint http://localhost:8081/ emulator faults --status 429 --count 20

  # Slow down a tenth of the change-feed reads by 500ms, then remove every rule
  cfp --endpoint http://localhost:8081/ emulator faults --latency 500ms --fraction 0.1 --change-feed-only
  cfp --endpoint http://localhost:8081/ emulator faults --clear`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if !opts.Clear {
				if opts.Status == 0 && opts.Latency == 0 {
					return usageErrorf("give --status, --latency or both (or --clear)")
				}
				if err := opts.rule().Rule().Validate(); err != nil {
					return usageErrorf("%w", err)
				}
			}
			return explainAdmin(runEmulatorFaults(contextOf(c), opts))
		},
	}
	fs := c.Flags()
	fs.IntVar(&opts.Status, "status", 0, "answer with this HTTP `STATUS`: 429, 500, 503, 410 or 400")
	fs.IntVar(&opts.Substatus, "substatus", 0, "x-ms-substatus `CODE` (default for 410: 1002, partition gone)")
	fs.DurationVar(&opts.RetryAfter, "retry-after", 0, "retry-after `DURATION` sent with 429 (default 10ms)")
	fs.DurationVar(&opts.Latency, "latency", 0, "add this `DURATION` before answering")
	fs.IntVar(&opts.Count, "count", 0, "apply to the next `N` matching requests only (0: no limit)")
	fs.Float64Var(&opts.Fraction, "fraction", 0, "apply to this `FRACTION` (0..1] of matching requests (0: all)")
	fs.BoolVar(&opts.ChangeFeedOnly, "change-feed-only", false, "apply to change-feed reads only")
	fs.BoolVar(&opts.IncludeAccount, "include-account", false, "apply to the account read (GET /) too")
	fs.BoolVar(&opts.Clear, "clear", false, "remove every fault rule")
	for _, name := range []string{"status", "substatus", "retry-after", "latency", "count", "fraction", "change-feed-only", "include-account"} {
		c.MarkFlagsMutuallyExclusive("clear", name)
	}
	return c
}

func (o *emulatorFaultsOptions) rule() emulator.FaultRuleJSON {
	return emulator.FaultRuleJSON{
		Status: o.Status, Substatus: o.Substatus,
		RetryAfterMs: o.RetryAfter.Milliseconds(), LatencyMs: o.Latency.Milliseconds(),
		Count: o.Count, Fraction: o.Fraction, ChangeFeedOnly: o.ChangeFeedOnly,
		IncludeAccount: o.IncludeAccount,
	}
}

func runEmulatorFaults(ctx context.Context, opts *emulatorFaultsOptions) error {
	f := opts.f
	p, err := f.printer(render.FormatJSON)
	if err != nil {
		return err
	}
	adm, err := openEmulatorAdmin(f, false)
	if err != nil {
		return err
	}
	defer adm.Close()
	var v faultsView
	if opts.Clear {
		err = adm.ClearFaults(ctx)
	} else {
		v.FaultRules, err = adm.InjectFaults(ctx, opts.rule())
	}
	if err != nil {
		return err
	}
	return p.Print(ctx, v, func(t *render.Table) {
		*t = *render.NewTable(f.IO, "active fault rules")
		t.Row(strconv.Itoa(v.FaultRules))
	})
}
