package cmd

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/changefeed"
	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/leases"
	"github.com/cfp-dev/cfp/internal/render"
)

// procSeed creates shop/orders (partitioned on /pk, 4 physical partitions) in the local data
// directory dir and writes n documents {"id":"doc-NNN","pk":"key-K","n":N} spread over many keys.
func procSeed(t *testing.T, dir string, n int) {
	t.Helper()
	ctx := context.Background()
	acct := openLocal(t, dir, 4)
	defer acct.Close()
	c := createContainer(t, acct, "shop", "orders", "/pk")
	for i := range n {
		pk := fmt.Sprintf("key-%d", i%29)
		body := fmt.Sprintf(`{"id":"doc-%03d","pk":%q,"n":%d}`, i, pk, i)
		if err := c.UpsertItem(ctx, pk, []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
}

// procLeases lists processor proc's leases of shop/orders in dir.
func procLeases(t *testing.T, dir, proc string) []*leases.Lease {
	t.Helper()
	acct := openLocal(t, dir, 4)
	defer acct.Close()
	ls, err := processorStore(t, acct, acct.Container("shop", "orders"), proc).List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return ls
}

// procFastLeases are lease timings that make a local run converge in well under a second.
var procFastLeases = []string{
	"--lease-acquire-interval", "100ms", "--lease-renew-interval", "300ms",
	"--lease-expiration", "3s", "--poll-interval", "50ms",
}

// procRun is cfp running in process until stop is called.
type procRun struct {
	out, err *syncBuffer
	cancel   context.CancelFunc
	code     chan int
}

func procStart(t *testing.T, stdin string, args ...string) *procRun {
	t.Helper()
	out, errOut := &syncBuffer{}, &syncBuffer{}
	ios := &render.IOStreams{In: strings.NewReader(stdin), Out: out, ErrOut: errOut, Width: render.DefaultWidth}
	ctx, cancel := context.WithCancel(context.Background())
	r := &procRun{out: out, err: errOut, cancel: cancel, code: make(chan int, 1)}
	go func() { r.code <- MainWithIO(ctx, args, ios, func(string) string { return "" }) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.code:
		case <-time.After(30 * time.Second):
		}
	})
	return r
}

// stop interrupts cfp (as SIGINT does) and returns its exit code.
func (r *procRun) stop(t *testing.T) int {
	t.Helper()
	r.cancel()
	select {
	case code := <-r.code:
		r.code <- code
		return code
	case <-time.After(30 * time.Second):
		t.Fatalf("cfp did not stop within 30s\nstderr:\n%s", r.err.String())
		return -1
	}
}

