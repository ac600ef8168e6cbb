package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/emulator"
	"github.com/cfp-dev/cfp/internal/account"
	"github.com/cfp-dev/cfp/internal/cosmos"
	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/render"
)

// seedDir creates db/c (partitioned on /pk, 4 partitions) in a fresh data directory, upserts
// the documents d<from>..d<from+n-1> and closes the directory again, so that cfp can open it.
func seedDir(t *testing.T, dir string, from, n int) {
	t.Helper()
	acct := openLocal(t, dir, 4)
	seed(t, acct, from, n)
	if err := acct.Close(); err != nil {
		t.Fatal(err)
	}
}

// seed upserts {id: d<i>, pk: p<i%3>, n: i} for i in [from, from+n) with a few writers.
func seed(t *testing.T, acct *account.Account, from, n int) {
	t.Helper()
	ctx := context.Background()
	c := createContainer(t, acct, "db", "c", "/pk")
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := from + w; i < from+n; i += 4 {
				pk := fmt.Sprintf("p%d", i%3)
				body := fmt.Sprintf(`{"id":"d%d","pk":%q,"n":%d}`, i, pk, i)
				if err := c.UpsertItem(ctx, pk, []byte(body)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
}

// ids parses JSON lines and returns how often each id appears; it fails on a line that is not
// a JSON object with an id.
func ids(t *testing.T, out string) map[string]int {
	t.Helper()
	seen := map[string]int{}
	for i, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if line == "" {
			continue
		}
		var doc struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal([]byte(line), &doc); err != nil || doc.ID == "" {
			t.Fatalf("line %d is not a JSON document with an id: %q (%v)", i+1, line, err)
		}
		seen[doc.ID]++
	}
	return seen
}

// wantExactly fails unless seen holds d<from>..d<from+n-1>, each once, and nothing else.
func wantExactly(t *testing.T, seen map[string]int, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		id := fmt.Sprintf("d%d", i)
		if seen[id] != 1 {
			t.Errorf("%s delivered %d times, want once", id, seen[id])
		}
		delete(seen, id)
	}
	if len(seen) > 0 {
		t.Errorf("unexpected changes delivered: %v", seen)
	}
}

func TestTail_FromBeginningPrintsEveryDocumentOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	seedDir(t, dir, 0, 300)
	code, out, errOut := run(t, nil, "--local="+dir, "tail", "-d", "db", "-c", "c", "--from", "beginning", "-e", "--batch-size", "7")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	wantExactly(t, ids(t, out), 0, 300)
	if errOut != "" {
		t.Errorf("stderr = %q, want nothing in a pipe at the default log level", errOut)
	}
}

func TestTail_StateResumesExactly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	state := dir + "/tail.state"
	seedDir(t, dir, 0, 100)
	args := []string{"--local=" + dir, "tail", "-d", "db", "-c", "c", "-e", "--save-state", state}

	// Stop in the middle of a page with -n: the state must point just after change 37.
	code, out, errOut := run(t, nil, append(args, "--from", "beginning", "-n", "37", "--batch-size", "10")...)
	if code != 0 || strings.Count(out, "\n") != 37 {
		t.Fatalf("exit %d, %d lines, stderr %q; want 0 and 37 lines", code, strings.Count(out, "\n"), errOut)
	}
	first := ids(t, out)

	code, out, errOut = run(t, nil, append(args, "--from", "@"+state)...)
	if code != 0 {
		t.Fatalf("resume: exit %d, stderr %q", code, errOut)
	}
	rest := ids(t, out)
	for id, n := range first {
		rest[id] += n
	}
	wantExactly(t, rest, 0, 100)

	// More writes: the next resume prints exactly the new ones.
	seedDir(t, dir, 100, 25)
	code, out, errOut = run(t, nil, append(args, "--from", "@"+state)...)
	if code != 0 {
		t.Fatalf("second resume: exit %d, stderr %q", code, errOut)
	}
	wantExactly(t, ids(t, out), 100, 25)

	// Nothing new: nothing printed.
	code, out, _ = run(t, nil, append(args, "--from", "@"+state)...)
	if code != 0 || out != "" {
		t.Errorf("third resume: exit %d, stdout %q; want 0 and nothing", code, out)
	}
}

