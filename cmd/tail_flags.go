package cmd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/leases"
	"github.com/cfp-dev/cfp/internal/render"
)

// tailTimeoutRefusal says why --timeout does not apply to a tail that follows.
func tailTimeoutRefusal(c *cobra.Command) string {
	if e, _ := c.Flags().GetBool("exit-at-end"); !e {
		return "needs -e/--exit-at-end: a tail that follows runs until interrupted"
	}
	return ""
}

// Defaults of `cfp tail`.
const (
	defaultTailPageSize = 1000
	// tailFlushEvery bounds how long a change may sit in the output buffer of a live tail.
	tailFlushEvery = 200 * time.Millisecond
	// tailStopGrace bounds how long an interrupted tail waits for a blocked stdout before it
	// saves its state and exits.
	tailStopGrace = 500 * time.Millisecond
	// A tail's live heap is small (the pages in flight) while it allocates every page it reads:
	// a higher GC target spends a quarter less CPU for ~10 MB more, and the soft memory limit
	// keeps the heap well under 100 MB whatever the page sizes. GOGC and GOMEMLIMIT win.
	tailGCPercent   = 400
	tailMemoryLimit = 64 << 20
)

type tailOptions struct {
	f *factory

	From         string
	Until        string
	ExitAtEnd    bool
	MaxItems     int64
	PartitionKey string
	Range        string
	Lease        string
	Mode         string
	Poll         time.Duration
	SaveState    string
	SaveEvery    time.Duration
	Envelope     bool
	PageSize     int
	Concurrency  int

	// pkSet is whether --partition-key was given (--partition-key "" is the empty string key).
	pkSet bool
	// modeSet is whether --mode was given (a state file's mode applies otherwise).
	modeSet bool
	// fromSet is whether --from was given (--lease starts at the lease's checkpoint otherwise).
	fromSet bool

	// Resolved by validate.
	mode   feed.FeedMode
	start  feed.StartFrom
	state  *feed.TailState
	until  time.Time
	pk     json.RawMessage
	rng    *feed.Range
	format render.Format
	query  *render.Query
}

const tailLong = `Watch a container's changes, in every feed range at once, without writing any lease.

Each change is the latest version of a created or updated item. In a pipe cfp tail writes one
JSON document per line (-o jsonl), exactly as the change feed returned it; on a terminal it
shows one coloured line per change: time, range, id and a short preview of the body.
--envelope wraps every change as {"range","partition","lsn","ts","operation","item"}.

[details]

--mode all-versions reads the all-versions-and-deletes feed instead: every create, replace
and delete, each as the service's {"current","previous","metadata"} object, with the
operation on the terminal line and in the envelope. The service starts this mode from now or
a saved position only: use --from now (the default) or --from @FILE.

Where to start (--from), in the position grammar of every cfp command:
  now               only changes made from now on (the default)
  beginning         the whole retained history
  2026-01-02T15:04:05Z, -15m
                    changes made at or after that time (-<duration>: that long ago)
  @FILE             exactly where a --save-state FILE of an earlier run stopped:
                    no change lost, none repeated
  lsn:N             from the change at LSN N on, in one partition (with --lease, or a
                    --range within one partition)

--lease TOKEN (with -p) reads only that lease's range, from its checkpoint unless --from
says otherwise: the changes its processor has not processed yet, the first one first.

Where to stop: Ctrl-C (a one-line summary on stderr, exit 130), -e/--exit-at-end (once
every range is caught up), -n/--max-items N (in all), or --until TIME (now, an RFC 3339
time, -<duration> or +<duration>; changes after it are left for the next run). With --save-state FILE the position of every range is written to FILE
(atomically) every --save-every and on exit, so 'cfp tail --from @FILE --save-state FILE'
resumes where the last run stopped.

Status ("caught up on 4/4 ranges") goes to stderr on a terminal or with --log-level info.
The JSON forms are a contract: see docs/scripting.md.`

