//go:build unix

package jssdk

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// pinnedSDK is the @azure/cosmos version of package.json and package-lock.json.
const pinnedSDK = "4.9.3"

// scriptTimeout bounds one run of check.mjs; it takes a few seconds.
const scriptTimeout = 3 * time.Minute

// summary is what check.mjs prints on stdout.
type summary struct {
	SDK      string `json:"sdk"`
	Database string `json:"database"`
	Passed   int    `json:"passed"`
	Failed   int    `json:"failed"`
	Checks   []struct {
		Name   string `json:"name"`
		OK     bool   `json:"ok"`
		Detail string `json:"detail"`
	} `json:"checks"`
}

// mustCheck are the checks that must have run (and passed); check.mjs may add more.
var mustCheck = []string{
	"database createIfNotExists",
	"container createIfNotExists /pk",
	"item create, read, replace If-Match, stale If-Match 412, delete",
	"item read of a missing id is 404",
	"cross-partition query with parameters, paged by maxItemCount",
	"items.readAll",
	"getFeedRanges",
	"change feed from Beginning: every live document once, at its latest version",
	"change feed from Now: only what is written after",
	"change feed from a continuation token: the rest, once",
	"partition-key-scoped change feed",
	"split in the middle of a change-feed read (4 partitions)",
	"merge in the middle of a change-feed read, and a token from before it",
}

func TestJSSDK(t *testing.T) {
	if os.Getenv("CFP_JSSDK") != "1" {
		t.Skip("set CFP_JSSDK=1 to check the emulator against @azure/cosmos (needs node and npm)")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("CFP_JSSDK=1 needs node on PATH: %v", err)
	}
	installSDK(t)
	dir := t.TempDir()
	bin := buildCFP(t, dir)
	emu := startEmulator(t, bin, dir)

	ctx, cancel := context.WithTimeout(context.Background(), scriptTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "check.mjs")
	cmd.Env = append(cleanEnv(), "COSMOS_ENDPOINT="+emu.endpoint, "COSMOS_KEY="+emu.key)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	runErr := cmd.Run()
	t.Logf("check.mjs ran in %v", time.Since(start).Round(time.Millisecond))

	var sum summary
	if err := json.Unmarshal(stdout.Bytes(), &sum); err != nil {
		t.Fatalf("check.mjs printed no summary (%v, %v)\nstdout:\n%s\nstderr:\n%s\nemulator log:\n%s",
			runErr, err, stdout.Bytes(), stderr.Bytes(), tail(emu.log, 30))
	}
	if sum.SDK != pinnedSDK {
		t.Errorf("check.mjs ran @azure/cosmos %s, want %s (run npm ci in test/jssdk)", sum.SDK, pinnedSDK)
	}
	ran := map[string]bool{}
	for _, c := range sum.Checks {
		ran[c.Name] = true
		t.Run(c.Name, func(t *testing.T) {
			if !c.OK {
				t.Error(c.Detail)
				return
			}
			t.Log(c.Detail)
		})
	}
	for _, name := range mustCheck {
		if !ran[name] {
			t.Errorf("check %q did not run", name)
		}
	}
	if runErr != nil || sum.Failed > 0 {
		t.Errorf("check.mjs: %d passed, %d failed (%v)\nstderr:\n%s\nemulator log:\n%s",
			sum.Passed, sum.Failed, runErr, stderr.Bytes(), tail(emu.log, 30))
	}
	emu.stop(t)
	checkTraffic(t, emu.log, sum.Database)
}

// checkTraffic checks in the emulator's request log what the script cannot see: the SDK reads
// the account once (the account's locations are usable, so it does not re-read it before every
// request), the splits and the merge reached the SDK as "partition gone" on a change-feed read
// (so the check did follow a split, not a fresh range list), and nothing failed on the server's
// side or for a bad signature.
func checkTraffic(t *testing.T, logName, database string) {
	t.Helper()
	f, err := os.Open(logName)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	accountReads := 0
	gone := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var rec struct {
			Msg    string `json:"msg"`
			Method string `json:"method"`
			Path   string `json:"path"`
			Status int    `json:"status"`
		}
		if json.Unmarshal(sc.Bytes(), &rec) != nil || rec.Msg != "request" {
			continue
		}
		switch {
		case rec.Method == "GET" && rec.Path == "/":
			accountReads++
		case rec.Status == 410:
			gone[rec.Path]++
		case rec.Status == 401 || rec.Status >= 500:
			t.Errorf("the emulator answered %s %s with %d", rec.Method, rec.Path, rec.Status)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if accountReads == 0 || accountReads > 2 {
		t.Errorf("the SDK read the account %d times, want 1 or 2 (more means it does not trust the account's locations)", accountReads)
	}
	for _, coll := range []string{"split", "merge"} {
		if p := "/dbs/" + database + "/colls/" + coll + "/docs"; gone[p] == 0 {
			t.Errorf("no change-feed read of %s was answered 410 (gone): the %s did not happen under the iterator", p, coll)
		}
	}
}

// installSDK runs npm ci unless node_modules already holds the pinned SDK.
func installSDK(t *testing.T) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("node_modules", "@azure", "cosmos", "package.json"))
	if err == nil {
		var pkg struct {
			Version string `json:"version"`
		}
		if json.Unmarshal(b, &pkg) == nil && pkg.Version == pinnedSDK {
			return
		}
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Fatalf("CFP_JSSDK=1 needs npm on PATH to install @azure/cosmos: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in test/jssdk: %v\n%s", err, out)
	}
}

