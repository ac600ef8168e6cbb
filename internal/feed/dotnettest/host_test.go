package dotnettest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cfp-dev/cfp/internal/feed/feedtest"
	"github.com/cfp-dev/cfp/internal/leases"
)

const prefix = "dotnetlocalhost_AAAAAA==_AAAAAAAAAAA="

func fast(instance string) Options {
	return Options{
		Instance: instance, Prefix: prefix,
		AcquireInterval: 20 * time.Millisecond, RenewInterval: 40 * time.Millisecond, Expiration: 2 * time.Second,
		LockTime: 30 * time.Second, SleepTime: 10 * time.Millisecond, PollDelay: 5 * time.Millisecond,
		StartFromBeginning: true,
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func docBody(t *testing.T, docs *leases.MemDocuments, id string) map[string]any {
	t.Helper()
	d, err := docs.Read(context.Background(), id, id)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(d.Body, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestHost_BootstrapWritesDotNetLeases: the bootstrap creates one v0 lease per partition with
// exactly the properties DocumentServiceLeaseCore serializes, then .info, and removes .lock.
func TestHost_BootstrapWritesDotNetLeases(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		src := feedtest.NewMemSource(2)
		docs := leases.NewMemDocuments("/id")
		h := New(src, docs, fast("dotnet-a"))
		if err := h.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		h.Stop()
		if _, err := docs.Read(context.Background(), prefix+".lock", prefix+".lock"); !errors.Is(err, leases.ErrNotFound) {
			t.Errorf(".lock after bootstrap: %v", err)
		}
		if m := docBody(t, docs, prefix+".info"); len(m) != 3 { // id, _etag, _ts
			t.Errorf(".info = %v", m)
		}
		m := docBody(t, docs, prefix+"..0")
		var keys []string
		for k := range m {
			keys = append(keys, k)
		}
		want := "ContinuationToken FeedRange LeaseToken Mode Owner _etag _ts id properties timestamp version"
		if got := strings.Join(sorted(keys), " "); got != want {
			t.Errorf("lease properties = %s, want %s", got, want)
		}
		if m["version"] != 0.0 || m["Mode"] != ModeIncremental || m["Owner"] != nil || m["LeaseToken"] != "0" {
			t.Errorf("lease 0 = %v", m)
		}
		fr, _ := json.Marshal(m["FeedRange"])
		parts, _ := src.Partitions(context.Background())
		if string(fr) != fmt.Sprintf(`{"Range":{"max":%q,"min":""}}`, parts[0].Range.Max) {
			t.Errorf("FeedRange = %s", fr)
		}
		// cfp reads what the model wrote as a .NET v0 lease.
		ls, err := leases.NewStore(docs, prefix, leases.StoreOptions{}).List(context.Background())
		if err != nil || len(ls) != 2 || ls[0].Family != leases.FamilyDotNetV0 {
			t.Fatalf("cfp reads %v (%v)", ls, err)
		}
	})
}

func sorted(s []string) []string {
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s
}

// TestHost_StartFailsOnInfoConflict: a host whose .info create gets a 409 (another host wrote
// .info while this one held the lock) fails its start, as EnsureSuccessStatusCode makes .NET do.
func TestHost_StartFailsOnInfoConflict(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		src := feedtest.NewMemSource(1)
		docs := leases.NewMemDocuments("/id")
		o := fast("dotnet-a")
		o.SlowBootstrap = 200 * time.Millisecond
		h := New(src, docs, o)
		errc := make(chan error, 1)
		go func() { errc <- h.Start(context.Background()) }()
		waitFor(t, "the lock", func() bool {
			_, err := docs.Read(context.Background(), prefix+".lock", prefix+".lock")
			return err == nil
		})
		if _, err := docs.Create(context.Background(), prefix+".info", []byte(`{"id":"`+prefix+`.info"}`)); err != nil {
			t.Fatal(err)
		}
		err := <-errc
		if !errors.Is(err, leases.ErrConflict) || !strings.Contains(err.Error(), "409") {
			t.Fatalf("Start() = %v, want the 409 on .info", err)
		}
	})
}

