package cmd

// The adversarial suite: hostile input (import lines, state files, lease documents, flags) and
// fault schedules, each case asserting what an operator would notice (the exit code, the one
// error line, what was written). Every case here failed on the code before its fix.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/emulator"
	"github.com/cfp-dev/cfp/emulator/auth"
	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/lineio"
	"github.com/cfp-dev/cfp/internal/render"
)

// endlessZeros is /dev/zero as an io.Reader that counts what was read from it.
type endlessZeros struct{ read atomic.Int64 }

func (z *endlessZeros) Read(p []byte) (int, error) {
	clear(p)
	z.read.Add(int64(len(p)))
	return len(p), nil
}

// adversarialCase is one hostile run of cfp: args, stdin, and what the operator must see.
type adversarialCase struct {
	name  string
	args  []string
	stdin string
	// setup prepares the data directory (in dir) before the run; it returns extra args.
	setup func(t *testing.T, dir string) []string
	code  int
	// stderr and stdout are regular expressions the outputs must match.
	stderr []string
	stdout []string
	// check inspects the data directory after the run.
	check func(t *testing.T, dir string)
}

// runAdversarial runs the cases, each on its own data directory.
func runAdversarial(t *testing.T, cases []adversarialCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			args := append([]string{"--local=" + dir}, tc.args...)
			if tc.setup != nil {
				args = append(args, tc.setup(t, dir)...)
			}
			code, stdout, stderr := runCLI(t, context.Background(), tc.stdin, args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, stdout, stderr)
			}
			for _, re := range tc.stderr {
				if !regexp.MustCompile(re).MatchString(stderr) {
					t.Errorf("stderr does not match %s:\n%s", re, stderr)
				}
			}
			for _, re := range tc.stdout {
				if !regexp.MustCompile(re).MatchString(stdout) {
					t.Errorf("stdout does not match %s:\n%s", re, stdout)
				}
			}
			if tc.check != nil {
				tc.check(t, dir)
			}
		})
	}
}

// versionsOfOneID returns n versions of the document "hot" (v = 0..n-1), interleaved with
// other documents.
func versionsOfOneID(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{"id":"hot","pk":"p","v":%d}`+"\n", i)
		if i%10 == 0 {
			fmt.Fprintf(&b, `{"id":"cold-%d","pk":"p%d","v":%d}`+"\n", i, i%7, i)
		}
	}
	return b.String()
}

func TestAdversarial_ImportLines(t *testing.T) {
	t.Parallel()
	create := []string{"import", "-d", "db", "-c", "c", "--create", "--partition-key-path", "/pk"}
	longArray := "[" + strings.Repeat(`{"id":"x","pk":"p","pad":"0123456789abcdef"},`, (lineio.MaxLine/40)+1) + `{"id":"y","pk":"p"}]`
	longObject := `{"id":"big","pk":"p","pad":"` + strings.Repeat("z", lineio.MaxLine) + `"}`
	runAdversarial(t, []adversarialCase{{
		name:  "3000 versions of one id: the last line wins",
		args:  append(create, "--concurrency", "16"),
		stdin: versionsOfOneID(3000),
		code:  0,
		check: func(t *testing.T, dir string) {
			docs := countItems(t, dir, "db", "c")
			if v := docs["hot"]["v"]; v != float64(2999) {
				t.Errorf("hot has v = %v after importing its versions 0..2999 in order, want 2999", v)
			}
			if len(docs) != 301 {
				t.Errorf("%d documents, want 301", len(docs))
			}
		},
	}, {
		name:  "a one-line JSON array over the document limit is rejected with a jq hint, the rest imported",
		args:  create,
		stdin: `{"id":"a","pk":"p"}` + "\n" + longArray + "\n" + `{"id":"b","pk":"p"}` + "\n",
		code:  3,
		stderr: []string{
			`(?m)^cfp: line 2: longer than 2 MiB, the service's document limit; the line looks like a JSON array: .*jq -c '\.\[\]'`,
			`(?m)^imported 2, rejected 1,`,
			`(?m)^cfp: 1 of 3 lines rejected$`,
		},
		check: func(t *testing.T, dir string) {
			if docs := countItems(t, dir, "db", "c"); len(docs) != 2 || docs["a"] == nil || docs["b"] == nil {
				t.Errorf("documents %v, want a and b", docs)
			}
		},
	}, {
		name:   "an object over the document limit is rejected without a hint",
		args:   create,
		stdin:  longObject + "\n" + `{"id":"b","pk":"p"}`,
		code:   3,
		stderr: []string{`(?m)^cfp: line 1: longer than 2 MiB, the service's document limit$`, `(?m)^imported 1, rejected 1,`},
	}, {
		name:   "an over-long last line without a line end",
		args:   create,
		stdin:  `{"id":"b","pk":"p"}` + "\n" + longObject,
		code:   3,
		stderr: []string{`(?m)^cfp: line 2: longer than 2 MiB`, `(?m)^imported 1, rejected 1,`},
	}})
}

