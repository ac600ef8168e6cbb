package changefeed_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/changefeed"
)

// leaseLog is a LeaseHandler that records the leases opened and closed.
type leaseLog struct {
	mu     sync.Mutex
	opened []string
	closed map[string]changefeed.CloseReason
	open   chan string
}

func (l *leaseLog) OpenLease(_ context.Context, li changefeed.LeaseInfo) error {
	l.mu.Lock()
	l.opened = append(l.opened, li.Token)
	l.mu.Unlock()
	l.open <- li.Token
	return nil
}

func (l *leaseLog) CloseLease(_ context.Context, li changefeed.LeaseInfo, reason changefeed.CloseReason) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed[li.Token] = reason
	return nil
}

// TestProcessor_BootstrapThenRun: what cfp process uses of a Processor. Bootstrap creates the
// lease set (one lease per partition) and says so before any lease is processed; the prefix,
// the leases and the anchored start are known from then; the LeaseHandler is told each lease
// opened while Owned lists it, and closed at shutdown; a second host's Bootstrap finds the set.
func TestProcessor_BootstrapThenRun(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, 2, nil)
	clock := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	cfg := fx.config("host", "host-a")
	cfg.StartFrom, cfg.Now = changefeed.Now(), func() time.Time { return clock }
	ll := &leaseLog{closed: map[string]changefeed.CloseReason{}, open: make(chan string, 2)}
	cfg.LeaseHandler = ll
	p, err := changefeed.NewProcessor(cfg, func(context.Context, changefeed.Batch) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if p.Prefix() != "" || p.Owned() != nil {
		t.Errorf("before Bootstrap: prefix %q, owned %v; want none", p.Prefix(), p.Owned())
	}
	ctx := context.Background()
	boot, err := p.Bootstrap(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if boot.Existed || boot.Created != 2 {
		t.Errorf("Bootstrap = %+v, want 2 leases created", boot)
	}
	ls, err := p.Leases(ctx)
	if err != nil || len(ls) != 2 || p.Prefix() == "" {
		t.Fatalf("after Bootstrap: %d leases (%v), prefix %q; want 2 under a prefix", len(ls), err, p.Prefix())
	}
	if got, want := p.StartFrom().String(), changefeed.Time(clock.Add(-time.Second)).String(); got != want {
		t.Errorf("StartFrom() = %s, want Now() anchored at the host's start less a second, %s", got, want)
	}

	stop := runAll(ctx, p)
	var tokens []string
	for range 2 {
		select {
		case tok := <-ll.open:
			tokens = append(tokens, tok)
		case <-time.After(60 * time.Second):
			t.Fatal("no lease opened within 60s")
		}
	}
	owned := p.Owned()
	slices.Sort(tokens)
	slices.Sort(owned)
	if !slices.Equal(owned, tokens) {
		t.Errorf("Owned() = %v, want the leases opened %v", owned, tokens)
	}
	if errs := stop(); errs[0] != nil {
		t.Fatalf("Run: %v", errs[0])
	}
	if p.Owned() != nil {
		t.Errorf("Owned() after Run = %v, want none", p.Owned())
	}
	ll.mu.Lock()
	for _, tok := range tokens {
		if ll.closed[tok] != changefeed.CloseShutdown {
			t.Errorf("lease %s closed with %q, want %q", tok, ll.closed[tok], changefeed.CloseShutdown)
		}
	}
	ll.mu.Unlock()

	p2, err := changefeed.NewProcessor(fx.config("host", "host-b"), func(context.Context, changefeed.Batch) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if boot, err := p2.Bootstrap(ctx); err != nil || !boot.Existed || boot.Created != 0 {
		t.Errorf("second host's Bootstrap = %+v, %v; want the existing set", boot, err)
	}
}
