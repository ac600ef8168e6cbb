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
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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

// tailEnvelope is one change with --envelope: a public contract (docs/scripting.md).
type tailEnvelope struct {
	Range     feed.Range      `json:"range"`
	Partition string          `json:"partition,omitempty"`
	LSN       int64           `json:"lsn"`
	TS        string          `json:"ts,omitempty"`
	Operation string          `json:"operation"`
	Item      json.RawMessage `json:"item"`
}

// tailOperationLatest is the envelope's operation in latest-version mode, where a create and a
// replace cannot be told apart.
const tailOperationLatest = "upsert"

func envelopeOf(ch feed.Change) tailEnvelope {
	env := tailEnvelope{
		Range:     ch.Range,
		Partition: ch.PartitionID,
		LSN:       ch.LSN,
		Operation: tailOperationLatest,
		Item:      ch.Item,
	}
	if ch.Operation != "" {
		env.Operation = ch.Operation
	}
	if !ch.TS.IsZero() {
		env.TS = ch.TS.UTC().Format(time.RFC3339)
	}
	return env
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

	out := newTailWriter(f.IO, o)
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
		topts.Written = out.written.Load
		topts.Flush = func() { out.flushWithin(tailStopGrace) }
		topts.SaveState = func(st feed.TailState) error {
			st.Database, st.Container, st.ContainerRID = info.Database, info.Container, info.ContainerRID
			return feed.WriteTailState(path, st)
		}
	}
	if showStatus {
		topts.OnStatus = func(s feed.TailStatus) {
			if f.IO.IsStderrTTY {
				out.setStatus(status, fmt.Sprintf("caught up on %d/%d ranges", s.CaughtUp, s.Ranges))
				return
			}
			f.Log.Info("tail status", "ranges", s.Ranges, "caughtUp", s.CaughtUp, "items", s.Items)
		}
	}

	defer tuneGC(f.Getenv)()
	stopFlush := out.startFlusher(tailFlushEvery)
	topts.StopGrace = tailStopGrace
	sum, err := feed.Tail(ctx, src, topts, out.emit)
	stopFlush()
	if ferr := out.close(ctx.Err() != nil); ferr != nil && err == nil {
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
		if errors.Is(err, errTailOutput) {
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

// errTailOutput marks a failure to write to stdout (a closed pipe): the message says so.
var errTailOutput = errors.New("write output")

// tailWriter turns changes into output lines in a buffer that is written out at least every
// tailFlushEvery, so a live tail shows changes promptly and a bulk tail writes big blocks. The
// write to stdout happens outside mu, so a stdout nobody reads never blocks the state saver or
// the shutdown; written counts the changes that reached stdout, for the tail's state.
type tailWriter struct {
	o      *tailOptions
	ios    *render.IOStreams
	styles render.Styles
	ctx    context.Context

	// Lock order: wmu before mu. wmu serialises writes to stdout (held while one blocks); mu
	// guards the buffer, n and the status line, and is never held across a write to stdout.
	wmu     sync.Mutex
	mu      sync.Mutex
	w       *bytes.Buffer // changes not yet written out
	spare   *bytes.Buffer // the buffer being written (under wmu)
	n       int64         // changes put in the buffer so far
	written atomic.Int64  // changes written to stdout
	werr    error         // the first failed write to stdout (under wmu); every later one fails
	line    []byte
	jqOut   bytes.Buffer
	table   bool

	// status is the status line on stderr, redrawn below each change when stdout and stderr
	// share a terminal; statusMsg is its text.
	status    *render.Status
	statusMsg string
}

// tailBufferSize is the output buffer beyond which emit writes it out at once.
const tailBufferSize = 64 << 10

// setStatus shows msg on the status line and keeps it for redrawing.
func (t *tailWriter) setStatus(s *render.Status, msg string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.status, t.statusMsg = s, msg
	s.Update("%s", msg)
}

func newTailWriter(ios *render.IOStreams, o *tailOptions) *tailWriter {
	t := &tailWriter{o: o, ios: ios, styles: ios.Styles(), ctx: context.Background(),
		w: bytes.NewBuffer(make([]byte, 0, tailBufferSize+4096)), spare: bytes.NewBuffer(make([]byte, 0, tailBufferSize+4096)),
		table: o.format == render.FormatTable && o.query == nil}
	if o.format == render.FormatJSON {
		t.w.WriteString("[")
	}
	return t
}

// startFlusher writes the buffer out every d until the returned function is called. stop
// waits for the flusher at most tailStopGrace: it may be blocked on a stdout nobody reads.
func (t *tailWriter) startFlusher(d time.Duration) (stop func()) {
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(d)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				_ = t.drain()
			}
		}
	}()
	return func() {
		close(done)
		grace := time.NewTimer(tailStopGrace)
		defer grace.Stop()
		select {
		case <-stopped:
		case <-grace.C:
		}
	}
}

