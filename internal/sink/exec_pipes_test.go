package sink

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for concurrent writes (a log sink).
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestExec_BackgroundProcessHoldingOutputAfterExit0 runs a command that exits 0 but leaves a
// background process holding its stdout and stderr: the batch was processed and must count so
// (it was retried forever), with one warning per lease.
func TestExec_BackgroundProcessHoldingOutputAfterExit0(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	e := &Exec{
		Command:   "sleep 1 & cat >/dev/null; echo processed; exit 0",
		Stdout:    &syncBuffer{},
		Stderr:    &syncBuffer{},
		KillDelay: 100 * time.Millisecond,
		Logger:    slog.New(slog.NewTextHandler(&logs, nil)),
	}
	for _, lease := range []string{"3", "3", "4"} {
		if err := e.Handle(t.Context(), batch(lease, `{}`)); err != nil {
			t.Fatalf("lease %s: a command that exited 0 failed its batch: %v", lease, err)
		}
	}
	if out := e.Stdout.(*syncBuffer).String(); strings.Count(out, "processed\n") != 3 {
		t.Errorf("stdout %q, want the command's output of each batch", out)
	}
	warnings := strings.Count(logs.String(), "level=WARN")
	if warnings != 2 || !strings.Contains(logs.String(), "lease=3") || !strings.Contains(logs.String(), "lease=4") {
		t.Fatalf("logs %q, want one warning per lease (2)", logs.String())
	}
}

// TestExec_BackgroundProcessDoesNotHideAFailure: a command that exits non-zero still fails its
// batch when a background process holds its output.
func TestExec_BackgroundProcessDoesNotHideAFailure(t *testing.T) {
	t.Parallel()
	e := &Exec{Command: "sleep 1 & cat >/dev/null; exit 4", Stdout: &syncBuffer{}, KillDelay: 100 * time.Millisecond}
	err := e.Handle(t.Context(), batch("3", `{}`))
	if err == nil || !strings.Contains(err.Error(), "status 4") {
		t.Fatalf("err = %v, want exit status 4", err)
	}
}