func TestAdversarial_ImportEndlessInputIsBounded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ios, _, _, errOut := render.Test()
	zeros := &endlessZeros{}
	ios.In = zeros
	env := map[string]string{"NO_COLOR": "1", "COSMOS_KEY": auth.WellKnownKey}
	args := []string{"--local=" + dir, "import", "-d", "db", "-c", "c", "--create", "--partition-key-path", "/pk"}
	code := MainWithIO(context.Background(), args, ios, func(k string) string { return env[k] })
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s", code, errOut)
	}
	if !regexp.MustCompile(`(?m)^cfp: read standard input: line 1 has no end in its first 64 MiB: not JSON lines, stopped reading$`).MatchString(errOut.String()) {
		t.Errorf("stderr:\n%s", errOut)
	}
	// The skip limit plus one buffer: the input is abandoned, not read forever.
	if n := zeros.read.Load(); n > lineio.MaxSkip+lineio.MaxLine+1<<20 {
		t.Errorf("read %d bytes of an endless input, want at most about %d", n, lineio.MaxSkip)
	}
}

func TestAdversarial_ImportServerErrorStopsAtOnce(t *testing.T) {
	t.Parallel()
	emu, endpoint := serveEmulator(t)
	ctx := context.Background()
	code, _, stderr := runCLI(t, ctx, "", "--endpoint", endpoint, "import", "-d", "db", "-c", "c", "--create", "--partition-key-path", "/pk", "/dev/null")
	if code != 0 {
		t.Fatalf("creating the container: exit %d\n%s", code, stderr)
	}
	// The first line is imported before the service starts failing every request.
	pr, pw := io.Pipe()
	ios, _, _, errOut := render.Test()
	ios.In = pr
	done := make(chan int, 1)
	go func() {
		env := map[string]string{"NO_COLOR": "1", "COSMOS_KEY": auth.WellKnownKey}
		done <- MainWithIO(ctx, []string{"--endpoint", endpoint, "import", "-d", "db", "-c", "c"}, ios, func(k string) string { return env[k] })
	}()
	if _, err := io.WriteString(pw, `{"id":"first","pk":"p"}`+"\n"); err != nil {
		t.Fatal(err)
	}
	for n := 0; n == 0; {
		time.Sleep(5 * time.Millisecond)
		var err error
		if n, err = emu.ScanChangeFeed("db", "c", 10, func([]byte) {}); err != nil {
			t.Fatal(err)
		}
	}
	if err := emu.InjectFaults(emulator.FaultRule{Status: 500}); err != nil {
		t.Fatal(err)
	}
	go func() {
		var in strings.Builder
		for i := range 2000 {
			fmt.Fprintf(&in, `{"id":"d%d","pk":"p%d"}`+"\n", i, i%5)
		}
		_, _ = io.WriteString(pw, in.String())
		pw.Close()
	}()
	code = <-done
	pr.Close()
	emu.ClearFaults()
	stderr = errOut.String()
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s", code, stderr)
	}
	if !regexp.MustCompile(`(?m)^cfp: line \d+: .*HTTP 500`).MatchString(stderr) {
		t.Errorf("no server error line:\n%s", stderr)
	}
	if strings.Count(stderr, "\n") > 4 || strings.Contains(stderr, "rejected") && !strings.Contains(stderr, "rejected 0,") {
		t.Errorf("the import went on line by line after a server error:\n%s", stderr)
	}
}

var _ io.Reader = (*endlessZeros)(nil)

