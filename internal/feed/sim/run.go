package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"testing/synctest"
	"time"
)

// Base is the lease timing every host starts from: .NET's defaults (13s, 17s, 60s) divided by
// ten, so that a run of a few virtual minutes sees many acquire cycles.
var Base = Timing{Acquire: 1300 * time.Millisecond, Renew: 1700 * time.Millisecond, Expiration: 6 * time.Second}

// Windows and bounds of the invariants (docs/architecture.md, "The deployment simulation").
const (
	// Batch is every host's MaxItems: the unit of the duplicate bound.
	Batch = 10
	// SettleCycles is how many acquire cycles after the faults stopped (and the last killed
	// host's leases expired) the lease set may take to be covered, owned by live hosts and
	// balanced, on top of two cycles per lease of a host's share (a join takes leases one per
	// cycle, and a cfp host takes a lease from a cfp owner in two: ask, then take).
	SettleCycles = 3
	// StayedCycles is how long a settled lease set must then stay unchanged.
	StayedCycles = 6
	// Duration is the length of the faulty phase.
	Duration = 90 * time.Second
	// settleLimit is when a run gives up waiting for the lease set to settle.
	settleLimit = 3 * time.Minute
)

// FaultKinds lists the names Options.Faults selects from.
func FaultKinds() []string {
	out := []string{"timing", "skew", "burst", "join", "kill", "stop", "restart", "pause", "split", "merge", "lease-delete"}
	for f := faultKind(1); f < numFaults; f++ {
		out = append(out, f.String())
	}
	return out
}

// Options of a run; the zero value is the full simulation.
type Options struct {
	// Faults selects the fault kinds drawn (nil: all of them).
	Faults []string
	// Duration of the faulty phase (default Duration).
	Duration time.Duration
	// Only, when set, makes every host of this kind (CFP+1 for cfp, DotNet+1 for .NET);
	// zero mixes both.
	Only int
	// Peer is the kind of the non-cfp hosts (DotNet by default, or Java): one lease set holds
	// .NET's leases or Java's, never both (feed.LeaseFormat).
	Peer Kind
	// Trace logs every delivery.
	Trace bool
	// Requests logs every request of every host (its key, as the gate sees it) and every lease
	// write's latency, to the nanosecond: where two replays of a seed part (order.go).
	Requests bool
	// Strict makes the liveness bounds (settling within SettleCycles + two per lease of a
	// share, staying settled for StayedCycles) violations; otherwise they are reported in
	// Result.Liveness only. The safety invariants always are.
	Strict bool
}

// Result is what a run saw.
type Result struct {
	Seed uint64
	// Violations are the broken invariants, in the order they were found; empty means the run
	// passed.
	Violations []string
	// Liveness are the broken liveness bounds when Options.Strict is off.
	Liveness []string
	// Log is the fault schedule as it was played, and every violation.
	Log []string

	Written, Duplicates, Changes, Retries                        int
	Hosts, Kills, Pauses, Restarts, Splits, Merges, FaultWindows int
	// Deletions are the leases deleted under their owner (and restored later).
	Deletions int
	// SettleCycles is how many acquire cycles of Base the lease set took to settle after the
	// faults stopped.
	SettleCycles int
	// MaxLate is the longest a host went on delivering a lease after it lost it (awake time),
	// LateBatches how many batches were.
	MaxLate     time.Duration
	LateBatches int
	// NetLost counts the changes .NET's own overlap lost (World.missing): not a violation.
	NetLost int
	// Fingerprint hashes the run's ownership changes and deliveries with their virtual
	// instants (fingerprint.go): replays of a seed that saw the same schedule share it.
	Fingerprint string
}

// Summary is one line of figures.
func (r Result) Summary() string {
	return fmt.Sprintf("seed %d: %d changes, %d hosts, %d kills, %d pauses, %d restarts, %d splits, %d merges, %d lease deletions, %d fault windows; settled in %d cycles; %d ownership changes, %d handler failures, %d duplicates; %d late batches (max %s)",
		r.Seed, r.Written, r.Hosts, r.Kills, r.Pauses, r.Restarts, r.Splits, r.Merges, r.Deletions, r.FaultWindows, r.SettleCycles,
		r.Changes, r.Retries, r.Duplicates, r.LateBatches, r.MaxLate) + netLost(r.NetLost)
}

func netLost(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("; %d changes lost to .NET's own overlap (excused)", n)
}