// procWaitFor polls cond until it holds or 20s passed.
func procWaitFor(t *testing.T, what string, cond func() bool, r *procRun) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s\nstderr:\n%s", what, r.err.String())
		}
		select {
		case code := <-r.code:
			r.code <- code
			t.Fatalf("cfp exited %d while waiting for %s\nstderr:\n%s", code, what, r.err.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func procLines(s string) int { return strings.Count(s, "\n") }

// events parses --events jsonl output, failing on a line that is not an event.
func procEvents(t *testing.T, stderr string) []processEventView {
	t.Helper()
	var out []processEventView
	for line := range strings.Lines(stderr) {
		var v processEventView
		if err := json.Unmarshal([]byte(line), &v); err != nil || v.Type == "" {
			t.Fatalf("stderr line is not an event: %q (%v)", line, err)
		}
		out = append(out, v)
	}
	return out
}

func procEventsOf(evs []processEventView, typ string) []processEventView {
	var out []processEventView
	for _, e := range evs {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

func TestProcess_StdoutDeliversEveryChangeThenReleasesOnInterrupt(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	procSeed(t, dir, 60)
	args := append([]string{"--local=" + dir, "process", "-d", "shop", "-c", "orders", "-p", "proj",
		"--instance", "host-a", "--create-lease-container", "--from", "beginning", "--events", "jsonl"}, procFastLeases...)

	r := procStart(t, "", args...)
	procWaitFor(t, "60 documents on stdout", func() bool { return procLines(r.out.String()) >= 60 }, r)
	if code := r.stop(t); code != exitOK {
		t.Fatalf("exit code %d after interrupt, want 0\nstderr:\n%s", code, r.err.String())
	}

	ids := map[string]bool{}
	for line := range strings.Lines(r.out.String()) {
		var doc struct {
			ID string `json:"id"`
			N  *int   `json:"n"`
		}
		if err := json.Unmarshal([]byte(line), &doc); err != nil || doc.ID == "" || doc.N == nil {
			t.Fatalf("stdout line is not a changed document: %q (%v)", line, err)
		}
		ids[doc.ID] = true
	}
	if len(ids) != 60 || procLines(r.out.String()) != 60 {
		t.Errorf("stdout has %d lines with %d distinct ids, want 60 of each", procLines(r.out.String()), len(ids))
	}

	evs := procEvents(t, r.err.String())
	if evs[0].Type != eventStarted || evs[0].Processor != "proj" || evs[0].LeasesCreated == nil || *evs[0].LeasesCreated != 4 {
		t.Errorf("first event = %+v, want started for proj with 4 leases created", evs[0])
	}
	acquired, released := procEventsOf(evs, "acquired"), procEventsOf(evs, "released")
	if len(acquired) != 4 || len(released) != 4 {
		t.Errorf("%d acquired and %d released events, want 4 of each", len(acquired), len(released))
	}
	for _, e := range acquired {
		if e.Owner != "host-a" || e.Lease == "" || e.Range == nil {
			t.Errorf("acquired event without owner, lease or range: %+v", e)
		}
	}
	last := evs[len(evs)-1]
	if last.Type != eventSummary || last.Processed == nil || *last.Processed != 60 || last.Reason != "shutdown" {
		t.Errorf("last event = %+v, want a shutdown summary with 60 processed", last)
	}

	ls := procLeases(t, dir, "proj")
	if len(ls) != 4 {
		t.Fatalf("%d leases, want 4", len(ls))
	}
	for _, l := range ls {
		if l.Owner != "" {
			t.Errorf("lease %s still owned by %q after shutdown", l.Token, l.Owner)
		}
		if l.Continuation == "" {
			t.Errorf("lease %s has no checkpoint after its changes were delivered", l.Token)
		}
	}

	// A restart resumes from the checkpoints: nothing is delivered again, and --start-from
	// beginning is reported as not applying to the existing leases.
	r2 := procStart(t, "", append(args[:len(args):len(args)], "--events", "text")...)
	procWaitFor(t, "all leases acquired again", func() bool { return strings.Count(r2.err.String(), " acquired ") == 4 }, r2)
	time.Sleep(300 * time.Millisecond) // several polls of every lease
	if code := r2.stop(t); code != exitOK {
		t.Fatalf("restart: exit code %d, want 0\nstderr:\n%s", code, r2.err.String())
	}
	if out := r2.out.String(); out != "" {
		t.Errorf("restart delivered changes again:\n%s", out)
	}
	stderr := r2.err.String()
	for _, want := range []string{"4 of 4 leases of processor proj already have a continuation", "cfp leases reset -p proj", " released owner=host-a lease="} {
		if !strings.Contains(stderr, want) {
			t.Errorf("restart stderr lacks %q:\n%s", want, stderr)
		}
	}
}

func TestProcess_ExecRunsOncePerBatchWithItsEnvironment(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dir, batches := filepath.Join(root, "data"), filepath.Join(root, "batches")
	if err := os.Mkdir(batches, 0o755); err != nil {
		t.Fatal(err)
	}
	procSeed(t, dir, 30)
	// Each batch becomes a file named after its environment, holding the batch from stdin.
	script := `f="` + batches + `/$CFP_LEASE_TOKEN.$(printf %s "$CFP_CONTINUATION" | tr -d '"').$CFP_BATCH_SIZE"; ` +
		`printf '%s\n' "$CFP_RANGE" > "$f.range"; cat > "$f"`
	r := procStart(t, "", append([]string{"--local=" + dir, "process", "-d", "shop", "-c", "orders", "-p", "execp",
		"--create-lease-container", "--from", "beginning", "--batch-size", "4", "--exec", script, "--events", "jsonl"}, procFastLeases...)...)
	total := func() int {
		n := 0
		ents, _ := os.ReadDir(batches)
		for _, e := range ents {
			if !strings.HasSuffix(e.Name(), ".range") {
				n += procSuffix(e.Name())
			}
		}
		return n
	}
	procWaitFor(t, "30 items handed to --exec", func() bool { return total() >= 30 }, r)
	if code := r.stop(t); code != exitOK {
		t.Fatalf("exit code %d, want 0\nstderr:\n%s", code, r.err.String())
	}

	ranges := map[string]string{}
	for _, l := range procLeases(t, dir, "execp") {
		ranges[l.Token] = l.Range.String()
	}
	ents, _ := os.ReadDir(batches)
	ids := map[string]bool{}
	for _, e := range ents {
		name := e.Name()
		if strings.HasSuffix(name, ".range") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(batches, name))
		if err != nil {
			t.Fatal(err)
		}
		var items []struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(b, &items); err != nil {
			t.Fatalf("batch %s is not a JSON array: %v\n%s", name, err, b)
		}
		if size := procSuffix(name); len(items) != size || size < 1 || size > 4 {
			t.Errorf("batch %s: %d items, CFP_BATCH_SIZE %d (max items 4)", name, len(items), size)
		}
		for _, it := range items {
			ids[it.ID] = true
		}
		token, _, _ := strings.Cut(name, ".")
		rng, _ := os.ReadFile(filepath.Join(batches, name+".range"))
		if want, ok := ranges[token]; !ok || strings.TrimSpace(string(rng)) != want {
			t.Errorf("batch %s: CFP_RANGE %q, lease %s has range %q", name, strings.TrimSpace(string(rng)), token, want)
		}
	}
	if len(ids) != 30 {
		t.Errorf("--exec saw %d distinct documents, want 30", len(ids))
	}
	// CFP_CONTINUATION is what the host checkpointed: every lease's checkpoint names a batch file.
	for _, l := range procLeases(t, dir, "execp") {
		lsn, ok := feed.ContinuationLSN(l.Continuation)
		if !ok {
			t.Errorf("lease %s: continuation %q", l.Token, l.Continuation)
			continue
		}
		if m, _ := filepath.Glob(filepath.Join(batches, fmt.Sprintf("%s.%d.*", l.Token, lsn))); len(m) == 0 {
			t.Errorf("lease %s checkpointed %q, which no batch's CFP_CONTINUATION named", l.Token, l.Continuation)
		}
	}
}

// procSuffix returns the number after the last dot of name (0 if none).
func procSuffix(name string) int {
	n, _ := strconv.Atoi(name[strings.LastIndexByte(name, '.')+1:])
	return n
}

func TestProcess_FailingBatchesGoToTheDeadLetterFile(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dir, dl := filepath.Join(root, "data"), filepath.Join(root, "dead.jsonl")
	procSeed(t, dir, 12)
	r := procStart(t, "", append([]string{"--local=" + dir, "process", "-d", "shop", "-c", "orders", "-p", "dlp",
		"--create-lease-container", "--from", "beginning", "--exec", "echo nope >&2; exit 3",
		"--delegate-retries", "1", "--dead-letter", dl, "--events", "jsonl"}, procFastLeases...)...)
	var records []struct {
		Lease    string            `json:"lease"`
		Range    feed.Range        `json:"range"`
		Attempts int               `json:"attempts"`
		Error    string            `json:"error"`
		Items    []json.RawMessage `json:"items"`
	}
	procWaitFor(t, "12 items dead-lettered", func() bool {
		records = records[:0]
		b, _ := os.ReadFile(dl)
		n := 0
		for line := range strings.Lines(string(b)) {
			if !strings.HasSuffix(line, "\n") {
				return false
			}
			var rec = struct {
				Lease    string            `json:"lease"`
				Range    feed.Range        `json:"range"`
				Attempts int               `json:"attempts"`
				Error    string            `json:"error"`
				Items    []json.RawMessage `json:"items"`
			}{}
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatalf("dead-letter line %q: %v", line, err)
			}
			records = append(records, rec)
			n += len(rec.Items)
		}
		return n >= 12
	}, r)
	if code := r.stop(t); code != exitOK {
		t.Fatalf("exit code %d, want 0\nstderr:\n%s", code, r.err.String())
	}
	for _, rec := range records {
		if rec.Attempts != 2 || !strings.Contains(rec.Error, "status 3") || rec.Lease == "" || rec.Range.Max == "" {
			t.Errorf("dead-letter record %+v, want 2 attempts, exit status 3, lease and range", rec)
		}
	}
	var errs []processEventView
	for line := range strings.Lines(r.err.String()) {
		if strings.HasPrefix(line, "{") {
			var v processEventView
			if json.Unmarshal([]byte(line), &v) == nil && v.Type == "error" {
				errs = append(errs, v)
			}
		}
	}
	if len(errs) != 2*len(records) {
		t.Errorf("%d error events for %d dead-lettered batches, want two each", len(errs), len(records))
	}
	for _, e := range errs {
		if e.Cause != "user" || e.Attempt < 1 || e.Attempt > 2 || !strings.Contains(e.Error, "status 3") {
			t.Errorf("error event %+v, want cause user, attempt 1 or 2", e)
		}
	}
	// Dead-lettered batches are processed: the leases are checkpointed past them.
	for _, l := range procLeases(t, dir, "dlp") {
		if l.Owner != "" {
			t.Errorf("lease %s owned by %q after shutdown", l.Token, l.Owner)
		}
	}
}

func TestProcess_OnErrorStopExitsOneAndReleasesLeases(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	procSeed(t, dir, 5)
	r := procStart(t, "", append([]string{"--local=" + dir, "process", "-d", "shop", "-c", "orders", "-p", "stopp",
		"--create-lease-container", "--from", "beginning", "--exec", "exit 7", "--delegate-retries", "0",
		"--events", "text"}, procFastLeases...)...)
	var code int
	select {
	case code = <-r.code:
		r.code <- code
	case <-time.After(30 * time.Second):
		t.Fatalf("cfp did not stop on the failing batch\nstderr:\n%s", r.err.String())
	}
	stderr := r.err.String()
	if code != exitError {
		t.Fatalf("exit code %d, want 1\nstderr:\n%s", code, stderr)
	}
	for _, want := range []string{" error owner=", "cause=user", "cfp: processor stopped: lease ", "exited with status 7", " summary ", "reason=stopped"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	for _, l := range procLeases(t, dir, "stopp") {
		if l.Owner != "" {
			t.Errorf("lease %s still owned by %q after the processor stopped", l.Token, l.Owner)
		}
		if l.Continuation != "" {
			t.Errorf("lease %s checkpointed %q past a batch that failed", l.Token, l.Continuation)
		}
	}
}

func TestProcess_ExecLinesChildCheckpoints(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dir, got := filepath.Join(root, "data"), filepath.Join(root, "got")
	procSeed(t, dir, 20)
	// The child appends every batch message to got.<lease> and checkpoints it.
	child := `while IFS= read -r line; do case "$line" in *'"type":"batch"'*) printf '%s\n' "$line" >> "` + got +
		`.$CFP_LEASE_TOKEN"; echo '{"type":"checkpoint"}';; *) echo '{"type":"done"}';; esac; done`
	r := procStart(t, "", append([]string{"--local=" + dir, "process", "-d", "shop", "-c", "orders", "-p", "linesp",
		"--create-lease-container", "--from", "beginning", "--exec-lines", child, "--events", "none"}, procFastLeases...)...)
	items := func() int {
		files, _ := filepath.Glob(got + ".*")
		n := 0
		for _, f := range files {
			b, _ := os.ReadFile(f)
			for line := range strings.Lines(string(b)) {
				var m struct {
					Type  string            `json:"type"`
					Items []json.RawMessage `json:"items"`
				}
				if json.Unmarshal([]byte(line), &m) == nil {
					n += len(m.Items)
				}
			}
		}
		return n
	}
	procWaitFor(t, "20 items handed to the children", func() bool { return items() >= 20 }, r)
	if code := r.stop(t); code != exitOK {
		t.Fatalf("exit code %d, want 0\nstderr:\n%s", code, r.err.String())
	}
	if n := items(); n != 20 {
		t.Errorf("children got %d items, want 20", n)
	}
	if s := r.err.String(); s != "" {
		t.Errorf("--events none wrote to stderr:\n%s", s)
	}
	for _, l := range procLeases(t, dir, "linesp") {
		if l.Owner != "" {
			t.Errorf("lease %s still owned by %q", l.Token, l.Owner)
		}
		if files, _ := filepath.Glob(got + "." + l.Token); len(files) == 1 && l.Continuation == "" {
			t.Errorf("lease %s: the child answered checkpoint but the lease has no continuation", l.Token)
		}
	}
}

func TestProcess_MetricsEndpoint(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	procSeed(t, dir, 16)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	r := procStart(t, "", append([]string{"--local=" + dir, "process", "-d", "shop", "-c", "orders", "-p", "metp",
		"--instance", "m1", "--create-lease-container", "--from", "beginning", "--metrics-addr", addr,
		"--events", "none"}, procFastLeases...)...)
	procWaitFor(t, "16 documents", func() bool { return procLines(r.out.String()) >= 16 }, r)
	var body string
	// A batch's event (the items) comes before its checkpoint is written: wait for both.
	procWaitFor(t, "metrics with 16 items and a checkpoint", func() bool {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		// A batch's checkpoint follows its items: wait for its charge too, which is asserted below.
		return procMetricSum(body, "cfp_process_items_total") == 16 &&
			procMetricSum(body, `cfp_process_request_units_total{container="orders",database="shop",kind="checkpoint",owner="m1",processor="metp"}`) > 0
	}, r)
	if code := r.stop(t); code != exitOK {
		t.Fatalf("exit code %d, want 0", code)
	}
	if got := procMetricSum(body, "cfp_process_owned_leases"); got != 4 {
		t.Errorf("cfp_process_owned_leases = %v, want 4\n%s", got, body)
	}
	if got := procMetricSum(body, "cfp_process_batches_total"); got < 4 {
		t.Errorf("cfp_process_batches_total = %v, want at least one per lease\n%s", got, body)
	}
	if got := procMetricSum(body, "cfp_process_lease_lag"); got != 0 {
		t.Errorf("cfp_process_lease_lag sums to %v after everything was processed, want 0\n%s", got, body)
	}
	// RU: the change-feed reads and checkpoints that delivered the 16 documents were charged,
	// and every change-feed read was for a lease.
	for _, kind := range []string{"change_feed", "checkpoint", "lease_list", "acquire"} {
		if got := procMetricSum(body, `cfp_process_request_units_total{container="orders",database="shop",kind="`+kind+`",owner="m1",processor="metp"}`); got <= 0 {
			t.Errorf("cfp_process_request_units_total{kind=%q} = %v, want > 0\n%s", kind, got, body)
		}
	}
	feedRU := procMetricSum(body, `cfp_process_request_units_total{container="orders",database="shop",kind="change_feed",owner="m1",processor="metp"}`)
	var perLease float64
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "cfp_process_lease_request_units_total{") && strings.Contains(line, `kind="change_feed"`) {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			perLease += v
		}
	}
	if perLease != feedRU {
		t.Errorf("change-feed RU by lease sums to %v, want the change_feed total %v\n%s", perLease, feedRU, body)
	}
	for _, want := range []string{`cfp_process_errors_total{cause="user",container="orders",database="shop",owner="m1",processor="metp"} 0`, `cfp_process_lease_lag{`} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q:\n%s", want, body)
		}
	}
	if _, err := http.Get("http://" + addr + "/metrics"); err == nil {
		t.Error("metrics server still serving after cfp exited")
	}
}