// bootstrapLeases creates shop/orders (4 partitions) and the leases of processor proc in
// shop/leases, as a processor's first start does, and returns the lease prefix.
func bootstrapLeases(t *testing.T, dir, proc string) string {
	t.Helper()
	ctx := context.Background()
	acct := openLocal(t, dir, 4)
	defer acct.Close()
	c := createContainer(t, acct, "shop", "orders", "/id")
	createContainer(t, acct, "shop", "leases", "/id")
	store := processorStore(t, acct, c, proc)
	p, err := feed.NewProcessor(c, store, feed.HandlerFunc(func(context.Context, feed.Batch) error { return nil }),
		feed.ProcessorOptions{Instance: "host-1", StartFrom: feed.StartFrom{Kind: feed.StartBeginning}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Bootstrap(ctx); err != nil {
		t.Fatal(err)
	}
	return store.Prefix()
}

func TestAdversarial_ProcessorWithoutLeases(t *testing.T) {
	t.Parallel()
	withLeases := func(t *testing.T, dir string) []string { bootstrapLeases(t, dir, "orders-proj"); return nil }
	noLeases := func(t *testing.T, dir string) []string {
		acct := openLocal(t, dir, 4)
		defer acct.Close()
		createContainer(t, acct, "shop", "orders", "/id")
		createContainer(t, acct, "shop", "leases", "/id")
		return nil
	}
	typo := `(?m)^cfp: no leases for processor "orders-prj" in lease container shop/leases \(did you mean orders-proj\?\); found: orders-proj$`
	hint := `(?m)^Try: check -p/--processor`
	target := []string{"-d", "shop", "-c", "orders", "-p", "orders-prj"}
	stillThere := func(t *testing.T, dir string) {
		acct := openLocal(t, dir, 4)
		defer acct.Close()
		ls, err := processorStore(t, acct, acct.Container("shop", "orders"), "orders-proj").List(context.Background())
		if err != nil || len(ls) != 4 {
			t.Errorf("the real processor's leases: %d, %v; want 4", len(ls), err)
		}
	}
	runAdversarial(t, []adversarialCase{
		{name: "estimate with a typo", args: append([]string{"estimate", "--max-lag", "1000"}, target...), setup: withLeases,
			code: 5, stderr: []string{typo, hint}},
		{name: "estimate --allow-empty reports the .NET estimator's 1", setup: withLeases,
			args: append([]string{"estimate", "--allow-empty", "--jq", ".summary.total_lag"}, target...),
			code: 0, stdout: []string{`^1\n$`}},
		{name: "estimate in a lease container without leases", args: append([]string{"estimate"}, target...), setup: noLeases,
			code: 5, stderr: []string{`(?m)^cfp: no leases for processor "orders-prj" in lease container shop/leases \(it holds no other lease sets\)$`}},
		{name: "leases export with a typo", args: append([]string{"leases", "export"}, target...), setup: withLeases,
			code: 5, stderr: []string{typo}, stdout: []string{`^$`}},
		{name: "leases list with a typo", args: append([]string{"leases", "list"}, target...), setup: withLeases,
			code: 5, stderr: []string{typo}},
		{name: "leases reset with a typo", args: append([]string{"leases", "reset", "--to-lsn", "5", "--execute"}, target...), setup: withLeases,
			code: 5, stderr: []string{typo}, check: stillThere},
		{name: "leases delete with a typo", args: append([]string{"leases", "delete", "--execute"}, target...), setup: withLeases,
			code: 5, stderr: []string{typo}, check: stillThere},
		{name: "leases release with a typo", args: append([]string{"leases", "release", "--owner", "host-1", "--execute"}, target...), setup: withLeases,
			code: 5, stderr: []string{typo}},
		{name: "a lease prefix with a typo names the prefixes found", setup: withLeases,
			args: []string{"estimate", "-d", "shop", "-c", "orders", "--lease-id-prefix", "orders-prjlocalhost_x_y"},
			code: 5, stderr: []string{`(?m)^cfp: no leases for lease prefix "orders-prjlocalhost_x_y" in lease container shop/leases( \(did you mean [^)]*\))?; found: orders-projlocalhost_`}},
	})
}

func TestAdversarial_TailPartitionKey(t *testing.T) {
	t.Parallel()
	seeded := func(t *testing.T, dir string) []string {
		acct := openLocal(t, dir, 4)
		defer acct.Close()
		seed(t, acct, 0, 12)
		if err := acct.Container("db", "c").UpsertItem(context.Background(), "", []byte(`{"id":"empty-key","pk":""}`)); err != nil {
			t.Fatal(err)
		}
		return nil
	}
	tail := []string{"tail", "-d", "db", "-c", "c", "-e", "--from", "beginning"}
	runAdversarial(t, []adversarialCase{
		{name: "two components for a container with one path", setup: seeded, args: append(tail, "--partition-key", `["p1","x"]`),
			code: 2, stderr: []string{`(?m)^cfp: invalid --partition-key \["p1","x"\]: 2 component\(s\), but db/c is partitioned on /pk \(1\)$`}, stdout: []string{`^$`}},
		{name: "an object", setup: seeded, args: append(tail, "--partition-key", `{"pk":"p1"}`),
			code: 2, stderr: []string{`(?m)^cfp: invalid --partition-key .*not an object$`}},
		{name: "an object inside the array", setup: seeded, args: append(tail, "--partition-key", `[{"pk":"p1"}]`),
			code: 2, stderr: []string{`(?m)^cfp: invalid --partition-key .*component 1 is an array or object`}},
		{name: `"" is the empty-string key, not every partition`, setup: seeded, args: append(tail, "--partition-key", ""),
			code: 0, stdout: []string{`^\{"id":"empty-key","pk":""[,}][^\n]*\n$`}},
		{name: "the right key still works", setup: seeded, args: append(tail, "--partition-key", "p1", "--jq", ".id"),
			code: 0, stdout: []string{`^(d(1|4|7|10)\n){4}$`}},
	})
}

func TestAdversarial_EndlessFiles(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skip("no /dev/zero")
	}
	withLeases := func(t *testing.T, dir string) []string { bootstrapLeases(t, dir, "orders-proj"); return nil }
	runAdversarial(t, []adversarialCase{
		{name: "tail --from @/dev/zero", args: []string{"tail", "-d", "shop", "-c", "orders", "--from", "@/dev/zero"}, setup: withLeases,
			code: 1, stderr: []string{`(?m)^cfp: read tail state: /dev/zero is larger than 64 MiB$`}},
		{name: "replay-from @/dev/zero", args: []string{"replay-from", "@/dev/zero", "-d", "shop", "-c", "orders", "-p", "orders-proj"}, setup: withLeases,
			code: 2, stderr: []string{`(?m)^cfp: read tail state: /dev/zero is larger than 64 MiB$`}},
		{name: "leases import /dev/zero", args: []string{"leases", "import", "/dev/zero", "-d", "shop"}, setup: withLeases,
			code: 1, stderr: []string{`(?m)^cfp: read export: /dev/zero is larger than 64 MiB$`}},
		{name: "leases reset --to @/dev/zero", args: []string{"leases", "reset", "--to", "@/dev/zero", "-d", "shop", "-c", "orders", "-p", "orders-proj"}, setup: withLeases,
			code: 1, stderr: []string{`(?m)^cfp: read the export file: /dev/zero is larger than 64 MiB$`}},
	})
}

func TestAdversarial_LeasesImportFailingPartWayWritesNoInfo(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bootstrapLeases(t, dir, "orders-proj")
	ctx := context.Background()
	code, export, stderr := runCLI(t, ctx, "", "--local="+dir, "leases", "export", "-d", "shop", "-c", "orders", "-p", "orders-proj")
	if code != 0 {
		t.Fatalf("export: exit %d\n%s", code, stderr)
	}
	// A hostile lease document: over the service's 2 MB document limit, so its write fails.
	var e struct {
		Leases  []map[string]any `json:"leases"`
		Markers []map[string]any `json:"markers"`
	}
	var raw map[string]any
	if err := json.Unmarshal([]byte(export), &raw); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(export), &e); err != nil || len(e.Leases) != 4 || len(e.Markers) == 0 {
		t.Fatalf("export has %d leases, %d markers (%v)", len(e.Leases), len(e.Markers), err)
	}
	e.Leases[1]["pad"] = strings.Repeat("x", 3<<20)
	raw["leases"] = e.Leases
	b, _ := json.Marshal(raw)
	file := filepath.Join(t.TempDir(), "export.json")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runCLI(t, ctx, "", "--local="+dir, "leases", "import", file, "-d", "shop", "--lease-container", "leases2", "--create", "--execute")
	if code != 3 {
		t.Fatalf("import: exit %d, want 3 (partial failure)\n%s", code, stderr)
	}
	if !strings.Contains(stderr, ".info not written: 1 lease(s) were not written") {
		t.Errorf("stderr does not say the marker was held back:\n%s", stderr)
	}
	docs := countItems(t, dir, "shop", "leases2")
	for id := range docs {
		if strings.HasSuffix(id, ".info") {
			t.Errorf("the .info marker %s was written although a lease failed", id)
		}
	}
	if len(docs) != 3 {
		t.Errorf("lease container holds %d documents, want the 3 leases that could be written", len(docs))
	}
}

