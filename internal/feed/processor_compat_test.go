package feed_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/feed/feedtest"
	"github.com/cfp-dev/cfp/internal/leases"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestProcessor_BootstrapLeaseMatchesDotNet checks the lease cfp creates for a partition against
// the document .NET's bootstrapper writes (docs/protocol-leases.md, "Lease documents"), field for field. _etag and _ts
// belong to the service and are compared as .NET sends them (null and 0).
func TestProcessor_BootstrapLeaseMatchesDotNet(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		src := feedtest.NewMemSource(2)
		docs := leases.NewMemDocuments("/id")
		store := leases.NewStore(docs, testPrefix, leases.StoreOptions{})
		p, err := feed.NewProcessor(src, store, feed.HandlerFunc(func(context.Context, feed.Batch) error { return nil }), fastOptions("boot"))
		if err != nil {
			t.Fatal(err)
		}
		res, err := p.Bootstrap(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if res.Existed || res.Created != 2 {
			t.Fatalf("Bootstrap = %+v, want 2 leases created on a new store", res)
		}
		id := leases.LeaseID(testPrefix, "0")
		d, err := docs.Read(ctx, id, id)
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		if err := json.Unmarshal(d.Body, &got); err != nil {
			t.Fatal(err)
		}
		for _, sys := range []string{"_etag", "_ts"} {
			if _, ok := got[sys]; !ok {
				t.Fatalf("stored lease has no %s", sys)
			}
		}
		got["_etag"], got["_ts"] = nil, 0.0
		golden := filepath.Join("testdata", "bootstrap_lease_v0.golden.json")
		if *update {
			b, _ := json.MarshalIndent(got, "", "  ")
			if err := os.WriteFile(golden, append(b, '\n'), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		raw, err := os.ReadFile(golden)
		if err != nil {
			t.Fatal(err)
		}
		var want map[string]any
		if err := json.Unmarshal(raw, &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			g, _ := json.MarshalIndent(got, "", "  ")
			t.Fatalf("bootstrap lease:\n%s\nwant (.NET):\n%s", g, raw)
		}

		// The markers: .info written, .lock removed; a second host finds the store initialized.
		if _, err := docs.Read(ctx, leases.InfoID(testPrefix), leases.InfoID(testPrefix)); err != nil {
			t.Fatalf(".info marker: %v", err)
		}
		if _, err := docs.Read(ctx, leases.LockID(testPrefix), leases.LockID(testPrefix)); !errors.Is(err, leases.ErrNotFound) {
			t.Fatalf(".lock marker left behind: %v", err)
		}
		p2, err := feed.NewProcessor(src, store, feed.HandlerFunc(func(context.Context, feed.Batch) error { return nil }), fastOptions("boot2"))
		if err != nil {
			t.Fatal(err)
		}
		if res, err := p2.Bootstrap(ctx); err != nil || !res.Existed || res.Created != 0 {
			t.Fatalf("second Bootstrap = %+v, %v; want existing leases, none created", res, err)
		}
	})
}

// TestProcessor_TakesOverDotNetLeases starts cfp on a lease set a .NET processor wrote: a v0
// lease owned by a .NET host that died, and a released v1 (EPK) lease, both with
// continuations. cfp must resume each after its continuation and write both back in their
// own format.
func TestProcessor_TakesOverDotNetLeases(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		src := feedtest.NewMemSource(2)
		writeDocs(t, src, 0, 60)
		parts, err := src.Partitions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// Expected: per partition, the documents after half its LSN.
		want := map[string]bool{}
		conts := map[string]string{}
		for _, part := range parts {
			lsn, _ := src.LSN(part.ID)
			cut := lsn / 2
			conts[part.ID] = fmt.Sprintf(`"%d"`, cut)
			page, err := src.ReadPage(ctx, feed.ReadRequest{PartitionID: part.ID, Start: feed.StartFrom{Kind: feed.StartBeginning}, MaxItems: 1000})
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range page.Items {
				var d struct {
					ID  string `json:"id"`
					LSN int64  `json:"_lsn"`
				}
				_ = json.Unmarshal(it, &d)
				if d.LSN > cut {
					want[d.ID] = true
				}
			}
		}
		docs := leases.NewMemDocuments("/id")
		old := time.Now().Add(-time.Hour).UTC().Format("2006-01-02T15:04:05.9999999Z")
		v1Token := parts[1].Range.String()
		for _, body := range []string{
			fmt.Sprintf(`{"id":%q,"version":0,"LeaseToken":"0","FeedRange":{"Range":{"min":"","max":%q}},"Owner":"dotnet-worker-7f9c","ContinuationToken":%q,"properties":{},"timestamp":%q,"Mode":"Incremental Feed"}`,
				leases.LeaseID(testPrefix, "0"), parts[0].Range.Max, conts["0"], old),
			fmt.Sprintf(`{"id":%q,"version":1,"LeaseToken":%q,"FeedRange":{"Range":{"min":%q,"max":"FF"}},"Owner":null,"ContinuationToken":%q,"properties":{"team":"orders"},"timestamp":%q,"Mode":"Incremental Feed"}`,
				leases.LeaseID(testPrefix, v1Token), v1Token, parts[1].Range.Min, conts["1"], old),
			fmt.Sprintf(`{"id":%q}`, leases.InfoID(testPrefix)),
		} {
			var m map[string]any
			if err := json.Unmarshal([]byte(body), &m); err != nil {
				t.Fatal(err)
			}
			if _, err := docs.Create(ctx, m["id"].(string), []byte(body)); err != nil {
				t.Fatal(err)
			}
		}

		var mu sync.Mutex
		got := map[string]bool{}
		var early atomic.Int32
		h := feed.HandlerFunc(func(ctx context.Context, b feed.Batch) error {
			mu.Lock()
			defer mu.Unlock()
			for _, it := range b.Items {
				id := docID(it)
				if !want[id] {
					early.Add(1)
				}
				got[id] = true
			}
			return nil
		})
		opts := fastOptions("cfp-1")
		hs := startHost(t, src, docs, h, opts)
		waitFor(t, 10*time.Second, "the documents after the continuations", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(got) >= len(want)
		})
		if err := hs.stop(t); err != nil {
			t.Fatal(err)
		}
		if n := early.Load(); n > 0 {
			t.Fatalf("%d documents at or before the .NET continuations were delivered again", n)
		}
		ls := listLeases(t, docs)
		if len(ls) != 2 {
			t.Fatalf("%d leases, want the 2 .NET leases and no new one", len(ls))
		}
		for _, l := range ls {
			d, err := docs.Read(ctx, l.ID, l.ID)
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			_ = json.Unmarshal(d.Body, &m)
			switch l.Token {
			case "0":
				if m["version"] != 0.0 || l.Family != leases.FamilyDotNetV0 {
					t.Errorf("v0 lease written as %s: %s", l.Family, d.Body)
				}
			case v1Token:
				fr, _ := json.Marshal(m["FeedRange"])
				if m["version"] != 1.0 || !strings.Contains(string(fr), parts[1].Range.Min) || l.Properties["team"] != "orders" {
					t.Errorf("v1 lease not kept in its format: %s", d.Body)
				}
			default:
				t.Errorf("unexpected lease %s", l.Token)
			}
			lsn, _ := src.LSN(map[string]string{"0": "0", v1Token: "1"}[l.Token])
			if want := fmt.Sprintf(`"%d"`, lsn); l.Continuation != want || l.Owner != "" {
				t.Errorf("lease %s: continuation %s owner %q, want %s and released", l.Token, l.Continuation, l.Owner, want)
			}
		}
		if len(hs.ev.of(feed.EventAcquired)) != 2 {
			t.Errorf("acquired events %+v", hs.ev.of(feed.EventAcquired))
		}
	})
}

