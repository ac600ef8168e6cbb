//go:build linux

package sink

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
)

// alive reports whether pid runs (a zombie waiting for its reaper does not).
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, rest, _ := bytes.Cut(stat, []byte(") "))
	return len(rest) > 0 && rest[0] != 'Z'
}

// grandchild reads the pid the delegate wrote to path once it is there.
func grandchild(t *testing.T, path string) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(path)
		if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && perr == nil && pid > 0 {
			return pid
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("the delegate never wrote its grandchild's pid")
	return 0
}

// waitGone fails unless pid ends within d; it kills it (by pid) to clean up.
func waitGone(t *testing.T, pid int, d time.Duration, what string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for alive(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("%s (pid %d) still runs %s after the delegate was cancelled", what, pid, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestExec_CancelStopsTheWholeCommand cancels a batch whose command runs a pipeline-like
// child of the shell (one that sh does not exec into) and one that ignores SIGTERM: neither
// may outlive the cancellation (a lost lease, the end of the shutdown grace), or it goes on
// processing a batch that another host delivers again.
func TestExec_CancelStopsTheWholeCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct{ name, cmd string }{
		{"child of the shell", `sleep 30 & echo $! > "$PIDFILE"; wait`},
		{"child that ignores SIGTERM", `(trap '' TERM; exec sleep 30) & echo $! > "$PIDFILE"; wait`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pidfile := filepath.Join(t.TempDir(), "pid")
			e := &Exec{Command: tc.cmd, KillDelay: 200 * time.Millisecond, Dir: dir,
				Env: append(os.Environ(), "PIDFILE="+pidfile)}
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { done <- e.Handle(ctx, feed.Batch{LeaseToken: "0"}) }()
			pid := grandchild(t, pidfile)
			cancel()
			select {
			case err := <-done:
				if err == nil {
					t.Fatal("a cancelled command succeeded")
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Handle did not return after cancellation")
			}
			waitGone(t, pid, 10*time.Second, "the command's child")
		})
	}
}

// TestExecLines_StopEndsTheChildsChildren stops an ExecLines child that ignores its closed
// stdin and runs a process of its own: after CloseLease nothing of it may run on.
func TestExecLines_StopEndsTheChildsChildren(t *testing.T) {
	t.Parallel()
	pidfile := filepath.Join(t.TempDir(), "pid")
	x := &ExecLines{
		Command:   `sleep 30 & echo $! > "$PIDFILE"; read -r line; echo '{"type":"done"}'; wait`,
		Env:       append(os.Environ(), "PIDFILE="+pidfile),
		KillDelay: 200 * time.Millisecond,
	}
	info := feed.LeaseInfo{Token: "0", Owner: "h"}
	if err := x.OpenLease(t.Context(), info); err != nil {
		t.Fatal(err)
	}
	pid := grandchild(t, pidfile)
	_ = x.CloseLease(t.Context(), info, feed.CloseShutdown)
	waitGone(t, pid, 10*time.Second, "the child's own process")
}
