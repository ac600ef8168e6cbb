package cmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/cfp-dev/cfp/internal/account"
	"github.com/cfp-dev/cfp/internal/cosmos"
	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/leases"
	"github.com/cfp-dev/cfp/internal/lineio"
	"github.com/cfp-dev/cfp/internal/render"
)

// Replay timings: a replay is usually the only host of its leases, so it balances and probes
// often; the lease expiration keeps the .NET default.
const (
	replayAcquireInterval = time.Second
	replayProbeInterval   = time.Second
	replayPollInterval    = time.Second
)

type replayOptions struct {
	f        *factory
	From     string
	Until    string
	Fresh    bool
	Cleanup  bool
	Instance string
	MaxItems int
	delegate delegateOptions

	// probeInterval is how often the end of each range is checked (replayProbeInterval when 0).
	probeInterval time.Duration
}

const replayLong = `Re-process a window of a container's history through the same delegates as 'cfp process':
JSON lines on stdout by default, --exec CMD once per batch, or --exec-lines CMD with one child
per lease, with the same --max-retries and --on-error policy.

The window starts at the POSITION argument, in the position grammar of every cfp command,
and ends at --until (default: the moment the replay started, including the rest of that
second):

  beginning          every change still in the feed
  <RFC 3339 time>    the changes since that time, e.g. 2026-01-02T10:00:00Z
  -<duration>        the changes since that long ago, e.g. -2h or -90m
  @<state-file>      each range from its position in a 'cfp tail --save-state' file

(A duration without its sign, 2h, still works as in earlier versions, with a warning.)

The change feed keeps the latest version of each document, so a document changed several
times is delivered once, at its latest version, when that version lies in the window; a
document whose latest change is after --until is not delivered. The window is half-open,
[start, --until), in the whole seconds of each change's _ts, the resolution at which the feed
starts from a time: replaying 10:00 to 11:00 and then 11:00 to 12:00 delivers every change
exactly once.

Every range is read in parallel by a processor host that keeps its progress in leases of its
own, in the lease container, under the processor name

  <-p NAME, or "replay">.replay-<8 hex digits>

where the digits hash the container and the window as typed. The live processor's leases are
never read or written. Interrupted (Ctrl-C, a crash), the same command resumes where the
checkpoints left off, with the window of the first run; --fresh starts over. When every range
has passed the window's end, cfp prints a summary on stderr (items, ranges, elapsed, items/s),
deletes the replay's leases (keep them with --cleanup=false) and exits 0.`

const replayExample = `  # Re-process the last two hours of shop/orders as JSON lines
  cfp replay-from -2h -d shop -c orders > changes.jsonl

  # Replay a morning through the projection's loader, next to the live processor "orders-proj"
  cfp replay-from 2026-01-02T08:00:00Z --until 2026-01-02T12:00:00Z \
    -d shop -c orders -p orders-proj --exec './load.sh'

  # Everything after the positions a tail saved
  cfp tail -d shop -c orders --save-state pos.json -e > /dev/null
  cfp replay-from @pos.json -d shop -c orders`

func newReplayCmd(f *factory) *cobra.Command {
	opts := &replayOptions{f: f}
	c := &cobra.Command{
		Use:     "replay-from POSITION [flags]",
		Short:   "Re-process a window of history through the process delegates",
		Long:    replayLong,
		Example: replayExample,
		Args:    cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if err := f.requireContainer(); err != nil {
				return err
			}
			if err := opts.delegate.validate(c); err != nil {
				return err
			}
			if opts.MaxItems < 0 {
				return usageErrorf("--batch-size must not be negative, got %d", opts.MaxItems)
			}
			opts.From = args[0]
			return runReplay(contextOf(c), opts)
		},
	}
	fs := c.Flags()
	fs.StringVar(&opts.Until, "until", "", "end of the window: now, an RFC 3339 `TIME`, -<duration> or +<duration> (default: the end of the second the replay started in)")
	fs.BoolVar(&opts.Fresh, "fresh", false, "start over: delete the leases of an earlier, interrupted run of the same replay")
	fs.BoolVar(&opts.Cleanup, "cleanup", true, "delete the replay's leases once every range is done")
	fs.StringVar(&opts.Instance, "instance", "", "the replay host's `NAME` in its leases (default <hostname>-replay)")
	fs.IntVar(&opts.MaxItems, "batch-size", 0, "at most `N` changes per batch (0: the service default)")
	opts.delegate.addFlags(c, replayDelegateUsage)
	renameFlag(f, c, "max-items", "batch-size")
	return c
}