// procMetricSum adds the samples of metric name in a Prometheus text exposition.
func procMetricSum(body, name string) float64 {
	var sum float64
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err == nil {
			sum += v
		}
	}
	return sum
}

func TestProcess_UsageErrors(t *testing.T) {
	t.Parallel()
	base := []string{"--local=" + filepath.Join(t.TempDir(), "never"), "process", "-d", "shop", "-c", "orders"}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no processor", nil, "no processor given"},
		{"dead-letter policy without file", []string{"-p", "x", "--on-error", "dead-letter"}, "--on-error dead-letter needs --dead-letter FILE"},
		{"dead-letter file with another policy", []string{"-p", "x", "--on-error", "skip", "--dead-letter", "f"}, "--dead-letter needs --on-error dead-letter"},
		{"two delegates", []string{"-p", "x", "--exec", "a", "--exec-lines", "b"}, "exec"},
		{"bad start", []string{"-p", "x", "--from", "yesterday"}, "--from"},
		{"renew not below expiration", []string{"-p", "x", "--lease-renew-interval", "1m"}, "renew interval 1m0s must be shorter than the lease expiration 1m0s"},
		{"negative checkpoint interval", []string{"-p", "x", "--checkpoint-interval", "-1s"}, "checkpoint interval must not be negative, got -1s"},
		{"bad events", []string{"-p", "x", "--events", "xml"}, "want one of text, jsonl, none"},
		{"negative retries", []string{"-p", "x", "--delegate-retries", "-1"}, "--delegate-retries must not be negative"},
		{"throughput bucket out of range", []string{"-p", "x", "--throughput-bucket", "9"}, "--throughput-bucket must be 1 to 5 (0: none), got 9"},
		{"unknown priority", []string{"-p", "x", "--priority", "urgent"}, "low, high"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ios, _, out, errOut := render.Test()
			code := MainWithIO(context.Background(), append(slices.Clone(base), tc.args...), ios, func(string) string { return "" })
			if code != exitUsage {
				t.Fatalf("exit code %d, want 2\nstderr:\n%s", code, errOut)
			}
			if !strings.Contains(errOut.String(), tc.want) {
				t.Errorf("stderr lacks %q:\n%s", tc.want, errOut)
			}
			if out.Len() != 0 {
				t.Errorf("stdout not empty: %s", out)
			}
		})
	}
}

