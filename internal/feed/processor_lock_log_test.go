package feed_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
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
	synctest.Test(t, func(t *testing.T) {
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
	})
}

// vanishingLock answers the first lock creations with a conflict and the reads of the lock with
// not found: the holder released its lock between cfp's create and its read.
type vanishingLock struct {
	leases.Documents
	mu        sync.Mutex
	conflicts int
}

func (v *vanishingLock) Create(ctx context.Context, pk string, body []byte) (leases.Document, error) {
	v.mu.Lock()
	lock := strings.Contains(string(body), `.lock"`) && v.conflicts > 0
	if lock {
		v.conflicts--
	}
	v.mu.Unlock()
	if lock {
		return leases.Document{}, leases.ErrConflict
	}
	return v.Documents.Create(ctx, pk, body)
}

// TestProcessor_LockGoneBeforeItsHolderIsReadIsNoWait: a lock released between cfp's create
// (409) and its read of the holder names no one; cfp logs no wait on "a .NET or Java
// processor" for it (cfp demo's interrupted run printed one).
func TestProcessor_LockGoneBeforeItsHolderIsReadIsNoWait(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		src := feedtest.NewMemSource(2)
		docs := &vanishingLock{Documents: leases.NewMemDocuments("/id"), conflicts: 1}
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
		if out := logs.String(); strings.Contains(out, "waiting for the bootstrap lock") {
			t.Errorf("a wait logged for a lock that was gone:\n%s", out)
		}
	})
}
