package javatest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/feed/feedtest"
	"github.com/cfp-dev/cfp/internal/leases"
)

// Each test pins one rule of the Java v4 EPK processor (azure-cosmos 4.81.0; paths under
// sdk/cosmos/azure-cosmos/src/main/java/com/azure/cosmos/implementation/changefeed/ in
// Azure/azure-sdk-for-java) in a synctest bubble: virtual time.

const prefix = "proc127.0.0.1_db_coll"

// spyDocs counts the replaces of each lease and can run a hook before one is forwarded.
type spyDocs struct {
	leases.Documents
	mu            sync.Mutex
	replaces      map[string]int
	beforeReplace func(id string)
	onReplace     func(id string, body []byte)
}

func newSpy(d leases.Documents) *spyDocs { return &spyDocs{Documents: d, replaces: map[string]int{}} }

func (s *spyDocs) Replace(ctx context.Context, id, pk, ifMatch string, body []byte) (leases.Document, error) {
	s.mu.Lock()
	hook := s.beforeReplace
	s.beforeReplace = nil
	s.mu.Unlock()
	if hook != nil {
		hook(id)
	}
	d, err := s.Documents.Replace(ctx, id, pk, ifMatch, body)
	if err == nil {
		s.mu.Lock()
		s.replaces[id]++
		if s.onReplace != nil {
			s.onReplace(id, body)
		}
		s.mu.Unlock()
	}
	return d, err
}

func (s *spyDocs) count(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.replaces[id]
}

func write(t *testing.T, src *feedtest.MemSource, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		if _, err := src.Write(fmt.Sprintf("pk%d", i), fmt.Appendf(nil, `{"id":"d%d"}`, i)); err != nil {
			t.Fatal(err)
		}
	}
}

// recorder collects what hosts delivered.
type recorder struct {
	mu   sync.Mutex
	seen map[string]int
}

func (r *recorder) handle(_ context.Context, b Batch) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil {
		r.seen = map[string]int{}
	}
	for _, it := range b.Items {
		var d struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(it, &d)
		r.seen[d.ID]++
	}
	return nil
}

func (r *recorder) distinct() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seen)
}

func fastOptions(instance string, rec *recorder) Options {
	o := Options{Instance: instance, Prefix: prefix,
		AcquireInterval: time.Second, RenewInterval: 2 * time.Second, Expiration: 6 * time.Second,
		PollDelay: 500 * time.Millisecond, LockTime: 3 * time.Second, SleepTime: time.Second,
		StartFromBeginning: true}
	if rec != nil {
		o.Handle = rec.handle
	}
	return o
}

func stored(t *testing.T, docs leases.Documents) map[string]*lease {
	t.Helper()
	ds, err := docs.QueryPrefix(context.Background(), prefix+"..")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*lease{}
	for _, d := range ds {
		l, err := decodeLease(d.Body, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		out[l.Token] = l
	}
	return out
}

func owners(t *testing.T, docs leases.Documents) map[string]int {
	n := map[string]int{}
	for _, l := range stored(t, docs) {
		n[l.owner()]++
	}
	return n
}

// BootstrapperImpl.initialize, PartitionSynchronizerImpl.createLeases and
// LeaseStoreManagerImpl.createLeaseIfNotExist: one EPK lease per partition with a null
// continuation, version 1 and feedRange, written by ServiceItemLeaseV1's serializer only (no
// properties, no Mode, no FeedRange); .info and no .lock left. Two hosts then share the set
// 2/2 and deliver every change.
func TestBootstrapAndShare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := feedtest.NewMemSource(4)
		docs := leases.NewMemDocuments("/id")
		write(t, src, 0, 100)
		rec := &recorder{}
		a := New(src, docs, fastOptions("java-a", rec))
		if err := a.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		defer a.Stop()
		ls := stored(t, docs)
		if len(ls) != 4 {
			t.Fatalf("%d leases, want 4", len(ls))
		}
		for tok, l := range ls {
			raw, err := docs.Read(context.Background(), l.ID, l.ID)
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			_ = json.Unmarshal(raw.Body, &m)
			for _, k := range []string{"properties", "Mode", "FeedRange", "partitionKey"} {
				if _, ok := m[k]; ok {
					t.Errorf("lease %s has %s: %s", tok, k, raw.Body)
				}
			}
			if m["version"] != 1.0 || m["feedRange"] == nil || tok != l.FeedRange.Min+"-"+l.FeedRange.Max {
				t.Errorf("lease %s: %s", tok, raw.Body)
			}
		}
		if _, err := docs.Read(context.Background(), prefix+".lock", prefix+".lock"); err == nil {
			t.Error("the bootstrap lock is left behind")
		}
		b := New(src, docs, fastOptions("java-b", rec))
		if err := b.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		defer b.Stop()
		time.Sleep(20 * time.Second)
		if o := owners(t, docs); o["java-a"] != 2 || o["java-b"] != 2 {
			t.Errorf("owners %v, want 2/2", o)
		}
		if rec.distinct() != 100 {
			t.Errorf("%d of 100 changes delivered", rec.distinct())
		}
	})
}

