package feed_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
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
	synctest.Test(t, func(t *testing.T) {
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
	})
}

// dotnetOptions are the model .NET host's options with the test timings of fastOptions.
func dotnetOptions(instance string) dotnettest.Options {
	return dotnettest.Options{
		Instance: instance, Prefix: testPrefix,
		AcquireInterval: 20 * time.Millisecond, RenewInterval: 40 * time.Millisecond, Expiration: 5 * time.Second,
		SleepTime: 20 * time.Millisecond, PollDelay: 5 * time.Millisecond, StartFromBeginning: true,
	}
}

// TestProcessor_RefusesAModeDotNetRefuses: a lease set whose Mode .NET does not know
// ("IncrementalFeed", "LatestVersion", "") is refused with .NET's reason, where cfp used to
// read it as incremental and run.
func TestProcessor_RefusesAModeDotNetRefuses(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		for _, mode := range []string{"IncrementalFeed", "LatestVersion", ""} {
			docs := leases.NewMemDocuments("/id")
			id := leases.LeaseID(testPrefix, "0")
			body := `{"id":"` + id + `","version":0,"LeaseToken":"0","FeedRange":{"Range":{"min":"","max":"FF"}},"Owner":null,"ContinuationToken":null,"properties":{},"timestamp":null,"Mode":"` + mode + `"}`
			for _, b := range []string{body, `{"id":"` + leases.InfoID(testPrefix) + `"}`} {
				if _, err := docs.Put(docIDOf(t, b), []byte(b)); err != nil {
					t.Fatal(err)
				}
			}
			p, err := feed.NewProcessor(feedtest.NewMemSource(1), leases.NewStore(docs, testPrefix, leases.StoreOptions{}),
				feed.HandlerFunc(func(context.Context, feed.Batch) error { return nil }), fastOptions("cfp-1"))
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.Bootstrap(context.Background())
			var mm *feed.ModeMismatchError
			if !errors.As(err, &mm) || !mm.Refused || mm.LeaseMode != mode || mm.Lease != "0" {
				t.Errorf("Mode %q: Bootstrap() = %v, want a refused mode", mode, err)
			}
		}
	})
}

// TestProcessor_NeverProcessesAnUndecodableLease: a lease whose continuation cfp cannot decode
// (a Java state "V":"2") is reported with an error event and never acquired; the other leases
// are processed.
func TestProcessor_NeverProcessesAnUndecodableLease(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		src := feedtest.NewMemSource(2)
		parts, _ := src.Partitions(context.Background())
		docs := leases.NewMemDocuments("/id")
		state := base64.StdEncoding.EncodeToString([]byte(`{"V":"2","Mode":"INCREMENTAL","StartFrom":{"Type":"NOW"}}`))
		tok1 := parts[1].Range.String()
		for _, b := range []string{
			fmt.Sprintf(`{"id":%q,"version":1,"LeaseToken":%q,"FeedRange":{"Range":{"min":"","max":%q}},"Owner":null,"ContinuationToken":null,"properties":{},"timestamp":null,"Mode":"Incremental Feed"}`,
				leases.LeaseID(testPrefix, parts[0].Range.String()), parts[0].Range.String(), parts[0].Range.Max),
			fmt.Sprintf(`{"id":%q,"LeaseToken":%q,"ContinuationToken":%q,"timestamp":null,"Owner":null,"version":1,"feedRange":{"Range":{"min":%q,"max":"FF"}}}`,
				leases.LeaseID(testPrefix, tok1), tok1, state, parts[1].Range.Min),
			`{"id":"` + leases.InfoID(testPrefix) + `"}`,
		} {
			if _, err := docs.Put(docIDOf(t, b), []byte(b)); err != nil {
				t.Fatal(err)
			}
		}
		hs := startHost(t, src, docs, feed.HandlerFunc(func(context.Context, feed.Batch) error { return nil }), fastOptions("cfp-1"))
		waitFor(t, 5*time.Second, "the readable lease", func() bool { return len(hs.p.Owned()) == 1 })
		time.Sleep(100 * time.Millisecond) // several acquire cycles
		if got := hs.p.Owned(); len(got) != 1 || got[0] == tok1 {
			t.Errorf("owned %v, want only the readable lease", got)
		}
		var unreadable *feed.UnreadableLeaseError
		found := false
		for _, e := range hs.ev.of(feed.EventError) {
			if errors.As(e.Err, &unreadable) && unreadable.Lease == tok1 {
				found = true
			}
		}
		if !found {
			t.Errorf("no error event names the undecodable lease %s: %+v", tok1, hs.ev.of(feed.EventError))
		}
	})
}

func docIDOf(t *testing.T, body string) string {
	t.Helper()
	var d struct{ ID string }
	if err := json.Unmarshal([]byte(body), &d); err != nil {
		t.Fatal(err)
	}
	return d.ID
}