// TestHost_OneStealPerCycle: a second host joining a host that owns four leases takes them
// one per acquire cycle until both hold two.
func TestHost_OneStealPerCycle(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		src := feedtest.NewMemSource(4)
		docs := leases.NewMemDocuments("/id")
		a := New(src, docs, fast("dotnet-a"))
		if err := a.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		defer a.Stop()
		waitFor(t, "a owns 4", func() bool { return len(a.Owned()) == 4 })
		ob := fast("dotnet-b")
		ob.AcquireInterval = time.Hour // one cycle at start
		b := New(src, docs, ob)
		if err := b.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		defer b.Stop()
		waitFor(t, "b's first steal", func() bool { return len(b.Owned()) == 1 })
		time.Sleep(50 * time.Millisecond)
		if n := len(b.Owned()); n != 1 {
			t.Fatalf("b owns %d leases after one cycle, want 1 (one steal per cycle)", n)
		}
	})
}

// TestHost_AcquireFillsFeedRange: a PK-range lease without FeedRange gets its range from the
// partition key ranges at acquire, persisted by the acquire's replace.
func TestHost_AcquireFillsFeedRange(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		src := feedtest.NewMemSource(2)
		docs := leases.NewMemDocuments("/id")
		for _, tok := range []string{"0", "1"} {
			id := prefix + ".." + tok
			if _, err := docs.Create(context.Background(), id, []byte(`{"id":"`+id+`","PartitionId":"`+tok+`","Owner":null,"ContinuationToken":null,"properties":{},"timestamp":null}`)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := docs.Create(context.Background(), prefix+".info", []byte(`{"id":"`+prefix+`.info"}`)); err != nil {
			t.Fatal(err)
		}
		h := New(src, docs, fast("dotnet-a"))
		if err := h.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "both leases", func() bool { return len(h.Owned()) == 2 })
		h.Stop()
		parts, _ := src.Partitions(context.Background())
		for i, tok := range []string{"0", "1"} {
			m := docBody(t, docs, prefix+".."+tok)
			fr, _ := json.Marshal(m["FeedRange"])
			if want := fmt.Sprintf(`{"Range":{"max":%q,"min":%q}}`, parts[i].Range.Max, parts[i].Range.Min); string(fr) != want {
				t.Errorf("lease %s FeedRange = %s, want %s", tok, fr, want)
			}
			if m["PartitionId"] != tok || m["LeaseToken"] != tok {
				t.Errorf("V2 lease %s lost its PartitionId: %v", tok, m)
			}
		}
	})
}

// TestHost_SplitAndMerge: every change is handled across a split of a PK-range lease (children
// named after the child partitions) and a merge of those children (EPK leases over each
// child's range).
func TestHost_SplitAndMerge(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		src := feedtest.NewMemSource(1)
		docs := leases.NewMemDocuments("/id")
		var mu sync.Mutex
		seen := map[string]int{}
		o := fast("dotnet-a")
		o.Handle = func(_ context.Context, b Batch) error {
			mu.Lock()
			defer mu.Unlock()
			for _, it := range b.Items {
				var d struct{ ID string }
				_ = json.Unmarshal(it, &d)
				seen[d.ID]++
			}
			return nil
		}
		h := New(src, docs, o)
		if err := h.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		defer h.Stop()
		write := func(from, n int) {
			for i := from; i < from+n; i++ {
				if _, err := src.Write(fmt.Sprintf("pk%d", i), []byte(fmt.Sprintf(`{"id":"d%d"}`, i))); err != nil {
					t.Fatal(err)
				}
			}
		}
		all := func(n int) func() bool {
			return func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(seen) == n
			}
		}
		write(0, 50)
		waitFor(t, "50 changes", all(50))
		kids, err := src.Split("0")
		if err != nil {
			t.Fatal(err)
		}
		write(50, 50)
		waitFor(t, "100 changes after the split", all(100))
		waitFor(t, "the children owned", func() bool { return strings.Join(h.Owned(), ",") == strings.Join(kids, ",") })
		if _, err := src.Merge(kids[0], kids[1]); err != nil {
			t.Fatal(err)
		}
		write(100, 50)
		waitFor(t, "150 changes after the merge", all(150))
		ls, err := leases.NewStore(docs, prefix, leases.StoreOptions{}).List(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range ls {
			if l.Family != leases.FamilyDotNetV1 {
				t.Errorf("lease %s is %s after the merge, want an EPK lease", l.Token, l.Family)
			}
		}
		if len(ls) != 2 {
			t.Errorf("%d leases after the merge, want 2", len(ls))
		}
		mu.Lock()
		defer mu.Unlock()
		for id, n := range seen {
			if n != 1 {
				t.Errorf("%s handled %d times", id, n)
			}
		}
	})
}
