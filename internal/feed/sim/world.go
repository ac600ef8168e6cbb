// Package sim is a deterministic simulation of a mixed deployment: cfp processor hosts (the
// real feed.Processor) and model .NET v3 hosts (dotnettest) sharing one lease set over an
// in-memory change feed (feedtest.MemSource) and lease container (leases.MemDocuments), in
// virtual time. A seed draws the deployment and its fault schedule (writes, kills, pauses,
// restarts, splits, merges, injected service answers, slow and failing handlers, clock skew,
// lease options that differ between hosts); the world checks its invariants at every delivery
// and at the end. Run must be called inside a testing/synctest bubble, so that every timer of
// every host runs on the bubble's fake clock. docs/architecture.md, "The deployment
// simulation", describes what it models and the windows its invariants allow.
package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/feed/dotnettest"
	"github.com/cfp-dev/cfp/internal/feed/feedtest"
	"github.com/cfp-dev/cfp/internal/feed/javatest"
	"github.com/cfp-dev/cfp/internal/leases"
)

// Prefix is the lease prefix of the simulated lease set.
const Prefix = "cfpsim.documents.azure.com_db==_coll="

// Kind is a host's implementation.
type Kind int

// Host kinds.
const (
	CFP Kind = iota
	DotNet
)

func (k Kind) String() string {
	switch k {
	case DotNet:
		return "dotnet"
	case Java:
		return "java"
	}
	return "cfp"
}

// Timing is one host's lease options.
type Timing struct {
	Acquire, Renew, Expiration time.Duration
}

// host is one simulated process, alive or not.
type host struct {
	name   string
	kind   Kind
	timing Timing
	skew   time.Duration // its clock's offset from the true time
	io     *hostIO

	// cfp
	cancel context.CancelFunc
	done   chan error
	// .NET
	net *dotnettest.Host
	// Java (java.go)
	java *javatest.Host

	pauses []span // when it was frozen (end zero: still frozen)
	blind  []span // when its lease writes failed (429, 503, lost answers): it cannot learn of a loss
	// faulted says the host was answered with an injected fault: a Run that failed on one
	// (a bootstrap that gave up on a 429 or 503, as .NET's StartAsync throws) is no violation.
	faulted bool
	exited  atomic.Bool // a cfp host's Run returned
}

type span struct{ from, to time.Time }

// owned is the lease document's owner of one token, as last written.
type owned struct {
	owner string
	since time.Time
}

// World is the simulated deployment.
type World struct {
	src   *feedtest.MemSource
	mem   *leases.MemDocuments
	docs  leases.Documents // mem, observed
	batch int
	seed  uint64 // the run's seed: the hosts' timer offsets (order.go)
	start time.Time
	// format is the lease format cfp hosts bootstrap in (java.go).
	format feed.LeaseFormat
	trace  bool // log every delivery
	// requests logs every request of every host (Options.Requests).
	requests bool

	// wmu makes a lease write and its observation one step (observedDocs); taken before mu.
	// Nothing blocks under it: the in-memory container answers at once.
	wmu sync.Mutex

	mu      sync.Mutex
	hosts   map[string]*host // by name, the newest incarnation
	order   []string         // names in the order they first started
	latest  map[string]int64 // document id -> the LSN of its latest write
	seen    map[string]int   // id@lsn -> successful deliveries
	written int

	owner map[string]owned                // token -> current owner
	lost  map[string]map[string]time.Time // token -> former owner -> when it stopped owning it
	// goneAt is when a host deleted each lease document that is not there now, by token (a
	// split's or merge's parent).
	goneAt  map[string]time.Time
	changes int // ownership changes (a lease written with a new non-empty owner)
	retries int // failed handler calls (each may redeliver a batch)

	// maxLate is the longest a former owner went on delivering a lease after losing it (its
	// awake time), and lateBatches how many batches were so delivered.
	maxLate     time.Duration
	lateBatches int

	// wide are the keys over which a .NET host created a lease wider than the gone lease it
	// replaced (dotnetwide.go): .NET's own overlap, excused there alone.
	wide []leases.Range
	// wideAt is when each of wide was recorded (the .NET host's create of that lease).
	wideAt []time.Time
	// latestAt is when each document's latest version was written, by id.
	latestAt map[string]time.Time
	// netLost counts the changes lost to .NET's own overlap (see missing).
	netLost int
	// ver changes with every delivery, write and .NET overlap recorded: missing's answer holds
	// until it changes (missed).
	ver    uint64
	missed struct {
		ver     uint64
		ok      bool
		n       int
		one     string
		netLost int
	}
	// checks keeps what the checker decoded of the lease container until it changes
	// (leaseSet, coverage); the settle wait asks every 100 ms of virtual time.
	checks checkCache
	// deleted are the leases an operator deleted and has not restored yet (deleted.go).
	deleted map[string]bool
	// deletions are the operator's deletions of each lease, by token, and their restores (zero
	// while deleted).
	deletions map[string][]span
	// rebuffs are the cfp hosts' refusals to steal a lease again from the .NET host that took
	// it back (rebuff.go).
	rebuffs []rebuffWindow
	// stranded are the leases a .NET or Java host acquired with the answer lost (stranded.go).
	stranded []strandedLease
	// overwrites are the owner changes a .NET host made without If-Match (rebuff.go).
	overwrites []overwrite
	// throttles are the cfp hosts' runs of throttled reads, by host and read (readbackoff.go).
	throttles map[*host]map[string]*throttleRun

	violations []string
	log        []string
	// events are the run's ownership changes and deliveries, for its fingerprint
	// (fingerprint.go).
	events []string
}

