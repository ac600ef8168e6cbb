package feed_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/feed/dotnettest"
	"github.com/cfp-dev/cfp/internal/feed/feedtest"
	"github.com/cfp-dev/cfp/internal/leases"
)

// Mixed deployments: cfp processor hosts and model .NET v3 hosts (dotnettest) on one lease set,
// with joins, kills (abandon without release), graceful stops, splits and merges. Each test
// asserts what an operator would notice: every change delivered, no two leases overlapping and
// no range uncovered at the end, every .NET start succeeding, ownership settled within three
// acquire cycles of the .NET hosts after the last event and staying settled, and duplicates
// bounded by one batch per ownership change.

const (
	mixedBatch    = 10 // MaxItems of every host: the unit of the duplicate bound
	mixedAcquire  = 40 * time.Millisecond
	mixedRenew    = 80 * time.Millisecond
	mixedExpiry   = 600 * time.Millisecond
	settleCycles  = 3
	stayedCycles  = 6
	mixedDeadline = 30 * time.Second
)

// mixedCluster is one lease set shared by cfp and .NET hosts over one MemSource.
type mixedCluster struct {
	t    testing.TB
	src  *feedtest.MemSource
	docs *leases.MemDocuments

	mu      sync.Mutex
	seen    map[string]int // deliveries per document id
	written []string
	next    int
	cfp     map[string]*mixedCFP
	dotnet  map[string]*dotnettest.Host
	dead    map[string]bool // killed or stopped instances
	// lastEvent is when the last join, stop, kill, split or merge happened (a kill counts at
	// the moment its leases expire).
	lastEvent time.Time
	kills     int
	splits    int
	merges    int

	acquiredCFP atomic.Int64
}

type mixedCFP struct {
	p      *feed.Processor
	cut    *frozenDocs
	cancel context.CancelFunc
	done   chan error
}

func newMixedCluster(t testing.TB, partitions int) *mixedCluster {
	return &mixedCluster{
		t: t, src: feedtest.NewMemSource(partitions, feedtest.WithPageSize(mixedBatch)), docs: leases.NewMemDocuments("/id"),
		seen: map[string]int{}, cfp: map[string]*mixedCFP{}, dotnet: map[string]*dotnettest.Host{}, dead: map[string]bool{},
	}
}

func (c *mixedCluster) record(items []json.RawMessage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, it := range items {
		c.seen[docID(it)]++
	}
}

func (c *mixedCluster) event() {
	c.mu.Lock()
	if now := time.Now(); now.After(c.lastEvent) {
		c.lastEvent = now
	}
	c.mu.Unlock()
}

// write adds n documents.
func (c *mixedCluster) write(n int) {
	c.t.Helper()
	c.mu.Lock()
	from := c.next
	c.next += n
	c.mu.Unlock()
	for i := from; i < from+n; i++ {
		id := fmt.Sprintf("doc%d", i)
		if _, err := c.src.Write(fmt.Sprintf("pk%d", i), fmt.Appendf(nil, `{"id":%q}`, id)); err != nil {
			c.t.Fatal(err)
		}
		c.mu.Lock()
		c.written = append(c.written, id)
		c.mu.Unlock()
	}
}