func TestProcessEvents_TextShowsLifecycleOnly(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	ev := newProcessEvents(&buf, eventsText, func(s string) string { return strings.ReplaceAll(s, "SECRET", "[REDACTED]") }, func() time.Time { return now })
	rng := feed.Range{Min: "", Max: "3F"}
	ev.notify(feed.Event{Type: feed.EventAcquired, Time: now, Lease: "0", Range: rng, Owner: "h1"})
	ev.notify(feed.Event{Type: feed.EventBatch, Time: now, Lease: "0", Range: rng, Owner: "h1", Items: 3})
	ev.notify(feed.Event{Type: feed.EventCheckpoint, Time: now, Lease: "0", Range: rng, Owner: "h1", Continuation: `"9"`})
	ev.notify(feed.Event{Type: feed.EventError, Time: now, Lease: "0", Owner: "h1", Cause: feed.CauseInfra, Err: fmt.Errorf("read with key SECRET:\nrefused")})
	ev.notify(feed.Event{Type: feed.EventError, Time: now, Lease: "0", Owner: "h1", Cause: feed.CauseUser, Err: feed.Stop(fmt.Errorf("boom"))})
	ev.notify(feed.Event{Type: feed.EventLost, Time: now, Lease: "0", Range: rng, Owner: "h1", Err: fmt.Errorf("owned by h2")})
	ru := newRequestUnits(nil)
	ru.OnRequestCharge(leases.ChargeChangeFeed, "0", 2.5)
	ru.OnRequestCharge(leases.ChargeCheckpoint, "0", 10.68)
	ru.OnRequestCharge(leases.ChargeCheckpoint, "0", 0)
	ev.summary("h1", nil, ru)
	want := `cfp: 2026-05-01T12:00:00Z acquired owner=h1 lease=0 range=""-3F
cfp: 2026-05-01T12:00:00Z error owner=h1 lease=0 cause=infra error="read with key [REDACTED]: refused"
cfp: 2026-05-01T12:00:00Z lost owner=h1 lease=0 range=""-3F error="owned by h2"
cfp: 2026-05-01T12:00:00Z summary owner=h1 batches=1 processed=3 errors=1 seconds=0.0 ru=13.18 ru_by_kind=change_feed:2.50,checkpoint:10.68 reason=shutdown
`
	if got := buf.String(); got != want {
		t.Errorf("text events:\n%s\nwant:\n%s", got, want)
	}
}

