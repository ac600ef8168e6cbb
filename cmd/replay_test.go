package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/internal/account"
	"github.com/cfp-dev/cfp/internal/cosmos"
	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/render"
)

func TestProgressBar(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		done, total int
		want        string
	}{
		{0, 4, "[----]"}, {1, 4, "[#---]"}, {4, 4, "[####]"}, {5, 4, "[####]"}, {0, 0, "[----]"},
	} {
		if got := progressBar(tt.done, tt.total, 4); got != tt.want {
			t.Errorf("progressBar(%d, %d) = %q, want %q", tt.done, tt.total, got, tt.want)
		}
	}
}

// TestReplayCovered: the replay's status line shows the share of the window's time covered,
// not ranges done (which sat at 0/4 until the very end).
func TestReplayCovered(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 1, 2, 8, 0, 0, 0, time.UTC)
	until := start.Add(4 * time.Hour)
	timed := feed.ReplayWindow{Start: feed.StartFrom{Kind: feed.StartTime, Time: start}, Until: until}
	all := feed.ReplayWindow{Start: feed.StartFrom{Kind: feed.StartBeginning}, Until: until}
	for _, tt := range []struct {
		w       feed.ReplayWindow
		covered time.Time
		want    string
	}{
		{timed, start, "[----------]   0% up to 08:00:00"},
		{timed, start.Add(time.Hour), "[##--------]  25% up to 09:00:00"},
		{timed, until, "[##########] 100% up to 12:00:00"},
		{all, time.Time{}, "up to -"},
		{all, start.Add(3 * time.Hour), "up to 11:00:00"},
		{all, start.Add(-48 * time.Hour), "up to 2025-12-31T08:00:00Z"},
	} {
		if got := replayCovered(tt.w, tt.covered); got != tt.want {
			t.Errorf("replayCovered(%v, %v) = %q, want %q", tt.w.Start.Kind, tt.covered, got, tt.want)
		}
	}
}

// replayFixture is a local account directory with shop/orders (4 partitions) and shop/leases.
type replayFixture struct {
	dir string
}

func (fx replayFixture) open(t *testing.T) (*account.Account, *cosmos.Container) {
	t.Helper()
	acct := openLocal(t, fx.dir, 4)
	return acct, acct.Container("shop", "orders")
}

func newReplayFixture(t *testing.T) replayFixture {
	t.Helper()
	fx := replayFixture{dir: t.TempDir()}
	acct, _ := fx.open(t)
	defer acct.Close()
	for _, c := range []string{"orders", "leases"} {
		createContainer(t, acct, "shop", c, "/id")
	}
	return fx
}

func upsertDocs(t *testing.T, c *cosmos.Container, ids []string, version int) {
	t.Helper()
	for _, id := range ids {
		if err := c.UpsertItem(context.Background(), id, fmt.Appendf(nil, `{"id":%q,"v":%d}`, id, version)); err != nil {
			t.Fatal(err)
		}
	}
}

// nextSecond sleeps into the next second of the clock (_ts counts whole seconds).
func nextSecond() {
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + 50*time.Millisecond)))
}

func docIDs(prefix string, from, to int) []string {
	var out []string
	for i := from; i <= to; i++ {
		out = append(out, fmt.Sprintf("%s%02d", prefix, i))
	}
	return out
}