// startCFP starts a cfp host.
func (c *mixedCluster) startCFP(name string) {
	c.t.Helper()
	opts := fastOptions(name)
	opts.AcquireInterval, opts.RenewInterval, opts.Expiration, opts.MaxItems = mixedAcquire, mixedRenew, mixedExpiry, mixedBatch
	opts.Notify = func(e feed.Event) {
		if e.Type == feed.EventAcquired {
			c.acquiredCFP.Add(1)
		}
	}
	cut := &frozenDocs{Documents: c.docs}
	p, err := feed.NewProcessor(c.src, leases.NewStore(cut, testPrefix, leases.StoreOptions{}), feed.HandlerFunc(func(_ context.Context, b feed.Batch) error {
		c.record(b.Items)
		return nil
	}), opts)
	if err != nil {
		c.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &mixedCFP{p: p, cut: cut, cancel: cancel, done: make(chan error, 1)}
	go func() { h.done <- p.Run(ctx) }()
	c.mu.Lock()
	c.cfp[name] = h
	c.mu.Unlock()
	c.event()
}

// startDotNet starts a model .NET host; its StartAsync must succeed.
func (c *mixedCluster) startDotNet(name string) {
	c.t.Helper()
	o := dotnetOptions(name)
	o.AcquireInterval, o.RenewInterval, o.Expiration, o.MaxItems = mixedAcquire, mixedRenew, mixedExpiry, mixedBatch
	o.Handle = func(_ context.Context, b dotnettest.Batch) error {
		c.record(b.Items)
		return nil
	}
	h := dotnettest.New(c.src, c.docs, o)
	if err := h.Start(context.Background()); err != nil {
		c.t.Fatalf(".NET host %s: StartAsync failed: %v", name, err)
	}
	c.mu.Lock()
	c.dotnet[name] = h
	c.mu.Unlock()
	c.event()
}

// stop stops a host gracefully: its leases are released.
func (c *mixedCluster) stop(name string) {
	c.t.Helper()
	c.mu.Lock()
	h, d := c.cfp[name], c.dotnet[name]
	delete(c.cfp, name)
	delete(c.dotnet, name)
	c.dead[name] = true
	c.mu.Unlock()
	switch {
	case h != nil:
		h.cancel()
		if err := <-h.done; err != nil {
			c.t.Errorf("cfp host %s: Run() = %v", name, err)
		}
	case d != nil:
		d.Stop()
	}
	c.event()
}

// kill abandons a host: nothing is released, its leases expire. A cfp host loses the lease
// container first, so that its shutdown cannot release anything either.
func (c *mixedCluster) kill(name string) {
	c.t.Helper()
	c.mu.Lock()
	h, d := c.cfp[name], c.dotnet[name]
	delete(c.cfp, name)
	delete(c.dotnet, name)
	c.dead[name] = true
	c.kills++
	c.mu.Unlock()
	switch {
	case h != nil:
		h.cut.freeze()
		h.cancel()
		<-h.done
	case d != nil:
		d.Kill()
	}
	c.mu.Lock()
	c.lastEvent = time.Now().Add(mixedExpiry) // its leases are free from then
	c.mu.Unlock()
}

func (c *mixedCluster) split(partition string) {
	c.t.Helper()
	if _, err := c.src.Split(partition); err != nil {
		c.t.Fatal(err)
	}
	c.mu.Lock()
	c.splits++
	c.mu.Unlock()
	c.event()
}

func (c *mixedCluster) merge(a, b string) {
	c.t.Helper()
	if _, err := c.src.Merge(a, b); err != nil {
		c.t.Fatal(err)
	}
	c.mu.Lock()
	c.merges++
	c.mu.Unlock()
	c.event()
}

// partitionIDs returns the live partitions' ids in range order.
func (c *mixedCluster) partitionIDs() []string {
	ps, err := c.src.Partitions(context.Background())
	if err != nil {
		c.t.Fatal(err)
	}
	var ids []string
	for _, p := range ps {
		ids = append(ids, p.ID)
	}
	return ids
}

// waitGoneHandled waits until no PK-range lease names a partition that is gone: after a merge
// the first parent's child can deliver every change before the other parent's owner reads its
// lease again, and that lease is only handled (deleted) then.
func (c *mixedCluster) waitGoneHandled(what string) {
	c.t.Helper()
	deadline := time.Now().Add(mixedDeadline)
	for {
		live := c.partitionIDs()
		gone := ""
		for _, l := range listLeases(c.t, c.docs) {
			if l.NamesPartition() && !slices.Contains(live, l.Token) {
				gone = l.Token
			}
		}
		if gone == "" {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s: lease %s still names a gone partition; leases: %s", what, gone, c.describe())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (c *mixedCluster) missing() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, id := range c.written {
		if c.seen[id] == 0 {
			n++
		}
	}
	return n
}

// waitDelivered waits until every written document was delivered.
func (c *mixedCluster) waitDelivered(what string) {
	c.t.Helper()
	deadline := time.Now().Add(mixedDeadline)
	for c.missing() > 0 {
		if time.Now().After(deadline) {
			c.t.Fatalf("%s: %d of %d changes never delivered; leases: %s", what, c.missing(), len(c.written), c.describe())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// anyDotNet returns a running .NET host, whose balancer cycles are the test's clock.
func (c *mixedCluster) anyDotNet() *dotnettest.Host {
	c.mu.Lock()
	defer c.mu.Unlock()
	var names []string
	for n := range c.dotnet {
		names = append(names, n)
	}
	if len(names) == 0 {
		return nil
	}
	sort.Strings(names)
	return c.dotnet[names[0]]
}

// ownership returns the owner of every lease, and whether it is settled: every lease owned by a
// running host, no lease by a stopped one, and the running hosts' counts within one of each
// other.
func (c *mixedCluster) ownership() (map[string]string, bool) {
	ls := listLeases(c.t, c.docs)
	c.mu.Lock()
	defer c.mu.Unlock()
	owners := map[string]string{}
	counts := map[string]int{}
	for n := range c.cfp {
		counts[n] = 0
	}
	for n := range c.dotnet {
		counts[n] = 0
	}
	settled := len(counts) > 0
	// The lease set must match the partitions: no lease left over a split or merged
	// partition, no gap, no overlap.
	parts, err := c.src.Partitions(context.Background())
	if err != nil {
		c.t.Fatal(err)
	}
	var lp []leases.Partition
	for _, p := range parts {
		lp = append(lp, leases.Partition{ID: p.ID, Range: p.Range, Parents: p.Parents})
	}
	for _, f := range leases.Check(ls, time.Now(), time.Hour, leases.WithPartitions(lp)) {
		switch f.Kind {
		case leases.FindingPendingSplit, leases.FindingOrphanParent, leases.FindingGap, leases.FindingOverlap, leases.FindingUnknownRange:
			settled = false
		}
	}
	for _, l := range ls {
		owners[l.Token] = l.Owner
		if _, live := counts[l.Owner]; !live {
			settled = false
			continue
		}
		counts[l.Owner]++
	}
	lo, hi := len(ls), 0
	for _, n := range counts {
		lo, hi = min(lo, n), max(hi, n)
	}
	if hi-lo > 1 {
		settled = false
	}
	return owners, settled
}

func (c *mixedCluster) describe() string {
	var b strings.Builder
	for _, l := range listLeases(c.t, c.docs) {
		fmt.Fprintf(&b, "\n  %s %s %s owner=%q cont=%s", l.Token, l.Family, l.Range, l.Owner, l.Continuation)
	}
	return b.String()
}

// settle waits until ownership is settled and measures how many acquire cycles of a .NET host
// that took after the last event (a kill's at its leases' expiry); then it requires the
// ownership to stay unchanged for stayedCycles more cycles. It returns the cycles it took.
func (c *mixedCluster) settle(what string) int {
	c.t.Helper()
	c.mu.Lock()
	wait := time.Until(c.lastEvent)
	c.mu.Unlock()
	if wait > 0 {
		time.Sleep(wait)
	}
	clock := c.anyDotNet()
	if clock == nil {
		c.t.Fatal("settle needs a running .NET host as its clock")
	}
	start := clock.Cycles()
	deadline := time.Now().Add(mixedDeadline)
	var owners map[string]string
	for {
		var ok bool
		if owners, ok = c.ownership(); ok {
			break
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s: ownership never settled: %s", what, c.describe())
		}
		time.Sleep(2 * time.Millisecond)
	}
	took := clock.Cycles() - start
	// A host that joins takes leases from live owners one per acquire cycle, as .NET's
	// strategy does (EqualPartitionsBalancingStrategy steals one lease per cycle), and a cfp
	// host takes a lease from a cfp owner in two (ask, then take after the release): a join
	// may need up to two cycles per lease of its share on top of the three.
	share := 0
	if n := len(owners); n > 0 {
		c.mu.Lock()
		hosts := len(c.cfp) + len(c.dotnet)
		c.mu.Unlock()
		share = (n + hosts - 1) / hosts
	}
	if took > settleCycles+2*share {
		c.t.Errorf("%s: ownership settled %d acquire cycles after the last event, want at most %d (+%d, two cycles per lease of a share of %d): %s",
			what, took, settleCycles, 2*share, share, c.describe())
	}
	from := clock.Cycles()
	for clock.Cycles() < from+stayedCycles {
		now, _ := c.ownership()
		if fmt.Sprint(now) != fmt.Sprint(owners) {
			c.t.Errorf("%s: ownership changed after it settled:\n  was %v\n  now %v", what, owners, now)
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	return took
}

// finish stops every host and checks the end state: all delivered, coverage exact, no .NET
// errors, duplicates within one batch per ownership change. It returns the duplicates.
func (c *mixedCluster) finish() int {
	c.t.Helper()
	c.waitDelivered("at the end")
	c.mu.Lock()
	var names []string
	for n := range c.cfp {
		names = append(names, n)
	}
	for n := range c.dotnet {
		names = append(names, n)
	}
	dn := make([]*dotnettest.Host, 0, len(c.dotnet))
	for _, h := range c.dotnet {
		dn = append(dn, h)
	}
	c.mu.Unlock()
	acquired := int(c.acquiredCFP.Load())
	for _, h := range dn {
		acquired += h.Acquired()
		for _, err := range h.Errors() {
			c.t.Errorf(".NET host error: %v", err)
		}
	}
	for _, n := range names {
		c.stop(n)
	}
	ls := listLeases(c.t, c.docs)
	parts, err := c.src.Partitions(context.Background())
	if err != nil {
		c.t.Fatal(err)
	}
	var lp []leases.Partition
	for _, p := range parts {
		lp = append(lp, leases.Partition{ID: p.ID, Range: p.Range, Parents: p.Parents})
	}
	for _, f := range leases.Check(ls, time.Now(), time.Hour, leases.WithPartitions(lp)) {
		switch f.Kind {
		case leases.FindingOverlap, leases.FindingGap, leases.FindingDuplicate, leases.FindingOrphanParent, leases.FindingUnknownRange:
			c.t.Errorf("lease set at the end: %s: %s%s", f.Kind, f.Message, c.describe())
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	dups := 0
	for _, id := range c.written {
		if n := c.seen[id]; n > 1 {
			dups += n - 1
		}
	}
	if bound := mixedBatch * acquired; dups > bound {
		c.t.Errorf("%d duplicate deliveries, want at most one batch (%d) per ownership change (%d acquisitions): %d", dups, mixedBatch, acquired, bound)
	}
	return dups
}

// writer writes a document every few milliseconds until stopped.
func (c *mixedCluster) writer() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			c.write(3)
			time.Sleep(3 * time.Millisecond)
		}
	}()
	return func() { cancel(); <-done }
}

// TestMixed_JoinsStopsAndKills: a .NET host bootstraps, cfp and .NET hosts join, a cfp host and
// a .NET host are killed, another .NET host stops gracefully, while changes keep coming.
func TestMixed_JoinsStopsAndKills(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := newMixedCluster(t, 8)
		c.write(100)
		c.startDotNet("dotnet-a")
		stop := c.writer()
		c.startCFP("cfp-b")
		c.settle("startCFP cfp-b")
		c.startDotNet("dotnet-c")
		c.startCFP("cfp-d")
		c.settle("startCFP cfp-d")
		c.kill("cfp-b")
		c.settle("kill cfp-b")
		c.kill("dotnet-c")
		c.startCFP("cfp-e")
		c.settle("startCFP cfp-e")
		c.stop("dotnet-a")
		c.startDotNet("dotnet-f")
		stop()
		c.write(50)
		took := c.settle("the end")
		dups := c.finish()
		t.Logf("%d changes, %d kills, settled in %d cycles, %d duplicates", len(c.written), c.kills, took, dups)
	})
}

// TestMixed_SplitAndMerge: a .NET host and a cfp host share a lease set through a split and a
// merge of the split's children.
func TestMixed_SplitAndMerge(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := newMixedCluster(t, 2)
		c.write(100)
		c.startDotNet("dotnet-a")
		c.startCFP("cfp-b")
		stop := c.writer()
		c.settle("startCFP cfp-b")
		c.split("0")
		c.waitDelivered("after the split")
		c.settle("waitDelivered after the split")
		ids := c.partitionIDs() // the two children, then partition 1
		c.merge(ids[0], ids[1])
		c.waitDelivered("after the merge")
		stop()
		c.write(50)
		took := c.settle("the end")
		dups := c.finish()
		t.Logf("%d changes, %d splits, %d merges, settled in %d cycles, %d duplicates", len(c.written), c.splits, c.merges, took, dups)
	})
}

// seedLeases writes the lease documents before any host starts: one per partition, in the
// families given (by partition index), and the .info marker.
func (c *mixedCluster) seedLeases(families []string) {
	c.t.Helper()
	parts, err := c.src.Partitions(context.Background())
	if err != nil {
		c.t.Fatal(err)
	}
	for i, p := range parts {
		var body string
		id := leases.LeaseID(testPrefix, p.ID)
		fr := fmt.Sprintf(`{"Range":{"min":%q,"max":%q}}`, p.Range.Min, p.Range.Max)
		switch families[i%len(families)] {
		case "v0":
			body = fmt.Sprintf(`{"id":%q,"version":0,"LeaseToken":%q,"FeedRange":%s,"Owner":null,"ContinuationToken":null,"properties":{},"timestamp":null,"Mode":"Incremental Feed"}`, id, p.ID, fr)
		case "v0-no-range":
			body = fmt.Sprintf(`{"id":%q,"LeaseToken":%q,"Owner":null,"ContinuationToken":null,"properties":{},"timestamp":null}`, id, p.ID)
		case "v2":
			body = fmt.Sprintf(`{"id":%q,"PartitionId":%q,"Owner":null,"ContinuationToken":null,"properties":{},"timestamp":null}`, id, p.ID)
		case "java-pk":
			body = fmt.Sprintf(`{"id":%q,"LeaseToken":%q,"ContinuationToken":null,"timestamp":null,"Owner":null}`, id, p.ID)
		case "java-epk":
			tok := p.Range.String()
			id = leases.LeaseID(testPrefix, tok)
			body = fmt.Sprintf(`{"id":%q,"LeaseToken":%q,"ContinuationToken":null,"timestamp":null,"Owner":null,"version":1,"feedRange":{"Range":{"min":%q,"max":%q,"isMinInclusive":true,"isMaxInclusive":false}}}`, id, tok, p.Range.Min, p.Range.Max)
		case "v1":
			tok := p.Range.String()
			id = leases.LeaseID(testPrefix, tok)
			body = fmt.Sprintf(`{"id":%q,"version":1,"LeaseToken":%q,"FeedRange":%s,"Owner":null,"ContinuationToken":null,"properties":{},"timestamp":null,"Mode":"Incremental Feed"}`, id, tok, fr)
		}
		if _, err := c.docs.Put(id, []byte(body)); err != nil {
			c.t.Fatal(err)
		}
	}
	if _, err := c.docs.Put(leases.InfoID(testPrefix), []byte(`{"id":"`+leases.InfoID(testPrefix)+`"}`)); err != nil {
		c.t.Fatal(err)
	}
}

// TestMixed_EveryDotNetFamily: leases of every .NET family (v0 with and without FeedRange, the
// V2 library's PartitionId, v1) under cfp and .NET hosts, through a split of a range-less
// lease's partition and a merge of two partitions whose leases had no FeedRange when they were
// written.
func TestMixed_EveryDotNetFamily(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := newMixedCluster(t, 4)
		c.seedLeases([]string{"v0", "v0-no-range", "v2", "v1"})
		c.write(200)
		c.startDotNet("dotnet-a")
		c.startCFP("cfp-b")
		stop := c.writer()
		c.settle("startCFP cfp-b")
		c.split("1") // a v0 lease written without FeedRange
		c.waitDelivered("after the split")
		c.settle("waitDelivered after the split")
		ids := c.partitionIDs()
		// Merge the V2 lease's partition (2) with the v1 lease's (3).
		i := slices.Index(ids, "2")
		c.merge(ids[i], ids[i+1])
		c.waitDelivered("after the merge")
		c.startCFP("cfp-c")
		c.kill("cfp-b")
		stop()
		c.write(50)
		took := c.settle("the end")
		dups := c.finish()
		t.Logf("%d changes, %d kills, %d splits, %d merges, settled in %d cycles, %d duplicates", len(c.written), c.kills, c.splits, c.merges, took, dups)
	})
}