// ServiceItemLeaseV1.fromDocument → withContinuationToken: every lease's ContinuationToken is
// Base64-decoded (java.util.Base64.getDecoder()) as it is listed, so a set holding a lease a
// .NET-format writer checkpointed ("\"131\"") fails the Java host's start: the defect of a
// set cfp bootstrapped in .NET's format (feed.LeaseFormatJava is the fix).
func TestListingFailsOnADotNetContinuation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := feedtest.NewMemSource(2)
		docs := leases.NewMemDocuments("/id")
		store := leases.NewStore(docs, prefix, leases.StoreOptions{})
		l, err := store.Create(context.Background(), leases.NewDotNetV0(prefix, "0", leases.Range{Min: "", Max: "FF"}, ""))
		if err != nil {
			t.Fatal(err)
		}
		if l, err = store.Acquire(context.Background(), l, "cfp"); err != nil {
			t.Fatal(err)
		}
		if _, err = store.Checkpoint(context.Background(), l, "cfp", `"131"`); err != nil {
			t.Fatal(err)
		}
		if _, err := docs.Create(context.Background(), prefix+".info", fmt.Appendf(nil, `{"id":%q}`, prefix+".info")); err != nil {
			t.Fatal(err)
		}
		err = New(src, docs, fastOptions("java", nil)).Start(context.Background())
		if err == nil || !strings.Contains(err.Error(), "Illegal base64 character 22") {
			t.Fatalf("Start = %v, want Illegal base64 character 22", err)
		}
	})
}

func expiredSet(t *testing.T, docs leases.Documents, own map[string]string, stale map[string]bool) {
	t.Helper()
	now := time.Now()
	i := 0
	for tok, owner := range own {
		r := leases.Range{Min: fmt.Sprintf("%02X", i*16), Max: fmt.Sprintf("%02X", (i+1)*16)}
		i++
		ts := now
		if stale[tok] {
			ts = now.Add(-time.Hour)
		}
		l := &lease{ID: prefix + ".." + tok, Token: tok, Version: 1, FeedRange: &r, Timestamp: instantString(ts)}
		if owner != "" {
			l.Owner = strPtr(owner)
		}
		body, _ := l.encode()
		if _, err := docs.Create(context.Background(), l.ID, body); err != nil {
			t.Fatal(err)
		}
	}
}

