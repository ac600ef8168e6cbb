package cmd

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
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

// TestDemo_AWriteInFlightWhenTheDurationEndsIsCounted: an order whose write lands while the
// duration ends is counted as written. The write was cancelled in flight, the client reported
// the cancellation, and the order was delivered uncounted: 599 written, 600 deliveries, 0
// duplicates (issue 22).
func TestDemo_AWriteInFlightWhenTheDurationEndsIsCounted(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx, endDuration := context.WithCancel(context.Background())
		defer endDuration()
		r := &demoRun{o: &demoOptions{Rate: 100}, f: &factory{Now: time.Now}, began: time.Now()}
		landed := 0
		r.upsert = func(wctx context.Context, _ any, _ []byte) error {
			landed++ // the service stored the order
			if landed == 3 {
				endDuration() // and the duration ends before its answer arrives
			}
			return wctx.Err() // a client whose context ended reports that, not the answer
		}
		if err := r.write(ctx); err != nil {
			t.Fatal(err)
		}
		if r.written != int64(landed) {
			t.Errorf("%d orders written, %d landed", r.written, landed)
		}
	})
}
