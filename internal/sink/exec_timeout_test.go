//go:build linux

package sink

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
)

// silentChild answers "initialize" the first time ($LOG.started marks it), then reads batches
// and never answers; it starts a background process first, whose pid goes to $PIDFILE.
const silentChild = `
sleep 30 & echo $! > "$PIDFILE"
while IFS= read -r line; do
  printf '%s\n' "$line" >> "$LOG"
  case "$line" in
    *'"type":"initialize"'*) echo '{"type":"done"}' ;;
    *'"type":"batch"'*) [ -e "$LOG.started" ] && echo '{"type":"checkpoint"}'; : > "$LOG.started" ;;
  esac
done
`

// TestExecLines_ChildThatNeverAnswersTimesOut: a child that reads a batch and never answers
// held its lease until shutdown. With AnswerTimeout it is stopped, its whole process group
// with it, the batch fails with ErrTimeout, and the next delivery gets a new child.
func TestExecLines_ChildThatNeverAnswersTimesOut(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	log, pidfile := filepath.Join(dir, "log"), filepath.Join(dir, "pid")
	x := &ExecLines{
		Command:       silentChild,
		Env:           []string{"LOG=" + log, "PIDFILE=" + pidfile, "PATH=" + os.Getenv("PATH")},
		KillDelay:     200 * time.Millisecond,
		AnswerTimeout: 300 * time.Millisecond,
	}
	defer x.Close()
	done := make(chan error, 1)
	go func() { done <- x.Handle(t.Context(), batch("6", `{}`)) }()
	pid := grandchild(t, pidfile)
	select {
	case err := <-done:
		if !errors.Is(err, ErrTimeout) || errors.Is(err, feed.ErrNoCheckpoint) {
			t.Fatalf("Handle = %v, want ErrTimeout", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Handle still waits for a child that never answers")
	}
	waitGone(t, pid, 10*time.Second, "the silent child's background process")

	// The batch comes again (the retry policy): a new child takes it.
	if err := x.Handle(t.Context(), batch("6", `{}`)); err != nil {
		t.Fatalf("the batch on a new child: %v", err)
	}
	var types []string
	for _, m := range readLog(t, log) {
		types = append(types, fmt.Sprint(m["type"]))
	}
	if got, want := strings.Join(types, ","), "initialize,batch,initialize,batch"; got != want {
		t.Fatalf("children saw %s, want %s", got, want)
	}
}

// TestExec_CommandThatHangsTimesOut: an --exec command that never finishes is stopped, with
// the processes it started, after Timeout and its batch fails with ErrTimeout. On a busy
// machine bash may not even have started its background process within a short Timeout (then
// there is nothing to look for): the test tries again with a longer one.
func TestExec_CommandThatHangsTimesOut(t *testing.T) {
	t.Parallel()
	e := &Exec{
		Command:   `sleep 30 & echo $! > "$PIDFILE"; cat >/dev/null; wait`,
		KillDelay: 200 * time.Millisecond,
	}
	checked := false
	for _, timeout := range []time.Duration{300 * time.Millisecond, time.Second, 3 * time.Second, 10 * time.Second} {
		pidfile := filepath.Join(t.TempDir(), "pid")
		e.Env, e.Timeout = append(os.Environ(), "PIDFILE="+pidfile), timeout
		done := make(chan error, 1)
		go func() { done <- e.Handle(t.Context(), batch("6", `{}`)) }()
		select {
		case err := <-done:
			if !errors.Is(err, ErrTimeout) {
				t.Fatalf("Handle = %v, want ErrTimeout", err)
			}
		case <-time.After(timeout + 20*time.Second):
			t.Fatal("Handle still waits for a command past its timeout")
		}
		b, err := os.ReadFile(pidfile)
		pid, perr := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || perr != nil || pid <= 0 {
			t.Logf("the command was stopped before it wrote its background process's pid (timeout %s): again with a longer one", timeout)
			continue
		}
		waitGone(t, pid, 10*time.Second, "the command's background process")
		checked = true
		break
	}
	if !checked {
		t.Fatal("the command never started its background process before its timeout, even at 10 s")
	}

	// A command that finishes in time is not affected (in time even for a busy machine).
	e.Command, e.Timeout = "cat >/dev/null", 30*time.Second
	if err := e.Handle(t.Context(), batch("6", `{}`)); err != nil {
		t.Fatalf("a quick command: %v", err)
	}
}