func TestProcess_StartNowIsAnchoredAtTheHostsStart(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	procSeed(t, dir, 1)
	ios, _, _, _ := render.Test()
	clock := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	f := &factory{IO: ios, Getenv: func(string) string { return "" }, Now: func() time.Time { return clock },
		Global: &globalOptions{Local: dir, Database: "shop", Container: "orders", LeaseContainer: "leases", Processor: "anchor"}}
	f.Log = f.newLogger()
	f.Account = f.openAccount
	defer f.closeAccount()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got changefeed.StartFrom
	opts := &processOptions{f: f, Instance: "h", StartFrom: "now", Events: eventsNone, CreateLeaseContainer: true,
		delegate: delegateOptions{OnError: "stop"}, started: func(p *changefeed.Processor) { got = p.StartFrom(); cancel() }}
	if err := opts.resolve(); err != nil {
		t.Fatal(err)
	}
	err := runProcess(ctx, opts)
	if code := exitCode(err, true); code != exitOK {
		t.Fatalf("runProcess: %v (exit %d)", err, code)
	}
	// A lease taken over from a host that died before its first checkpoint starts here, not at
	// the takeover: the changes written in between are delivered.
	want := changefeed.Time(clock.Add(-time.Second))
	if got.String() != want.String() {
		t.Errorf("--start-from now runs the processor with %+v, want %+v", got, want)
	}
}