type timed struct {
	at time.Time
	h  *host
}

// runner is one run's driver: its seed's stream, the world, the result so far and the
// schedule's state.
type runner struct {
	o        Options
	rng      *rand.Rand
	w        *World
	r        Result
	e        ended
	nextDoc  int
	hostN    int
	killed   map[string]*host // restartable names
	resumes  []timed
	clears   []timed
	lastKill time.Time
	del      *deleter
}

// Run plays the deployment and fault schedule of seed. It must run inside a synctest bubble
// (synctest.Test): it sleeps on the bubble's clock, and every host runs there.
func Run(seed uint64, o Options) Result {
	if o.Duration == 0 {
		o.Duration = Duration
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	x := &runner{o: o, rng: rng, r: Result{Seed: seed}, killed: map[string]*host{}}
	x.w = newWorld(2+rng.IntN(7), Batch)
	x.w.seed = seed
	if o.Peer == Java || o.Only == int(Java)+1 {
		x.w.format = leaseFormatOf(Java)
	}
	x.w.trace = o.Trace || o.Requests
	x.w.requests = o.Requests
	x.writeN(20 + rng.IntN(100))
	nCFP, nNet := 1+rng.IntN(3), rng.IntN(3)
	for range nCFP {
		x.start(CFP, "")
	}
	for range nNet {
		x.start(DotNet, "")
	}
	x.del = newDeleter(x.w, seed, x.allowed("lease-delete"))
	end := time.Now().Add(o.Duration)
	for time.Now().Before(end) {
		time.Sleep(time.Duration(200+rng.IntN(1300)) * time.Millisecond)
		// The hosts' goroutines that woke at this instant run to a stop first: the driver's
		// step (a write a reader polls for at this instant, a kill) never races them.
		synctest.Wait()
		x.step(time.Now())
	}
	x.settle()
	x.w.finish(&x.r, &x.e)
	return x.r
}

func (x *runner) allowed(f string) bool { return x.o.Faults == nil || slices.Contains(x.o.Faults, f) }

// writeN writes n documents, a fifth of them updates of earlier ones.
func (x *runner) writeN(n int) {
	ids := make([]string, 0, n)
	for range n {
		if x.nextDoc > 0 && x.rng.IntN(5) == 0 {
			ids = append(ids, fmt.Sprintf("doc%d", x.rng.IntN(x.nextDoc))) // an update
			continue
		}
		ids = append(ids, fmt.Sprintf("doc%d", x.nextDoc))
		x.nextDoc++
	}
	x.w.write(ids)
}

// timing draws a host's lease options: Base, or one of them changed.
func (x *runner) timing() Timing {
	t := Base
	if x.allowed("timing") && x.rng.IntN(4) == 0 {
		switch x.rng.IntN(3) {
		case 0:
			t.Expiration = t.Expiration * 3 / 4
		case 1:
			t.Renew = t.Renew * 3 / 2
		case 2:
			t.Acquire = t.Acquire * 2
		}
	}
	return t
}

// skew draws a host's clock offset.
func (x *runner) skew() time.Duration {
	if x.allowed("skew") && x.rng.IntN(4) == 0 {
		return time.Duration(x.rng.IntN(1001)-500) * time.Millisecond
	}
	return 0
}

// start starts a host of kind k, named name (a restart) or a new name.
func (x *runner) start(k Kind, name string) *host {
	if x.o.Only > 0 {
		k = Kind(x.o.Only - 1)
	} else if k == DotNet && x.o.Peer == Java {
		k = Java
	}
	if name == "" {
		x.hostN++
		name = fmt.Sprintf("%s-%d", k, x.hostN)
		x.r.Hosts++
	}
	t, sk := x.timing(), x.skew()
	defer synctest.Wait() // the host's bootstrap runs to a stop before the driver goes on (order.go)
	if k == CFP {
		x.w.logf("start cfp %s %+v skew %s", name, t, sk)
		return x.w.startCFP(name, t, sk)
	}
	if k == Java {
		x.w.logf("start java %s %+v skew %s", name, t, sk)
		h, err := x.w.startJava(name, t, sk)
		if err != nil {
			x.w.violate("java %s: start failed: %v", name, err)
		}
		return h
	}
	x.w.logf("start dotnet %s %+v skew %s", name, t, sk)
	h, err := x.w.startDotNet(name, t, sk)
	if err != nil {
		x.w.violate("dotnet %s: StartAsync failed: %v", name, err)
	}
	return h
}

// pick draws one of names' hosts.
func (x *runner) pick(names []string) *host {
	if len(names) == 0 {
		return nil
	}
	x.w.mu.Lock()
	defer x.w.mu.Unlock()
	return x.w.hosts[names[x.rng.IntN(len(names))]]
}

// step is one step of the faulty phase at now: the pauses and fault windows that end, the
// deletions due, a few writes, and one action drawn.
func (x *runner) step(now time.Time) {
	// Each of the step's actions runs to a stop before the next (order.go).
	for len(x.resumes) > 0 && !x.resumes[0].at.After(now) {
		x.w.logf("resume %s", x.resumes[0].h.name)
		x.w.resume(x.resumes[0].h)
		x.resumes = x.resumes[1:]
		synctest.Wait()
	}
	for len(x.clears) > 0 && !x.clears[0].at.After(now) {
		x.w.logf("faults off %s", x.clears[0].h.name)
		x.w.setFault(x.clears[0].h, faultNone)
		x.clears = x.clears[1:]
		synctest.Wait()
	}
	x.del.step(now)
	synctest.Wait()
	x.writeN(x.rng.IntN(6))
	synctest.Wait()
	live := x.w.live()
	x.act(now, live)
}

// act draws one action of a step: a burst, a join, a kill, a stop, a restart, a pause, a
// split, a merge or a window of injected answers on one host, or nothing.
func (x *runner) act(now time.Time, live []string) {
	switch a := x.rng.IntN(40); {
	case a < 2 && x.allowed("burst"):
		n := 50 + x.rng.IntN(150)
		x.w.logf("burst %d", n)
		x.writeN(n)
	case a < 5 && x.allowed("join") && len(live) < 6:
		x.start(Kind(x.rng.IntN(2)), "")
	case a < 8 && x.allowed("kill") && len(live) > 1:
		h := x.pick(live)
		x.w.logf("kill %s", h.name)
		x.w.kill(h, &x.e)
		x.killed[h.name] = h
		x.r.Kills++
		x.lastKill = now
	case a < 10 && x.allowed("stop") && len(live) > 1:
		h := x.pick(live)
		x.w.logf("stop %s", h.name)
		x.w.stop(h, &x.e)
	case a < 13 && x.allowed("restart") && len(x.killed) > 0:
		names := make([]string, 0, len(x.killed))
		for n := range x.killed {
			names = append(names, n)
		}
		sort.Strings(names)
		old := x.killed[names[x.rng.IntN(len(names))]]
		delete(x.killed, old.name)
		x.w.logf("restart %s", old.name)
		if x.start(old.kind, old.name) != nil {
			x.r.Restarts++
		}
	case a < 16 && x.allowed("pause") && len(live) > 1:
		h := x.pick(live)
		d := time.Duration(float64(h.timing.Expiration) * (0.3 + 2.2*x.rng.Float64())).Truncate(time.Millisecond)
		x.w.logf("pause %s for %s", h.name, d)
		x.w.pause(h)
		x.resumes = insert(x.resumes, timed{at: now.Add(d), h: h})
		x.r.Pauses++
	case a < 18 && x.allowed("split"):
		ps := x.w.partitions()
		if len(ps) < 12 {
			p := ps[x.rng.IntN(len(ps))]
			x.w.logf("split %s %s", p.ID, p.Range)
			if ids, err := x.w.src.Split(p.ID); err != nil {
				x.w.violate("split %s: %v", p.ID, err)
			} else {
				x.w.logf("  into %s", x.w.rangesOf(ids...))
			}
			x.r.Splits++
		}
	case a < 20 && x.allowed("merge"):
		ps := x.w.partitions()
		if len(ps) > 2 {
			i := x.rng.IntN(len(ps) - 1)
			x.w.logf("merge %s %s %s %s", ps[i].ID, ps[i].Range, ps[i+1].ID, ps[i+1].Range)
			if id, err := x.w.src.Merge(ps[i].ID, ps[i+1].ID); err != nil {
				x.w.violate("merge: %v", err)
			} else {
				x.w.logf("  into %s", x.w.rangesOf(id))
			}
			x.r.Merges++
		}
	case a < 26 && len(live) > 0:
		h := x.pick(live)
		f := faultKind(1 + x.rng.IntN(int(numFaults)-1))
		if !x.allowed(f.String()) || (f == faultFeed410 && h.kind != CFP) {
			break // the .NET SDK retries a stale route inside the read
		}
		d := time.Duration(1000+x.rng.IntN(7000)) * time.Millisecond
		x.w.logf("fault %s on %s for %s", f, h.name, d)
		x.w.setFault(h, f)
		h.faulted = true
		x.clears = insert(x.clears, timed{at: now.Add(d), h: h})
		x.r.FaultWindows++
	}
}

// settle ends the faulty phase: every frozen host resumes, every fault clears, the deleted
// leases come back; then it waits for the lease set to settle (World.settle).
func (x *runner) settle() {
	// The faults stop: every frozen host resumes, every fault clears.
	x.w.logf("faults stop")
	for _, t := range x.resumes {
		x.w.resume(t.h)
	}
	for _, t := range x.clears {
		x.w.setFault(t.h, faultNone)
	}
	x.r.Deletions = x.del.finish()
	if len(x.w.live()) == 0 {
		x.start(CFP, "")
	}
	x.writeN(50)
	// The lease set may settle once the last killed host's leases expired.
	quiet := time.Now()
	if exp := x.lastKill.Add(maxExpiration(x.w) + time.Second); exp.After(quiet) {
		quiet = exp
	}
	time.Sleep(time.Until(quiet))
	x.w.settle(&x.r, quiet, x.o.Strict, 0)
	x.r.MaxLate, x.r.LateBatches = x.w.maxLate, x.w.lateBatches
}

// finish stops every host gracefully (in start order, each run to a stop), waits for every
// stopped or killed host, and checks the end state into r: every change delivered, the lease
// set's coverage, the duplicate bound; then r's figures, log and fingerprint.
func (w *World) finish(r *Result, e *ended) {
	w.mu.Lock()
	var up []*host
	for _, n := range w.order {
		if h := w.hosts[n]; h.cancel != nil || h.net != nil || h.java != nil {
			up = append(up, h)
		}
	}
	w.mu.Unlock()
	for _, h := range up {
		w.stop(h, e)
		synctest.Wait()
	}
	for _, wait := range e.waits {
		wait()
	}
	if n, one := w.missing(); n > 0 {
		w.violate("%d of %d changes never delivered (e.g. %s)", n, w.written, one)
	}
	for _, c := range w.coverage() {
		w.violate("lease set at the end: %s%s", c, w.describe())
	}
	r.Duplicates = w.duplicates()
	w.mu.Lock()
	r.NetLost = w.netLost
	w.mu.Unlock()
	w.mu.Lock()
	r.Written, r.Changes, r.Retries = w.written, w.changes, w.retries
	r.Violations, r.Log = w.violations, w.log
	w.mu.Unlock()
	r.Fingerprint = w.fingerprint()
	if bound := Batch * (r.Changes + r.Retries); r.Duplicates > bound {
		r.Violations = append(r.Violations, fmt.Sprintf("%d duplicate deliveries, more than one batch (%d) per ownership change (%d) and handler failure (%d): %d",
			r.Duplicates, Batch, r.Changes, r.Retries, bound))
	}
}

func insert(q []timed, t timed) []timed {
	i := sort.Search(len(q), func(i int) bool { return q[i].at.After(t.at) })
	return slices.Insert(q, i, t)
}

// maxExpiration is the longest lease expiration of any host, with its clock's skew.
func maxExpiration(w *World) time.Duration {
	return w.longest(func(t Timing) time.Duration { return t.Expiration })
}

// longest is the longest of one timing (of) over Base and every host, each with its clock's
// skew.
func (w *World) longest(of func(Timing) time.Duration) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	d := of(Base)
	for _, h := range w.hosts {
		d = max(d, of(h.timing)+h.skew.Abs())
	}
	return d
}

