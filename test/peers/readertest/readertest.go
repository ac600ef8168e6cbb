// Package readertest checks a change feed reader of another SDK (Python's azure-cosmos,
// JavaScript's @azure/cosmos: they have no change feed processor) against a served `cfp
// emulator` over TLS: read per feed range from the beginning, save the continuations, resume
// from them across a split, and deliver every change once, in _lsn order per partition key.
// The tests of test/peers/python and test/peers/js drive it.
package readertest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/internal/account"
	"github.com/cfp-dev/cfp/internal/testproc"
)

// Names of the emulator's database and container.
const (
	Database  = "shop"
	Container = "orders"
)

// Missing skips the test for a missing tool, or fails it under CI=true.
func Missing(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true and "+format, args...)
	}
	t.Skipf(format, args...)
}

// World is a served emulator with the container the readers read.
type World struct {
	t        *testing.T
	Dir      string
	bin      string
	emu      *testproc.Emulator
	Endpoint string // https://127.0.0.1:PORT/
	PEM      string // the emulator's certificate, to trust
	Key      string
	acct     *account.Account
	written  int
}

// NewWorld builds cfp, serves the emulator (4 partitions) and creates shop/orders on /pk.
func NewWorld(t *testing.T) *World {
	t.Helper()
	w := &World{t: t, Dir: t.TempDir()}
	bin, err := testproc.Build(w.Dir)
	if err != nil {
		t.Fatal(err)
	}
	w.bin = bin
	logName := filepath.Join(w.Dir, "emulator.log")
	e, err := testproc.StartEmulator(bin, testproc.EmulatorOptions{
		Data: filepath.Join(w.Dir, "data"), Args: []string{"--partitions", "4"},
		Log: logName, StartTimeout: 30 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	w.emu, w.Key = e, e.Key
	t.Cleanup(func() {
		if err := e.Stop(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("emulator log, last lines:\n%s", testproc.Tail(logName, 40))
		}
	})
	w.Endpoint = strings.Replace(e.Endpoint, "http://", "https://", 1)
	w.PEM = filepath.Join(w.Dir, "data", "emulator.pem")
	ctx := context.Background()
	acct, err := account.Open(ctx, account.Config{Endpoint: w.Endpoint, Key: e.Key, CAFile: w.PEM})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = acct.Close() })
	w.acct = acct
	if err := acct.CreateDatabaseIfNotExists(ctx, Database); err != nil {
		t.Fatal(err)
	}
	if _, err := acct.CreateContainerIfNotExists(ctx, Database, Container, "/pk", nil); err != nil {
		t.Fatal(err)
	}
	return w
}

// Write creates n more documents {"id":"doc-NNNN","pk":"key-K"} over 7 partition keys.
func (w *World) Write(n int) {
	w.t.Helper()
	c := w.acct.Container(Database, Container)
	for range n {
		i := w.written
		id, pk := fmt.Sprintf("doc-%04d", i), fmt.Sprintf("key-%d", i%7)
		body := fmt.Sprintf(`{"id":%q,"pk":%q,"n":%d}`, id, pk, i)
		if err := c.UpsertItem(context.Background(), pk, []byte(body)); err != nil {
			w.t.Fatal(err)
		}
		w.written++
	}
}

// Split splits the physical partition rangeID with `cfp emulator split` over TLS.
func (w *World) Split(rangeID string) {
	w.t.Helper()
	cmd := exec.Command(w.bin, "emulator", "split", "--endpoint", w.Endpoint, "--ca-file", w.PEM,
		"-d", Database, "-c", Container, "--range", rangeID)
	cmd.Env = append(testproc.CleanEnv(), "COSMOS_KEY="+w.Key)
	if out, err := cmd.CombinedOutput(); err != nil {
		w.t.Fatalf("cfp emulator split --range %s: %v\n%s", rangeID, err, out)
	}
}

// Env is the environment of a reader: COSMOS_KEY and more (the trust variables).
func (w *World) Env(more ...string) []string {
	return append(append(testproc.CleanEnv(), "COSMOS_KEY="+w.Key), more...)
}

// Change is one line a reader printed.
type Change struct {
	ID    string `json:"id"`
	PK    string `json:"pk"`
	LSN   int64  `json:"lsn"`
	Range int    `json:"range"`
}

// Read runs the reader command cmd once and returns the changes it printed.
func (w *World) Read(cmd *exec.Cmd) []Change {
	w.t.Helper()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		w.t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, stderr.Bytes())
	}
	var chs []Change
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var c Change
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil || c.ID == "" {
			w.t.Fatalf("reader printed %q, not a change (%v)", sc.Text(), err)
		}
		chs = append(chs, c)
	}
	return chs
}

// Check runs the scenario: 100 changes, a read from the beginning; two partitions split, 100
// more changes, a read resumed from the saved continuations; 50 more, a third read; a fourth
// read finds nothing. reader returns the command of one run on the state file state.
func Check(t *testing.T, w *World, reader func(state string) *exec.Cmd) {
	state := filepath.Join(w.Dir, "reader-state.json")
	var all []Change
	read := func(want int) {
		t.Helper()
		got := w.Read(reader(state))
		t.Logf("read %d changes", len(got))
		if len(got) != want {
			t.Errorf("a read delivered %d changes, want the %d written since the last", len(got), want)
		}
		all = append(all, got...)
	}
	w.Write(100)
	read(100)
	w.Split("0")
	w.Split("2")
	w.Write(100)
	read(100)
	w.Write(50)
	read(50)
	read(0)

	seen := map[string]int{}
	last := map[string]int64{}
	for _, c := range all {
		seen[c.ID]++
		if c.LSN <= last[c.PK] {
			t.Errorf("%s (pk %s) at _lsn %d comes after _lsn %d of the same partition key", c.ID, c.PK, c.LSN, last[c.PK])
		}
		last[c.PK] = c.LSN
	}
	for i := range w.written {
		if id := fmt.Sprintf("doc-%04d", i); seen[id] != 1 {
			t.Errorf("%s delivered %d times, want once", id, seen[id])
		}
	}
	t.Logf("%d changes written, %d delivered over 4 reads across a split of 2 of 4 partitions", w.written, len(all))
}
