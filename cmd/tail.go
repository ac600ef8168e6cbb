package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"time"

	"github.com/cfp-dev/cfp/internal/cosmos"
	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/render"
)

// checkStateContainer refuses a state file written for another container (feed's
// TailState.CheckContainer) as a usage error.
func checkStateContainer(st *feed.TailState, file string, info cosmos.ContainerInfo) error {
	if err := st.CheckContainer(info.Database, info.Container, info.ContainerRID); err != nil {
		return briefUsageErrorf("state file %s %w", file, err)
	}
	return nil
}

// checkPartitionKeyComponents refuses a --partition-key whose number of components is not the
// container's number of partition key paths (feed.CheckPartitionKeyComponents).
func checkPartitionKeyComponents(ctx context.Context, c *cosmos.Container, pk json.RawMessage) error {
	info, err := c.Info(ctx)
	if err != nil {
		return err
	}
	err = feed.CheckPartitionKeyComponents(pk, info.Database+"/"+info.Container, info.PartitionKeyPaths)
	if ae := (*feed.PartitionKeyArityError)(nil); errors.As(err, &ae) {
		return briefUsageErrorf("invalid --partition-key %s: %w", pk, err)
	}
	return err
}

func runTail(ctx context.Context, o *tailOptions) error {
	f := o.f
	acct, err := f.Account(ctx)
	if err != nil {
		return err
	}
	src := acct.Container(f.Global.Database, f.Global.Container)
	if o.Lease != "" {
		if err := o.resolveLease(ctx); err != nil {
			return err
		}
	}
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
	topts.ReuseItems = true // every printer copies the change into its output buffer (render.ChangeWriter.Emit)
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

// resolveLease narrows the tail to the range of the processor's lease --lease and, unless
// --from was given, starts it at the lease's checkpoint.
func (o *tailOptions) resolveLease(ctx context.Context) error {
	f := o.f
	t, err := f.openLeaseTarget(ctx, true)
	if err != nil {
		return err
	}
	all, err := t.store().List(ctx)
	if err != nil {
		return err
	}
	if len(all) == 0 {
		return t.noLeases(ctx, f)
	}
	ls, err := selectLeases(all, []string{o.Lease})
	if err != nil {
		return err
	}
	l := ls[0]
	rng := l.Range
	if !l.HasRange() {
		parts, err := t.partitions(ctx)
		if err != nil {
			return err
		}
		rt, err := feed.Route(l, parts)
		if err != nil {
			return fmt.Errorf("lease %s: %w", l.Token, err)
		}
		rng = rt.Partition.Range
	}
	o.rng = &rng
	if !o.fromSet {
		if l.Continuation == "" {
			return briefUsageErrorf("lease %s has no checkpoint yet: say where to start with --from", l.Token)
		}
		o.start = feed.StartFrom{Kind: feed.StartContinuation, Continuation: l.Continuation}
	}
	return nil
}