// buildCFP builds the cfp binary into dir and returns its path.
func buildCFP(t *testing.T, dir string) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the test builds cfp and needs the go command: %v", err)
	}
	bin := filepath.Join(dir, "cfp")
	if out, err := exec.Command(gobin, "build", "-o", bin, "github.com/cfp-dev/cfp").CombinedOutput(); err != nil {
		t.Fatalf("go build cfp: %v\n%s", err, out)
	}
	return bin
}

// emulatorProc is a `cfp emulator` child process.
type emulatorProc struct {
	cmd      *exec.Cmd
	done     chan struct{}
	err      error // Wait's result, once done is closed
	endpoint string
	key      string
	log      string
}

// startEmulator serves dir/data with 4 partitions per container on a free loopback port, logs
// every request as JSON to dir/emulator.log, and waits for its "serving" line.
func startEmulator(t *testing.T, bin, dir string) *emulatorProc {
	t.Helper()
	out := filepath.Join(dir, "emulator.out")
	logName := filepath.Join(dir, "emulator.log")
	stdout, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer stdout.Close()
	stderr, err := os.Create(logName)
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	cmd := exec.Command(bin, "emulator", "--addr", "127.0.0.1:0", "--data", filepath.Join(dir, "data"),
		"--partitions", "4", "--log-level", "debug", "--log-format", "json", "-o", "jsonl")
	cmd.Env = cleanEnv()
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start cfp emulator: %v", err)
	}
	e := &emulatorProc{cmd: cmd, log: logName, done: make(chan struct{})}
	go func() {
		e.err = cmd.Wait()
		close(e.done)
	}()
	t.Cleanup(func() { e.stop(t) })

	var view struct {
		Type     string `json:"type"`
		Endpoint string `json:"endpoint"`
		Key      string `json:"key"`
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, _ := os.ReadFile(out)
		if line, _, ok := bytes.Cut(b, []byte{'\n'}); ok {
			if err := json.Unmarshal(line, &view); err != nil || view.Type != "serving" || view.Endpoint == "" || view.Key == "" {
				t.Fatalf("cfp emulator printed a line that is not a serving line with an endpoint and the well-known key (%v)", err)
			}
			break
		}
		if e.exited() || time.Now().After(deadline) {
			t.Fatalf("cfp emulator did not start serving:\n%s", tail(logName, 20))
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.endpoint, e.key = view.Endpoint, view.Key
	return e
}

// stop interrupts the emulator and waits for it (idempotent).
func (e *emulatorProc) stop(t *testing.T) {
	t.Helper()
	if e.exited() {
		return
	}
	_ = e.cmd.Process.Signal(os.Interrupt)
	select {
	case <-e.done:
		if e.err != nil {
			t.Errorf("cfp emulator did not stop cleanly on SIGINT: %v\n%s", e.err, tail(e.log, 10))
		}
	case <-time.After(20 * time.Second):
		_ = e.cmd.Process.Kill()
		<-e.done
		t.Errorf("cfp emulator ignored SIGINT for 20s; killed")
	}
}

// exited reports whether the emulator has ended.
func (e *emulatorProc) exited() bool {
	select {
	case <-e.done:
		return true
	default:
		return false
	}
}

// cleanEnv is the test's environment without cfp's and the SDK's variables, so that an account
// configured in the caller's shell is never reached or printed.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "COSMOS_") || strings.HasPrefix(kv, "CFP_") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// tail returns the last n lines of a file, for failure messages.
func tail(name string, n int) string {
	b, err := os.ReadFile(name)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