// EqualPartitionsBalancingStrategy.selectLeasesToTake: with no maximum partition count, a host
// that holds its share still takes one expired lease ("We should try to pick at least one
// expired lease even if already overbooked"); with a maximum it does not. While other hosts
// own leases it takes one expired lease per cycle even when it needs more.
func TestBalancerTakesAnExpiredLeaseEvenAtItsShare(t *testing.T) {
	docs := leases.NewMemDocuments("/id")
	expiredSet(t, docs, map[string]string{"a": "me", "b": "me", "c": "other", "d": "dead"}, map[string]bool{"d": true})
	h := New(nil, docs, Options{Instance: "me", Prefix: prefix, Expiration: time.Minute})
	all, err := h.allLeases(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// 4 leases, 2 live owners: target 2, "me" holds 2.
	if got := h.selectLeasesToTake(all); len(got) != 1 || got[0].Token != "d" {
		t.Errorf("at its share: took %v, want the expired lease d", tokens(got))
	}
	h.opts.MaxPartitionCount = 2
	if got := h.selectLeasesToTake(all); len(got) != 0 {
		t.Errorf("at its share with MaxPartitionCount 2: took %v, want none", tokens(got))
	}

	docs = leases.NewMemDocuments("/id")
	expiredSet(t, docs, map[string]string{"a": "other", "b": "", "c": "", "d": "", "e": "", "f": ""}, nil)
	h = New(nil, docs, Options{Instance: "me", Prefix: prefix, Expiration: time.Minute})
	all, _ = h.allLeases(context.Background())
	if got := h.selectLeasesToTake(all); len(got) != 1 {
		t.Errorf("needing 3 beside another owner: took %v, want one lease per cycle", tokens(got))
	}
}

// EqualPartitionsBalancingStrategy.getLeaseToSteal: with nothing free, one lease from the host
// with the most, and only when it holds more than the target (less one when this host needs
// more than one).
func TestBalancerStealsOneLeaseFromTheBusiest(t *testing.T) {
	docs := leases.NewMemDocuments("/id")
	expiredSet(t, docs, map[string]string{"a": "big", "b": "big", "c": "big", "d": "big", "e": "small", "f": "small"}, nil)
	h := New(nil, docs, Options{Instance: "me", Prefix: prefix, Expiration: time.Minute})
	all, _ := h.allLeases(context.Background())
	got := h.selectLeasesToTake(all)
	if len(got) != 1 || got[0].owner() != "big" {
		t.Fatalf("took %v, want one lease of big", tokens(got))
	}
	docs = leases.NewMemDocuments("/id")
	expiredSet(t, docs, map[string]string{"a": "x", "b": "x", "c": "y", "d": "y", "e": "me"}, nil)
	h = New(nil, docs, Options{Instance: "me", Prefix: prefix, Expiration: time.Minute})
	all, _ = h.allLeases(context.Background())
	if got := h.selectLeasesToTake(all); len(got) != 0 {
		t.Errorf("5 leases over 3 hosts, me 1, x and y 2 each (target 2): took %v, want none", tokens(got))
	}
}

func tokens(ls []*lease) []string {
	var out []string
	for _, l := range ls {
		out = append(out, l.Token)
	}
	return out
}

// DocumentServiceLeaseUpdaterImpl.updateLease: after a 412 the updater re-reads the document
// only to check the owner and take its _etag, then replaces it with its own cached copy: a
// checkpoint written between a renewal's read and its replace is overwritten, and the lease's
// continuation moves back.
func TestUpdaterRewritesItsCachedCopyAfterA412(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := leases.NewMemDocuments("/id")
		spy := newSpy(mem)
		h := New(nil, spy, Options{Instance: "me", Prefix: prefix})
		r := leases.Range{Min: "", Max: "FF"}
		old := state{Rid: "coll", Mode: "INCREMENTAL", StartFrom: "NOW", Token: `"5"`, Range: r}.String()
		l := &lease{ID: prefix + "..-FF", Token: "-FF", Version: 1, FeedRange: &r, Owner: strPtr("me"),
			Continuation: strPtr(old), Timestamp: instantString(time.Now())}
		body, _ := l.encode()
		if _, err := mem.Create(context.Background(), l.ID, body); err != nil {
			t.Fatal(err)
		}
		newer := state{Rid: "coll", Mode: "INCREMENTAL", StartFrom: "NOW", Token: `"9"`, Range: r}.String()
		spy.beforeReplace = func(id string) {
			// The worker's checkpoint lands between the renewer's read and its replace.
			if _, err := h.checkpoint(context.Background(), l, newer); err != nil {
				t.Error(err)
			}
		}
		if _, err := h.renew(context.Background(), l); err != nil {
			t.Fatal(err)
		}
		got := stored(t, mem)["-FF"]
		st, err := parseState(*got.Continuation)
		if err != nil || st.Token != `"5"` {
			t.Errorf("continuation after the renewal = %+v, %v; want the renewal's stale copy (\"5\") over the checkpoint (\"9\")", st, err)
		}
	})
}