func TestAdversarial_ProcessWarnsOnUncoveredLeases(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bootstrapLeases(t, dir, "orders-proj")
	func() {
		acct := openLocal(t, dir, 4)
		defer acct.Close()
		store := processorStore(t, acct, acct.Container("shop", "orders"), "orders-proj")
		ls, err := store.List(context.Background())
		if err != nil || len(ls) != 4 {
			t.Fatalf("leases %d, %v", len(ls), err)
		}
		if err := store.Delete(context.Background(), ls[2]); err != nil {
			t.Fatal(err)
		}
	}()
	ios, _, _, _ := render.Test()
	var errOut syncBuffer
	ios.ErrOut = &errOut
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() {
		env := map[string]string{"NO_COLOR": "1"}
		done <- MainWithIO(ctx, []string{"--local=" + dir, "process", "-d", "shop", "-c", "orders", "-p", "orders-proj", "--events", "jsonl"}, ios, func(k string) string { return env[k] })
	}()
	for i := 0; !strings.Contains(errOut.String(), `"type":"started"`) && i < 2000; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	if !regexp.MustCompile(`warning: the leases of orders-projlocalhost_\S+ do not cover the key space: .*never processed`).MatchString(errOut.String()) {
		t.Errorf("no coverage warning at start:\n%s", errOut.String())
	}
}