// replayRun is the state of one replay.
type replayRun struct {
	o      *replayOptions
	f      *factory
	src    feed.Source
	store  *leases.Store
	window replayWindow
	h      *windowHandler
	status *render.Status
	began  time.Time

	mu     sync.Mutex
	done   map[string]bool // lease tokens whose range is done
	ranges int             // leases seen at the last probe
	splits int
}

func runReplay(ctx context.Context, o *replayOptions) (err error) {
	f := o.f
	now := f.Now()
	from := strings.TrimSpace(o.From)
	if d, derr := time.ParseDuration(from); derr == nil && d > 0 {
		// "2h", the spelling of earlier versions: that long ago.
		f.warnf("replay-from %s is deprecated: use replay-from -%s (see 'cfp help deprecated')", from, from)
		from = "-" + from
	}
	start, state, err := feed.ParseTailFrom(from, now)
	if err != nil {
		return briefUsageErrorf("%w", err)
	}
	if state == nil && start.Kind == feed.StartNow {
		return briefUsageErrorf("replay-from needs a start in the past: beginning, an RFC 3339 time, -<duration> (e.g. -2h) or @state-file")
	}
	if state != nil && len(state.PartitionKey) > 0 {
		return briefUsageErrorf("%s holds the state of a partition-key tail: replay-from replays whole ranges", o.From)
	}
	// By default the window ends when the replay starts, including that whole second: _ts
	// counts whole seconds, and a change written earlier in the same second is history too.
	until := now.Truncate(time.Second).Add(time.Second)
	if o.Until != "" {
		if until, err = feed.ParseUntil(o.Until, now); err != nil {
			return briefUsageErrorf("--until: %w", err)
		}
	}
	if start.Kind == feed.StartTime && !until.After(start.Time) {
		return briefUsageErrorf("the window is empty: --until %s is not after the start %s", until.Format(time.RFC3339), start.Time.Format(time.RFC3339))
	}
	var stateBytes []byte
	if state != nil {
		if stateBytes, err = lineio.ReadFile(strings.TrimPrefix(strings.TrimSpace(o.From), "@"), feed.MaxTailStateFile); err != nil {
			return fmt.Errorf("read tail state: %w", err)
		}
		if start, err = stateStart(state, now); err != nil {
			return briefUsageErrorf("%s: %w", o.From, err)
		}
	}

	acct, err := f.Account(ctx)
	if err != nil {
		return err
	}
	db, coll := f.Global.Database, f.Global.Container
	src := acct.Container(db, coll)
	info, err := src.Info(ctx)
	if err != nil {
		return fmt.Errorf("open monitored container: %w", err)
	}
	if state != nil {
		if err := checkStateContainer(state, strings.TrimPrefix(strings.TrimSpace(o.From), "@"), info); err != nil {
			return err
		}
	}
	store, name, err := replayStore(ctx, f, acct, info, o.From, stateBytes, o.Until)
	if err != nil {
		return err
	}

	r := &replayRun{o: o, f: f, src: src, store: store, status: render.NewStatus(f.IO), began: now, done: map[string]bool{}}
	if o.Fresh {
		if err := store.DeleteAll(ctx); err != nil {
			return fmt.Errorf("start the replay over: %w", err)
		}
	}
	resumed, err := r.prepare(ctx, replayWindow{Start: start, Until: until, State: state})
	if err != nil {
		return err
	}
	verb := "replaying"
	if resumed {
		verb = "resuming replay of"
	}
	r.status.Println("%s %s/%s from %s until %s into %s (leases: processor %s)",
		verb, db, coll, describeStart(r.window, o.From), r.window.Until.UTC().Format(time.RFC3339), o.delegate.describe(), name)

	inner, closeDelegate, err := o.delegate.handler(f, nil)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := closeDelegate(); cerr != nil && err == nil {
			err = fmt.Errorf("close delegate: %w", cerr)
		}
	}()
	r.h = newWindowHandler(inner, r.window.Until)
	finished, err := r.run(ctx)
	elapsed := f.Now().Sub(r.began)
	items := r.h.items.Load()
	rate := 0.0
	if s := elapsed.Seconds(); s > 0 {
		rate = float64(items) / s
	}
	r.mu.Lock()
	ranges := r.ranges
	r.mu.Unlock()
	switch {
	case err != nil:
		r.status.Done("replay stopped after %d items: re-run the same command to resume", items)
		return err
	case !finished:
		r.status.Done("replay interrupted after %d items in %s: re-run the same command to resume", items, elapsed.Round(time.Millisecond))
		return ctx.Err()
	}
	cleanup := "replay leases deleted"
	if o.Cleanup {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), feed.DefaultReleaseTimeout)
		defer cancel()
		if err := store.DeleteAll(cctx); err != nil {
			r.status.Done("")
			return fmt.Errorf("delete the replay's leases: %w", err)
		}
	} else {
		cleanup = "replay leases kept under processor " + name
	}
	r.status.Done("replayed %d items from %d ranges in %s (%.0f items/s); %s", items, ranges, elapsed.Round(time.Millisecond), rate, cleanup)
	return nil
}