// With --events jsonl every stderr line is a JSON object, logs included, so a script can pipe
// stderr through jq; an explicit --log-format still wins.
func TestProcess_EventsJSONLMakesLogsJSON(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	procSeed(t, dir, 5)
	args := append([]string{"--local=" + dir, "--log-level", "info", "process", "-d", "shop", "-c", "orders", "-p", "proj",
		"--instance", "host-a", "--create-lease-container", "--from", "beginning", "--events", "jsonl"}, procFastLeases...)
	r := procStart(t, "", args...)
	procWaitFor(t, "5 documents on stdout", func() bool { return procLines(r.out.String()) >= 5 }, r)
	if code := r.stop(t); code != exitOK {
		t.Fatalf("exit code %d, want 0\nstderr:\n%s", code, r.err.String())
	}
	logs := 0
	for line := range strings.Lines(r.err.String()) {
		var v map[string]any
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("stderr line is not JSON: %q", line)
		}
		if _, ok := v["msg"]; ok {
			logs++
		}
	}
	if logs == 0 {
		t.Fatalf("no log lines at --log-level info; the test proves nothing:\n%s", r.err.String())
	}

	r2 := procStart(t, "", append([]string{"--log-format", "text"}, args...)...)
	procWaitFor(t, "a text log line", func() bool { return strings.Contains(r2.err.String(), "level=INFO") }, r2)
	r2.stop(t)
}

