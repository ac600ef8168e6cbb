package cmd

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/internal/render"
)

func TestDelegate_ExecTimeoutUsageErrors(t *testing.T) {
	t.Parallel()
	local := "--local=" + filepath.Join(t.TempDir(), "never")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"negative", []string{"process", "-d", "shop", "-c", "orders", "-p", "x", "--exec", "cat", "--exec-timeout", "-1s"}, "--exec-timeout must not be negative"},
		{"without a command delegate", []string{"process", "-d", "shop", "-c", "orders", "-p", "x", "--exec-timeout", "1m"}, "--exec-timeout needs --exec or --exec-lines"},
		{"replay without a command delegate", []string{"replay-from", "beginning", "-d", "shop", "-c", "orders", "--exec-timeout", "1m"}, "--exec-timeout needs --exec or --exec-lines"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ios, _, out, errOut := render.Test()
			code := MainWithIO(context.Background(), append([]string{local}, tc.args...), ios, func(string) string { return "" })
			if code != exitUsage {
				t.Fatalf("exit code %d, want 2\nstderr:\n%s", code, errOut)
			}
			if !strings.Contains(errOut.String(), tc.want) {
				t.Errorf("stderr lacks %q:\n%s", tc.want, errOut)
			}
			if out.Len() != 0 {
				t.Errorf("stdout not empty: %s", out)
			}
		})
	}
}

// TestProcess_ExecTimeoutFailsAHangingBatch: an --exec command that hangs held its lease until
// shutdown; with --exec-timeout it is stopped and its batch fails like any other (here
// --max-retries 0 and the stop policy: cfp exits 1 and releases its leases, uncheckpointed).
func TestProcess_ExecTimeoutFailsAHangingBatch(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	procSeed(t, dir, 3)
	r := procStart(t, "", append([]string{"--local=" + dir, "process", "-d", "shop", "-c", "orders", "-p", "hangp",
		"--create-lease-container", "--from", "beginning", "--exec", "sleep 30", "--exec-timeout", "300ms",
		"--delegate-retries", "0", "--events", "text"}, slices.Clone(procFastLeases)...)...)
	var code int
	select {
	case code = <-r.code:
		r.code <- code
	case <-time.After(30 * time.Second):
		t.Fatalf("cfp still waits for a command past --exec-timeout\nstderr:\n%s", r.err.String())
	}
	stderr := r.err.String()
	if code != exitError {
		t.Fatalf("exit code %d, want 1\nstderr:\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "command still ran after 300ms: delegate timed out") {
		t.Errorf("stderr does not say the command timed out:\n%s", stderr)
	}
	for _, l := range procLeases(t, dir, "hangp") {
		if l.Owner != "" {
			t.Errorf("lease %s still owned by %q after the processor stopped", l.Token, l.Owner)
		}
		if l.Continuation != "" {
			t.Errorf("lease %s checkpointed %q past a batch that timed out", l.Token, l.Continuation)
		}
	}
}
