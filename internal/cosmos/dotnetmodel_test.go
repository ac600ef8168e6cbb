package cosmos

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/feed/dotnettest"
	"github.com/cfp-dev/cfp/internal/leases"
)

// TestDotNetModel_WithCFPOnTheEmulator: the model .NET host runs against the embedded emulator
// through azcosmos as it does against the in-memory store: it bootstraps the lease set, shares
// it with a cfp host, and across a merge of the two partitions every change is delivered; the
// leases it wrote are read by cfp as .NET leases.
func TestDotNetModel_WithCFPOnTheEmulator(t *testing.T) {
	t.Parallel()
	fx := newMergeFixture(t)
	docs := fx.acct.LeaseDocuments("db", "leases")
	want := upsert(t, fx.orders, somePKs, 0, 120)
	var mu sync.Mutex
	seen := map[string]int{}
	record := func(items []json.RawMessage) {
		mu.Lock()
		defer mu.Unlock()
		for _, it := range items {
			seen[idOf(it)]++
		}
	}
	dn := dotnettest.New(fx.orders, docs, dotnettest.Options{
		Instance: "dotnet-1", Prefix: fx.store.Prefix(), StartFromBeginning: true, MaxItems: 20,
		AcquireInterval: 30 * time.Millisecond, RenewInterval: 100 * time.Millisecond, Expiration: 3 * time.Second,
		SleepTime: 20 * time.Millisecond, PollDelay: 5 * time.Millisecond,
		Handle: func(_ context.Context, b dotnettest.Batch) error { record(b.Items); return nil },
	})
	if err := dn.Start(context.Background()); err != nil {
		t.Fatalf("the .NET host's StartAsync failed: %v", err)
	}
	defer dn.Stop()
	p, err := feed.NewProcessor(fx.orders, fx.store, feed.HandlerFunc(func(_ context.Context, b feed.Batch) error {
		record(b.Items)
		return nil
	}), feed.ProcessorOptions{
		Instance: "cfp-1", StartFrom: feed.StartFrom{Kind: feed.StartBeginning}, MaxItems: 20,
		AcquireInterval: 30 * time.Millisecond, RenewInterval: 100 * time.Millisecond, Expiration: 3 * time.Second,
		PollInterval: 5 * time.Millisecond, ErrorBackoff: 5 * time.Millisecond, MaxErrorBackoff: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() { runErr <- p.Run(ctx) }()
	defer func() {
		stop()
		if err := <-runErr; err != nil {
			t.Errorf("Run() = %v", err)
		}
	}()
	waitAll := func(ids []string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			mu.Lock()
			n := 0
			for _, id := range ids {
				if seen[id] == 0 {
					n++
				}
			}
			mu.Unlock()
			if n == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d changes never delivered", n, len(ids))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitAll(want)
	ls, err := fx.store.List(context.Background())
	if err != nil || len(ls) != 2 {
		t.Fatalf("leases = %v, %v; want the 2 the .NET host bootstrapped", ls, err)
	}
	for _, l := range ls {
		if l.Family != leases.FamilyDotNetV0 || !l.HasRange() || l.Mode != leases.ModeIncremental {
			t.Errorf("lease %s read as %s %s mode %q, want a .NET v0 lease with its FeedRange", l.Token, l.Family, l.Range, l.Mode)
		}
	}
	if _, err := fx.acct.Emulator().Merge("db", "orders", []string{"0", "1"}); err != nil {
		t.Fatal(err)
	}
	more := upsert(t, fx.orders, somePKs, 120, 40)
	waitAll(append(want, more...))
	if errs := dn.Errors(); len(errs) > 0 {
		t.Errorf(".NET host errors: %v", errs)
	}
}
