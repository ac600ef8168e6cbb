package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/cfp-dev/cfp/internal/account"
	"github.com/cfp-dev/cfp/internal/cosmos"
	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/leases"
	"github.com/cfp-dev/cfp/internal/lineio"
	"github.com/cfp-dev/cfp/internal/render"
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
}

const replayLong = `Re-process a window of a container's history through the same delegates as 'cfp process':
JSON lines on stdout by default, --exec CMD once per batch, or --exec-lines CMD with one child
per lease, with the same --delegate-retries and --on-error policy.

The window starts at the POSITION argument, in the position grammar of every cfp command,
and ends at --until (default: the moment the replay started, including the rest of that
second):

  beginning          every change still in the feed
  <RFC 3339 time>    the changes since that time, e.g. 2026-01-02T10:00:00Z
  -<duration>        the changes since that long ago, e.g. -2h or -90m
  @<state-file>      each range from its position in a 'cfp tail --save-state' file

(A duration without its sign, 2h, still works as in earlier versions, with a warning.)

[details]

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
deletes the replay's leases (keep them with --cleanup=false) and exits 0. A replay whose
stdout its reader closes ('| head') ends there too, exit 0: it deletes its leases, so the same
command starts over (with --cleanup=false it keeps them, and the same command resumes).`

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
	// --max-retries is also the global retry count of 429/503 requests: one meaning per name.
	renameFlag(f, c, "max-retries", "delegate-retries")
	return c
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
		if start, err = feed.StateStart(state, now); err != nil {
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
	// A reader that stops early (| head) closes stdout: the replay ends there instead of
	// dying of SIGPIPE with its leases left behind for a "resume" nobody asked for.
	rctx, cancelReplay := context.WithCancel(ctx)
	defer cancelReplay()
	var outputClosed atomic.Bool
	if o.delegate.Exec == "" && o.delegate.ExecLines == "" {
		stopPipe := notifyClosedPipe()
		defer stopPipe()
		out := f.IO.Out
		f.IO.Out = &closedPipeWriter{w: out, closed: func() {
			outputClosed.Store(true)
			cancelReplay()
		}}
		defer func() { f.IO.Out = out }()
	}
	inner, closeDelegate, err := o.delegate.handler(f, nil)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := closeDelegate(); cerr != nil && err == nil {
			err = fmt.Errorf("close delegate: %w", cerr)
		}
	}()

	status := render.NewStatus(f.IO)
	rate := func(items int64) float64 {
		if s := f.Now().Sub(now).Seconds(); s > 0 {
			return float64(items) / s
		}
		return 0
	}
	started := false
	var window feed.ReplayWindow
	res, err := feed.Replay(rctx, src, store, feed.ReplayOptions{
		Window:   feed.ReplayWindow{Start: start, Until: until, State: state},
		Handler:  inner,
		Instance: replayInstance(o.Instance),
		Fresh:    o.Fresh,
		Cleanup:  o.Cleanup,
		MaxItems: o.MaxItems,
		Now:      f.Now,
		Logger:   f.Log,
		Started: func(w feed.ReplayWindow, resumed bool) {
			started, window = true, w
			verb := "replaying"
			if resumed {
				verb = "resuming replay of"
			}
			status.Println("%s %s/%s from %s until %s into %s (leases: processor %s)",
				verb, db, coll, describeStart(w, o.From), w.Until.UTC().Format(time.RFC3339), o.delegate.describe(), name)
		},
		Progress: func(p feed.ReplayProgress) {
			status.Update("replaying %s, %d items (%.0f/s), %d/%d ranges done", replayCovered(window, p.Covered), p.Items, rate(p.Items), p.Done, p.Ranges)
		},
	})
	elapsed := f.Now().Sub(now)
	switch {
	case outputClosed.Load() && ctx.Err() == nil && started:
		return endOnClosedOutput(ctx, status, store, o.Cleanup, res.Items, name)
	case err != nil && !started:
		return err
	case err != nil && res.Finished:
		status.Done("")
		return err
	case err != nil:
		status.Done("replay stopped after %d items: re-run the same command to resume", res.Items)
		return err
	case !res.Finished:
		status.Done("replay interrupted after %d items in %s: re-run the same command to resume", res.Items, elapsed.Round(time.Millisecond))
		return ctx.Err()
	}
	cleanup := "replay leases deleted"
	if !o.Cleanup {
		cleanup = "replay leases kept under processor " + name
	}
	status.Done("replayed %d items from %d ranges in %s (%.0f items/s); %s", res.Items, res.Ranges, elapsed.Round(time.Millisecond), rate(res.Items), cleanup)
	return nil
}

