//go:build linux || darwin

package cmd

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/charmbracelet/x/vt"
	"github.com/creack/pty"
)

// ptyScreen is a cfp process on a pseudo-terminal whose output a virtual terminal interprets,
// so a test sees the screen as a user would: what is left of earlier frames included.
type ptyScreen struct {
	t    *testing.T
	ptmx *os.File
	cmd  *exec.Cmd
	done chan struct{}
	read chan struct{} // closed when all the output was read
	// changed is signalled after each piece of output reached the screen.
	changed chan struct{}
	err     error

	mu  sync.Mutex
	emu *vt.Emulator
	raw strings.Builder // every byte cfp wrote to the terminal
}

// startOnPty runs the cfp of this test binary with args on a width x height terminal, or
// skips the test where no pseudo-terminal can be had.
func startOnPty(t *testing.T, dir string, width, height int, args ...string) *ptyScreen {
	t.Helper()
	return startProgramOnPty(t, dir, width, height, "cfp", args...) // testscript.Main (TestMain) put this binary on PATH as cfp
}

// startProgramOnPty is startOnPty for another program on PATH (sh, to redirect cfp's stdout).
func startProgramOnPty(t *testing.T, dir string, width, height int, program string, args ...string) *ptyScreen {
	t.Helper()
	self, err := exec.LookPath(program)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, args...)
	cmd.Dir = dir
	cmd.Env = []string{"TERM=xterm-256color", "HOME=" + dir, "PATH=" + os.Getenv("PATH"), "GOCOVERDIR=" + os.Getenv("GOCOVERDIR")}
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: uint16(width), Rows: uint16(height)})
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	s := &ptyScreen{t: t, ptmx: ptmx, cmd: cmd, done: make(chan struct{}), read: make(chan struct{}), changed: make(chan struct{}, 1), emu: vt.NewEmulator(width, height)}
	go func() {
		defer close(s.read)
		buf := make([]byte, 32<<10)
		for {
			n, err := ptmx.Read(buf)
			if n > 0 {
				s.mu.Lock()
				_, _ = s.emu.Write(buf[:n])
				s.raw.Write(buf[:n])
				s.mu.Unlock()
				select {
				case s.changed <- struct{}{}:
				default:
				}
			}
			if err != nil {
				return
			}
		}
	}()
	// The terminal's answers to the program's queries go back as input.
	go func() { _, _ = io.Copy(ptmx, s.emu) }()
	go func() {
		s.err = cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-s.done
		_ = ptmx.Close()
		// s.emu is not closed: vt's Close races with the Read of the goroutine that copies the
		// terminal's answers (go test -race), which stays blocked in it until the test binary
		// ends.
	})
	return s
}

// screen returns the terminal's lines now.
func (s *ptyScreen) screen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Split(s.emu.String(), "\n")
}

// waitFor waits until ok holds for the screen, looking again each time output arrives, and
// fails the test after 30s.
func (s *ptyScreen) waitFor(what string, ok func([]string) bool) []string {
	s.t.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		lines := s.screen()
		if ok(lines) {
			return lines
		}
		select {
		case <-s.changed:
		case <-s.done:
			// The process ended: what it wrote last may still be on its way.
			select {
			case <-s.read:
			case <-deadline.C:
			}
			if lines := s.screen(); ok(lines) {
				return lines
			}
			s.t.Fatalf("cfp exited (%v) before the screen showed %s:\n%s", s.err, what, strings.Join(s.screen(), "\n"))
		case <-deadline.C:
			s.t.Fatalf("the screen never showed %s:\n%s", what, strings.Join(s.screen(), "\n"))
		}
	}
}

// keys types keys on the terminal: text as it is, or a named key (up, down, enter, esc).
func (s *ptyScreen) keys(keys ...string) {
	s.t.Helper()
	named := map[string]string{"up": "\x1b[A", "down": "\x1b[B", "enter": "\r", "esc": "\x1b", "backspace": "\x7f"}
	for _, k := range keys {
		if seq, ok := named[k]; ok {
			k = seq
		}
		if _, err := s.ptmx.WriteString(k); err != nil {
			s.t.Fatal(err)
		}
	}
}

// output returns every byte written to the terminal so far.
func (s *ptyScreen) output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.raw.String()
}

// resize changes the terminal's size, as a user dragging the window does.
func (s *ptyScreen) resize(width, height int) {
	s.t.Helper()
	s.mu.Lock()
	s.emu.Resize(width, height)
	s.mu.Unlock()
	if err := pty.Setsize(s.ptmx, &pty.Winsize{Cols: uint16(width), Rows: uint16(height)}); err != nil {
		s.t.Fatal(err)
	}
}

// exit waits for the process and returns its exit code.
func (s *ptyScreen) exit() int {
	s.t.Helper()
	select {
	case <-s.done:
	case <-time.After(60 * time.Second):
		s.t.Fatalf("cfp did not exit:\n%s", strings.Join(s.screen(), "\n"))
	}
	// The last output may still be in the pseudo-terminal: read it to the end (EIO once the
	// process is gone on Linux), or give up after a while where the end never comes.
	select {
	case <-s.read:
	case <-time.After(2 * time.Second):
	}
	var ee *exec.ExitError
	if errors.As(s.err, &ee) {
		return ee.ExitCode()
	}
	if s.err != nil {
		s.t.Fatal(s.err)
	}
	return 0
}