func newWorld(partitions, batch int) *World {
	w := &World{
		src:    feedtest.NewMemSource(partitions, feedtest.WithPageSize(batch)),
		mem:    leases.NewMemDocuments("/id"),
		batch:  batch,
		start:  time.Now(),
		hosts:  map[string]*host{},
		latest: map[string]int64{},
		seen:   map[string]int{},
		owner:  map[string]owned{},
		lost:   map[string]map[string]time.Time{}, goneAt: map[string]time.Time{},
		deleted: map[string]bool{}, deletions: map[string][]span{}, latestAt: map[string]time.Time{},
	}
	w.docs = &observedDocs{Documents: w.mem, w: w}
	return w
}

// at is the virtual time since the start, for logs.
func (w *World) at() time.Duration { return time.Since(w.start) }

// stamp is a log line's virtual instant: to the millisecond, or with -deliveries to the
// nanosecond, so that the traces of two replays of a seed can be sorted and compared (a
// host's timers are offset by microseconds, order.go).
func (w *World) stamp() string {
	if w.trace {
		return fmt.Sprintf("%14s ", w.at())
	}
	return fmt.Sprintf("%8s ", w.at().Truncate(time.Millisecond))
}

func (w *World) logf(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.log = append(w.log, w.stamp()+fmt.Sprintf(format, args...))
}

func (w *World) violate(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.violateLocked(format, args...)
}

func (w *World) violateLocked(format string, args ...any) {
	msg := w.stamp() + fmt.Sprintf(format, args...)
	w.violations = append(w.violations, msg)
	w.log = append(w.log, "VIOLATION "+msg)
}

// observedDocs is the lease container with an observer of every lease write: the world's
// record of who owns what since when. A write and its observation are one step (wmu), so that
// the world sees two writes in the order the container applied them.
type observedDocs struct {
	leases.Documents
	w *World
}

func (o *observedDocs) Create(ctx context.Context, pk string, body []byte) (leases.Document, error) {
	o.w.wmu.Lock()
	defer o.w.wmu.Unlock()
	d, err := o.Documents.Create(ctx, pk, body)
	if err == nil {
		o.w.observe(d, false)
	}
	return d, err
}

func (o *observedDocs) Replace(ctx context.Context, id, pk, ifMatch string, body []byte) (leases.Document, error) {
	o.w.wmu.Lock()
	defer o.w.wmu.Unlock()
	d, err := o.Documents.Replace(ctx, id, pk, ifMatch, body)
	if err == nil {
		if ifMatch == "" {
			o.w.noteOverwrite(d)
		}
		o.w.observe(d, false)
	}
	return d, err
}

func (o *observedDocs) Delete(ctx context.Context, id, pk, ifMatch string) error {
	o.w.wmu.Lock()
	defer o.w.wmu.Unlock()
	// Read first to learn the token; the delete itself decides.
	d, rerr := o.Documents.Read(ctx, id, pk)
	err := o.Documents.Delete(ctx, id, pk, ifMatch)
	if err == nil && rerr == nil {
		o.w.observe(d, true)
	}
	return err
}