func TestAdversarial_EventErrorsAreOneLine(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	p := newProcessEvents(&buf, eventsJSONL, func(s string) string { return s }, time.Now)
	p.notify(feed.Event{Type: feed.EventError, Lease: "0", Err: errors.New("child said:\nline two\r\n\tline three")})
	out := buf.String()
	if strings.Count(out, "\n") != 1 {
		t.Fatalf("event is not one line: %q", out)
	}
	var v struct{ Error string }
	if err := json.Unmarshal([]byte(out), &v); err != nil || strings.ContainsAny(v.Error, "\r\n\t") {
		t.Errorf("error field %q (%v) holds line ends", v.Error, err)
	}
}

func TestAdversarial_HostileStateFiles(t *testing.T) {
	t.Parallel()
	// One real state file of db/c (4 partitions), then hostile variants of it.
	dir := t.TempDir()
	func() {
		acct := openLocal(t, dir, 4)
		defer acct.Close()
		seed(t, acct, 0, 40)
		createContainer(t, acct, "db", "other", "/pk")
	}()
	good := filepath.Join(t.TempDir(), "good.state")
	code, _, stderr := runCLI(t, context.Background(), "", "--local="+dir, "tail", "-d", "db", "-c", "c", "-e", "--from", "beginning", "--save-state", good)
	if code != 0 {
		t.Fatalf("tail: exit %d\n%s", code, stderr)
	}
	b, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	var st map[string]any
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	ranges := st["ranges"].([]any)
	if len(ranges) != 4 || st["container"] != "c" || st["container_rid"] == nil || st["scope"] == nil {
		t.Fatalf("state file %s: want 4 ranges, the container and the scope", b)
	}
	variant := func(name string, edit func(m map[string]any)) string {
		m := map[string]any{}
		_ = json.Unmarshal(b, &m)
		edit(m)
		out, _ := json.Marshal(m)
		path := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(path, out, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	missing := variant("missing", func(m map[string]any) { m["ranges"] = []any{ranges[0], ranges[2], ranges[3]} })
	missingFirst := variant("missing-first", func(m map[string]any) { m["ranges"] = ranges[1:] })
	duplicate := variant("duplicate", func(m map[string]any) { m["ranges"] = append([]any{ranges[0]}, ranges...) })
	old := variant("old", func(m map[string]any) {
		for _, k := range []string{"scope", "database", "container", "container_rid"} {
			delete(m, k)
		}
	})
	tail := func(file string, coll string) []string {
		return []string{"--local=" + dir, "tail", "-d", "db", "-c", coll, "-e", "--from", "@" + file}
	}
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"a missing range", tail(missing, "c"), 1, `(?m)^cfp: read tail state \S+: no range covers \S+-\S+$`},
		{"a missing first range", tail(missingFirst, "c"), 1, `(?m)^cfp: read tail state \S+: no range covers -\S+$`},
		{"a duplicate range", tail(duplicate, "c"), 1, `(?m)^cfp: read tail state \S+: range \S+ appears twice$`},
		{"another container's state", tail(good, "other"), 2, `(?m)^cfp: state file \S+ was written for container db/c \(resource id \S+\), not db/other \(resource id \S+\)$`},
		{"replay-from another container's state", []string{"--local=" + dir, "replay-from", "@" + good, "-d", "db", "-c", "other", "-p", "r"}, 2, `(?m)^cfp: state file \S+ was written for container db/c`},
		{"an old state file without the container stays readable", tail(old, "c"), 0, `^$`},
		{"the state file itself resumes", tail(good, "c"), 0, `^$`},
	} {
		// Sequential: the cases share one data directory.
		code, stdout, stderr := runCLI(t, context.Background(), "", tc.args...)
		if code != tc.code || !regexp.MustCompile(tc.stderr).MatchString(stderr) {
			t.Errorf("%s: exit %d, want %d; stderr does not match %s:\n%s", tc.name, code, tc.code, tc.stderr, stderr)
		}
		if tc.code != 0 && stdout != "" {
			t.Errorf("%s: stdout %q", tc.name, stdout)
		}
	}
}

