package feed_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/feed/feedtest"
)

// avOpts are tail options in all-versions mode that stop when caught up.
func avOpts(clock *feedtest.Clock) feed.TailOptions {
	opts := fastOpts(clock)
	opts.Mode = feed.AllVersionsAndDeletes
	opts.Start = feed.StartFrom{Kind: feed.StartNow}
	opts.ExitAtEnd = true
	return opts
}

// opsOf renders changes as "op id@lsn".
func opsOf(t *testing.T, chs []feed.Change) string {
	t.Helper()
	var s []string
	for _, ch := range chs {
		s = append(s, fmt.Sprintf("%s %s@%d", ch.Operation, avID(t, ch), ch.LSN))
	}
	return strings.Join(s, ", ")
}

// avID is the id of an all-versions change: current.id, or metadata.id for a delete.
func avID(t *testing.T, ch feed.Change) string {
	t.Helper()
	var v struct {
		Current struct {
			ID string `json:"id"`
		} `json:"current"`
		Metadata struct {
			ID string `json:"id"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(ch.Item, &v); err != nil {
		t.Fatalf("change %s: %v", ch.Item, err)
	}
	if v.Current.ID != "" {
		return v.Current.ID
	}
	return v.Metadata.ID
}

func TestTail_AllVersions_CreateReplaceDeleteFromNow(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		clock := feedtest.NewClock(t0)
		src := feedtest.NewMemSource(1, feedtest.WithClock(clock.Now))
		write(t, src, "a", "old") // before the tail starts: never delivered
		opts := avOpts(clock)
		sum, err := feed.Tail(context.Background(), src, opts, func(feed.Change) error { return errors.New("nothing is new yet") })
		if err != nil {
			t.Fatal(err)
		}
		if sum.State.Mode != "all-versions" || sum.State.Ranges[0].Continuation != `"1"` {
			t.Fatalf("state from now = %+v", sum.State)
		}

		clock.Advance(time.Minute)
		write(t, src, "a", "x")
		write(t, src, "a", "x")
		if err := src.Delete("a", "x"); err != nil {
			t.Fatal(err)
		}
		opts.State = &sum.State
		var c collector
		if _, err := feed.Tail(context.Background(), src, opts, c.emit); err != nil {
			t.Fatal(err)
		}
		if got, want := opsOf(t, c.changes), "create x@2, replace x@3, delete x@4"; got != want {
			t.Fatalf("changes: %s, want %s", got, want)
		}
		for _, ch := range c.changes {
			if !ch.TS.Equal(t0.Add(time.Minute)) || ch.PartitionID != "0" {
				t.Errorf("%s: ts %v partition %q, want the crts %v in partition 0", ch.Operation, ch.TS, ch.PartitionID, t0.Add(time.Minute))
			}
		}
	})
}

func TestTail_AllVersions_MaxItemsResumesAtTheNextOperation(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		clock := feedtest.NewClock(t0)
		src := feedtest.NewMemSource(1, feedtest.WithClock(clock.Now))
		opts := avOpts(clock)
		sum, err := feed.Tail(context.Background(), src, opts, func(feed.Change) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		write(t, src, "a", "x")
		write(t, src, "a", "x")
		write(t, src, "a", "x")
		if err := src.Delete("a", "x"); err != nil {
			t.Fatal(err)
		}
		// Two of four operations from one page, then the rest from the saved position.
		opts.State, opts.MaxItems = &sum.State, 2
		var first, rest collector
		sum, err = feed.Tail(context.Background(), src, opts, first.emit)
		if err != nil || sum.Reason != feed.TailStopMaxItems {
			t.Fatalf("first run: %v, %+v", err, sum)
		}
		opts.State, opts.MaxItems = &sum.State, 0
		if _, err := feed.Tail(context.Background(), src, opts, rest.emit); err != nil {
			t.Fatal(err)
		}
		if got := opsOf(t, first.changes) + " | " + opsOf(t, rest.changes); got != "create x@1, replace x@2 | replace x@3, delete x@4" {
			t.Fatalf("runs: %s", got)
		}
	})
}

func TestTail_AllVersions_RefusesBeginningTimeAndOtherModesState(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		clock := feedtest.NewClock(t0)
		src := feedtest.NewMemSource(2, feedtest.WithClock(clock.Now))
		latest := fastOpts(clock)
		latest.ExitAtEnd = true
		latestSum, err := feed.Tail(context.Background(), src, latest, func(feed.Change) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name  string
			start feed.StartFrom
			state *feed.TailState
			want  string
		}{
			{"beginning", feed.StartFrom{Kind: feed.StartBeginning}, nil, "start from beginning"},
			{"time", feed.StartFrom{Kind: feed.StartTime, Time: t0}, nil, "start from 2026-11-30T12:00:00Z"},
			{"latest state", feed.StartFrom{}, &latestSum.State, "written in latest mode"},
			{"state from the beginning", feed.StartFrom{}, &feed.TailState{Version: feed.TailStateVersion, Mode: "all-versions",
				Ranges: []feed.RangeState{{PartitionID: "0", Range: feed.Range{Max: "FF"}, Start: "beginning"}}}, "starts from beginning"},
		} {
			opts := avOpts(clock)
			opts.Start, opts.State = tc.start, tc.state
			_, err := feed.Tail(context.Background(), src, opts, func(feed.Change) error { return nil })
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: %v, want an error mentioning %q", tc.name, err, tc.want)
			}
			if tc.state == nil && !errors.Is(err, feed.ErrAllVersionsStart) {
				t.Errorf("%s: %v is not ErrAllVersionsStart", tc.name, err)
			}
		}
		// A latest-version tail never sees the delete, an all-versions tail does.
		write(t, src, "a", "gone")
		if err := src.Delete("a", "gone"); err != nil {
			t.Fatal(err)
		}
		latest.State = &latestSum.State
		var c collector
		if _, err := feed.Tail(context.Background(), src, latest, c.emit); err != nil || len(c.changes) != 0 {
			t.Fatalf("latest-version tail after a create and delete: %v, %d changes", err, len(c.changes))
		}
	})
}