const tailExample = `  # Follow new changes on the embedded emulator
  cfp --local tail -d shop -c orders

  # Dump the whole history as JSON lines and stop
  cfp tail -d shop -c orders --from beginning -e > orders.jsonl

  # Copy a container: its whole history into a new container with the same partition key
  cfp tail -d shop -c orders --from beginning -e > orders-all.jsonl
  cfp import -d shop -c orders-copy --create --like orders orders-all.jsonl

[details]

  # Remember the position, then resume exactly where the last run stopped
  cfp tail -d shop -c orders --from beginning -e --save-state orders.state
  cfp tail -d shop -c orders --from @orders.state --save-state orders.state -e

  # What lease 0 of a processor has still to process, from its checkpoint
  cfp tail -d shop -c orders -p orders-proj --lease 0 -e -n 1 --envelope

  # The last hour's changes of one customer, as envelopes, filtered with jq
  cfp tail -d shop -c orders --from -1h -e --partition-key c42 --envelope --jq '[.lsn, .item.id]'

  # Deletes, as the all-versions feed shows them: save the position, delete, read on
  cfp tail -d shop -c orders --mode all-versions -e --save-state av.state
  head -n 3 orders.jsonl | cfp import -d shop -c orders --delete
  cfp tail -d shop -c orders --mode all-versions --from @av.state -e --envelope \
    --jq 'select(.operation == "delete") | .item.metadata.id'`

func newTailCmd(f *factory) *cobra.Command {
	opts := &tailOptions{f: f}
	c := &cobra.Command{
		Use:     "tail [flags]",
		Short:   "Watch a container's changes (never writes leases)",
		Long:    tailLong,
		Example: tailExample,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			opts.modeSet = c.Flags().Changed("mode")
			opts.pkSet = c.Flags().Changed("partition-key")
			opts.fromSet = c.Flags().Changed("from")
			if err := opts.validate(); err != nil {
				return err
			}
			return runTail(contextOf(c), opts)
		},
	}
	fs := c.Flags()
	fs.StringVar(&opts.From, "from", "now", "where to start: now, beginning, an RFC 3339 `TIME`, -<duration> or @STATE-FILE")
	fs.StringVar(&opts.Until, "until", "", "stop each range at its first change after `TIME`: now, an RFC 3339 time, -<duration> or +<duration>")
	fs.BoolVarP(&opts.ExitAtEnd, "exit-at-end", "e", false, "stop once every range is caught up")
	fs.Int64VarP(&opts.MaxItems, "max-items", "n", 0, "stop after `N` changes (0: no limit)")
	fs.StringVar(&opts.PartitionKey, "partition-key", "", "only the changes of the logical partition `VALUE` (a string, \"\" included, or JSON such as [5] or [\"a\",\"b\"], one component per partition key path)")
	fs.StringVar(&opts.Range, "range", "", "only the changes in the EPK `RANGE` MIN-MAX (hex, e.g. -3F or 3F-7F)")
	fs.StringVar(&opts.Lease, "lease", "", "only the range of the processor's (-p) lease `TOKEN`, from its checkpoint unless --from is given")
	enumFlag(fs, &opts.Mode, "mode", "", "latest", "change feed mode", "latest", "all-versions")
	fs.DurationVar(&opts.Poll, "poll-interval", feed.DefaultTailPoll, "wait this `DURATION` before reading a caught-up range again")
	fs.StringVar(&opts.SaveState, "save-state", "", "write every range's position to `FILE` periodically and on exit (resume with --from @FILE)")
	fs.DurationVar(&opts.SaveEvery, "save-every", feed.DefaultTailSaveEvery, "write the --save-state file every `DURATION`")
	fs.BoolVar(&opts.Envelope, "envelope", false, "wrap each change as {range, partition, lsn, ts, operation, item}")
	fs.IntVar(&opts.PageSize, "batch-size", defaultTailPageSize, "read at most `N` changes at a time")
	fs.IntVar(&opts.Concurrency, "concurrency", feed.DefaultTailConcurrency, "at most `N` ranges read at once")
	c.MarkFlagsMutuallyExclusive("partition-key", "range")
	c.MarkFlagsMutuallyExclusive("lease", "range")
	c.MarkFlagsMutuallyExclusive("lease", "partition-key")
	renameFlag(f, c, "poll", "poll-interval")
	renameFlag(f, c, "page-size", "batch-size")
	groupFlags(fs, "Position", "from", "until", "exit-at-end", "max-items", "save-state", "save-every")
	groupFlags(fs, "Filter", "partition-key", "range", "lease", "mode")
	return c
}