// leaseDocBodies returns the raw documents of the lease container whose id starts with prefix.
func leaseDocBodies(t *testing.T, acct *account.Account, prefix string) map[string]string {
	t.Helper()
	docs, err := acct.LeaseDocuments("shop", "leases").QueryPrefix(context.Background(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, d := range docs {
		out[d.ID] = string(d.Body)
	}
	return out
}

// runInProcess runs cfp in process with no environment and returns its exit code and output.
func runInProcess(ctx context.Context, args ...string) (int, string, string) {
	ios, _, out, errOut := render.Test()
	code := MainWithIO(ctx, args, ios, func(string) string { return "" })
	return code, out.String(), errOut.String()
}

// replayDelivered returns id -> version of the JSON lines of a replay's stdout, failing on a
// document delivered twice.
func replayDelivered(t *testing.T, stdout string) map[string]int {
	t.Helper()
	got := map[string]int{}
	for line := range strings.Lines(stdout) {
		var v struct {
			ID string `json:"id"`
			V  int    `json:"v"`
		}
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("not a JSON line: %q: %v", line, err)
		}
		if _, dup := got[v.ID]; dup {
			t.Errorf("%s delivered twice", v.ID)
		}
		got[v.ID] = v.V
	}
	return got
}

func TestReplay_ExactWindowAndLiveLeasesUntouched(t *testing.T) {
	t.Parallel()
	fx := newReplayFixture(t)
	ctx := context.Background()

	// Window 1: a01..a12; then, after its end, b01..b08 and new versions of a01..a03.
	acct, orders := fx.open(t)
	upsertDocs(t, orders, docIDs("a", 1, 12), 1)
	nextSecond() // the end is in a later second than every a: the window is [start, end)
	end := time.Now().UTC()
	upsertDocs(t, orders, docIDs("b", 1, 8), 1)
	upsertDocs(t, orders, docIDs("a", 1, 3), 2)

	// A live processor "live" processes everything and stops: its leases have checkpoints.
	store := processorStore(t, acct, orders, "live")
	var mu sync.Mutex
	seen := map[string]bool{}
	pctx, stop := context.WithCancel(ctx)
	proc, err := feed.NewProcessor(orders, store, feed.HandlerFunc(func(_ context.Context, b feed.Batch) error {
		mu.Lock()
		defer mu.Unlock()
		for _, it := range b.Items {
			var v struct{ ID string }
			_ = json.Unmarshal(it, &v)
			seen[v.ID] = true
		}
		if len(seen) == 20 {
			stop()
		}
		return nil
	}), feed.ProcessorOptions{Instance: "live-1", StartFrom: feed.StartFrom{Kind: feed.StartBeginning},
		AcquireInterval: 200 * time.Millisecond, PollInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	runDone := make(chan error, 1)
	go func() { runDone <- proc.Run(pctx) }()
	select {
	case err := <-runDone:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		stop()
		t.Fatalf("live processor saw %d of 20 documents", len(seen))
	}
	stop()
	before := leaseDocBodies(t, acct, "live")
	if len(before) < 5 { // four leases and the .info marker
		t.Fatalf("live lease documents: %v", slices.Collect(maps.Keys(before)))
	}
	if err := acct.Close(); err != nil {
		t.Fatal(err)
	}

	endText := end.Format(time.RFC3339Nano)
	code, stdout, stderr := runInProcess(ctx, "--local="+fx.dir, "replay-from", "beginning", "--until", endText,
		"-d", "shop", "-c", "orders", "-p", "live")
	if code != 0 {
		t.Fatalf("replay exited %d: %s", code, stderr)
	}
	got := replayDelivered(t, stdout)
	want := map[string]int{}
	for _, id := range docIDs("a", 4, 12) {
		want[id] = 1 // a01..a03 changed after the window: the feed holds only their later version
	}
	if !maps.Equal(got, want) {
		t.Errorf("replay of the first window delivered %v, want %v", got, want)
	}
	if !strings.Contains(stderr, "replayed 9 items from 4 ranges") {
		t.Errorf("summary missing: %s", stderr)
	}

	// The rest of history: from the end of the first window to now.
	code, stdout, stderr = runInProcess(ctx, "--local="+fx.dir, "replay-from", endText, "-d", "shop", "-c", "orders", "-p", "live")
	if code != 0 {
		t.Fatalf("second replay exited %d: %s", code, stderr)
	}
	got = replayDelivered(t, stdout)
	want = map[string]int{}
	for _, id := range docIDs("b", 1, 8) {
		want[id] = 1
	}
	for _, id := range docIDs("a", 1, 3) {
		want[id] = 2
	}
	if !maps.Equal(got, want) {
		t.Errorf("replay of the second window delivered %v, want %v", got, want)
	}

	acct, _ = fx.open(t)
	defer acct.Close()
	after := leaseDocBodies(t, acct, "live")
	for id := range after {
		if strings.Contains(id, ".replay-") {
			delete(after, id) // cleaned up below; only the live prefix must be identical
		}
	}
	if !maps.Equal(before, after) {
		t.Errorf("the live processor's lease documents changed:\nbefore %v\nafter  %v", before, after)
	}
	if left := leaseDocBodies(t, acct, "live.replay-"); len(left) > 0 {
		t.Errorf("finished replays left leases behind: %v", slices.Collect(maps.Keys(left)))
	}
}

func TestReplay_CleanupFalseKeepsLeasesAndFreshStartsOver(t *testing.T) {
	t.Parallel()
	fx := newReplayFixture(t)
	ctx := context.Background()
	acct, orders := fx.open(t)
	upsertDocs(t, orders, docIDs("a", 1, 6), 1)
	if err := acct.Close(); err != nil {
		t.Fatal(err)
	}
	nextSecond() // the window ends before the current second
	args := []string{"--local=" + fx.dir, "replay-from", "beginning", "--until", "now", "-d", "shop", "-c", "orders", "--cleanup=false"}
	code, stdout, stderr := runInProcess(ctx, args...)
	if code != 0 || len(replayDelivered(t, stdout)) != 6 {
		t.Fatalf("first replay exited %d with %q: %s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "replay leases kept under processor replay.replay-") {
		t.Errorf("stderr does not say where the leases are: %s", stderr)
	}
	// Run again: the kept leases are past the window, so nothing comes again ...
	code, stdout, stderr = runInProcess(ctx, args...)
	if code != 0 || stdout != "" || !strings.Contains(stderr, "resuming replay") {
		t.Fatalf("re-run exited %d with %q: %s", code, stdout, stderr)
	}
	// ... unless --fresh.
	code, stdout, stderr = runInProcess(ctx, append(args, "--fresh")...)
	if code != 0 || len(replayDelivered(t, stdout)) != 6 {
		t.Fatalf("--fresh exited %d with %q: %s", code, stdout, stderr)
	}
}

func TestReplay_UsageErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"replay-from", "now", "-d", "shop", "-c", "orders", "--local=x"}, "needs a start in the past"},
		{[]string{"replay-from", "1h", "--until", "-2h", "-d", "shop", "-c", "orders", "--local=x"}, "the window is empty"},
		{[]string{"replay-from", "1h", "--local=x"}, "no container given"},
		{[]string{"replay-from", "-d", "shop", "-c", "orders", "--local=x"}, "accepts 1 arg"},
		{[]string{"replay-from", "-d", "shop", "-c", "orders", "--on-error", "dead-letter", "--local=x", "--", "-1h"}, "needs --dead-letter FILE"},
	} {
		code, _, stderr := runInProcess(context.Background(), tt.args...)
		if code != 2 || !strings.Contains(stderr, tt.want) {
			t.Errorf("cfp %s: exit %d, stderr %q; want 2 and %q", strings.Join(tt.args, " "), code, stderr, tt.want)
		}
	}
}