// count is how many lines of the screen contain sub.
func count(lines []string, sub string) int {
	n := 0
	for _, l := range lines {
		if strings.Contains(l, sub) {
			n++
		}
	}
	return n
}

// oneLiveFrame checks the screen holds exactly one frame of a live view: its title on the
// first line, one table header, the footer on the last line, nothing else of a frame.
func oneLiveFrame(t *testing.T, lines []string, height int, title string) {
	t.Helper()
	oneFrame(t, lines, height, title, "sort: ")
}

// oneFrame is oneLiveFrame for a view whose footer starts with footer.
func oneFrame(t *testing.T, lines []string, height int, title, footer string) {
	t.Helper()
	screen := strings.Join(lines, "\n")
	switch {
	case !strings.HasPrefix(lines[0], title):
		t.Errorf("the first line is not the view's title %q:\n%s", title, screen)
	case count(lines, "LEASE  ") != 1:
		t.Errorf("%d table headers, want one frame:\n%s", count(lines, "LEASE  "), screen)
	case len(lines) != height || !strings.HasPrefix(lines[height-1], footer):
		t.Errorf("the footer is not on the last of %d lines:\n%s", height, screen)
	case count(lines, footer) != 1 || count(lines, title) != 1:
		t.Errorf("debris of another frame:\n%s", screen)
	}
}

var liveSizes = []struct{ width, height int }{{80, 24}, {160, 45}}

// TestLive_DemoOwnsTheScreen: cfp demo on a real terminal at 80x24 and 160x45 shows one intact
// frame while it runs (also after a resize) and leaves exactly its summary behind, no debris.
func TestLive_DemoOwnsTheScreen(t *testing.T) {
	t.Parallel()
	for _, sz := range liveSizes {
		t.Run(fmt.Sprintf("%dx%d", sz.width, sz.height), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			s := startOnPty(t, dir, sz.width, sz.height, "demo", "--duration", "10s", "--data", filepath.Join(dir, "data"))
			live := func(lines []string) bool { return count(lines, "LEASE  ") > 0 && count(lines, "sort: ") > 0 }
			oneLiveFrame(t, s.waitFor("the live view", live), sz.height, "cfp demo")
			// After the split the table has 5 leases: still one frame.
			lines := s.waitFor("the split", func(l []string) bool { return live(l) && count(l, "split into") > 0 })
			oneLiveFrame(t, lines, sz.height, "cfp demo")
			// The other size: the view follows the terminal.
			w, h := 80+160-sz.width, 24+45-sz.height
			s.resize(w, h)
			lines = s.waitFor("the view at the new size", func(l []string) bool {
				return live(l) && len(l) == h && strings.HasPrefix(l[h-1], "sort: ")
			})
			oneLiveFrame(t, lines, h, "cfp demo")
			if code := s.exit(); code != 0 {
				t.Fatalf("exit %d:\n%s", code, strings.Join(s.screen(), "\n"))
			}
			lines = s.screen()
			screen := strings.Join(lines, "\n")
			for _, want := range []string{"Leases at the end:", "LEASE  ", "orders written", "lost              0"} {
				if count(lines, want) != 1 {
					t.Errorf("the final screen has %q %d times, want once:\n%s", want, count(lines, want), screen)
				}
			}
			if count(lines, "sort: ") != 0 || count(lines, "cfp demo  ") != 0 {
				t.Errorf("the live view left debris on the final screen:\n%s", screen)
			}
		})
	}
}

// TestLive_EstimateWatchOwnsTheScreen: cfp estimate --watch on a real terminal is a live view
// at 80x24 and 160x45 (sort keys work, q quits with exit 0) and leaves the last estimate, one
// table, behind.
func TestLive_EstimateWatchOwnsTheScreen(t *testing.T) {
	t.Parallel()
	for _, sz := range liveSizes {
		t.Run(fmt.Sprintf("%dx%d", sz.width, sz.height), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			seedWideLeases(t, dir)
			s := startOnPty(t, dir, sz.width, sz.height, "--local="+dir, "estimate", "-d", "shop", "-c", "orders", "-p", "proj", "--watch", "500ms")
			title := "cfp estimate  shop/orders  processor proj"
			lines := s.waitFor("two estimates", func(l []string) bool { return count(l, "LEASE  ") > 0 && count(l, "▁▁") > 0 })
			oneFrame(t, lines, sz.height, title, liveFooter)
			// l sorts by lag: the lease with the most pending changes comes first.
			s.keys("l")
			s.waitFor("the lag order", func(l []string) bool { return count(l, "s sort:lag") == 1 })
			if _, err := s.ptmx.WriteString("q"); err != nil {
				t.Fatal(err)
			}
			if code := s.exit(); code != 0 {
				t.Fatalf("exit %d after q:\n%s", code, strings.Join(s.screen(), "\n"))
			}
			lines = s.screen()
			screen := strings.Join(lines, "\n")
			if count(lines, "LEASE  ") != 1 || count(lines, "Total lag 16") != 1 || count(lines, "  owned  ") != 8 {
				t.Errorf("the final screen is not one estimate table:\n%s", screen)
			}
			if count(lines, liveFooter) != 0 || count(lines, title) != 0 {
				t.Errorf("the live view left debris on the final screen:\n%s", screen)
			}
		})
	}
}

// liveFooter starts the footer of the lease view of estimate --watch and process.
const liveFooter = "? keys  / filter"