func TestTail_FromTimeReturnsChangesAtOrAfterIt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	seedDir(t, dir, 0, 20)
	// _ts has a resolution of one second: start the second batch in a later second.
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + 10*time.Millisecond)))
	from := time.Now().UTC().Truncate(time.Second)
	seedDir(t, dir, 20, 15)

	code, out, errOut := run(t, nil, "--local="+dir, "tail", "-d", "db", "-c", "c", "-e", "--from", from.Format(time.RFC3339))
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	wantExactly(t, ids(t, out), 20, 15)
}

func TestTail_PartitionKeyFilters(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	seedDir(t, dir, 0, 60)
	code, out, errOut := run(t, nil, "--local="+dir, "tail", "-d", "db", "-c", "c", "-e", "--from", "beginning", "--partition-key", "p1", "--envelope")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	n := 0
	for line := range strings.Lines(out) {
		var env struct {
			Range     feed.Range `json:"range"`
			LSN       int64      `json:"lsn"`
			TS        string     `json:"ts"`
			Operation string     `json:"operation"`
			Item      struct {
				PK string `json:"pk"`
				N  int    `json:"n"`
			} `json:"item"`
		}
		if err := json.Unmarshal([]byte(line), &env); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		if env.Item.PK != "p1" || env.Item.N%3 != 1 {
			t.Errorf("change of partition %q (n=%d) in a tail of p1", env.Item.PK, env.Item.N)
		}
		if env.LSN <= 0 || env.Operation != "upsert" || env.Range.Max == "" {
			t.Errorf("envelope %q lacks lsn, operation or range", line)
		}
		if _, err := time.Parse(time.RFC3339, env.TS); err != nil {
			t.Errorf("envelope ts %q is not RFC 3339", env.TS)
		}
		n++
	}
	if n != 20 {
		t.Errorf("%d changes of p1, want 20", n)
	}
}