func TestReplayHelp_DocumentsThePrefix(t *testing.T) {
	t.Parallel()
	// The full description: 'cfp replay-from --help' is its first screen.
	code, stdout, _ := runInProcess(context.Background(), "help", "replay-from")
	if code != 0 {
		t.Fatalf("help exited %d", code)
	}
	for _, want := range []string{".replay-<8 hex digits>", "--fresh", "--cleanup", "--exec-lines", "--until", "Examples:"} {
		if !bytes.Contains([]byte(stdout), []byte(want)) {
			t.Errorf("replay-from --help lacks %q", want)
		}
	}
}

// Without --until the window ends when the replay starts, and changes of that same second
// belong to it: _ts counts whole seconds, so a replay started right after a write must still
// deliver it (it delivered nothing when the end was truncated to the current second).
func TestReplay_DefaultUntilIncludesTheCurrentSecond(t *testing.T) {
	t.Parallel()
	fx := newReplayFixture(t)
	nextSecond() // write and replay well inside one second
	acct, orders := fx.open(t)
	upsertDocs(t, orders, docIDs("n", 1, 3), 1)
	if err := acct.Close(); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runInProcess(context.Background(), "--local="+fx.dir, "replay-from", "beginning",
		"-d", "shop", "-c", "orders", "-p", "now")
	if code != 0 {
		t.Fatalf("replay exited %d: %s", code, stderr)
	}
	want := map[string]int{"n01": 1, "n02": 1, "n03": 1}
	if got := replayDelivered(t, stdout); !maps.Equal(got, want) {
		t.Errorf("replay delivered %v, want %v", got, want)
	}
}