// observe records a lease document's new owner (none when deleted).
func (w *World) observe(d leases.Document, deleted bool) {
	l, err := leases.Decode(d)
	if err != nil {
		return // a marker (.info, .lock) or a host record
	}
	owner := strings.TrimSpace(l.Owner)
	if deleted {
		owner = ""
	}
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	was := w.owner[l.Token]
	if was.owner == owner && (owner != "" || !deleted) {
		if w.trace && len(l.Properties) > 0 {
			w.log = append(w.log, fmt.Sprintf("%swrite %s: owner %q props=%v", w.stamp(), l.Token, owner, l.Properties))
		}
		return
	}
	if was.owner != "" && was.owner != owner {
		if w.lost[l.Token] == nil {
			w.lost[l.Token] = map[string]time.Time{}
		}
		w.lost[l.Token][was.owner] = now
	}
	if w.trace {
		w.log = append(w.log, fmt.Sprintf("%sowner %s: %q -> %q props=%v", w.stamp(), l.Token, was.owner, owner, l.Properties))
	}
	w.recordLocked("owner %s %q", l.Token, owner)
	if owner != "" {
		w.changes++
		if w.lost[l.Token] != nil {
			delete(w.lost[l.Token], owner)
		}
	}
	if deleted {
		delete(w.owner, l.Token)
		w.goneAt[l.Token] = now
		return
	}
	delete(w.goneAt, l.Token)
	w.owner[l.Token] = owned{owner: owner, since: now}
}

// awake returns how long h was running (not frozen) between from and to.
func (h *host) awake(from, to time.Time) time.Duration {
	d := to.Sub(from)
	for _, p := range h.pauses {
		end := p.to
		if end.IsZero() {
			end = to
		}
		lo, hi := maxTime(p.from, from), minTime(end, to)
		if hi.After(lo) {
			d -= hi.Sub(lo)
		}
	}
	return d
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// late returns how long after losing a lease (at lostAt) a host that delivers it at now has
// been at it, in its own awake time, and its window: the batch in flight (a slow handler's) and
// one write interval for the host to learn of the loss at its next write of the lease: the
// renew interval for .NET, the keep-alive for cfp, which writes an idle lease only that often
// (feed.ProcessorOptions.KeepAlive, looked at every quarter renew interval). A host whose lease
// writes failed meanwhile cannot learn of it: a cfp host goes on until its lease expires by
// its own clock (an expiration after its last write); a .NET host, whose renewer only logs
// failures, until a write succeeds again, so its lateness counts from then.
func (h *host) late(lostAt, now time.Time) (late, window time.Duration) {
	from := lostAt
	blind := false
	for _, b := range h.blind {
		if (b.to.IsZero() || b.to.After(lostAt)) && b.from.Before(now) {
			blind = true
			if b.to.IsZero() || b.to.After(now) {
				from = now
			} else if b.to.After(from) {
				from = b.to
			}
		}
	}
	if h.kind == CFP {
		o := feed.ProcessorOptions{AcquireInterval: h.timing.Acquire, RenewInterval: h.timing.Renew, Expiration: h.timing.Expiration}
		window = max(o.KeepAlive(), h.timing.Renew) + h.timing.Renew/4 + slowHandler
		if blind {
			window = h.timing.Expiration + slowHandler
		}
		return h.awake(lostAt, now), window
	}
	if h.kind == Java {
		// Java learns of a loss at its next renewal (or checkpoint), and its supervisor
		// releases without waiting for the batch in flight; blind also while its writes got
		// 412s, after which its updater gives up silently (setFault).
		return h.awake(from, now), h.timing.Renew + javaTick + slowHandler
	}
	return h.awake(from, now), h.timing.Renew + slowHandler
}

// begin is a handler call of h for token: the ownership invariant. A host hands over a lease's
// batch only while the lease document names it, or within its window (see late), in its awake
// time, after the document stopped naming it.
func (w *World) begin(h *host, token string) {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.owner[token].owner == h.name {
		return
	}
	if w.deleted[token] {
		return // deleted by an operator, not restored yet: no other host can hold it (deleted.go)
	}
	lostAt, ok := w.lost[token][h.name]
	if !ok && h.javaBelievesItOwns(now) {
		w.lateBatches++ // java.go: an acquire Java's updater gave up on silently
		return
	}
	if !ok {
		w.violateLocked("%s %s delivered lease %s, which it never owned (owner %q)", h.kind, h.name, token, w.owner[token].owner)
		return
	}
	late, win := h.late(lostAt, now)
	if late > win && h.kind == DotNet {
		// A lease deleted before the host learned of its loss hides the loss until it is
		// restored: .NET's renewer reads it, gets 404 and only logs it (deleted.go), and
		// learns of the new owner at its first read after the restore.
		for _, d := range w.deletions[token] {
			if d.from.After(lostAt) && d.from.Before(lostAt.Add(win)) && !d.to.IsZero() && d.to.Before(now) {
				late, win = h.late(d.to, now)
			}
		}
		// Deleted by a host (the parent of a split or merge another host handled) before
		// this one learned of its loss, and not there since: it learns at the checkpoint of
		// its next batch, whose replace answers 404 (seed 978: dotnet-13 lost 0666-0999 to
		// cfp-8, which deleted it as a merge's parent 0.65 s later; dotnet-13's renewer read
		// 404 seven times and its next batch came 12.4 s after the loss). Nobody holds this
		// lease; the hosts that hold its successors deliver the same changes (duplicates).
		if at, ok := w.goneAt[token]; ok && at.After(lostAt) && at.Before(lostAt.Add(win)) {
			late = 0
		}
	}
	w.lateBatches++
	w.maxLate = max(w.maxLate, late)
	if late > win {
		w.violateLocked("%s %s delivered lease %s %s (awake) after it lost it to %q, beyond its window of %s",
			h.kind, h.name, token, late, w.owner[token].owner, win)
	}
}

// deliver records the items of a successful handler call of host for token.
func (w *World) deliver(host, token string, items []json.RawMessage) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.recordLocked("deliver %s %s %d", host, token, len(items))
	for _, it := range items {
		var d struct {
			ID  string `json:"id"`
			LSN int64  `json:"_lsn"`
		}
		if err := json.Unmarshal(it, &d); err != nil {
			w.violateLocked("undecodable item %s", it)
			continue
		}
		w.seen[fmt.Sprintf("%s@%d", d.ID, d.LSN)]++
	}
	w.ver++
}

