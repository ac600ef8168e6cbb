package cmd

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cfp-dev/cfp/internal/cosmos"
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

  # Remember the position, then resume exactly where the last run stopped
  cfp tail -d shop -c orders --from beginning -e --save-state orders.state
  cfp tail -d shop -c orders --from @orders.state --save-state orders.state -e

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
	enumFlag(fs, &opts.Mode, "mode", "", "latest", "change feed mode", "latest", "all-versions")
	fs.DurationVar(&opts.Poll, "poll-interval", feed.DefaultTailPoll, "wait this `DURATION` before reading a caught-up range again")
	fs.StringVar(&opts.SaveState, "save-state", "", "write every range's position to `FILE` periodically and on exit (resume with --from @FILE)")
	fs.DurationVar(&opts.SaveEvery, "save-every", feed.DefaultTailSaveEvery, "write the --save-state file every `DURATION`")
	fs.BoolVar(&opts.Envelope, "envelope", false, "wrap each change as {range, partition, lsn, ts, operation, item}")
	fs.IntVar(&opts.PageSize, "batch-size", defaultTailPageSize, "read at most `N` changes at a time")
	fs.IntVar(&opts.Concurrency, "concurrency", feed.DefaultTailConcurrency, "at most `N` ranges read at once")
	c.MarkFlagsMutuallyExclusive("partition-key", "range")
	renameFlag(f, c, "poll", "poll-interval")
	renameFlag(f, c, "page-size", "batch-size")
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
		r, err := parseEPKRange(o.Range)
		if err != nil {
			return briefUsageErrorf("invalid --range %q: %w", o.Range, err)
		}
		if o.state != nil {
			return briefUsageErrorf("--range cannot be combined with --from @FILE: the state file has its ranges")
		}
		o.rng = &r
	}
	if o.pkSet || o.PartitionKey != "" {
		pk, err := partitionKeyJSON(o.PartitionKey)
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

// parseEPKRange parses "MIN-MAX" (upper- or lower-case hex EPKs; MIN may be empty or "" for
// the lowest key, as tables show it, MAX empty or FF for the top).
func parseEPKRange(s string) (feed.Range, error) {
	lo, hi, ok := strings.Cut(strings.TrimSpace(s), "-")
	if !ok || strings.Contains(hi, "-") {
		return feed.Range{}, errors.New("want MIN-MAX in hex EPKs, e.g. -3F or 3F-FF")
	}
	if lo == render.EmptyEPK {
		lo = ""
	}
	lo, hi = strings.ToUpper(lo), strings.ToUpper(hi)
	if hi == "" {
		hi = "FF"
	}
	for _, v := range []string{lo, hi} {
		if strings.Trim(v, "0123456789ABCDEF") != "" {
			return feed.Range{}, fmt.Errorf("%q is not a hex EPK", v)
		}
	}
	r := feed.Range{Min: lo, Max: hi}
	if leases.CompareEPK(r.Min, r.Max) >= 0 {
		return feed.Range{}, errors.New("MIN must be below MAX")
	}
	if leases.CompareEPK(r.Max, "FF") > 0 {
		return feed.Range{}, errors.New("MAX must not be above FF")
	}
	return r, nil
}

// partitionKeyJSON turns --partition-key into the JSON array form: a JSON array or JSON string
// literal is taken as JSON, anything else as a plain string.
func partitionKeyJSON(v string) (json.RawMessage, error) {
	t := strings.TrimSpace(v)
	if strings.HasPrefix(t, "{") {
		return nil, errors.New("a partition key value is a string, number, bool or null, not an object")
	}
	if strings.HasPrefix(t, "[") || strings.HasPrefix(t, `"`) {
		var x any
		if err := json.Unmarshal([]byte(t), &x); err != nil {
			return nil, fmt.Errorf("not valid JSON: %w", err)
		}
		if arr, ok := x.([]any); ok {
			if len(arr) == 0 {
				return nil, errors.New("empty partition key")
			}
			for i, c := range arr {
				switch c.(type) {
				case []any, map[string]any:
					return nil, fmt.Errorf("component %d is an array or object, not a string, number, bool or null", i+1)
				}
			}
			var b bytes.Buffer
			if err := json.Compact(&b, []byte(t)); err != nil {
				return nil, err
			}
			return b.Bytes(), nil
		}
		b, _ := json.Marshal([]any{x})
		return b, nil
	}
	b, err := json.Marshal([]string{v})
	return b, err
}

// checkStateContainer refuses a state file written for another container: its continuations
// and ranges mean nothing here (a state without the container, from an older cfp, is taken
// as it is).
func checkStateContainer(st *feed.TailState, file string, info cosmos.ContainerInfo) error {
	switch {
	case st.ContainerRID != "" && info.ContainerRID != "" && st.ContainerRID != info.ContainerRID,
		st.ContainerRID == "" && st.Container != "" && (st.Database != info.Database || st.Container != info.Container):
		return briefUsageErrorf("state file %s was written for container %s/%s (resource id %s), not %s/%s (resource id %s)",
			file, st.Database, st.Container, cmp.Or(st.ContainerRID, "-"), info.Database, info.Container, info.ContainerRID)
	}
	return nil
}

// checkPartitionKeyComponents refuses a --partition-key whose number of components is not the
// container's number of partition key paths: such a key names no logical partition, and the
// tail would match nothing without a word.
func checkPartitionKeyComponents(ctx context.Context, c *cosmos.Container, pk json.RawMessage) error {
	info, err := c.Info(ctx)
	if err != nil {
		return err
	}
	var comps []json.RawMessage
	if err := json.Unmarshal(pk, &comps); err != nil {
		return fmt.Errorf("partition key %s: %w", pk, err)
	}
	if n := len(info.PartitionKeyPaths); n > 0 && len(comps) != n {
		return briefUsageErrorf("invalid --partition-key %s: %d component(s), but %s/%s is partitioned on %s (%d)",
			pk, len(comps), info.Database, info.Container, strings.Join(info.PartitionKeyPaths, ", "), n)
	}
	return nil
}

func runTail(ctx context.Context, o *tailOptions) error {
	f := o.f
	acct, err := f.Account(ctx)
	if err != nil {
		return err
	}
	src := acct.Container(f.Global.Database, f.Global.Container)
	if o.pk != nil {
		if err := checkPartitionKeyComponents(ctx, src, o.pk); err != nil {
			return err
		}
	}
	var info cosmos.ContainerInfo
	if o.SaveState != "" || o.state != nil {
		if info, err = src.Info(ctx); err != nil {
			return err
		}
	}
	if o.state != nil {
		if err := checkStateContainer(o.state, strings.TrimPrefix(strings.TrimSpace(o.From), "@"), info); err != nil {
			return err
		}
	}

	out := render.NewChangeWriter(f.IO, render.NewChangePrinter(f.IO, o.format, o.query, o.Envelope))
	status := render.NewStatus(f.IO)
	showStatus := f.IO.IsStderrTTY || f.Log.Enabled(ctx, slog.LevelInfo)

	topts := feed.TailOptions{
		Start:        o.start,
		Until:        o.until,
		ExitAtEnd:    o.ExitAtEnd,
		MaxItems:     o.MaxItems,
		PartitionKey: o.pk,
		Mode:         o.mode,
		Range:        o.rng,
		Poll:         o.Poll,
		PageSize:     o.PageSize,
		State:        o.state,
		Concurrency:  o.Concurrency,
		SaveEvery:    o.SaveEvery,
		Now:          f.Now,
		Logger:       f.Log,
		Reader:       feed.ReaderOptions{MinBackoff: 100 * time.Millisecond, MaxBackoff: 10 * time.Second},
	}
	if o.SaveState != "" {
		path := o.SaveState
		// The state never runs ahead of the output: it counts only the changes written to
		// stdout (Written); Flush writes out the buffer first, waiting for a blocked stdout no
		// longer than tailStopGrace.
		topts.Written = out.Written
		topts.Flush = func() { out.FlushWithin(tailStopGrace) }
		topts.SaveState = func(st feed.TailState) error {
			st.Database, st.Container, st.ContainerRID = info.Database, info.Container, info.ContainerRID
			return feed.WriteTailState(path, st)
		}
	}
	if showStatus {
		topts.OnStatus = func(s feed.TailStatus) {
			if f.IO.IsStderrTTY {
				out.SetStatus(status, fmt.Sprintf("caught up on %d/%d ranges", s.CaughtUp, s.Ranges))
				return
			}
			f.Log.Info("tail status", "ranges", s.Ranges, "caughtUp", s.CaughtUp, "items", s.Items)
		}
	}

	defer tuneGC(f.Getenv)()
	stopFlush := out.StartFlusher(tailFlushEvery, tailStopGrace)
	topts.StopGrace = tailStopGrace
	sum, err := feed.Tail(ctx, src, topts, out.Emit)
	stopFlush()
	if ferr := out.Close(ctx.Err() != nil, tailStopGrace); ferr != nil && err == nil {
		err = ferr
	}
	status.Clear()

	interrupted := ctx.Err() != nil
	// A tail that failed before it read any range has nothing to sum up: the error says it all.
	startFailed := err != nil && !interrupted && sum.Ranges == 0
	if (interrupted || showStatus) && !startFailed {
		fmt.Fprintln(f.IO.ErrOut, tailSummaryLine(sum, interrupted))
	}
	if err != nil && !interrupted {
		if errors.Is(err, render.ErrOutput) {
			return err
		}
		return fmt.Errorf("tail %s/%s: %w", f.Global.Database, f.Global.Container, err)
	}
	if interrupted && o.ExitAtEnd && sum.Ranges > 0 && sum.CaughtUp == sum.Ranges {
		return &ExitError{Code: exitOK}
	}
	if interrupted {
		return context.Canceled
	}
	return nil
}

// tuneGC applies the tail's GC settings unless the environment sets its own, and returns the
// function that restores the previous ones.
func tuneGC(getenv func(string) string) (restore func()) {
	if getenv("GOGC") != "" || getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	percent := debug.SetGCPercent(tailGCPercent)
	limit := debug.SetMemoryLimit(tailMemoryLimit)
	return func() {
		debug.SetGCPercent(percent)
		debug.SetMemoryLimit(limit)
	}
}

// tailSummaryLine is the one-line summary on stderr.
func tailSummaryLine(s feed.TailSummary, interrupted bool) string {
	what := "tail stopped"
	switch {
	case interrupted:
		what = "tail interrupted"
	case s.Reason == feed.TailStopCaughtUp:
		what = "tail caught up"
	case s.Reason == feed.TailStopMaxItems:
		what = "tail reached --max-items"
	case s.Reason == feed.TailStopUntil:
		what = "tail reached --until"
	}
	line := fmt.Sprintf("%s: %d %s from %d %s (caught up on %d/%d), %d pages, %.0f RU",
		what, s.Items, plural(s.Items, "change", "changes"), s.Ranges, plural(int64(s.Ranges), "range", "ranges"),
		s.CaughtUp, s.Ranges, s.Pages, s.RequestCharge)
	if s.Splits > 0 {
		line += fmt.Sprintf(", %d %s followed", s.Splits, plural(int64(s.Splits), "split", "splits"))
	}
	if s.Merges > 0 {
		line += fmt.Sprintf(", %d %s followed", s.Merges, plural(int64(s.Merges), "merge", "merges"))
	}
	return line
}

func plural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
