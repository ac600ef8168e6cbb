package cosmos

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
)

// TestTail_SkipInAMergedPartitionSurvivesASplit: a state saved between two changes that share an
// LSN in a merged partition (a skip), resumed after that partition split, loses nothing and
// re-delivers at most the skipped changes: the count alone does not say which child holds the
// changes already delivered, so the children start just before that LSN (the TailState contract).
func TestTail_SkipInAMergedPartitionSurvivesASplit(t *testing.T) {
	t.Parallel()
	a := openLocal(t, 2)
	c := newFeedContainer(t, a)
	want := upsert(t, c, somePKs, 0, 40)
	if _, err := a.Emulator().Merge("db", "orders", []string{"0", "1"}); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	var saved feed.TailState
	emit := func(ch feed.Change) error { seen[idOf(ch.Item)]++; return nil }
	opts := feed.TailOptions{Start: feed.StartFrom{Kind: feed.StartBeginning}, MaxItems: 3, Poll: time.Millisecond,
		SaveState: func(s feed.TailState) error { saved = s; return nil }}
	if _, err := feed.Tail(context.Background(), c, opts, emit); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(saved)
	t.Logf("state %s", b)
	parts := partitions(t, c)
	if _, err := a.Emulator().Split("db", "orders", parts[0].ID); err != nil {
		t.Fatal(err)
	}
	var st feed.TailState
	_ = json.Unmarshal(b, &st)
	if _, err := feed.Tail(context.Background(), c, feed.TailOptions{State: &st, ExitAtEnd: true, Poll: time.Millisecond}, emit); err != nil {
		t.Fatal(err)
	}
	skip := 0
	for _, r := range saved.Ranges {
		skip += r.Skip
	}
	if skip == 0 {
		t.Fatalf("state %s has no skip: the test no longer stops between changes sharing an LSN", b)
	}
	again := 0
	for _, id := range want {
		switch n := seen[id]; {
		case n == 0:
			t.Errorf("%s lost", id)
		case n > 1:
			again += n - 1
		}
	}
	if again > skip {
		t.Errorf("%d changes delivered again, more than the state's skip %d", again, skip)
	}
}