// write writes n documents; a fraction rewrites documents written before (latest-version
// feeds return only their newest version).
func (w *World) write(ids []string) {
	for _, id := range ids {
		lsn, err := w.src.Write("pk-"+id, fmt.Appendf(nil, `{"id":%q}`, id))
		if err != nil {
			w.violate("write %s: %v", id, err)
			continue
		}
		w.mu.Lock()
		if _, ok := w.latest[id]; !ok {
			w.written++
		}
		w.latest[id] = lsn
		w.latestAt[id] = time.Now()
		w.ver++
		w.mu.Unlock()
	}
}

// missing returns how many documents' latest version was never delivered, and one of them.
//
// A change whose key lies within .NET's own overlap (dotnetwide.go) and that was written before
// that overlap's lease was created is .NET's loss, not counted (netLost counts it): .NET
// created that lease for a gone PK-range lease with the gone lease's continuation, an LSN of
// that lease's partition, over a merged partition whose keys beyond the gone lease came from
// another partition, with LSNs of their own; when another gone lease's handling created it
// first, with its own continuation, the changes of the other lineage below that LSN are never
// read by any lease (Bootstrapping/PartitionSynchronizerCore.cs, HandlePartitionGoneAsync,
// the "Split" branch: CreateLeaseIfNotExistAsync(partitionKeyRange, lease.ContinuationToken),
// a conflict keeps the first). Seed 9077: dotnet-2 handled gone lease 1 (continuation 40) and
// created lease 16 over 0FFF-1AAA, a merge of partitions 10 (0FFF-1555, split from lease 4's
// partition 4) and 12; its handling of gone lease 4 (continuation 30) then found 16 there:
// doc116@36 and four more changes of partition 10 were never delivered.
func (w *World) missing() (int, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if m := &w.missed; m.ok && m.ver == w.ver {
		w.netLost = m.netLost
		return m.n, m.one
	}
	n, one := 0, ""
	w.netLost = 0
	defer func() {
		w.missed.ver, w.missed.ok, w.missed.n, w.missed.one, w.missed.netLost = w.ver, true, n, one, w.netLost
	}()
	for id, lsn := range w.latest {
		if k := fmt.Sprintf("%s@%d", id, lsn); w.seen[k] == 0 {
			if w.wideBeforeLocked(id, w.latestAt[id]) {
				w.netLost++
				continue
			}
			if n == 0 || k < one {
				one = k
			}
			n++
		}
	}
	return n, one
}

// duplicates counts deliveries beyond the first of every id@lsn, but for the keys of .NET's
// own overlaps (dotnetwide.go), which two leases read for ever.
func (w *World) duplicates() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	d := 0
	for k, n := range w.seen {
		if n > 1 && !w.wideKey(k[:strings.LastIndexByte(k, '@')]) {
			d += n - 1
		}
	}
	return d
}

