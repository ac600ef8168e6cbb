package sink

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/leases"
)

func items(docs ...string) []json.RawMessage {
	out := make([]json.RawMessage, len(docs))
	for i, d := range docs {
		out[i] = json.RawMessage(d)
	}
	return out
}

func batch(token string, docs ...string) feed.Batch {
	return feed.Batch{
		LeaseToken: token, Range: leases.Range{Min: "", Max: "05C1DFFFFFFFFC"}, Owner: "host-1",
		Items: items(docs...), Continuation: `"42"`, Attempt: 1,
	}
}

func TestStdout_WritesItemsVerbatimOnePerLine(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	bw := bufio.NewWriterSize(&out, 1<<16) // big enough that only Flush makes the bytes visible
	s := NewStdout(bw)
	docs := []string{`{"id":"a", "n":1}`, `{"id":"b","s":"\u00e9"}`, "{\n  \"id\": \"c\"\n}"}
	if err := s.Handle(t.Context(), batch("0", docs...)); err != nil {
		t.Fatal(err)
	}
	want := `{"id":"a", "n":1}` + "\n" + `{"id":"b","s":"\u00e9"}` + "\n" + `{"id":"c"}` + "\n"
	if got := out.String(); got != want {
		t.Fatalf("output (after Handle returned, without an outside flush):\n%s\nwant:\n%s", got, want)
	}
}

