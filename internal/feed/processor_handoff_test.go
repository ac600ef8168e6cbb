package feed_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/feed/feedtest"
	"github.com/cfp-dev/cfp/internal/leases"
	"github.com/cfp-dev/cfp/internal/sink"
)

// TestProcessor_StealsFromAHostThatIgnoresHandoffAfterExpiration plays a .NET host that owns
// every lease and renews them but knows nothing of cfp's handoff request: cfp asks, waits one
// lease expiration, then steals its share the .NET way.
func TestProcessor_StealsFromAHostThatIgnoresHandoffAfterExpiration(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	src := feedtest.NewMemSource(4)
	docs := leases.NewMemDocuments("/id")
	store := leases.NewStore(docs, testPrefix, leases.StoreOptions{})
	parts, err := src.Partitions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	held := map[string]*leases.Lease{}
	for _, part := range parts {
		l := leases.NewDotNetV0(testPrefix, part.ID, part.Range, "")
		l.Owner, l.Timestamp = "dotnet-host", time.Now()
		if held[part.ID], err = store.Create(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.MarkInitialized(ctx); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() { // the .NET host's renewer: renews what it still owns, ignores properties
		for ctx.Err() == nil {
			for tok, l := range held {
				if l == nil {
					continue
				}
				n, err := store.Renew(ctx, l, "dotnet-host")
				if err != nil {
					held[tok] = nil // lost
					continue
				}
				held[tok] = n
			}
			time.Sleep(20 * time.Millisecond)
		}
	})

	opts := fastOptions("cfp")
	// Long enough that the fake .NET renewer (every 20ms) never misses it on a loaded machine.
	opts.Expiration = 2 * time.Second
	started := time.Now()
	h := startHost(t, src, docs, newRecorder(0).handler("cfp"), opts)
	waitFor(t, 10*time.Second, "a handoff request", func() bool {
		for _, l := range listLeases(t, docs) {
			if strings.HasPrefix(l.Properties["cfpHandoff"], "dotnet-host>cfp") {
				return true
			}
		}
		return false
	})
	waitFor(t, 10*time.Second, "cfp to hold 2 leases", func() bool { return len(h.p.Owned()) == 2 })
	if d := time.Since(started); d < opts.Expiration {
		t.Fatalf("stole after %s, before the request had been ignored for an expiration", d)
	}
	if c := ownerCounts(listLeases(t, docs)); c["cfp"] != 2 || c["dotnet-host"] != 2 {
		t.Fatalf("owners %v, want 2 and 2", c)
	}
	for _, l := range listLeases(t, docs) {
		if l.Owner == "cfp" && l.Properties["cfpHandoff"] != "" {
			t.Errorf("lease %s taken with its handoff request left on it", l.Token)
		}
	}
}

// TestProcessor_ExecLinesChildDecidesCheckpoints runs the child protocol end to end: the child
// answers "done" to every batch (no checkpoint while running) and "checkpoint" at shutdown
// (the host writes what the child processed, then releases).
func TestProcessor_ExecLinesChildDecidesCheckpoints(t *testing.T) {
	t.Parallel()
	src := feedtest.NewMemSource(2)
	docs := leases.NewMemDocuments("/id")
	writeDocs(t, src, 0, 40)
	dir := t.TempDir()
	child := `
while IFS= read -r line; do
  case "$line" in
    *'"type":"batch"'*) printf '%s\n' "$line" >> "$OUT.$CFP_LEASE_TOKEN"; echo '{"type":"done"}' ;;
    *'"type":"shutdown"'*) echo '{"type":"checkpoint"}' ;;
    *) echo '{"type":"done"}' ;;
  esac
done`
	x := &sink.ExecLines{Command: child, Env: []string{"OUT=" + filepath.Join(dir, "batches"), "PATH=" + os.Getenv("PATH")}}
	opts := fastOptions("lines")
	opts.MaxItems = 5
	h := startHost(t, src, docs, x, opts)
	count := func() int {
		n := 0
		for _, part := range []string{"0", "1"} {
			b, _ := os.ReadFile(filepath.Join(dir, "batches."+part))
			n += strings.Count(string(b), `"id":"doc`)
		}
		return n
	}
	waitFor(t, 10*time.Second, "40 documents at the children", func() bool { return count() == 40 })
	if n := len(h.ev.of(feed.EventCheckpoint)); n != 0 {
		t.Fatalf("%d checkpoints while the child answered done", n)
	}
	if err := h.stop(t); err != nil {
		t.Fatal(err)
	}
	for _, l := range listLeases(t, docs) {
		lsn, _ := src.LSN(l.Token)
		if want := fmt.Sprintf(`"%d"`, lsn); l.Continuation != want || l.Owner != "" {
			t.Errorf("lease %s: continuation %s owner %q; want %s, released", l.Token, l.Continuation, l.Owner, want)
		}
	}
}