func TestTail_JSONIsOneDocument(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	seedDir(t, dir, 0, 12)
	code, out, errOut := run(t, nil, "--local="+dir, "tail", "-d", "db", "-c", "c", "-e", "--from", "beginning", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	var docs []map[string]any
	if err := json.Unmarshal([]byte(out), &docs); err != nil || len(docs) != 12 {
		t.Fatalf("-o json gave %d documents (%v):\n%s", len(docs), err, out)
	}
}

// TestTail_RidesThroughThrottlingAndUnavailability injects 429s and 503s into a fraction of the
// emulator's change-feed reads: every document must still be delivered exactly once.
func TestTail_RidesThroughThrottlingAndUnavailability(t *testing.T) {
	t.Parallel()
	// The request policy retries 429 and 503 itself (2 times here, quickly): bursts of 20 get
	// through it to the tail's own backoff.
	acct, err := account.Open(context.Background(), account.Config{LocalDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler),
		Retry: cosmos.RetryOptions{MaxRetries: 2, MinBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer acct.Close()
	seed(t, acct, 0, 400)
	emu := acct.Emulator()
	for _, rule := range []emulator.FaultRule{
		{Status: http.StatusTooManyRequests, Count: 20, ChangeFeedOnly: true, RetryAfter: time.Millisecond},
		{Status: http.StatusServiceUnavailable, Count: 20, ChangeFeedOnly: true},
		{Status: http.StatusTooManyRequests, Fraction: 0.25, ChangeFeedOnly: true, RetryAfter: time.Millisecond},
		{Status: http.StatusServiceUnavailable, Fraction: 0.2, ChangeFeedOnly: true},
	} {
		if err := emu.InjectFaults(rule); err != nil {
			t.Fatal(err)
		}
	}

	ios, _, out, errOut := render.Test()
	var logs syncWriter
	f := &factory{IO: ios, Global: &globalOptions{Database: "db", Container: "c"}, Getenv: func(string) string { return "" },
		Now: time.Now, Log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	f.Account = func(context.Context) (*account.Account, error) { return acct, nil }
	opts := &tailOptions{f: f, From: "beginning", ExitAtEnd: true, Mode: "latest", Poll: 10 * time.Millisecond,
		SaveEvery: time.Second, PageSize: 9, Concurrency: 4}
	if err := opts.validate(); err != nil {
		t.Fatal(err)
	}
	if err := runTail(context.Background(), opts); err != nil {
		t.Fatalf("runTail() error = %v, stderr %q", err, errOut)
	}
	wantExactly(t, ids(t, out.String()), 0, 400)
	// The faults must have reached the tail (past the SDK's own retries), or the test proved
	// nothing.
	for _, status := range []string{"status=429", "status=503"} {
		if !strings.Contains(logs.String(), status) {
			t.Errorf("no throttled read with %s reached the tail; logs:\n%s", status, logs.String())
		}
	}
}

// syncWriter is a syncBuffer that tells when the first bytes arrived (first, when not nil, is
// closed after the first write).
type syncWriter struct {
	syncBuffer
	first chan struct{}
	once  sync.Once
}

func (w *syncWriter) Write(p []byte) (int, error) {
	n, err := w.syncBuffer.Write(p)
	w.once.Do(func() {
		if w.first != nil {
			close(w.first)
		}
	})
	return n, err
}

func TestTail_InterruptPrintsSummaryAndExits130(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	seedDir(t, dir, 0, 30)
	out := &syncWriter{first: make(chan struct{})}
	var errOut bytes.Buffer
	ios := &render.IOStreams{In: strings.NewReader(""), Out: out, ErrOut: &errOut, Width: 80}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- MainWithIO(ctx, []string{"--local=" + dir, "tail", "-d", "db", "-c", "c", "--from", "beginning", "--poll-interval", "20ms"}, ios,
			func(string) string { return "" })
	}()
	select {
	case <-out.first:
	case <-time.After(30 * time.Second):
		t.Fatal("no output after 30s")
	}
	// Let the tail catch up (it keeps polling), then interrupt it.
	for deadline := time.Now().Add(30 * time.Second); strings.Count(out.String(), "\n") < 30 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	code := <-done
	if code != 130 {
		t.Errorf("exit %d after interruption, want 130", code)
	}
	wantExactly(t, ids(t, out.String()), 0, 30)
	lines := strings.Split(strings.TrimSuffix(errOut.String(), "\n"), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "tail interrupted: 30 changes from 4 ranges (caught up on 4/4)") {
		t.Errorf("stderr = %q, want one summary line", errOut.String())
	}
}

func TestTail_BadValuesAreOneLineUsageErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	base := []string{"--local=" + dir, "tail", "-d", "db", "-c", "c"}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--from", "yesterday"}, "cfp: invalid --from: position \"yesterday\": want beginning, now"},
		{[]string{"--from", "-5x"}, "cfp: invalid --from: position \"-5x\": bad duration"},
		{[]string{"--from", "@"}, "cfp: invalid --from \"@\": name the state file after @"},
		{[]string{"--until", "soon"}, "cfp: invalid --until: end position \"soon\": want now, an RFC 3339 time"},
		{[]string{"--range", "3F"}, "cfp: invalid --range \"3F\": want MIN-MAX"},
		{[]string{"--range", "7F-3F"}, "cfp: invalid --range \"7F-3F\": MIN must be below MAX"},
		{[]string{"--range", "zz-FF"}, "cfp: invalid --range \"zz-FF\": \"ZZ\" is not a hex EPK"},
		{[]string{"-n", "-1"}, "cfp: invalid --max-items -1"},
		{[]string{"--poll-interval", "0s"}, "cfp: invalid --poll-interval 0s"},
		{[]string{"--mode", "all-versions", "--from", "beginning"}, "cfp: --mode all-versions cannot start from \"beginning\": the service starts this mode from now or a saved position only"},
		{[]string{"--mode", "all-versions", "--from", "-1h"}, "cfp: --mode all-versions cannot start from \"-1h\""},
	} {
		code, out, errOut := run(t, nil, append(base, tt.args...)...)
		if code != 2 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.HasPrefix(errOut, tt.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and one line starting %q", tt.args, code, out, errOut, tt.want)
		}
	}
}
