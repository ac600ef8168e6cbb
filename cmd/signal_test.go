package cmd

import (
	"bytes"
	"errors"
	"fmt"
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
