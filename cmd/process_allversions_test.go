package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/internal/account"
	"github.com/cfp-dev/cfp/internal/leases"
	"github.com/cfp-dev/cfp/internal/render"
)

// TestProcess_AllVersionsDeliversEveryOperation runs `process --mode all-versions` on a local
// data directory that the test writes to while the processor runs (the account is shared in
// process), then checks that a lease set of one mode refuses the other.
func TestProcess_AllVersionsDeliversEveryOperation(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	procSeed(t, dir, 10) // written before the processor: "now" skips them
	acct := openLocal(t, dir, 4)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ios, _, _, _ := render.Test()
	out := &syncBuffer{}
	ios.Out = out
	f := &factory{IO: ios, Getenv: func(string) string { return "" }, Now: time.Now,
		Global: &globalOptions{Local: dir, Database: "shop", Container: "orders", LeaseContainer: "leases", Processor: "audit"}}
	f.Log = f.newLogger()
	f.Account = func(context.Context) (*account.Account, error) { return acct, nil }
	opts := &processOptions{f: f, Instance: "h", StartFrom: "now", Mode: "all-versions", Events: eventsNone,
		CreateLeaseContainer: true, delegate: delegateOptions{OnError: "stop"},
		AcquireInterval: 100 * time.Millisecond, RenewInterval: 300 * time.Millisecond, Expiration: 3 * time.Second,
		PollInterval: 20 * time.Millisecond, ShutdownTimeout: 5 * time.Second}
	done := make(chan error, 1)
	if err := opts.resolve(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- runProcess(ctx, opts) }()

	c := acct.Container("shop", "orders")
	wait := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !cond() {
			select {
			case err := <-done:
				t.Fatalf("process ended while waiting for %s: %v", what, err)
			case <-time.After(20 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; stdout:\n%s", what, out.String())
			}
		}
	}
	// The lease of key-1 reads from "now" once it was first read: write a probe until it
	// comes through, so that what follows is after "now".
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; !strings.Contains(out.String(), `"probe"`); i++ {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting for the probe")
		}
		if err := c.UpsertItem(ctx, "key-1", fmt.Appendf(nil, `{"id":"probe","pk":"key-1","n":%d}`, i)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, body := range []string{`{"id":"x","pk":"key-1","v":1}`, `{"id":"x","pk":"key-1","v":2}`} {
		if err := c.UpsertItem(ctx, "key-1", []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := acct.LeaseDocuments("shop", "orders").Delete(ctx, "x", "key-1", ""); err != nil {
		t.Fatal(err)
	}
	type line struct {
		Current  map[string]any `json:"current"`
		Previous map[string]any `json:"previous"`
		Metadata struct {
			OperationType string `json:"operationType"`
			LSN           int64  `json:"lsn"`
			ID            string `json:"id"`
		} `json:"metadata"`
	}
	var xs []line
	parse := func() {
		xs = xs[:0]
		for l := range strings.Lines(out.String()) {
			var v line
			if err := json.Unmarshal([]byte(l), &v); err != nil || v.Metadata.OperationType == "" {
				t.Fatalf("stdout line is not an all-versions item: %q (%v)", l, err)
			}
			if v.Current["id"] == "x" || v.Metadata.ID == "x" {
				xs = append(xs, v)
			}
		}
	}
	wait("create, replace and delete of x", func() bool { parse(); return len(xs) >= 3 })
	cancel()
	if err := <-done; exitCode(err, true) != exitOK {
		t.Fatalf("runProcess after cancel: %v", err)
	}
	parse()
	if len(xs) != 3 {
		t.Fatalf("%d items of x, want 3:\n%s", len(xs), out.String())
	}
	for i, want := range []string{"create", "replace", "delete"} {
		if xs[i].Metadata.OperationType != want || (i > 0 && xs[i].Metadata.LSN <= xs[i-1].Metadata.LSN) {
			t.Errorf("item %d of x: %s at LSN %d, want %s after the previous item", i, xs[i].Metadata.OperationType, xs[i].Metadata.LSN, want)
		}
	}
	if xs[2].Previous["v"] != 2.0 || len(xs[2].Current) != 0 {
		t.Errorf("delete item: current %v previous %v, want {} and the deleted version", xs[2].Current, xs[2].Previous)
	}
	if strings.Contains(out.String(), `"doc-`) {
		t.Errorf("changes written before the processor started were delivered:\n%s", out.String())
	}
	ls, err := processorStore(t, acct, c, "audit").List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	checkpointed := 0
	for _, l := range ls {
		if l.Mode != leases.ModeFullFidelity || l.Owner != "" {
			t.Errorf("lease %s: mode %q owner %q, want %q and released", l.Token, l.Mode, l.Owner, leases.ModeFullFidelity)
		}
		if l.Continuation != "" {
			checkpointed++
		}
	}
	if len(ls) == 0 || checkpointed == 0 {
		t.Errorf("%d leases, %d checkpointed: want the lease of key-1 checkpointed", len(ls), checkpointed)
	}
	// Deleted while no host runs: the lease of key-1 resumes from its checkpoint and delivers it.
	if err := acct.LeaseDocuments("shop", "orders").Delete(context.Background(), "probe", "key-1", ""); err != nil {
		t.Fatal(err)
	}
	// A lease set of the latest mode, as .NET v0 leases without a Mode.
	latest := processorStore(t, acct, c, "proj-latest")
	if _, err := latest.Create(context.Background(), leases.NewDotNetV0(latest.Prefix(), "0", leases.FullRange, "")); err != nil {
		t.Fatal(err)
	}
	if err := latest.MarkInitialized(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := acct.Close(); err != nil {
		t.Fatal(err)
	}

	// The same processor in latest mode is refused, on one line, naming the leases' mode.
	base := append([]string{"--local=" + dir, "process", "-d", "shop", "-c", "orders", "-p", "audit"}, procFastLeases...)
	code, stdout, stderr := run(t, nil, base...)
	if code != exitError || stdout != "" || procLines(stderr) != 1 ||
		!strings.Contains(stderr, "leases of processor audit are in all-versions mode") || !strings.Contains(stderr, "--mode all-versions") {
		t.Errorf("latest mode on all-versions leases: exit %d, stdout %q, stderr %q; want exit 1 and one line naming all-versions", code, stdout, stderr)
	}
	// An --exec delegate gets the same objects on stdin, with the usual environment. It appends
	// each batch and its environment to a file of its own, then publishes a copy by a rename:
	// the file the test reads holds whole batches only, never a batch without its echo.
	execDir := t.TempDir()
	execOut, execAll := filepath.Join(execDir, "batches"), filepath.Join(execDir, "batches.all")
	r := procStart(t, "", append(base[:len(base):len(base)], "--mode", "all-versions", "--events", "none",
		"--exec", `{ cat; echo " $CFP_BATCH_SIZE $CFP_CONTINUATION"; } >> `+execAll+
			` && cp `+execAll+` `+execOut+`.$$ && mv `+execOut+`.$$ `+execOut)...)
	var batches string
	procWaitFor(t, "the delete of the probe through --exec", func() bool {
		b, _ := os.ReadFile(execOut)
		batches = string(b)
		return strings.Contains(batches, `"operationType":"delete"`)
	}, r)
	if code := r.stop(t); code != exitOK {
		t.Fatalf("exec run: exit %d\n%s", code, r.err.String())
	}
	var arr []line
	if err := json.Unmarshal([]byte(batches[:strings.LastIndex(batches, "]")+1]), &arr); err != nil || len(arr) != 1 ||
		arr[0].Metadata.ID != "probe" || arr[0].Previous["id"] != "probe" || !strings.Contains(batches, `] 1 "`) {
		t.Errorf("--exec stdin and environment: %q (%v), want one delete of probe, CFP_BATCH_SIZE 1 and a continuation", batches, err)
	}

	// And the other way round.
	code, _, stderr = run(t, nil, append(base[:len(base):len(base)], "-p", "proj-latest", "--mode", "all-versions")...)
	if code != exitError || procLines(stderr) != 1 || !strings.Contains(stderr, "are in latest mode, not all-versions") {
		t.Errorf("all-versions mode on latest leases: exit %d, stderr %q", code, stderr)
	}
}

func TestProcess_AllVersionsStartsFromNowOnly(t *testing.T) {
	t.Parallel()
	base := []string{"--local=" + filepath.Join(t.TempDir(), "never"), "process", "-d", "shop", "-c", "orders", "-p", "x", "--mode", "all-versions"}
	for _, start := range []string{"beginning", "-1h", "2026-01-01T00:00:00Z"} {
		code, _, stderr := run(t, nil, append(base[:len(base):len(base)], "--from", start)...)
		if code != exitUsage || !strings.Contains(stderr, "an all-versions processor starts its leases from now only") {
			t.Errorf("--start-from %s: exit %d, stderr %q; want a usage error", start, code, stderr)
		}
	}
	code, _, stderr := run(t, nil, append(base[:len(base):len(base)], "--mode", "every")...)
	if code != exitUsage || !strings.Contains(stderr, "latest|all-versions") {
		t.Errorf("--mode every: exit %d, stderr %q", code, stderr)
	}
}