// settled reports whether every range has exactly one lease, every lease is owned by a live
// host, the live hosts' counts are within one of each other and every change was delivered.
func (w *World) settled() (map[string]string, string) {
	if c := w.coverage(); len(c) > 0 {
		return nil, c[0]
	}
	live := w.live()
	counts := map[string]int{}
	for _, n := range live {
		counts[n] = 0
	}
	owners := map[string]string{}
	ls := w.leaseSet()
	for _, l := range ls {
		owners[l.Token] = l.Owner
		if _, ok := counts[l.Owner]; !ok {
			return nil, fmt.Sprintf("lease %s owned by %q, not a live host", l.Token, l.Owner)
		}
		counts[l.Owner]++
	}
	lo, hi := len(ls), 0
	for _, n := range counts {
		lo, hi = min(lo, n), max(hi, n)
	}
	if hi-lo > 1 {
		return nil, fmt.Sprintf("unbalanced: %v", counts)
	}
	if n, one := w.missing(); n > 0 {
		return nil, fmt.Sprintf("%d changes not delivered yet (e.g. %s)", n, one)
	}
	return owners, ""
}

// heldBack is when the protocol of a .NET or Java host last held the lease set back from
// settling, and how: a live cfp host's rebuff window (rebuff.go), a lease stranded in a non-cfp
// host's name (stranded.go), a .NET host's overwrite of an owner without If-Match (rebuff.go).
func (w *World) heldBack() (time.Time, string) {
	end, what := w.rebuffEnd(), "a cfp host's rebuff window (rebuff.go)"
	if s := w.strandedEnd(); s.After(end) {
		end, what = s, "a lease stranded in a .NET or Java host's name (stranded.go)"
	}
	if o := w.overwriteEnd(); o.After(end) {
		end, what = o, "a .NET host's write of a lease's owner without If-Match (rebuff.go)"
	}
	return end, what
}