func TestAdversarial_ResetPastTheLatestLSN(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bootstrapLeases(t, dir, "orders-proj")
	func() {
		acct := openLocal(t, dir, 4)
		defer acct.Close()
		c := acct.Container("shop", "orders")
		for i := range 20 {
			if err := c.UpsertItem(context.Background(), fmt.Sprintf("o%d", i), []byte(fmt.Sprintf(`{"id":"o%d"}`, i))); err != nil {
				t.Fatal(err)
			}
		}
	}()
	ctx := context.Background()
	target := []string{"--local=" + dir, "-d", "shop", "-c", "orders", "-p", "orders-proj"}
	reset := func(extra ...string) (int, string, string) {
		return runCLI(t, ctx, "", append(append([]string{"leases", "reset", "--to-lsn", "1000000"}, target...), extra...)...)
	}
	// The plan marks every lease and warns; --execute refuses before writing.
	code, stdout, stderr := reset("-o", "table")
	if code != 0 || !strings.Contains(stdout, "past the latest LSN") || !strings.Contains(stderr, "--to-lsn 1000000 is past the latest LSN of 4 lease(s)' partitions") {
		t.Fatalf("plan: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	code, _, stderr = reset("--execute")
	if code != 1 || !regexp.MustCompile(`(?m)^cfp: --to-lsn 1000000 is past the latest LSN of 4 lease\(s\)' partitions \(0 latest \d+, `).MatchString(stderr) {
		t.Fatalf("--execute: exit %d, want 1\n%s", code, stderr)
	}
	code, _, stderr = runCLI(t, ctx, "", append([]string{"leases", "list", "--check"}, target...)...)
	if code != 0 {
		t.Fatalf("--check before the reset: exit %d\n%s", code, stderr)
	}
	// --force writes it; --check then reports every such lease.
	if code, _, stderr = reset("--execute", "--force"); code != 0 {
		t.Fatalf("--execute --force: exit %d\n%s", code, stderr)
	}
	code, _, stderr = runCLI(t, ctx, "", append([]string{"leases", "list", "--check"}, target...)...)
	if code != 3 || strings.Count(stderr, "beyond-latest-lsn: continuation LSN 1000000 is past the partition's latest LSN") != 4 {
		t.Errorf("--check after the reset: exit %d, want 3 with 4 findings\n%s", code, stderr)
	}
}