// checkCache holds the lease set the checker last decoded and the coverage it last found, each
// with the container's version (and, for coverage, the partitions and .NET overlaps) it holds
// for. Callers only read the leases.
type checkCache struct {
	mu          sync.Mutex
	ver         uint64
	ls          []*leases.Lease
	ok          bool
	coverKey    string
	coverVer    uint64
	cover       []string
	coverCached bool
}

// leaseSet lists the leases as the container holds them.
func (w *World) leaseSet() []*leases.Lease {
	c := &w.checks
	c.mu.Lock()
	defer c.mu.Unlock()
	ver := w.mem.Version()
	if c.ok && c.ver == ver {
		return slices.Clone(c.ls)
	}
	ls, err := leases.NewStore(w.mem, Prefix, leases.StoreOptions{}).List(context.Background())
	if err != nil {
		w.violate("list leases: %v", err)
		return ls
	}
	c.ver, c.ls, c.ok = ver, ls, true
	return slices.Clone(ls)
}

func (w *World) partitions() []feed.Partition {
	ps, err := w.src.Partitions(context.Background())
	if err != nil {
		w.violate("list partitions: %v", err)
	}
	return ps
}

// coverage returns what is wrong with the lease set against the live partitions: gaps,
// overlaps, duplicate tokens, leases over gone partitions.
func (w *World) coverage() []string {
	var lp []leases.Partition
	var key strings.Builder
	for _, p := range w.partitions() {
		lp = append(lp, leases.Partition{ID: p.ID, Range: p.Range, Parents: p.Parents})
		fmt.Fprintf(&key, "%s %s %v;", p.ID, p.Range, p.Parents)
	}
	w.mu.Lock()
	fmt.Fprintf(&key, "wide %d", len(w.wide))
	w.mu.Unlock()
	ver := w.mem.Version()
	c := &w.checks
	c.mu.Lock()
	if c.coverCached && c.coverVer == ver && c.coverKey == key.String() {
		out := slices.Clone(c.cover)
		c.mu.Unlock()
		return out
	}
	c.mu.Unlock()
	out := w.coverageOf(lp)
	c.mu.Lock()
	c.coverCached, c.coverVer, c.coverKey, c.cover = true, ver, key.String(), out
	c.mu.Unlock()
	return slices.Clone(out)
}

// coverageOf finds what coverage reports, on the lease set as the container holds it now.
func (w *World) coverageOf(lp []leases.Partition) []string {
	var out []string
	for _, f := range leases.Check(w.leaseSet(), time.Now(), time.Hour, leases.WithPartitions(lp)) {
		switch f.Kind {
		case leases.FindingOverlap:
			if f.Range != nil && w.inWide(*f.Range) {
				continue // .NET's own overlap (dotnetwide.go)
			}
			out = append(out, fmt.Sprintf("%s: %s", f.Kind, f.Message))
		case leases.FindingPendingSplit, leases.FindingOrphanParent, leases.FindingGap,
			leases.FindingUnknownRange, leases.FindingDuplicate:
			out = append(out, fmt.Sprintf("%s: %s", f.Kind, f.Message))
		}
	}
	return out
}

// live returns the names of the running hosts (not killed, not stopped, not frozen).
func (w *World) live() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for n, h := range w.hosts {
		if h.io.get() == running && (h.cancel != nil && !h.exited.Load() || h.net != nil || h.java != nil) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// liveNow returns whether a host incarnation is live now: running (live) and not replaced by a
// restart under its name. The answer must be used under w.mu.
func (w *World) liveNow() func(*host) bool {
	live := map[string]bool{}
	for _, n := range w.live() {
		live[n] = true
	}
	return func(h *host) bool { return live[h.name] && w.hosts[h.name] == h }
}

// describe renders the lease set for a report.
func (w *World) describe() string {
	var b strings.Builder
	now := time.Now()
	for _, l := range w.leaseSet() {
		fmt.Fprintf(&b, "\n    %s %s owner=%q age=%s cont=%s", l.Token, l.Range, l.Owner, now.Sub(l.Timestamp).Truncate(time.Millisecond), l.Continuation)
	}
	return b.String()
}

// rangesOf renders live partitions with their ranges, for the log.
func (w *World) rangesOf(ids ...string) string {
	var out []string
	for _, p := range w.partitions() {
		for _, id := range ids {
			if p.ID == id {
				out = append(out, p.ID+" "+p.Range.String())
			}
		}
	}
	return strings.Join(out, ", ")
}