// drain writes the buffered output to stdout. It must be called without t.mu.
func (t *tailWriter) drain() error {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	if t.werr != nil {
		return t.werr
	}
	t.mu.Lock()
	if t.w.Len() == 0 {
		t.mu.Unlock()
		return nil
	}
	t.w, t.spare = t.spare, t.w
	n, status, msg := t.n, t.status, t.statusMsg
	t.mu.Unlock()
	tty := t.ios.IsStdoutTTY && status != nil
	if tty {
		status.Clear()
	}
	_, err := t.ios.Out.Write(t.spare.Bytes())
	t.spare.Reset()
	if err != nil {
		t.werr = fmt.Errorf("%w: %w", errTailOutput, err)
		return t.werr
	}
	t.written.Store(n)
	if tty {
		status.Update("%s", msg)
	}
	return nil
}

// flushWithin writes the buffered output, waiting at most d for stdout; it reports whether
// everything buffered when it was called reached stdout.
func (t *tailWriter) flushWithin(d time.Duration) bool {
	t.mu.Lock()
	target := t.n
	t.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = t.drain()
	}()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
	}
	return t.written.Load() >= target
}

// emit puts one change in the buffer and writes the buffer out when it is full (or at once on
// a terminal). It is called by feed.Tail one change at a time.
func (t *tailWriter) emit(ch feed.Change) error {
	t.mu.Lock()
	var err error
	if t.o.format == render.FormatJSON && t.o.query == nil {
		if t.n > 0 {
			t.w.WriteByte(',')
		}
		t.w.WriteByte('\n')
	}
	switch {
	case t.o.query != nil:
		var v any = ch.Item
		if t.o.Envelope {
			v = envelopeOf(ch)
		}
		t.jqOut.Reset()
		if err := t.o.query.Run(t.ctx, &t.jqOut, v); err != nil {
			t.mu.Unlock()
			return err
		}
		t.w.Write(t.jqOut.Bytes())
	case t.table:
		t.line = t.appendPretty(t.line[:0], ch)
		t.w.Write(t.line)
	default:
		if t.o.Envelope {
			t.line, err = appendEnvelope(t.line[:0], ch)
		} else {
			t.line, err = appendCompact(t.line[:0], ch.Item)
		}
		if err == nil {
			if t.o.format != render.FormatJSON {
				t.line = append(t.line, '\n')
			}
			t.w.Write(t.line)
		}
	}
	if err != nil {
		t.mu.Unlock()
		return fmt.Errorf("%w: %w", errTailOutput, err)
	}
	t.n++
	full := t.ios.IsStdoutTTY || t.w.Len() >= tailBufferSize
	t.mu.Unlock()
	if full {
		return t.drain()
	}
	return t.writeErr()
}

// writeErr returns the error of a failed write to stdout, if one failed; it does not wait for
// a write in flight.
func (t *tailWriter) writeErr() error {
	if !t.wmu.TryLock() {
		return nil
	}
	defer t.wmu.Unlock()
	return t.werr
}

// close ends the output (the closing bracket of -o json) and writes it out, waiting at most
// tailStopGrace for stdout when the tail was interrupted.
func (t *tailWriter) close(interrupted bool) error {
	t.mu.Lock()
	if t.o.format == render.FormatJSON && t.o.query == nil {
		if t.n > 0 {
			t.w.WriteByte('\n')
		}
		t.w.WriteString("]\n")
	}
	t.mu.Unlock()
	if !interrupted {
		return t.drain()
	}
	if !t.flushWithin(tailStopGrace) {
		if err := t.writeErr(); err != nil {
			return err
		}
		return fmt.Errorf("%w: stdout is blocked", errTailOutput)
	}
	return t.writeErr()
}