func TestProcessorOptions_Validate(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		good := feed.ProcessorOptions{Instance: "h"}.WithDefaults()
		if err := good.Validate(); err != nil {
			t.Fatalf("defaults: %v", err)
		}
		if good.AcquireInterval != 13*time.Second || good.RenewInterval != 17*time.Second ||
			good.Expiration != time.Minute || good.PollInterval != 5*time.Second || good.Mode != feed.LatestVersion {
			t.Fatalf("defaults are not .NET's: %+v", good)
		}
		for name, mod := range map[string]func(*feed.ProcessorOptions){
			"no instance":           func(o *feed.ProcessorOptions) { o.Instance = " " },
			"renew after expiry":    func(o *feed.ProcessorOptions) { o.RenewInterval = 2 * time.Minute },
			"negative max items":    func(o *feed.ProcessorOptions) { o.MaxItems = -1 },
			"unknown mode":          func(o *feed.ProcessorOptions) { o.Mode = feed.FeedMode(7) },
			"negative poll":         func(o *feed.ProcessorOptions) { o.PollInterval = -time.Second },
			"continuation as start": func(o *feed.ProcessorOptions) { o.StartFrom = feed.StartFrom{Kind: feed.StartContinuation} },
		} {
			o := good
			mod(&o)
			if err := o.Validate(); err == nil {
				t.Errorf("%s: Validate() = nil", name)
			}
		}
	})
}

