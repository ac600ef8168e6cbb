package feed_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/feed/dotnettest"
	"github.com/cfp-dev/cfp/internal/feed/feedtest"
	"github.com/cfp-dev/cfp/internal/leases"
)

// infoRace is the lease container as a .NET host sees it: right after its first read of .info
// finds none, another host's whole bootstrap happens (run), before the .NET host's next
// request, as when both start at once.
type infoRace struct {
	leases.Documents
	once sync.Once
	run  func()
}

func (d *infoRace) Read(ctx context.Context, id, pk string) (leases.Document, error) {
	doc, err := d.Documents.Read(ctx, id, pk)
	if id == leases.InfoID(testPrefix) && errors.Is(err, leases.ErrNotFound) {
		d.once.Do(d.run)
	}
	return doc, err
}

// TestProcessor_DotNetThatSawNoInfoStartsAfterCFPBootstraps: a .NET host reads .info (none),
// then a cfp host bootstraps the lease set (lock, leases, .info) before the .NET host tries
// the lock. .NET does not read .info again once it holds the lock: it creates its leases and
// then .info, whose 409 fails its StartAsync. cfp keeps its lock an acquire interval after
// writing .info, so the .NET host finds it taken, waits and then finds the set initialized
// (found by the deployment simulation, internal/feed/sim, seed 1066).
func TestProcessor_DotNetThatSawNoInfoStartsAfterCFPBootstraps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := feedtest.NewMemSource(2)
		docs := leases.NewMemDocuments("/id")
		p, err := feed.NewProcessor(src, leases.NewStore(docs, testPrefix, leases.StoreOptions{}),
			feed.HandlerFunc(func(context.Context, feed.Batch) error { return nil }), fastOptions("cfp-1"))
		if err != nil {
			t.Fatal(err)
		}
		booted := make(chan error, 1)
		race := &infoRace{Documents: docs, run: func() {
			go func() {
				_, err := p.Bootstrap(context.Background())
				booted <- err
			}()
			// The .NET host's next request comes once .info is written.
			for {
				if _, err := docs.Read(context.Background(), leases.InfoID(testPrefix), leases.InfoID(testPrefix)); err == nil {
					return
				}
				time.Sleep(time.Millisecond)
			}
		}}
		dn := dotnettest.New(src, race, dotnetOptions("dotnet-1"))
		if err := dn.Start(context.Background()); err != nil {
			t.Errorf("the .NET host's StartAsync failed: %v", err)
		} else {
			dn.Stop()
		}
		if err := <-booted; err != nil {
			t.Errorf("cfp Bootstrap() = %v", err)
		}
	})
}
