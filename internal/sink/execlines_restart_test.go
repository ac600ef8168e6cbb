package sink

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/leases"
)

// crashOnSecondBatch is an ExecLines child that logs every message to $LOG, answers batches
// with checkpoint, and crashes on its second batch unless a child crashed already.
const crashOnSecondBatch = `
n=0
while IFS= read -r line; do
  printf '%s\n' "$line" >> "$LOG"
  case "$line" in
    *'"type":"batch"'*)
      n=$((n+1))
      if [ "$n" -eq 2 ] && [ ! -e "$LOG.crashed" ]; then : > "$LOG.crashed"; exit 1; fi
      echo '{"type":"checkpoint"}' ;;
    *) echo '{"type":"done"}' ;;
  esac
done
`

// TestExecLines_RestartedChildResumesFromTheCheckpoint crashes a child on its second batch: the
// child started for the batch's next delivery must be told the lease's checkpoint in its
// "initialize" (it was told none, as if the lease started from scratch).
func TestExecLines_RestartedChildResumesFromTheCheckpoint(t *testing.T) {
	t.Parallel()
	log := filepath.Join(t.TempDir(), "log")
	x := &ExecLines{Command: crashOnSecondBatch, Env: []string{"LOG=" + log, "PATH=" + os.Getenv("PATH")}, KillDelay: time.Second}
	defer x.Close()
	ctx := t.Context()
	rng := leases.Range{Min: "", Max: "FF"}
	if err := x.OpenLease(ctx, feed.LeaseInfo{Token: "7", Range: rng, Owner: "h", Continuation: `"10"`}); err != nil {
		t.Fatal(err)
	}
	b := feed.Batch{LeaseToken: "7", Range: rng, Owner: "h", Items: items(`{}`), Attempt: 1, Checkpoint: `"10"`, Continuation: `"20"`}
	if err := x.Handle(ctx, b); err != nil {
		t.Fatal(err)
	}
	// The host checkpointed "20"; the next batch crashes the child and comes again.
	b.Checkpoint, b.Continuation = `"20"`, `"30"`
	if err := x.Handle(ctx, b); !errors.Is(err, ErrChildExited) {
		t.Fatalf("second batch: %v, want ErrChildExited", err)
	}
	b.Attempt = 2
	if err := x.Handle(ctx, b); err != nil {
		t.Fatalf("the batch on a restarted child: %v", err)
	}
	var seen []string
	for _, m := range readLog(t, log) {
		seen = append(seen, fmt.Sprintf("%v(%v)", m["type"], m["continuation"]))
	}
	want := `initialize("10"),batch("20"),batch("30"),initialize("20"),batch("30")`
	if got := strings.Join(seen, ","); got != want {
		t.Fatalf("children saw %s, want %s", got, want)
	}
}
