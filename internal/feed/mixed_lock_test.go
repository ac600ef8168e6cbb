package feed_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/feed/dotnettest"
	"github.com/cfp-dev/cfp/internal/feed/feedtest"
	"github.com/cfp-dev/cfp/internal/leases"
)

// TestProcessor_WaitsForADotNetBootstrapLock: a cfp host that starts while a .NET host holds
// the bootstrap lock for longer than the lock's ttl (a slow bootstrap in a lease container
// without time to live; cfp's clock runs a minute ahead so the lock looks old) never deletes
// it: it says on its log whose lock it waits on and since when, and the .NET host's start
// succeeds. Before, cfp deleted the lock, wrote .info, and the .NET start failed with a 409.
func TestProcessor_WaitsForADotNetBootstrapLock(t *testing.T) {
	t.Parallel()
	src := feedtest.NewMemSource(2)
	docs := leases.NewMemDocuments("/id")
	do := dotnetOptions("dotnet-1")
	do.SlowBootstrap = 400 * time.Millisecond
	dn := dotnettest.New(src, docs, do)
	started := make(chan error, 1)
	go func() { started <- dn.Start(context.Background()) }()
	waitFor(t, 5*time.Second, "the .NET host's lock", func() bool {
		_, err := docs.Read(context.Background(), leases.LockID(testPrefix), leases.LockID(testPrefix))
		return err == nil
	})

	var logs syncBuffer
	ahead := func() time.Time { return time.Now().Add(time.Minute) }
	opts := fastOptions("cfp-1")
	opts.Now = ahead
	opts.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	p, err := feed.NewProcessor(src, leases.NewStore(docs, testPrefix, leases.StoreOptions{Now: ahead}),
		feed.HandlerFunc(func(context.Context, feed.Batch) error { return nil }), opts)
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Bootstrap(context.Background())
	if err != nil {
		t.Fatalf("cfp Bootstrap() = %v", err)
	}
	if err := <-started; err != nil {
		t.Fatalf("the .NET host's StartAsync failed: %v", err)
	}
	defer dn.Stop()
	if !res.Existed || res.Created != 0 {
		t.Errorf("cfp bootstrap = %+v, want the .NET host's leases found, none created", res)
	}
	out := logs.String()
	for _, want := range []string{"waiting for the bootstrap lock", leases.LockID(testPrefix), "a .NET or Java processor", "since="} {
		if !strings.Contains(out, want) {
			t.Errorf("cfp's log does not say %q:\n%s", want, out)
		}
	}
	if n := len(listLeases(t, docs)); n != 2 {
		t.Errorf("%d leases, want the 2 the .NET host created", n)
	}
	if _, err := docs.Read(context.Background(), leases.LockID(testPrefix), leases.LockID(testPrefix)); !errors.Is(err, leases.ErrNotFound) {
		t.Errorf("the lock after both bootstraps: %v, want it removed by its holder", err)
	}
}

// dotnetOptions are the model .NET host's options with the test timings of fastOptions.
func dotnetOptions(instance string) dotnettest.Options {
	return dotnettest.Options{
		Instance: instance, Prefix: testPrefix,
		AcquireInterval: 20 * time.Millisecond, RenewInterval: 40 * time.Millisecond, Expiration: 5 * time.Second,
		SleepTime: 20 * time.Millisecond, PollDelay: 5 * time.Millisecond, StartFromBeginning: true,
	}
}