// LeaseRenewerImpl.run: the first renewal comes a whole renew interval after the lease was
// taken (not half of it, as in .NET), then one per interval.
func TestRenewerWaitsAWholeInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := feedtest.NewMemSource(1)
		mem := leases.NewMemDocuments("/id")
		h := New(src, mem, fastOptions("me", nil)) // renew 2s, poll 0.5s, nothing written
		if err := h.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		defer h.Stop()
		start := time.Now()
		for h.Writes()["acquire"] == 0 {
			time.Sleep(10 * time.Millisecond)
		}
		took := time.Since(start)
		time.Sleep(2*time.Second - took - 50*time.Millisecond)
		if n := h.Writes()["renew"]; n != 0 {
			t.Fatalf("%d renewals before a whole interval", n)
		}
		time.Sleep(100 * time.Millisecond)
		if n := h.Writes()["renew"]; n != 1 {
			t.Fatalf("%d renewals just after the interval, want 1", n)
		}
		time.Sleep(4 * time.Second)
		if n := h.Writes()["renew"]; n != 3 {
			t.Errorf("%d renewals after three intervals, want 3", n)
		}
	})
}

// PartitionProcessorImpl.run (4.81.0, from its classes): a page with changes is checkpointed
// after the handler; an empty page is checkpointed only when its continuation moved
// (hasServerContinuationTokenChange) or more results follow. An idle lease over a whole
// partition is written by its renewals only; a lease over a part of a partition whose other
// part is written to sees its continuation move at every poll, and is written at each.
func TestCheckpointsOfEmptyPages(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := feedtest.NewMemSource(1)
		mem := leases.NewMemDocuments("/id")
		spy := newSpy(mem)
		half := leases.Range{Min: "", Max: "20"}
		h := New(src, spy, fastOptions("me", nil))
		// Two leases over the one partition's halves, as after a merge.
		for _, r := range []leases.Range{half, {Min: "20", Max: "FF"}} {
			if _, err := h.createLease(context.Background(), r, nil); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := mem.Create(context.Background(), prefix+".info", fmt.Appendf(nil, `{"id":%q}`, prefix+".info")); err != nil {
			t.Fatal(err)
		}
		h.opts.RenewInterval, h.opts.Expiration = time.Hour, 2*time.Hour // only checkpoints write
		if err := h.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		defer h.Stop()
		time.Sleep(3 * time.Second) // both acquired, first reads done
		lo, hi := prefix+"..-20", prefix+"..20-FF"
		base := map[string]int{lo: spy.count(lo), hi: spy.count(hi)}
		// Idle: 10 s of polls every 0.5 s.
		time.Sleep(10 * time.Second)
		if n := spy.count(lo) - base[lo]; n != 0 {
			t.Errorf("idle: %d writes of lease -20, want none", n)
		}
		// Writes to keys of the upper half only, one per second.
		var hiKeys []string
		for i := 0; len(hiKeys) < 10; i++ {
			if pk := fmt.Sprintf("k%d", i); half.Contains(feedtest.EPK(pk)) == false {
				hiKeys = append(hiKeys, pk)
			}
		}
		base = map[string]int{lo: spy.count(lo), hi: spy.count(hi)}
		for _, pk := range hiKeys {
			if _, err := src.Write(pk, fmt.Appendf(nil, `{"id":%q}`, pk)); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Second)
		}
		if n := spy.count(lo) - base[lo]; n < 8 {
			t.Errorf("the other half written to: %d checkpoints of lease -20 in 10 s, want one per change (empty pages whose continuation moved)", n)
		}
		if n := spy.count(hi) - base[hi]; n < 10 {
			t.Errorf("%d checkpoints of lease 20-FF for 10 changes", n)
		}
	})
}

