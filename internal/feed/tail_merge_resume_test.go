package feed_test

import (
	"context"
	"encoding/json"
	"testing"
	"testing/synctest"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/feed/feedtest"
)

// TestTail_MaxItemsResumeInAMergedPartitionRepeatsNothing: after a merge, the merged partition
// holds both parents' changes with their own LSNs, so two changes can share one LSN. A tail -n
// that stops between two such changes, resumed from its state, repeats neither (it resumed just
// before the shared LSN and printed the first one again) and loses neither.
func TestTail_MaxItemsResumeInAMergedPartitionRepeatsNothing(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		for _, n := range []int64{1, 3, 7, 10, 19} {
			clock := feedtest.NewClock(t0)
			src := feedtest.NewMemSource(2, feedtest.WithClock(clock.Now), feedtest.WithPageSize(100))
			want := fill(t, src, 0, 40)
			if _, err := src.Merge("0", "1"); err != nil {
				t.Fatal(err)
			}
			opts := fastOpts(clock)
			opts.MaxItems = n
			var saved []feed.TailState
			opts.SaveState = func(s feed.TailState) error { saved = append(saved, s); return nil }
			var first collector
			if _, err := feed.Tail(context.Background(), src, opts, first.emit); err != nil {
				t.Fatal(err)
			}
			if len(saved) == 0 {
				t.Fatal("state not saved on exit")
			}
			b, err := json.Marshal(saved[len(saved)-1])
			if err != nil {
				t.Fatal(err)
			}
			var st feed.TailState
			if err := json.Unmarshal(b, &st); err != nil {
				t.Fatal(err)
			}
			opts = fastOpts(clock)
			opts.State = &st
			opts.ExitAtEnd = true
			var second collector
			if _, err := feed.Tail(context.Background(), src, opts, second.emit); err != nil {
				t.Fatal(err)
			}
			got := append(first.ids(t), second.ids(t)...)
			if len(got) != len(want) {
				t.Errorf("-n %d then resume: %d changes, want %d (state %s)", n, len(got), len(want), b)
			}
			sameSet(t, got, want)
		}
	})
}
