package cmd

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/internal/render"
)

// failingOut is a stdout whose every write fails, as a redirect to a full disk does.
type failingOut struct{}

func (failingOut) Write([]byte) (int, error) { return 0, errors.New("no space left on device") }

// TestTail_StateNeverRunsAheadOfTheOutput tails into a stdout that cannot be written: the
// changes never reach the output, so the state file must not count them as delivered, and a
// resume from it prints every change.
func TestTail_StateNeverRunsAheadOfTheOutput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	state := dir + "/tail.state"
	seedDir(t, dir, 0, 60)
	ios, _, _, errOut := render.Test()
	ios.Out = failingOut{}
	args := []string{"--local=" + dir, "tail", "-d", "db", "-c", "c", "-e", "--save-state", state}
	code := MainWithIO(context.Background(), append(args, "--from", "beginning"), ios, func(string) string { return "" })
	if code == 0 {
		t.Fatalf("exit 0 with an output that fails, stderr %q", errOut)
	}
	if _, err := os.Stat(state); err != nil {
		// Nothing saved: a resume has to start over, which loses nothing.
		return
	}
	code, out, e := run(t, nil, append(args, "--from", "@"+state)...)
	if code != 0 {
		t.Fatalf("resume: exit %d, stderr %q", code, e)
	}
	if n := strings.Count(out, "\n"); n != 60 {
		t.Fatalf("resume printed %d changes, want all 60: none reached the output of the first run", n)
	}
	wantExactly(t, ids(t, out), 0, 60)
}

// blockedOut is a stdout nobody reads: every write blocks until the test ends. entered is
// closed at the first write.
type blockedOut struct {
	once    sync.Once
	entered chan struct{}
	release chan struct{}
}

func (b *blockedOut) Write(p []byte) (int, error) {
	b.once.Do(func() { close(b.entered) })
	<-b.release
	return 0, errors.New("released")
}

// TestTail_SignalWhileStdoutBlocked: a tail whose stdout blocks still stops on SIGINT/SIGTERM
// (a cancelled context), saves its state, and the state counts only what reached stdout
// (nothing here), so a resume prints every change.
func TestTail_SignalWhileStdoutBlocked(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	state := dir + "/tail.state"
	seedDir(t, dir, 0, 60)
	ios, _, _, errOut := render.Test()
	out := &blockedOut{entered: make(chan struct{}), release: make(chan struct{})}
	t.Cleanup(func() { close(out.release) })
	ios.Out = out
	args := []string{"--local=" + dir, "tail", "-d", "db", "-c", "c", "--save-state", state}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- MainWithIO(ctx, append(args, "--from", "beginning"), ios, func(string) string { return "" })
	}()
	deadline := time.NewTimer(60 * time.Second)
	defer deadline.Stop()
	select {
	case <-out.entered:
	case <-deadline.C:
		t.Fatal("tail never wrote to stdout")
	}
	cancel() // what SIGINT does in Main
	var code int
	select {
	case code = <-done:
	case <-deadline.C:
		t.Fatal("tail did not return after the signal while its stdout was blocked")
	}
	if code != 130 {
		t.Errorf("exit %d, want 130; stderr %q", code, errOut)
	}
	st, err := os.ReadFile(state)
	if err != nil {
		t.Fatalf("no state saved on the signal: %v", err)
	}
	code, res, e := run(t, nil, append(args, "-e", "--from", "@"+state)...)
	if code != 0 {
		t.Fatalf("resume: exit %d, stderr %q (state %s)", code, e, st)
	}
	wantExactly(t, ids(t, res), 0, 60)
}
