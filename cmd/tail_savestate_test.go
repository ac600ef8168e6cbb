package cmd

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

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