// validate checks the flags and resolves them, before any account is opened.
func (o *tailOptions) validate() error {
	f := o.f
	if err := f.requireContainer(); err != nil {
		return err
	}
	now := f.Now()
	if path, ok := strings.CutPrefix(strings.TrimSpace(o.From), "@"); ok {
		if path == "" {
			return briefUsageErrorf("invalid --from %q: name the state file after @", o.From)
		}
		st, err := feed.ReadTailState(path)
		if err != nil {
			return withHint(err, "pass a file written by 'cfp tail --save-state FILE'")
		}
		o.state = st
	} else {
		start, err := feed.ParseStart(o.From, now)
		if err != nil {
			return briefUsageErrorf("invalid --from: %w", err)
		}
		o.start = start
	}
	until, err := feed.ParseUntil(o.Until, now)
	if err != nil {
		return briefUsageErrorf("invalid --until: %w", err)
	}
	// An end before the start reads nothing and would exit 0 as if the feed were empty.
	if !until.IsZero() && o.state == nil {
		from := time.Time{}
		switch o.start.Kind {
		case feed.StartTime:
			from = o.start.Time
		case feed.StartNow:
			from = now
		}
		if !from.IsZero() && until.Before(from) {
			return briefUsageErrorf("the window is empty: --until %s is before the start %s", until.UTC().Format(time.RFC3339), from.UTC().Format(time.RFC3339))
		}
	}
	o.until = until
	if o.Range != "" {
		r, err := leases.ParseRange(o.Range)
		if err != nil {
			return briefUsageErrorf("invalid --range %q: %w", o.Range, err)
		}
		if o.state != nil {
			return briefUsageErrorf("--range cannot be combined with --from @FILE: the state file has its ranges")
		}
		o.rng = &r
	}
	if o.Lease != "" {
		if err := f.requireProcessor(); err != nil {
			return err
		}
		if o.state != nil {
			return briefUsageErrorf("--lease cannot be combined with --from @FILE: the state file has its ranges")
		}
	}
	if o.start.Kind == feed.StartContinuation && o.rng == nil && o.Lease == "" {
		return briefUsageErrorf("--from %s is a position in one partition: give --lease or --range too", strings.TrimSpace(o.From))
	}
	if o.pkSet || o.PartitionKey != "" {
		pk, err := feed.ParsePartitionKey(o.PartitionKey)
		if err != nil {
			return briefUsageErrorf("invalid --partition-key %q: %w", o.PartitionKey, err)
		}
		if o.state != nil && !bytes.Equal(pk, o.state.PartitionKey) {
			return briefUsageErrorf("--partition-key differs from the state file's partition key")
		}
		o.pk = pk
	}
	if err := o.resolveMode(); err != nil {
		return err
	}
	switch {
	case o.MaxItems < 0:
		return briefUsageErrorf("invalid --max-items %d: must not be negative", o.MaxItems)
	case o.Poll <= 0:
		return briefUsageErrorf("invalid --poll-interval %s: must be positive", o.Poll)
	case o.SaveEvery <= 0:
		return briefUsageErrorf("invalid --save-every %s: must be positive", o.SaveEvery)
	case o.PageSize <= 0:
		return briefUsageErrorf("invalid --batch-size %d: must be positive", o.PageSize)
	case o.Concurrency <= 0:
		return briefUsageErrorf("invalid --concurrency %d: must be positive", o.Concurrency)
	}
	if o.format, err = f.outputFormat(render.FormatJSONL); err != nil {
		return err
	}
	if o.query, err = f.jqQuery(); err != nil {
		return err
	}
	return nil
}

// resolveMode sets o.mode from --mode, or from the state file's mode when --mode is not given,
// and checks that an all-versions tail starts from now or a state file.
func (o *tailOptions) resolveMode() error {
	mode, err := feed.ParseFeedMode(o.Mode)
	if err != nil {
		return briefUsageErrorf("invalid --mode: %w", err)
	}
	if o.state != nil {
		stateMode, err := feed.ParseFeedMode(o.state.Mode)
		if err != nil {
			return fmt.Errorf("state file %s: %w", strings.TrimPrefix(strings.TrimSpace(o.From), "@"), err)
		}
		if !o.modeSet {
			mode = stateMode
		} else if mode != stateMode {
			return briefUsageErrorf("--mode %s differs from the state file's mode %s: a tail resumes in the mode it was saved in", mode, stateMode)
		}
	}
	o.mode = mode
	if mode != feed.AllVersionsAndDeletes {
		return nil
	}
	if o.state == nil && o.start.Kind != feed.StartNow {
		return briefUsageErrorf("--mode all-versions cannot start from %q: the service starts this mode from now or a saved position only (use --from now or --from @STATE-FILE)", o.From)
	}
	check := feed.TailOptions{Mode: mode, Start: o.start, State: o.state}
	if err := check.Validate(); err != nil {
		return briefUsageErrorf("--mode all-versions: %w", err)
	}
	return nil
}