// appendCompact appends raw as one line of JSON: as it is when it holds no newline (the feed's
// items are compact), else compacted.
func appendCompact(dst []byte, raw json.RawMessage) ([]byte, error) {
	if bytes.IndexByte(raw, '\n') < 0 && bytes.IndexByte(raw, '\r') < 0 {
		return append(dst, raw...), nil
	}
	buf := bytes.NewBuffer(dst)
	if err := json.Compact(buf, raw); err != nil {
		return dst, fmt.Errorf("change is not valid JSON: %w", err)
	}
	return buf.Bytes(), nil
}

// appendEnvelope appends the envelope of ch without re-encoding the item.
func appendEnvelope(dst []byte, ch feed.Change) ([]byte, error) {
	env := envelopeOf(ch)
	env.Item = nil
	head, err := json.Marshal(env)
	if err != nil {
		return dst, err
	}
	// head ends with `"item":null}`: put the raw item in place of null.
	head = bytes.TrimSuffix(head, []byte(`null}`))
	dst = append(dst, head...)
	dst, err = appendCompact(dst, ch.Item)
	if err != nil {
		return dst, err
	}
	return append(dst, '}'), nil
}

// tailHiddenProperties are the id and the properties the service adds; the terminal preview hides them.
var tailHiddenProperties = map[string]bool{"id": true, "_rid": true, "_self": true, "_etag": true,
	"_attachments": true, "_ts": true, "_lsn": true}

// appendPretty appends the terminal line of a change: time, range, id and a body preview,
// cut to the terminal width. An all-versions change shows its operation before the id and
// previews its current image (nothing for a delete).
func (t *tailWriter) appendPretty(dst []byte, ch feed.Change) []byte {
	var item map[string]json.RawMessage
	var deletedID json.RawMessage
	if ch.Operation != "" {
		var av struct {
			Current  map[string]json.RawMessage `json:"current"`
			Metadata struct {
				ID json.RawMessage `json:"id"`
			} `json:"metadata"`
		}
		_ = json.Unmarshal(ch.Item, &av)
		item, deletedID = av.Current, av.Metadata.ID
	} else {
		_ = json.Unmarshal(ch.Item, &item)
	}
	id := "-"
	raw, ok := item["id"]
	if !ok && deletedID != nil {
		raw, ok = deletedID, true
	}
	if ok {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			id = s
		} else {
			id = string(raw)
		}
	}
	when := "--:--:--"
	if !ch.TS.IsZero() {
		when = ch.TS.Local().Format("15:04:05")
	}
	where := render.RangeText(ch.Range.Min, ch.Range.Max)
	if ch.PartitionID != "" {
		where = "p" + ch.PartitionID
	}
	var preview strings.Builder
	preview.WriteByte('{')
	first := true
	for _, k := range sortedKeys(item) {
		if tailHiddenProperties[k] {
			continue
		}
		if !first {
			preview.WriteByte(',')
		}
		first = false
		kb, _ := json.Marshal(k)
		preview.Write(kb)
		preview.WriteByte(':')
		var c bytes.Buffer
		if json.Compact(&c, item[k]) == nil {
			preview.Write(c.Bytes())
		} else {
			preview.Write(item[k])
		}
		if preview.Len() > t.ios.Width {
			break
		}
	}
	preview.WriteByte('}')
	lsn := fmt.Sprintf("#%d", ch.LSN)
	op := ""
	if ch.Operation != "" {
		op = fmt.Sprintf("%-7s ", ch.Operation)
	}
	used := len(when) + len(where) + len(lsn) + len(op) + len([]rune(id)) + 4
	body := []rune(preview.String())
	if room := t.ios.Width - used - 1; room < len(body) {
		if room < 4 {
			body = nil
		} else {
			body = append(body[:room-1], '…')
		}
	}
	s := t.styles
	switch ch.Operation {
	case feed.OperationCreate:
		op = s.Success.Render(op)
	case feed.OperationDelete:
		op = s.Error.Render(op)
	}
	line := fmt.Sprintf("%s %s %s %s%s %s\n", s.Muted.Render(when), s.Warning.Render(where), s.Muted.Render(lsn),
		op, s.Bold.Render(render.Safe(id)), render.Safe(string(body)))
	return append(dst, line...)
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
