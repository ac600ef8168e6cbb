package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/changefeed"
	"github.com/cfp-dev/cfp/emulator"
	"github.com/cfp-dev/cfp/internal/leases"
	"github.com/cfp-dev/cfp/internal/render"
)

// TestEstimate_StuckLeaseAndHealth: lease 0's owner renews it but never checkpoints while it
// has pending changes; lease 1's owner checkpoints to the end. `estimate --watch` reports lease
// 0 stuck after --stuck-after estimates, lease 1 idle, the unowned leases waiting, and
// --max-stuck exits 3. /readyz answers 503 before the first estimate and while the account
// fails, 200 after a successful one.
func TestEstimate_StuckLeaseAndHealth(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const prefix = "stucklocalhost_k5lnAA==_k5lnAPDiLsw="
	want := seedEstimate(t, dir, prefix)

	ios, _, out, errOut := render.Test()
	f := &factory{
		IO:     ios,
		Global: &globalOptions{Local: dir, Database: "shop", Container: "orders", LeaseContainer: "leases", LeaseIDPrefix: prefix, Processor: "stuckp"},
		Getenv: func(string) string { return "" },
		Now:    time.Now,
	}
	f.Log = f.newLogger()
	f.Account = f.openAccount
	defer f.closeAccount()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	acct, err := f.Account(ctx)
	if err != nil {
		t.Fatal(err)
	}
	store := leases.NewStore(acct.LeaseDocuments("shop", "leases"), prefix, leases.StoreOptions{})

	// The owners: "stuck" renews lease 0 and never checkpoints; "mover" checkpoints lease 1 at
	// its partition's last LSN, then renews it.
	own := func(token, owner string) *leases.Lease {
		t.Helper()
		ls, err := store.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range ls {
			if l.Token == token {
				l, err := store.Acquire(ctx, l, owner)
				if err != nil {
					t.Fatal(err)
				}
				return l
			}
		}
		t.Fatalf("no lease %s", token)
		return nil
	}
	stuck, mover := own("0", "stuck"), own("1", "mover")
	if mover, err = store.Checkpoint(ctx, mover, "mover", leases.FormatLSN(want["1"])); err != nil {
		t.Fatal(err)
	}
	if want["0"] == 0 {
		t.Fatal("lease 0 has nothing pending")
	}
	var renewers sync.WaitGroup
	rctx, stopRenew := context.WithCancel(ctx)
	for _, r := range []struct {
		l     *leases.Lease
		owner string
	}{{stuck, "stuck"}, {mover, "mover"}} {
		renewers.Go(func() {
			l := r.l
			for rctx.Err() == nil {
				if n, err := store.Renew(rctx, l, r.owner); err == nil {
					l = n
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
	defer func() { stopRenew(); renewers.Wait() }()

	const stuckAfter, count = 2, 5
	ready := make(chan string, 1)
	var beforeFirst int
	opts := &estimateOptions{
		f: f, watching: true, Watch: 30 * time.Millisecond, Count: count, MetricsAddr: "127.0.0.1:0",
		Concurrency: 4, Expiration: leases.DefaultExpiration, StuckAfter: stuckAfter,
		MaxStuck: 0, maxStuckSet: true,
		metricsReady: func(addr string) {
			beforeFirst, _ = probe(t, "http://"+addr+"/readyz")
			ready <- addr
		},
	}
	done := make(chan error, 1)
	go func() { done <- runEstimate(ctx, opts) }()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("estimate ended before serving metrics: %v\n%s", err, errOut)
	}
	if beforeFirst != http.StatusServiceUnavailable {
		t.Errorf("/readyz before the first estimate: %d, want 503", beforeFirst)
	}
	err = <-done
	var exit *ExitError
	if !errors.As(err, &exit) || exit.Code != exitThreshold {
		t.Fatalf("estimate --max-stuck 0s ended with %v, want exit code 3\n%s", err, errOut)
	}
	if !strings.Contains(errOut.String(), "lease 0 stuck for") {
		t.Errorf("stderr does not name the stuck lease:\n%s", errOut)
	}

	var progress [][]string // per estimate: progress of leases 0..3
	for line := range strings.Lines(out.String()) {
		var v estimateView
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("not an estimate: %q", line)
		}
		var p []string
		for _, l := range v.Leases {
			p = append(p, l.Progress)
			if (l.Progress == changefeed.ProgressStuck) != (l.StuckSeconds != nil) {
				t.Errorf("lease %s: progress %s with stuck_seconds %v", l.Lease, l.Progress, l.StuckSeconds)
			}
		}
		if v.Summary.Stuck != strings.Count(strings.Join(p, ","), changefeed.ProgressStuck) {
			t.Errorf("summary.stuck %d for progress %v", v.Summary.Stuck, p)
		}
		progress = append(progress, p)
	}
	if len(progress) != count {
		t.Fatalf("%d estimates, want %d", len(progress), count)
	}
	for i, p := range progress {
		want0 := changefeed.ProgressActive
		if i >= stuckAfter {
			want0 = changefeed.ProgressStuck // the first stuckAfter estimates saw it move or start
		}
		wantAll := fmt.Sprint([]string{want0, changefeed.ProgressIdle, changefeed.ProgressWaiting, changefeed.ProgressWaiting})
		if fmt.Sprint(p) != wantAll {
			t.Errorf("estimate %d: progress %v, want %s", i+1, p, wantAll)
		}
	}

	// A watch that stays up: its gauges say stuck, and /readyz follows the account.
	opts = &estimateOptions{
		f: f, watching: true, Watch: 30 * time.Millisecond, MetricsAddr: "127.0.0.1:0",
		Concurrency: 4, Expiration: leases.DefaultExpiration, StuckAfter: stuckAfter,
		metricsReady: func(addr string) { ready <- addr },
	}
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go func() { done <- runEstimate(wctx, opts) }()
	addr := <-ready
	base := "http://" + addr
	waitProbe(t, "after an estimate", base+"/readyz", http.StatusOK, done)
	line := `cfp_estimate_lease_state{container="orders",database="shop",lease="0",processor="stuckp",state="stuck"} 1`
	deadline := time.Now().Add(20 * time.Second)
	for body := ""; !strings.Contains(body, line); body = scrape(t, base+"/metrics") {
		if time.Now().After(deadline) {
			t.Fatalf("metrics lack %q:\n%s", line, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := acct.Emulator().InjectFaults(emulator.FaultRule{Status: http.StatusServiceUnavailable}); err != nil {
		t.Fatal(err)
	}
	body := waitProbe(t, "account failing", base+"/readyz", http.StatusServiceUnavailable, done)
	if !strings.Contains(body, "account unreachable") {
		t.Errorf("/readyz says %q", body)
	}
	if code, _ := probe(t, base+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz %d while the account fails, want 200", code)
	}
	acct.Emulator().ClearFaults()
	waitProbe(t, "account back", base+"/readyz", http.StatusOK, done)
	stopWatch()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("watch ended with %v", err)
	}
}
