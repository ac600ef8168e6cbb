//go:build linux || darwin

package cmd

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
)

// TestTerminal_NotQueried: a command on a terminal does not ask the terminal for its colours.
// Bubble Tea's init asked every cfp command (version, leases list, ...) for the background
// colour; a terminal that does not answer (script, a CI pseudo-terminal, docker run -t) made
// each command wait out termenv's 5s timeout, and the query showed up in captured output.
func TestTerminal_NotQueried(t *testing.T) {
	t.Parallel()
	self, err := exec.LookPath("cfp") // testscript.Main (TestMain) put this binary on PATH as cfp
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cmd := exec.Command(self, "version")
	cmd.Dir = dir
	cmd.Env = []string{"TERM=xterm-256color", "HOME=" + dir, "PATH=" + os.Getenv("PATH"), "GOCOVERDIR=" + os.Getenv("GOCOVERDIR")}
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: 80, Rows: 24})
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer ptmx.Close()
	// A terminal that never answers: read everything, write nothing back.
	var out bytes.Buffer
	read := make(chan struct{})
	go func() { defer close(read); _, _ = io.Copy(&out, ptmx) }()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("cfp version: %v", err)
	}
	// Read to the end before closing: the child has exited and the terminal's other side is
	// closed, so the read ends (EIO) once everything written is read. Closing first could drop
	// what was not read yet (a loaded CI run saw "cfp version printed \"\"").
	select {
	case <-read:
	case <-time.After(10 * time.Second):
		_ = ptmx.Close()
		<-read
	}
	if s := out.String(); strings.Contains(s, "\x1b]11;?") || strings.Contains(s, "\x1b[6n") {
		t.Errorf("cfp version queried the terminal: %q", s)
	}
	if !strings.Contains(out.String(), "cfp") {
		t.Errorf("cfp version printed %q", out.String())
	}
}
