package feed_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/feed/feedtest"
	"github.com/cfp-dev/cfp/internal/leases"
)

// TestProcessor_YoungPeerLockIsNotAWarning: two cfp hosts that start together meet at the
// bootstrap lock as a matter of course (cfp demo does it every run). The one that waits says
// so at info, not as a warning on a default (warn) log; a lock of a .NET host or a stale one
// is still a warning (TestProcessor_WaitsForADotNetBootstrapLock).
func TestProcessor_YoungPeerLockIsNotAWarning(t *testing.T) {
	t.Parallel()
	src := feedtest.NewMemSource(2)
	docs := leases.NewMemDocuments("/id")
	peer := leases.NewStore(docs, testPrefix, leases.StoreOptions{})
	if ok, _, err := peer.TryLock(context.Background(), leases.DefaultLockTTL, "cfp-peer"); err != nil || !ok {
		t.Fatalf("peer TryLock = %v, %v", ok, err)
	}
	release := time.AfterFunc(300*time.Millisecond, func() { _ = peer.Unlock(context.Background()) })
	defer release.Stop()

	var logs syncBuffer
	opts := fastOptions("cfp-1")
	opts.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	p, err := feed.NewProcessor(src, leases.NewStore(docs, testPrefix, leases.StoreOptions{}),
		feed.HandlerFunc(func(context.Context, feed.Batch) error { return nil }), opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Bootstrap(context.Background()); err != nil {
		t.Fatalf("Bootstrap() = %v", err)
	}
	out := logs.String()
	if !strings.Contains(out, "waiting for the bootstrap lock") || !strings.Contains(out, "cfp host cfp-peer") {
		t.Fatalf("the wait is not logged with its holder:\n%s", out)
	}
	if strings.Contains(out, "level=WARN") {
		t.Errorf("a young lock of a cfp peer is logged as a warning:\n%s", out)
	}
}