// stateStart is the start of the ranges of a state file that have no continuation yet; they
// must agree, since one processor has one start position.
func stateStart(st *feed.TailState, now time.Time) (feed.StartFrom, error) {
	start := feed.StartFrom{Kind: feed.StartBeginning}
	seen := ""
	for _, rs := range st.Ranges {
		if rs.Continuation != "" {
			continue
		}
		if seen != "" && rs.Start != seen {
			return feed.StartFrom{}, fmt.Errorf("ranges without a continuation start at different positions (%s, %s)", seen, rs.Start)
		}
		seen = rs.Start
		s, err := feed.ParseStart(rs.Start, now)
		if err != nil {
			return feed.StartFrom{}, err
		}
		start = s
	}
	return start, nil
}

func describeStart(w replayWindow, from string) string {
	if w.State != nil {
		return from
	}
	if w.Start.Kind == feed.StartTime {
		return w.Start.Time.UTC().Format(time.RFC3339)
	}
	return feed.FormatStart(w.Start)
}

// replayStore opens the lease container (in the lease account) and returns the store of the
// replay's own prefix, which embeds the host of mon, the monitored account, and its processor
// name.
func replayStore(ctx context.Context, f *factory, mon *account.Account, info cosmos.ContainerInfo, from string, state []byte, until string) (*leases.Store, string, error) {
	ldb, lname := f.leaseDatabase(), f.Global.LeaseContainer
	acct, err := f.leaseAccount(ctx)
	if err != nil {
		return nil, "", err
	}
	docs := acct.LeaseDocuments(ldb, lname)
	if _, err := docs.PartitionKeyPath(ctx); err != nil {
		err = fmt.Errorf("open lease container %s/%s: %w", ldb, lname, err)
		if errors.Is(err, leases.ErrNotFound) {
			return nil, "", withHint(err, "the replay keeps its progress in the lease container: create it (cfp process --create-lease-container does) or name another with --lease-container")
		}
		return nil, "", err
	}
	base := f.Global.Processor
	if base == "" {
		base = "replay"
	}
	name := replayName(base, info.Database, info.Container, strings.TrimSpace(from), state, strings.TrimSpace(until))
	prefix := leases.Prefix(name, mon.Host(), info.DatabaseRID, info.ContainerRID)
	if f.Global.LeaseIDPrefix != "" {
		name = replayName(f.Global.LeaseIDPrefix, info.Database, info.Container, strings.TrimSpace(from), state, strings.TrimSpace(until))
		prefix = name
	}
	store := leases.NewStore(docs, prefix, leases.StoreOptions{
		Now: f.Now,
		OnSkip: func(id string, err error) {
			f.Log.Warn("not a lease document, ignored", "id", id, "err", err)
		},
	})
	return store, name, nil
}

// prepare finds the leases of an earlier run (resumed: their window wins) or creates one lease
// per range of the window, with the window in their properties, then marks the store
// initialized so the processor does not bootstrap leases of its own.
func (r *replayRun) prepare(ctx context.Context, w replayWindow) (resumed bool, err error) {
	existing, err := r.store.List(ctx)
	if err != nil {
		return false, err
	}
	if len(existing) > 0 {
		// The same command line gives the same prefix, hence the same state file, if any.
		stored, err := windowOfLeases(existing, r.f.Now())
		if err != nil {
			return false, err
		}
		stored.State = w.State
		w, resumed = stored, true
	}
	r.window = w
	initialized, err := r.store.IsInitialized(ctx)
	if err != nil {
		return false, err
	}
	if initialized {
		return resumed, nil
	}
	var plan []*leases.Lease
	if w.State != nil {
		for _, rs := range w.State.Ranges {
			plan = append(plan, leases.NewDotNetV1(r.store.Prefix(), rs.Range, rs.Continuation, ""))
		}
	} else {
		parts, err := r.src.Partitions(ctx)
		if err != nil {
			return false, fmt.Errorf("list partitions: %w", err)
		}
		for _, p := range parts {
			plan = append(plan, leases.NewDotNetV0(r.store.Prefix(), p.ID, p.Range, ""))
		}
	}
	for _, l := range plan {
		if slices.ContainsFunc(existing, func(e *leases.Lease) bool { return e.Token == l.Token }) {
			continue
		}
		l.Properties = w.properties()
		if _, err := r.store.Create(ctx, l); err != nil && !errors.Is(err, leases.ErrConflict) {
			return false, fmt.Errorf("create replay lease: %w", err)
		}
	}
	if err := r.store.MarkInitialized(ctx); err != nil {
		return false, err
	}
	return resumed, nil
}

