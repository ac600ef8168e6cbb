package cmd

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain_OneStopDeliveredTwice: a stop signal that arrives twice in quick succession, as
// timeout(1) and process-group kills deliver it, is one graceful stop: an interrupted tail
// still writes its summary and exits 130 (the second signal used to end cfp at once, by
// SIGINT, with neither).
func TestMain_OneStopDeliveredTwice(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	state := filepath.Join(dir, "tail.state")
	// More changes than a pipe holds: the tail blocks on a stdout nobody reads, so its
	// graceful stop takes a while (it waits for stdout before it gives up), as a slow reader
	// makes it.
	var docs strings.Builder
	for i := range 400 {
		fmt.Fprintf(&docs, `{"id":"d%d","pad":%q}`+"\n", i, strings.Repeat("x", 400))
	}
	imp := exec.Command("cfp", "--local="+filepath.Join(dir, "data"), "import", "-d", "shop", "-c", "orders", "--create")
	imp.Stdin = strings.NewReader(docs.String())
	if out, err := imp.CombinedOutput(); err != nil {
		t.Fatalf("import: %v\n%s", err, out)
	}
	c := exec.Command("cfp", "--local="+filepath.Join(dir, "data"), "tail", "-d", "shop", "-c", "orders",
		"--from", "beginning", "--save-state", state, "--save-every", "50ms")
	var stderr bytes.Buffer
	c.Stderr = &stderr
	stdout, err := c.StdoutPipe() // never read
	if err != nil {
		t.Fatal(err)
	}
	defer stdout.Close()
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Process.Kill()
	// The tail runs once it has saved its state.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(state); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the tail never saved its state:\n%s", stderr.String())
		}
	}
	_ = c.Process.Signal(syscall.SIGINT)
	time.Sleep(50 * time.Millisecond)
	_ = c.Process.Signal(syscall.SIGINT)
	err = c.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("tail ended with %v, want exit 130\n%s", err, stderr.String())
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		t.Fatalf("tail was killed by %v instead of stopping\n%s", ws.Signal(), stderr.String())
	}
	if ee.ExitCode() != 130 || !strings.Contains(stderr.String(), "tail interrupted: ") {
		t.Errorf("exit %d, stderr:\n%s\nwant exit 130 and the summary line", ee.ExitCode(), stderr.String())
	}
}

// TestTail_InterruptedWithABlockedStdoutEndsOnALine: `cfp tail` writes to a pipe nobody reads
// until it is interrupted; the reader drains the pipe after cfp exited, and what it reads must
// end at a line boundary, every line a whole change (cfp writes lines up to PIPE_BUF in pieces
// a pipe takes whole or not at all). cfp wrote its output buffer (64 KiB of
// lines) with one write, which a full pipe took in part: the process ended with the write
// half done and the reader's last line torn.
func TestTail_InterruptedWithABlockedStdoutEndsOnALine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	state := filepath.Join(dir, "tail.state")
	// Lines of uneven length, more than a pipe holds. (Lines longer than a pipe's atomic write,
	// which cfp completes when the reader takes them within render.OpenLineGrace, are
	// render's TestChangeWriter_InterruptedOnABlockedPipeStopsAtALineEnd.)
	var docs strings.Builder
	for i := range 600 {
		fmt.Fprintf(&docs, `{"id":"d%d","pad":%q}`+"\n", i, strings.Repeat("x", 200+i*37%500))
	}
	imp := exec.Command("cfp", "--local="+filepath.Join(dir, "data"), "import", "-d", "shop", "-c", "orders", "--create")
	imp.Stdin = strings.NewReader(docs.String())
	if out, err := imp.CombinedOutput(); err != nil {
		t.Fatalf("import: %v\n%s", err, out)
	}
	c := exec.Command("cfp", "--local="+filepath.Join(dir, "data"), "tail", "-d", "shop", "-c", "orders",
		"--from", "beginning", "-o", "jsonl", "--save-state", state, "--save-every", "50ms")
	var stderr bytes.Buffer
	c.Stderr = &stderr
	stdout, err := c.StdoutPipe() // read only after cfp exited
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Process.Kill()
	// The tail runs once it has saved its state; by then its stdout is full.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(state); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the tail never saved its state:\n%s", stderr.String())
		}
	}
	_ = c.Process.Signal(syscall.SIGINT)
	// c.Wait would close stdout: wait for the process alone, and read what it left in the pipe.
	ps, err := c.Process.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if ps.ExitCode() != 130 {
		t.Fatalf("tail exited %d, want 130 (interrupted)\n%s", ps.ExitCode(), stderr.String())
	}
	out, err := io.ReadAll(stdout)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatalf("the tail wrote nothing before it was interrupted\n%s", stderr.String())
	}
	if out[len(out)-1] != '\n' {
		i := bytes.LastIndexByte(out, '\n')
		t.Fatalf("the output (%d bytes) ends inside a line: %d bytes after the last line end", len(out), len(out)-1-i)
	}
	for i, line := range bytes.Split(bytes.TrimSuffix(out, []byte("\n")), []byte("\n")) {
		if !json.Valid(line) {
			t.Fatalf("line %d of the output is not a whole change: %.80q", i+1, line)
		}
	}
}
