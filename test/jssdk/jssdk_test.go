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
	"testing"
	"time"

	"github.com/cfp-dev/cfp/internal/testproc"
)

// pinnedSDK is the @azure/cosmos version of package.json and package-lock.json.
const pinnedSDK = "4.10.1"

// scriptTimeout bounds one run of check.mjs; it takes about a minute on a busy machine.
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
	"TLS on the same port, trusting the exported certificate",
	"patch: incr, add, remove, and a failed condition is 412",
	"transactional batch: all or nothing",
	"stored procedure: its writes commit together or not at all",
	"pre-trigger and user-defined function",
	"resource token: a Read permission reads its container and writes nothing",
	"offers: manual throughput read and replaced",
	"aggregates within a partition key",
	"items.bulk over several partition keys: create, upsert, replace, read, delete, a 409",
	"items.executeBulkOperations over several partition keys",
	"property: generated queries through the SDK match a JavaScript evaluation",
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
	bin, err := testproc.Build(dir)
	if err != nil {
		t.Fatal(err)
	}
	logName := filepath.Join(dir, "emulator.log")
	emu := startEmulator(t, bin, dir, logName)

	ctx, cancel := context.WithTimeout(context.Background(), scriptTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "check.mjs")
	cmd.Env = append(testproc.CleanEnv(), "COSMOS_ENDPOINT="+emu.Endpoint, "COSMOS_KEY="+emu.Key,
		"CFP_EMULATOR_CERT="+filepath.Join(dir, "data", "emulator.pem"))
	// The property check's seed and size: set, they replay a failure it printed.
	for _, name := range []string{"CFP_JSSDK_SEED", "CFP_JSSDK_QUERIES"} {
		if v := os.Getenv(name); v != "" {
			cmd.Env = append(cmd.Env, name+"="+v)
		}
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	runErr := cmd.Run()
	t.Logf("check.mjs ran in %v", time.Since(start).Round(time.Millisecond))

	var sum summary
	if err := json.Unmarshal(stdout.Bytes(), &sum); err != nil {
		t.Fatalf("check.mjs printed no summary (%v, %v)\nstdout:\n%s\nstderr:\n%s\nemulator log:\n%s",
			runErr, err, stdout.Bytes(), stderr.Bytes(), testproc.Tail(logName, 30))
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
			sum.Passed, sum.Failed, runErr, stderr.Bytes(), testproc.Tail(logName, 30))
	}
	if err := emu.Stop(); err != nil {
		t.Error(err)
	}
	checkTraffic(t, logName, sum.Database)
}

// checkTraffic checks in the emulator's request log what the script cannot see: the SDK reads
// the account once per client (the account's locations are usable, so it does not re-read it before every
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
	// One read per client: the checks' main client, the TLS check's and the resource-token check's.
	if accountReads == 0 || accountReads > 3 {
		t.Errorf("the SDK read the account %d times, want 1 to 3, one per client (more means it does not trust the account's locations)", accountReads)
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

// startEmulator serves dir/data with 4 partitions per container on a free loopback port, logs
// every request as JSON to logName, and stops it when the test ends.
func startEmulator(t *testing.T, bin, dir, logName string) *testproc.Emulator {
	t.Helper()
	e, err := testproc.StartEmulator(bin, testproc.EmulatorOptions{
		Data:         filepath.Join(dir, "data"),
		Args:         []string{"--partitions", "4", "--log-level", "debug", "--log-format", "json"},
		Log:          logName,
		StartTimeout: 30 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Stop(); err != nil {
			t.Error(err)
		}
	})
	return e
}