// --create-lease-container turns time-to-live on (defaultTtl -1), so a stale .lock marker with
// "ttl":30 (a bootstrap that died) expires instead of blocking the next bootstrap.
func TestProcess_CreatedLeaseContainerHasTTL(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	procSeed(t, dir, 1)
	args := append([]string{"--local=" + dir, "process", "-d", "shop", "-c", "orders", "-p", "proj",
		"--instance", "host-a", "--create-lease-container", "--from", "beginning", "--events", "none"}, procFastLeases...)
	r := procStart(t, "", args...)
	procWaitFor(t, "the document on stdout", func() bool { return procLines(r.out.String()) >= 1 }, r)
	if code := r.stop(t); code != exitOK {
		t.Fatalf("exit code %d\nstderr:\n%s", code, r.err.String())
	}

	acct := openLocal(t, dir, 4)
	defer acct.Close()
	docs := acct.LeaseDocuments("shop", "leases")
	ctx := context.Background()
	if _, err := docs.Create(ctx, "stale.lock", []byte(`{"id":"stale.lock","ttl":1}`)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond)
	if _, err := docs.Read(ctx, "stale.lock", "stale.lock"); !errors.Is(err, leases.ErrNotFound) {
		t.Fatalf("a document with ttl 1 is still there after 1.1s (err %v): the lease container has no TTL", err)
	}
}