// TestMixed_JavaFamilies: Java PK-range and EPK lease sets (no .NET host shares a Java lease
// set) under cfp hosts that join, split, merge and get killed: every change is delivered and
// the lease set stays in its family, without overlaps or gaps.
func TestMixed_JavaFamilies(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, family string
		merge        bool
	}{{"java-pk", "java-pk", false}, {"java-pk merge", "java-pk", true}, {"java-epk", "java-epk", true}} {
		family := tc.family
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				c := newMixedCluster(t, 3)
				c.seedLeases([]string{family})
				c.write(150)
				c.startCFP("cfp-a")
				c.startCFP("cfp-b")
				stop := c.writer()
				c.waitDelivered("at the start")
				c.split("0")
				c.waitDelivered("after the split")
				if tc.merge {
					ids := c.partitionIDs()
					c.merge(ids[len(ids)-2], ids[len(ids)-1])
					c.waitDelivered("after the merge")
					c.waitGoneHandled("after the merge")
				}
				c.kill("cfp-a")
				c.startCFP("cfp-c")
				stop()
				c.write(30)
				dups := c.finish()
				for _, l := range listLeases(t, c.docs) {
					if want := leases.Family(family); l.Family != want && !(family == "java-pk" && l.Family == leases.FamilyJavaEPK) {
						t.Errorf("lease %s is %s, want %s", l.Token, l.Family, want)
					}
				}
				t.Logf("%d changes, %d kills, %d splits, %d merges, %d duplicates", len(c.written), c.kills, c.splits, c.merges, dups)
			})
		})
	}
}