func TestStdout_BatchesOfLeasesDoNotInterleave(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	s := NewStdout(&out)
	var wg sync.WaitGroup
	for l := range 8 {
		wg.Go(func() {
			for b := range 20 {
				var docs []string
				for i := range 5 {
					docs = append(docs, fmt.Sprintf(`{"lease":%d,"batch":%d,"i":%d}`, l, b, i))
				}
				if err := s.Handle(context.Background(), batch(fmt.Sprint(l), docs...)); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 8*20*5 {
		t.Fatalf("got %d lines, want %d", len(lines), 8*20*5)
	}
	for i := 0; i < len(lines); i += 5 {
		var first struct{ Lease, Batch, I int }
		for j := range 5 {
			var d struct{ Lease, Batch, I int }
			if err := json.Unmarshal([]byte(lines[i+j]), &d); err != nil {
				t.Fatalf("line %d: %v", i+j, err)
			}
			if j == 0 {
				first = d
			}
			if d.Lease != first.Lease || d.Batch != first.Batch || d.I != j {
				t.Fatalf("line %d = %s interleaves with batch starting %+v", i+j, lines[i+j], first)
			}
		}
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestStdout_WriteErrorIsAHandlerError(t *testing.T) {
	t.Parallel()
	err := NewStdout(failingWriter{}).Handle(t.Context(), batch("3", `{}`))
	if err == nil || !strings.Contains(err.Error(), "disk full") || !strings.Contains(err.Error(), "lease 3") {
		t.Fatalf("err = %v", err)
	}
}

func TestExec_PassesBatchOnStdinAndEnvironment(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	e := &Exec{
		Command: `cat; echo; echo "$CFP_LEASE_TOKEN|$CFP_RANGE|$CFP_BATCH_SIZE|$CFP_CONTINUATION"; echo oops >&2`,
		Stdout:  &stdout, Stderr: &stderr,
	}
	if err := e.Handle(t.Context(), batch("7", `{"id":"a"}`, `{"id":"b"}`)); err != nil {
		t.Fatal(err)
	}
	want := `[{"id":"a"},{"id":"b"}]` + "\n" + `7|-05C1DFFFFFFFFC|2|"42"` + "\n"
	if stdout.String() != want {
		t.Fatalf("stdout = %q, want %q", stdout.String(), want)
	}
	if stderr.String() != "oops\n" {
		t.Fatalf("child stderr not passed through: %q", stderr.String())
	}
}

// secretEnvFixture is an environment with the secrets of the monitored account and of a lease
// account, one under a lower-case name, the secrets of the Entra ID credentials azidentity
// reads, and variables a delegate may rely on (a lease endpoint, a client id and a managed
// identity endpoint are no secrets).
var secretEnvFixture = []string{
	"PATH=" + os.Getenv("PATH"), "COSMOS_KEY=s3cret-key", "KEEP=1",
	"cosmos_connection_string=AccountEndpoint=https://a.example/;AccountKey=s3cret-cs;", "COSMOS_DATABASE=shop",
	"CFP_LEASE_KEY=s3cret-lease-key", "CFP_LEASE_CONNECTION_STRING=AccountEndpoint=https://l.example/;AccountKey=s3cret-lcs;",
	"CFP_LEASE_ENDPOINT=https://l.example/",
	"AZURE_CLIENT_SECRET=s3cret-client-secret", "AZURE_CLIENT_CERTIFICATE_PASSWORD=s3cret-cert-password",
	"AZURE_PASSWORD=s3cret-password", "IDENTITY_HEADER=s3cret-identity-header", "MSI_SECRET=s3cret-msi",
	"AZURE_CLIENT_ID=00000000-0000-0000-0000-000000000001", "IDENTITY_ENDPOINT=http://127.0.0.1:41741/msi/token",
}

// checkChildEnv fails unless env (the output of `env` in a child) has every want entry and no
// account secret.
func checkChildEnv(t *testing.T, env string, want ...string) {
	t.Helper()
	lines := strings.Split(env, "\n")
	for _, w := range want {
		if !slices.Contains(lines, w) {
			t.Errorf("child environment lacks %s:\n%s", w, env)
		}
	}
	for _, l := range lines {
		name, _, _ := strings.Cut(l, "=")
		if strings.HasSuffix(strings.ToUpper(name), "_KEY") || strings.HasSuffix(strings.ToUpper(name), "_CONNECTION_STRING") || strings.Contains(l, "s3cret") {
			t.Errorf("child environment has the account secret %q", l)
		}
	}
}

func TestExec_ChildEnvironmentHasNoAccountSecrets(t *testing.T) {
	t.Parallel()
	var stdout bytes.Buffer
	e := &Exec{Command: "env", Env: secretEnvFixture, Stdout: &stdout}
	if err := e.Handle(t.Context(), batch("7", `{"id":"a"}`)); err != nil {
		t.Fatal(err)
	}
	checkChildEnv(t, stdout.String(), "CFP_LEASE_TOKEN=7", "CFP_RANGE=-05C1DFFFFFFFFC", "CFP_BATCH_SIZE=1",
		`CFP_CONTINUATION="42"`, "KEEP=1", "COSMOS_DATABASE=shop", "CFP_LEASE_ENDPOINT=https://l.example/",
		"AZURE_CLIENT_ID=00000000-0000-0000-0000-000000000001", "IDENTITY_ENDPOINT=http://127.0.0.1:41741/msi/token")
}

// TestExec_InheritedEnvironmentHasNoAccountSecrets covers cfp's own case: no Env, so the child
// starts from the host's environment. It sets variables, so it cannot run in parallel.
func TestExec_InheritedEnvironmentHasNoAccountSecrets(t *testing.T) {
	t.Setenv("COSMOS_KEY", "s3cret-key")
	t.Setenv("COSMOS_CONNECTION_STRING", "AccountEndpoint=https://a.example/;AccountKey=s3cret-cs;")
	t.Setenv("CFP_LEASE_KEY", "s3cret-lease-key")
	t.Setenv("CFP_LEASE_CONNECTION_STRING", "AccountEndpoint=https://l.example/;AccountKey=s3cret-lcs;")
	t.Setenv("AZURE_CLIENT_SECRET", "s3cret-client-secret")
	t.Setenv("AZURE_CLIENT_CERTIFICATE_PASSWORD", "s3cret-cert-password")
	t.Setenv("AZURE_PASSWORD", "s3cret-password")
	t.Setenv("IDENTITY_HEADER", "s3cret-identity-header")
	t.Setenv("MSI_SECRET", "s3cret-msi")
	t.Setenv("CFP_TEST_KEEP", "1")
	var stdout bytes.Buffer
	e := &Exec{Command: "env", Stdout: &stdout}
	if err := e.Handle(t.Context(), batch("7", `{"id":"a"}`)); err != nil {
		t.Fatal(err)
	}
	checkChildEnv(t, stdout.String(), "CFP_LEASE_TOKEN=7", "CFP_TEST_KEEP=1")
}

func TestExecLines_ChildEnvironmentHasNoAccountSecrets(t *testing.T) {
	t.Parallel()
	var stderr bytes.Buffer
	x := &ExecLines{
		Command: `env >&2; while read -r line; do echo '{"type":"checkpoint"}'; done`,
		Env:     secretEnvFixture, Stderr: &stderr,
	}
	info := feed.LeaseInfo{Token: "0", Range: leases.Range{Min: "", Max: "05C1DFFFFFFFFC"}, Owner: "host-1"}
	if err := x.OpenLease(t.Context(), info); err != nil {
		t.Fatal(err)
	}
	if err := x.CloseLease(t.Context(), info, feed.CloseShutdown); err != nil {
		t.Fatal(err)
	}
	checkChildEnv(t, stderr.String(), "CFP_LEASE_TOKEN=0", "CFP_RANGE=-05C1DFFFFFFFFC", "CFP_OWNER=host-1",
		"KEEP=1", "COSMOS_DATABASE=shop", "CFP_LEASE_ENDPOINT=https://l.example/",
		"AZURE_CLIENT_ID=00000000-0000-0000-0000-000000000001", "IDENTITY_ENDPOINT=http://127.0.0.1:41741/msi/token")
}

func TestExec_NonZeroExitIsAnError(t *testing.T) {
	t.Parallel()
	e := &Exec{Command: "cat >/dev/null; exit 3"}
	err := e.Handle(t.Context(), batch("1", `{}`))
	if err == nil || !strings.Contains(err.Error(), "status 3") {
		t.Fatalf("err = %v, want exit status 3", err)
	}
}

func TestExec_CancelStopsTheChild(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	e := &Exec{Command: "sleep 30", KillDelay: 200 * time.Millisecond}
	start := time.Now()
	err := e.Handle(ctx, batch("1", `{}`))
	if err == nil {
		t.Fatal("a cancelled command succeeded")
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("Handle took %s after cancellation", d)
	}
}

// lineChild is an ExecLines child: it logs every message it gets to $LOG, answers batches with
// $ANSWER (checkpoint by default) and everything else with done.
const lineChild = `
while IFS= read -r line; do
  printf '%s\n' "$line" >> "$LOG"
  case "$line" in
    *'"type":"batch"'*) echo "debug: got a batch"; echo "{\"type\":\"${ANSWER:-checkpoint}\",\"message\":\"nope\"}" ;;
    *'"type":"shutdown"'*) echo '{"type":"checkpoint"}' ;;
    *) echo '{"type":"done"}' ;;
  esac
done
echo "exit $CFP_LEASE_TOKEN" >> "$LOG"
`

func readLog(t *testing.T, path string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if strings.HasPrefix(line, "exit ") {
			out = append(out, map[string]any{"type": line})
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("child got a non-JSON line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

func TestExecLines_Protocol(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	var stderr bytes.Buffer
	x := &ExecLines{Command: lineChild, Env: []string{"LOG=" + log, "PATH=" + os.Getenv("PATH")}, Stderr: &stderr}
	ctx := t.Context()
	info := feed.LeaseInfo{Token: "0", Range: leases.Range{Min: "", Max: "05C1DFFFFFFFFC"}, Owner: "host-1", Continuation: `"10"`}
	if err := x.OpenLease(ctx, info); err != nil {
		t.Fatal(err)
	}
	if err := x.Handle(ctx, batch("0", `{"id":"a"}`, `{"id":"b"}`)); err != nil {
		t.Fatalf("checkpoint answer: %v", err)
	}
	if err := x.CloseLease(ctx, info, feed.CloseShutdown); err != nil {
		t.Fatalf("shutdown answered checkpoint, CloseLease = %v, want nil", err)
	}
	msgs := readLog(t, log)
	types := []string{}
	for _, m := range msgs {
		types = append(types, fmt.Sprint(m["type"]))
	}
	if got, want := strings.Join(types, ","), "initialize,batch,shutdown,exit 0"; got != want {
		t.Fatalf("child saw %s, want %s", got, want)
	}
	if msgs[0]["continuation"] != `"10"` || msgs[0]["owner"] != "host-1" || msgs[0]["range"] != "-05C1DFFFFFFFFC" {
		t.Fatalf("initialize = %v", msgs[0])
	}
	b := msgs[1]
	if b["continuation"] != `"42"` || fmt.Sprint(b["items"]) != "[map[id:a] map[id:b]]" || b["lease"] != "0" {
		t.Fatalf("batch = %v", b)
	}
	if !strings.Contains(stderr.String(), "debug: got a batch") {
		t.Fatalf("a non-protocol stdout line was not copied to stderr: %q", stderr.String())
	}
}

func TestExecLines_AnswersMapToHandlerResults(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		answer string
		check  func(error) bool
	}{
		{"checkpoint", func(err error) bool { return err == nil }},
		{"done", func(err error) bool { return errors.Is(err, feed.ErrNoCheckpoint) }},
		{"error", func(err error) bool {
			return err != nil && !errors.Is(err, feed.ErrNoCheckpoint) && strings.Contains(err.Error(), "nope")
		}},
	} {
		t.Run(tc.answer, func(t *testing.T) {
			t.Parallel()
			log := filepath.Join(t.TempDir(), "log")
			x := &ExecLines{Command: lineChild, Env: []string{"LOG=" + log, "ANSWER=" + tc.answer, "PATH=" + os.Getenv("PATH")}}
			defer x.Close()
			if err := x.Handle(t.Context(), batch("5", `{"id":"a"}`)); !tc.check(err) {
				t.Fatalf("answer %s: Handle = %v", tc.answer, err)
			}
		})
	}
}

func TestExecLines_LeaseLostAndRestartAfterChildExit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	// This child handles one batch and exits.
	child := `read -r l; echo "$l" >> "$LOG"; echo '{"type":"done"}'; read -r l; echo "$l" >> "$LOG"; echo '{"type":"checkpoint"}'`
	x := &ExecLines{Command: child, Env: []string{"LOG=" + log, "PATH=" + os.Getenv("PATH")}, KillDelay: 2 * time.Second}
	ctx := t.Context()
	for range 2 {
		if err := x.Handle(ctx, batch("9", `{"n":1}`)); err != nil {
			t.Fatal(err)
		}
		// Wait for the child to exit on its own before the next batch.
		x.mu.Lock()
		c := x.children["9"]
		x.mu.Unlock()
		<-c.eof
	}
	info := feed.LeaseInfo{Token: "9"}
	if err := x.CloseLease(ctx, info, feed.CloseLeaseLost); !errors.Is(err, feed.ErrNoCheckpoint) {
		t.Fatalf("closing a lease whose child already exited = %v", err)
	}
	var types []string
	for _, m := range readLog(t, log) {
		types = append(types, fmt.Sprint(m["type"]))
	}
	if got, want := strings.Join(types, ","), "initialize,batch,initialize,batch"; got != want {
		t.Fatalf("child saw %s, want %s (a new child, initialized, after the first exited)", got, want)
	}

	// lease-lost reaches a live child.
	log2 := filepath.Join(dir, "log2")
	y := &ExecLines{Command: lineChild, Env: []string{"LOG=" + log2, "PATH=" + os.Getenv("PATH")}}
	if err := y.Handle(ctx, batch("4", `{}`)); err != nil {
		t.Fatal(err)
	}
	if err := y.CloseLease(ctx, feed.LeaseInfo{Token: "4"}, feed.CloseLeaseLost); !errors.Is(err, feed.ErrNoCheckpoint) {
		t.Fatalf("lease-lost answered done: CloseLease = %v", err)
	}
	types = nil
	for _, m := range readLog(t, log2) {
		types = append(types, fmt.Sprint(m["type"]))
	}
	if got, want := strings.Join(types, ","), "initialize,batch,lease-lost,exit 4"; got != want {
		t.Fatalf("child saw %s, want %s", got, want)
	}
}

func TestExecLines_ChildThatDiesMidBatchIsAnError(t *testing.T) {
	t.Parallel()
	x := &ExecLines{Command: `read -r l; echo '{"type":"done"}'; read -r l; exit 1`}
	err := x.Handle(t.Context(), batch("2", `{}`))
	if !errors.Is(err, ErrChildExited) {
		t.Fatalf("err = %v, want ErrChildExited", err)
	}
}

// flaky fails its first n calls.
type flaky struct {
	n     int32
	calls atomic.Int32
}

func (f *flaky) Handle(ctx context.Context, b feed.Batch) error {
	if f.calls.Add(1) <= f.n {
		return fmt.Errorf("boom %d", f.calls.Load())
	}
	return nil
}

func TestRetry_RetriesInPlaceThenSucceeds(t *testing.T) {
	t.Parallel()
	f := &flaky{n: 2}
	r := &Retry{Handler: f, MaxRetries: 2, Backoff: time.Millisecond}
	if err := r.Handle(t.Context(), batch("0", `{}`)); err != nil {
		t.Fatal(err)
	}
	if f.calls.Load() != 3 {
		t.Fatalf("calls = %d, want 3", f.calls.Load())
	}
}

func TestRetry_Policies(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	t.Run("stop", func(t *testing.T) {
		t.Parallel()
		f := &flaky{n: 100}
		err := (&Retry{Handler: f, MaxRetries: 1, Backoff: time.Millisecond}).Handle(t.Context(), batch("0", `{}`))
		var stop *feed.StopError
		if !errors.As(err, &stop) || !strings.Contains(err.Error(), "boom 2") {
			t.Fatalf("err = %v, want a StopError with the last failure", err)
		}
		if f.calls.Load() != 2 {
			t.Fatalf("calls = %d, want 2", f.calls.Load())
		}
	})
	t.Run("skip", func(t *testing.T) {
		t.Parallel()
		f := &flaky{n: 100}
		if err := (&Retry{Handler: f, MaxRetries: 0, OnError: OnErrorSkip}).Handle(t.Context(), batch("0", `{}`)); err != nil {
			t.Fatalf("skip: %v", err)
		}
		if f.calls.Load() != 1 {
			t.Fatalf("calls = %d, want 1", f.calls.Load())
		}
	})
	t.Run("dead-letter", func(t *testing.T) {
		t.Parallel()
		var dl bytes.Buffer
		f := &flaky{n: 100}
		r := &Retry{Handler: f, MaxRetries: 2, Backoff: time.Millisecond, OnError: OnErrorDeadLetter, DeadLetter: &dl, Now: func() time.Time { return now }}
		b := batch("3", `{"id":"x"}`, `{"id":"y"}`)
		if err := r.Handle(t.Context(), b); err != nil {
			t.Fatal(err)
		}
		want := `{"time":"2026-01-02T03:04:05Z","lease":"3","range":{"min":"","max":"05C1DFFFFFFFFC"},"owner":"host-1","continuation":"\"42\"","attempts":3,"error":"boom 3","items":[{"id":"x"},{"id":"y"}]}` + "\n"
		if dl.String() != want {
			t.Fatalf("dead letter:\n%s\nwant:\n%s", dl.String(), want)
		}
	})
	t.Run("dead-letter write failure is not processed", func(t *testing.T) {
		t.Parallel()
		r := &Retry{Handler: &flaky{n: 100}, OnError: OnErrorDeadLetter, DeadLetter: failingWriter{}}
		if err := r.Handle(t.Context(), batch("3", `{}`)); err == nil || !strings.Contains(err.Error(), "disk full") {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestRetry_PassesThroughDeferredCheckpointsAndStops(t *testing.T) {
	t.Parallel()
	for _, want := range []error{feed.ErrNoCheckpoint, feed.Stop(errors.New("fatal"))} {
		calls := 0
		h := feed.HandlerFunc(func(context.Context, feed.Batch) error { calls++; return want })
		err := (&Retry{Handler: h, MaxRetries: 5, OnError: OnErrorSkip}).Handle(t.Context(), batch("0", `{}`))
		if !errors.Is(err, want) || calls != 1 {
			t.Fatalf("got %v after %d calls, want %v after 1", err, calls, want)
		}
	}
}

func TestRetry_Validate(t *testing.T) {
	t.Parallel()
	h := feed.HandlerFunc(func(context.Context, feed.Batch) error { return nil })
	for _, r := range []*Retry{
		{},
		{Handler: h, MaxRetries: -1},
		{Handler: h, OnError: "explode"},
		{Handler: h, OnError: OnErrorDeadLetter},
	} {
		if r.Validate() == nil {
			t.Errorf("%+v: Validate() = nil", r)
		}
	}
	if _, err := ParseOnError("dead-letter"); err != nil {
		t.Error(err)
	}
}

// leaseRecorder is a feed.LeaseHandler that records the lease calls it gets and answers close
// with closeErr.
type leaseRecorder struct {
	feed.HandlerFunc
	calls    []string
	closeErr error
}

func (h *leaseRecorder) OpenLease(_ context.Context, l feed.LeaseInfo) error {
	h.calls = append(h.calls, "open "+l.Token)
	return nil
}

func (h *leaseRecorder) CloseLease(_ context.Context, l feed.LeaseInfo, reason feed.CloseReason) error {
	h.calls = append(h.calls, fmt.Sprintf("close %s %v", l.Token, reason))
	return h.closeErr
}

func TestRetry_ForwardsTheLeaseLifecycle(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	inner := &leaseRecorder{closeErr: feed.ErrNoCheckpoint}
	r := &Retry{Handler: inner}
	if err := r.OpenLease(ctx, feed.LeaseInfo{Token: "3"}); err != nil {
		t.Fatalf("OpenLease = %v", err)
	}
	if err := r.CloseLease(ctx, feed.LeaseInfo{Token: "3"}, feed.CloseLeaseLost); !errors.Is(err, feed.ErrNoCheckpoint) {
		t.Fatalf("CloseLease = %v, want the inner handler's %v", err, feed.ErrNoCheckpoint)
	}
	want := []string{"open 3", fmt.Sprintf("close 3 %v", feed.CloseLeaseLost)}
	if !slices.Equal(inner.calls, want) {
		t.Fatalf("inner handler got %q, want %q", inner.calls, want)
	}

	// A plain handler has no lease lifecycle: nothing to forward, nothing fails.
	plain := &Retry{Handler: feed.HandlerFunc(func(context.Context, feed.Batch) error { return nil })}
	if err := plain.OpenLease(ctx, feed.LeaseInfo{Token: "3"}); err != nil {
		t.Errorf("OpenLease of a plain handler = %v, want nil", err)
	}
	if err := plain.CloseLease(ctx, feed.LeaseInfo{Token: "3"}, feed.CloseShutdown); err != nil {
		t.Errorf("CloseLease of a plain handler = %v, want nil", err)
	}
}

// TestExec_FailureKeepsExitStatusAndStderrTail: a command that fails says its exit status and
// the last lines of its stderr (still passed through to the host's stderr), for the lease's
// failure record.
func TestExec_FailureKeepsExitStatusAndStderrTail(t *testing.T) {
	t.Parallel()
	var stderr bytes.Buffer
	e := &Exec{Command: `for i in 1 2 3 4 5 6 7; do echo "line $i" >&2; done; printf 'poison order o2\n\n' >&2; exit 3`, Stderr: &stderr}
	err := e.Handle(t.Context(), batch("7", `{"id":"a"}`))
	var x *ExecError
	if !errors.As(err, &x) {
		t.Fatalf("Handle() = %v, want an *ExecError", err)
	}
	if err.Error() != "exec for lease 7: command exited with status 3" || x.ExitStatus() != 3 {
		t.Errorf("error %q status %d", err, x.ExitStatus())
	}
	if got := strings.Join(x.StderrTail(), "|"); got != "line 4|line 5|line 6|line 7|poison order o2" {
		t.Errorf("stderr tail %q", got)
	}
	if !strings.HasPrefix(stderr.String(), "line 1\n") {
		t.Errorf("stderr not passed through: %q", stderr.String())
	}
}