// endOnClosedOutput ends a replay whose stdout was closed by its reader: with --cleanup (the
// default) its leases are deleted, so the same command starts over; with --cleanup=false they
// are kept and the same command resumes. Either way the message says which.
func endOnClosedOutput(ctx context.Context, status *render.Status, store *leases.Store, cleanup bool, items int64, name string) error {
	if !cleanup {
		status.Done("replay ended after %d items: its output was closed; leases kept under processor %s, re-run the same command to resume", items, name)
		return nil
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), feed.DefaultReleaseTimeout)
	defer cancel()
	if err := store.DeleteAll(cctx); err != nil {
		status.Done("")
		return fmt.Errorf("replay output closed after %d items; delete the replay's leases: %w", items, err)
	}
	status.Done("replay ended after %d items: its output was closed; replay leases deleted, so the same command starts over (--cleanup=false keeps them to resume)", items)
	return nil
}

// closedPipeWriter calls closed once a write fails because the reader closed the pipe, and
// makes that failure a feed.Stop: retrying a write nobody reads only waits out the backoff
// with a warning per attempt.
type closedPipeWriter struct {
	w      io.Writer
	closed func()
}

func (c *closedPipeWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	if errors.Is(err, syscall.EPIPE) {
		c.closed()
		err = feed.Stop(err)
	}
	return n, err
}

// notifyClosedPipe makes a write to a closed stdout fail with EPIPE instead of killing cfp
// with SIGPIPE, until the returned function is called. (Notify, unlike Ignore, is not
// inherited by the --exec children.)
func notifyClosedPipe() func() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGPIPE)
	return func() { signal.Stop(ch) }
}

// replayInstance is the replay host's name: --instance, else "<hostname>-replay", a stable
// name, so that after a crash the next run takes its leases back at once instead of waiting
// for them to expire.
func replayInstance(flag string) string {
	if flag != "" {
		return flag
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "cfp"
	}
	return host + "-replay"
}

// describeStart says where the window starts: the state file as typed, or the start time.
func describeStart(w feed.ReplayWindow, from string) string {
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
	base := f.Global.Processor
	if base == "" {
		base = "replay"
	}
	name := feed.ReplayName(base, info.Database, info.Container, strings.TrimSpace(from), state, strings.TrimSpace(until))
	explicit := ""
	if f.Global.LeaseIDPrefix != "" {
		name = feed.ReplayName(f.Global.LeaseIDPrefix, info.Database, info.Container, strings.TrimSpace(from), state, strings.TrimSpace(until))
		explicit = name
	}
	store, err := cosmos.OpenLeaseSet(ctx, cosmos.LeaseSet{
		Monitored: mon.Account, Info: info, Leases: acct.Account, Database: ldb, Container: lname,
		Processor: name, Explicit: explicit,
		Store: leases.StoreOptions{Now: f.Now, OnSkip: func(id string, err error) {
			f.Log.Warn("not a lease document, ignored", "id", id, "err", err)
		}},
	})
	if err != nil {
		if errors.Is(err, leases.ErrNotFound) {
			return nil, "", withHint(err, "the replay keeps its progress in the lease container: create it (cfp process --create-lease-container does) or name another with --lease-container")
		}
		return nil, "", err
	}
	return store, name, nil
}

// replayCovered describes how much of the window's time a replay has covered: a bar and the
// share of the window when it starts at a time, and the time reached ("-" before every range
// delivered something from a window that starts at the beginning).
func replayCovered(w feed.ReplayWindow, covered time.Time) string {
	if covered.IsZero() {
		return "up to -"
	}
	at := covered.UTC().Format(time.RFC3339)
	if w.Until.Sub(covered) < 24*time.Hour {
		at = covered.UTC().Format(time.TimeOnly)
	}
	if w.Start.Kind != feed.StartTime || !w.Until.After(w.Start.Time) {
		return "up to " + at
	}
	pct := int(100 * covered.Sub(w.Start.Time) / w.Until.Sub(w.Start.Time))
	pct = max(0, min(100, pct))
	return fmt.Sprintf("%s %3d%% up to %s", progressBar(pct, 100, 10), pct, at)
}

// progressBar draws done out of total as a bar of width cells: "[#######-------------]".
func progressBar(done, total, width int) string {
	n := 0
	if total > 0 {
		n = min(width, done*width/total)
	}
	return "[" + strings.Repeat("#", n) + strings.Repeat("-", width-n) + "]"
}