// FeedRangeGoneSplitHandler.handlePartitionGone and PartitionControllerImpl.handleFeedRangeGone:
// at a split the host creates one lease per child range with the parent's state narrowed to
// it, takes them itself and deletes the parent; nothing is read twice or lost.
func TestSplitCreatesChildrenWithTheParentsState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := feedtest.NewMemSource(1)
		mem := leases.NewMemDocuments("/id")
		rec := &recorder{}
		write(t, src, 0, 30)
		h := New(src, mem, fastOptions("me", rec))
		if err := h.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		defer h.Stop()
		time.Sleep(3 * time.Second)
		if _, err := src.Split("0"); err != nil {
			t.Fatal(err)
		}
		write(t, src, 30, 30)
		time.Sleep(5 * time.Second)
		ls := stored(t, mem)
		if len(ls) != 2 {
			t.Fatalf("%d leases after the split, want the 2 children", len(ls))
		}
		for tok, l := range ls {
			st, err := parseState(*l.Continuation)
			if err != nil || st.Range != *l.FeedRange || l.owner() != "me" {
				t.Errorf("child %s: owner %q, state %+v (%v)", tok, l.owner(), st, err)
			}
		}
		rec.mu.Lock()
		defer rec.mu.Unlock()
		for id, n := range rec.seen {
			if n != 1 {
				t.Errorf("%s delivered %d times", id, n)
			}
		}
		if len(rec.seen) != 60 {
			t.Errorf("%d of 60 delivered", len(rec.seen))
		}
	})
}

// FeedRangeGoneMergeHandler.handlePartitionGone: at a merge the lease is kept (not deleted,
// no new lease); the controller then removes it, which releases it, and the balancer takes it
// again. No change is lost.
func TestMergeKeepsTheLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := feedtest.NewMemSource(2)
		mem := leases.NewMemDocuments("/id")
		rec := &recorder{}
		write(t, src, 0, 40)
		h := New(src, mem, fastOptions("me", rec))
		if err := h.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		defer h.Stop()
		time.Sleep(3 * time.Second)
		before := stored(t, mem)
		if _, err := src.Merge("0", "1"); err != nil {
			t.Fatal(err)
		}
		write(t, src, 40, 40)
		time.Sleep(10 * time.Second)
		after := stored(t, mem)
		if len(after) != len(before) {
			t.Fatalf("%d leases after the merge, want the same %d", len(after), len(before))
		}
		for tok := range before {
			if after[tok] == nil || after[tok].owner() != "me" {
				t.Errorf("lease %s after the merge: %+v", tok, after[tok])
			}
		}
		if rec.distinct() != 80 {
			t.Errorf("%d of 80 delivered", rec.distinct())
		}
	})
}

// PartitionSupervisorImpl.shouldContinue: a supervisor whose processor got no response for
// more than 25 renew intervals (whole seconds) stops, and the lease is released (the release
// can fail when it races the lease's own renewal: the updater then sees the owner it is
// removing and calls the lease lost, as Java does).
func TestSupervisorReleasesAStalledLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &stallSource{MemSource: feedtest.NewMemSource(1)}
		mem := leases.NewMemDocuments("/id")
		o := fastOptions("me", nil)
		o.Expiration = time.Hour
		var mu sync.Mutex
		var stoppedAt time.Time
		o.Trace = func(f string, _ ...any) {
			if strings.Contains(f, "skipping renew as no batches processed") {
				mu.Lock()
				stoppedAt = time.Now()
				mu.Unlock()
			}
		}
		h := New(src, mem, o)
		if err := h.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		defer h.Stop()
		time.Sleep(3 * time.Second)
		src.stall.Store(true)
		start := time.Now()
		time.Sleep(60 * time.Second)
		src.stall.Store(false)
		mu.Lock()
		defer mu.Unlock()
		if took := stoppedAt.Sub(start); stoppedAt.IsZero() || took < 49*time.Second || took > 53*time.Second {
			t.Errorf("the supervisor stopped %v after the reads stalled (at %v), want after 25 renew intervals of 2 s", took, stoppedAt)
		}
	})
}

type stallSource struct {
	*feedtest.MemSource
	stall atomicBool
}

type atomicBool struct {
	mu sync.Mutex
	v  bool
}

func (b *atomicBool) Store(v bool) { b.mu.Lock(); b.v = v; b.mu.Unlock() }
func (b *atomicBool) Load() bool   { b.mu.Lock(); defer b.mu.Unlock(); return b.v }

func (s *stallSource) ReadPage(ctx context.Context, req feed.ReadRequest) (feed.Page, error) {
	if s.stall.Load() {
		<-ctx.Done()
		return feed.Page{}, ctx.Err()
	}
	return s.MemSource.ReadPage(ctx, req)
}