// Java's PK-range (pkversion) processor names its lease set after the database and container
// names, not their rids. cfp process -p joins that set, as cfp leases does, instead of
// bootstrapping a second one and delivering every change again.
func TestProcess_JoinsJavasPKRangeLeaseSet(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "data")
	procSeed(t, dir, 40)
	acct := openLocal(t, dir, 4)
	c := acct.Container("shop", "orders")
	parts, err := c.Partitions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := acct.CreateContainerIfNotExists(ctx, "shop", "leases", "/id", nil); err != nil {
		t.Fatal(err)
	}
	// The Java PK-range lease documents, as Java writes them, with no continuation yet.
	docs := acct.LeaseDocuments("shop", "leases")
	byName := leases.Prefix("jpk", acct.JavaHost(), "shop", "orders")
	for _, p := range parts {
		id := leases.LeaseID(byName, p.ID)
		body := fmt.Sprintf(`{"id":%q,"LeaseToken":%q,"ContinuationToken":null,"Owner":null,"timestamp":"2026-01-01T00:00:00Z"}`, id, p.ID)
		if _, err := docs.Create(ctx, id, []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := docs.Create(ctx, leases.InfoID(byName), []byte(`{"id":"`+leases.InfoID(byName)+`"}`)); err != nil {
		t.Fatal(err)
	}
	acct.Close()

	args := append([]string{"--local=" + dir, "process", "-d", "shop", "-c", "orders", "-p", "jpk",
		"--instance", "host-a", "--from", "beginning", "--events", "jsonl"}, procFastLeases...)
	r := procStart(t, "", args...)
	procWaitFor(t, "40 documents on stdout", func() bool { return procLines(r.out.String()) >= 40 }, r)
	if code := r.stop(t); code != exitOK {
		t.Fatalf("exit code %d, want 0\nstderr:\n%s", code, r.err.String())
	}
	if n := procLines(r.out.String()); n != 40 {
		t.Errorf("%d changes delivered, want 40 (each once)", n)
	}
	evs := procEvents(t, r.err.String())
	if evs[0].Type != eventStarted || evs[0].Prefix != byName || evs[0].LeasesCreated == nil || *evs[0].LeasesCreated != 0 {
		t.Errorf("first event = %+v, want started on prefix %s with no lease created", evs[0], byName)
	}
	if ls := procLeases(t, dir, "jpk"); len(ls) != 0 {
		t.Errorf("cfp bootstrapped a second lease set of %d leases beside Java's", len(ls))
	}

	acct = openLocal(t, dir, 4)
	defer acct.Close()
	ls, err := leases.NewStore(acct.LeaseDocuments("shop", "leases"), byName, leases.StoreOptions{}).List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != len(parts) {
		t.Fatalf("%d Java leases, want %d", len(ls), len(parts))
	}
	for _, l := range ls {
		if l.Continuation == "" {
			t.Errorf("Java lease %s has no continuation: cfp did not process it", l.Token)
		}
	}
}
