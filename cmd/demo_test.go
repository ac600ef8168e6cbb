package cmd

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/internal/render"
)

func TestDemo_InterruptEndsCleanlyWith130(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ios, _, out, errOut := render.Test()
	done := make(chan int, 1)
	go func() {
		done <- MainWithIO(ctx, []string{"demo", "--duration", "1m", "--rate", "50", "--data", dir}, ios, func(string) string { return "" })
	}()
	time.Sleep(1500 * time.Millisecond)
	cancel() // Ctrl-C
	var code int
	select {
	case code = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the demo did not stop after its context ended")
	}
	if code != exitInterrupted {
		t.Errorf("exit code %d, want %d; stderr: %s", code, exitInterrupted, errOut)
	}
	// The summary is still printed, and the workers released their leases on the way out.
	for _, want := range []string{"orders written", "Leases at the end:", "split             not reached"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	// Orders not processed yet at Ctrl-C are pending, not lost.
	if !strings.Contains(out.String(), "\nlost              0\n") {
		t.Errorf("an interrupted demo reports orders lost:\n%s", out)
	}
	if strings.Contains(out.String(), "\towned\t") {
		t.Errorf("a lease is still owned after the demo stopped:\n%s", out)
	}
	if errOut.Len() != 0 {
		t.Errorf("stderr: %s", errOut)
	}
}