func TestProcessor_RefusesLeasesOfAnotherMode(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		docs := leases.NewMemDocuments("/id")
		store := leases.NewStore(docs, testPrefix, leases.StoreOptions{})
		l := leases.NewDotNetV0(testPrefix, "0", leases.FullRange, leases.ModeFullFidelity)
		if _, err := store.Create(ctx, l); err != nil {
			t.Fatal(err)
		}
		if err := store.MarkInitialized(ctx); err != nil {
			t.Fatal(err)
		}
		p, err := feed.NewProcessor(feedtest.NewMemSource(1), store, feed.HandlerFunc(func(context.Context, feed.Batch) error { return nil }), fastOptions("m"))
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Run(ctx); err == nil || !strings.Contains(err.Error(), "not allowed") {
			t.Fatalf("Run = %v, want a mode mismatch error", err)
		}
	})
}

func TestProcessor_StopErrorEndsRunAfterReleasingLeases(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		src := feedtest.NewMemSource(3)
		docs := leases.NewMemDocuments("/id")
		writeDocs(t, src, 0, 30)
		fatal := errors.New("schema changed")
		h := feed.HandlerFunc(func(context.Context, feed.Batch) error { return feed.Stop(fatal) })
		p, err := feed.NewProcessor(src, leases.NewStore(docs, testPrefix, leases.StoreOptions{}), h, fastOptions("s"))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := p.Run(ctx); !errors.Is(err, fatal) {
			t.Fatalf("Run = %v, want the handler's stop error", err)
		}
		for _, l := range listLeases(t, docs) {
			if l.Owner != "" || l.Continuation != "" {
				t.Errorf("lease %s: owner %q continuation %q, want released without a checkpoint", l.Token, l.Owner, l.Continuation)
			}
		}
	})
}

// BenchmarkProcessor_NoopThroughput measures documents per second through one host with a
// handler that does nothing (MemSource, MemDocuments, 4 partitions, 100-item pages): b.N x 1000
// documents are written first, then the timer runs from the host's start until the handler
// has seen them all (read, handle, checkpoint).
func BenchmarkProcessor_NoopThroughput(b *testing.B) {
	b.ReportAllocs()
	const perOp = 1000
	src := feedtest.NewMemSource(4)
	docs := leases.NewMemDocuments("/id")
	total := int64(b.N * perOp)
	writeDocs(b, src, 0, int(total))
	var n atomic.Int64
	var once sync.Once
	done := make(chan struct{})
	h := feed.HandlerFunc(func(_ context.Context, bt feed.Batch) error {
		if n.Add(int64(len(bt.Items))) >= total {
			once.Do(func() { close(done) })
		}
		return nil
	})
	opts := fastOptions("bench")
	opts.MaxItems = 100
	b.ResetTimer()
	startHost(b, src, docs, h, opts)
	<-done
	b.StopTimer()
	b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "docs/s")
}