// settle waits for the lease set to settle after quiet and to stay so for StayedCycles.
//
// A change of owners after the set settled that the protocol of a .NET or Java host made
// (heldBack moved past the instant it settled) starts the wait again, from then, at most
// maxSettleRestarts times.
func (w *World) settle(r *Result, quiet time.Time, strict bool, restarts int) {
	miss := func(format string, args ...any) {
		if strict {
			w.violate(format, args...)
			return
		}
		msg := fmt.Sprintf(format, args...)
		w.logf("LIVENESS %s", msg)
		r.Liveness = append(r.Liveness, msg)
	}
	var owners map[string]string
	why := ""
	for {
		if owners, why = w.settled(); owners != nil {
			if end, what := w.heldBack(); time.Now().Before(end) {
				owners, why = nil, fmt.Sprintf("%s until %s", what, end.Sub(w.start))
			} else {
				break
			}
		}
		if time.Since(quiet) > settleLimit {
			w.violate("the lease set never settled within %s of the faults' end: %s%s", settleLimit, why, w.describe())
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The bound's clock starts at the faults' end, or when the protocol of a .NET or Java host
	// stopped holding the set back, if later (heldBack).
	if end, what := w.heldBack(); end.After(quiet) {
		w.logf("settle bound counted from the end of %s, %s after the faults' end", what, end.Sub(quiet).Truncate(time.Millisecond))
		quiet = end
	}
	if end := w.readBackoffEnd(); end.After(quiet) {
		w.logf("settle bound counted from the end of a cfp reader's backoff after throttled reads (readbackoff.go), %s after the faults' end", end.Sub(quiet).Truncate(time.Millisecond))
		quiet = end
	}
	settledAt := time.Now()
	took := settledAt.Sub(quiet)
	r.SettleCycles = int((took + Base.Acquire - 1) / Base.Acquire)
	hosts := len(w.live())
	share := (len(owners) + hosts - 1) / max(hosts, 1)
	if bound := SettleCycles + 2*share; r.SettleCycles > bound {
		miss("the lease set settled %d acquire cycles after the faults' end, want at most %d (%d + two per lease of a share of %d)",
			r.SettleCycles, bound, SettleCycles, share)
	}
	until := time.Now().Add(StayedCycles * Base.Acquire)
	for time.Now().Before(until) {
		time.Sleep(100 * time.Millisecond)
		now, why := w.settled()
		if fmt.Sprint(now) != fmt.Sprint(owners) {
			if now == nil {
				now = map[string]string{"(not settled)": why}
			}
			if end, what := w.heldBack(); end.After(settledAt) && restarts < maxSettleRestarts {
				w.logf("ownership changed after it settled, by %s at %s: waiting for the set to settle again", what, end.Sub(w.start).Truncate(time.Millisecond))
				w.settle(r, end, strict, restarts+1)
				return
			}
			miss("ownership changed after it settled:\n    was %v\n    now %v", owners, now)
			return
		}
	}
}

// maxSettleRestarts bounds how often the protocol of a .NET or Java host may unsettle the set
// after it settled (World.settle).
const maxSettleRestarts = 3