// run processes the window until every range is done (true), ctx ends (false) or the
// processor fails.
func (r *replayRun) run(ctx context.Context) (bool, error) {
	o := r.o
	instance := o.Instance
	if instance == "" {
		host, err := os.Hostname()
		if err != nil || host == "" {
			host = "cfp"
		}
		// A stable name: after a crash, the next run takes its leases back at once instead of
		// waiting for them to expire.
		instance = host + "-replay"
	}
	start := r.window.Start
	if start.Kind == feed.StartNow || start.Kind == feed.StartContinuation {
		start = feed.StartFrom{Kind: feed.StartBeginning}
	}
	proc, err := feed.NewProcessor(r.src, r.store, r.h, feed.ProcessorOptions{
		Instance:        instance,
		AcquireInterval: replayAcquireInterval,
		PollInterval:    replayPollInterval,
		MaxItems:        o.MaxItems,
		StartFrom:       start,
		Logger:          r.f.Log,
		Notify: func(e feed.Event) {
			if e.Type == feed.EventSplit {
				r.mu.Lock()
				r.splits++
				r.mu.Unlock()
			}
		},
	})
	if err != nil {
		return false, err
	}
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	var finished bool
	g, gctx := errgroup.WithContext(pctx)
	g.Go(func() error {
		err := proc.Run(gctx)
		stop() // a processor that stopped by itself ends the watch too
		var se *feed.StopError
		if errors.As(err, &se) {
			return fmt.Errorf("replay stopped: %w", se.Err)
		}
		return err
	})
	g.Go(func() error {
		finished = r.watch(gctx)
		if finished {
			stop()
		}
		return nil
	})
	err = g.Wait()
	if err != nil {
		return false, err
	}
	return finished, nil
}

// watch probes the ranges that are not done yet every probe interval and reports progress; it
// returns true once every range is done, false when ctx ends first.
func (r *replayRun) watch(ctx context.Context) bool {
	every := r.o.probeInterval
	if every <= 0 {
		every = replayProbeInterval
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if r.probe(ctx) {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
}

// probe checks every lease not known to be done; it reports whether all are.
func (r *replayRun) probe(ctx context.Context) bool {
	ls, err := r.store.List(ctx)
	if err != nil || len(ls) == 0 {
		if err != nil && ctx.Err() == nil {
			r.f.Log.Warn("list replay leases", "err", err)
		}
		return false
	}
	parts, err := r.src.Partitions(ctx)
	if err != nil {
		if ctx.Err() == nil {
			r.f.Log.Warn("list partitions", "err", err)
		}
		return false
	}
	r.mu.Lock()
	r.ranges = len(ls)
	r.mu.Unlock()
	done := 0
	for _, l := range ls {
		r.mu.Lock()
		known := r.done[l.Token]
		r.mu.Unlock()
		if !known {
			known = r.leaseDone(ctx, parts, l)
		}
		if known {
			done++
			r.mu.Lock()
			r.done[l.Token] = true
			r.mu.Unlock()
		}
	}
	items := r.h.items.Load()
	rate := 0.0
	if s := r.f.Now().Sub(r.began).Seconds(); s > 0 {
		rate = float64(items) / s
	}
	r.status.Update("replaying %s %d/%d ranges done, %d items (%.0f/s)", progressBar(done, len(ls), 20), done, len(ls), items, rate)
	return done == len(ls)
}

// leaseDone probes one lease from the furthest position the replay knows for it.
func (r *replayRun) leaseDone(ctx context.Context, parts []feed.Partition, l *leases.Lease) bool {
	acked, _ := r.h.position(l.Token)
	pos := r.window.Start
	switch {
	case acked != "":
		pos = feed.StartFrom{Kind: feed.StartContinuation, Continuation: acked}
	case l.Continuation != "":
		pos = feed.StartFrom{Kind: feed.StartContinuation, Continuation: l.Continuation}
	case pos.Kind == feed.StartNow || pos.Kind == feed.StartContinuation:
		pos = feed.StartFrom{Kind: feed.StartBeginning}
	}
	done, err := rangeDone(ctx, r.src, parts, l, pos, r.window.Until, r.f.Now)
	if err != nil && ctx.Err() == nil {
		r.f.Log.Debug("probe replay lease", "lease", l.Token, "err", err)
	}
	return done
}

// progressBar draws done out of total as a bar of width cells: "[#######-------------]".
func progressBar(done, total, width int) string {
	n := 0
	if total > 0 {
		n = min(width, done*width/total)
	}
	return "[" + strings.Repeat("#", n) + strings.Repeat("-", width-n) + "]"
}