// TestMixed_Long is the long run (CFP_MIXED_LONG=1): more hosts, kills, splits and merges for
// about a minute; it logs the figures.
func TestMixed_Long(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		if os.Getenv("CFP_MIXED_LONG") == "" {
			t.Skip("set CFP_MIXED_LONG=1 for the long mixed-deployment run")
		}
		c := newMixedCluster(t, 8)
		c.write(500)
		c.startDotNet("dotnet-0")
		stop := c.writer()
		maxTook := 0
		settle := func() { maxTook = max(maxTook, c.settle("long run")) }
		n := 1
		deadline := time.Now().Add(60 * time.Second)
		for round := 0; time.Now().Before(deadline); round++ {
			name := func(kind string) string { n++; return fmt.Sprintf("%s-%d", kind, n) }
			c.startCFP(name("cfp"))
			c.startDotNet(name("dotnet"))
			settle()
			// Kill one host and stop another, never the last .NET host (the clock).
			c.mu.Lock()
			var cfps, dns []string
			for k := range c.cfp {
				cfps = append(cfps, k)
			}
			for k := range c.dotnet {
				dns = append(dns, k)
			}
			c.mu.Unlock()
			sort.Strings(cfps)
			sort.Strings(dns)
			if len(cfps) > 1 {
				c.kill(cfps[0])
			}
			if len(dns) > 2 {
				if round%2 == 0 {
					c.kill(dns[0])
				} else {
					c.stop(dns[0])
				}
			}
			settle()
			ids := c.partitionIDs()
			switch {
			case round%3 == 0 && len(ids) < 16:
				c.split(ids[round%len(ids)])
			case round%3 == 1 && len(ids) > 4:
				c.merge(ids[0], ids[1])
			}
			c.waitDelivered(fmt.Sprintf("round %d", round))
			settle()
		}
		stop()
		c.write(100)
		settle()
		dups := c.finish()
		t.Logf("long run: %d changes, %d kills, %d splits, %d merges, lost %d, %d duplicates, settled within %d acquire cycles at worst",
			len(c.written), c.kills, c.splits, c.merges, c.missing(), dups, maxTook)
	})
}
