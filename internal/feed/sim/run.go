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
	// Fingerprint hashes the run's ownership changes and deliveries with their virtual
	// instants (fingerprint.go): replays of a seed that saw the same schedule share it.
	Fingerprint string
}

// Summary is one line of figures.
func (r Result) Summary() string {
	return fmt.Sprintf("seed %d: %d changes, %d hosts, %d kills, %d pauses, %d restarts, %d splits, %d merges, %d lease deletions, %d fault windows; settled in %d cycles; %d ownership changes, %d handler failures, %d duplicates; %d late batches (max %s)",
		r.Seed, r.Written, r.Hosts, r.Kills, r.Pauses, r.Restarts, r.Splits, r.Merges, r.Deletions, r.FaultWindows, r.SettleCycles,
		r.Changes, r.Retries, r.Duplicates, r.LateBatches, r.MaxLate)
}

type timed struct {
	at time.Time
	h  *host
}

// Run plays the deployment and fault schedule of seed. It must run inside a synctest bubble
// (synctest.Test): it sleeps on the bubble's clock, and every host runs there.
func Run(seed uint64, o Options) Result {
	if o.Duration == 0 {
		o.Duration = Duration
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	allowed := func(f string) bool { return o.Faults == nil || slices.Contains(o.Faults, f) }
	w := newWorld(2+rng.IntN(7), Batch)
	w.seed = seed
	if o.Peer == Java || o.Only == int(Java)+1 {
		w.format = leaseFormatOf(Java)
	}
	w.trace = o.Trace
	r := Result{Seed: seed}
	var e ended
	nextDoc := 0
	writeN := func(n int) {
		ids := make([]string, 0, n)
		for range n {
			if nextDoc > 0 && rng.IntN(5) == 0 {
				ids = append(ids, fmt.Sprintf("doc%d", rng.IntN(nextDoc))) // an update
				continue
			}
			ids = append(ids, fmt.Sprintf("doc%d", nextDoc))
			nextDoc++
		}
		w.write(ids)
	}
	timing := func() Timing {
		t := Base
		if allowed("timing") && rng.IntN(4) == 0 {
			switch rng.IntN(3) {
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
	skew := func() time.Duration {
		if allowed("skew") && rng.IntN(4) == 0 {
			return time.Duration(rng.IntN(1001)-500) * time.Millisecond
		}
		return 0
	}
	hostN := 0
	killed := map[string]*host{} // restartable names
	start := func(k Kind, name string) *host {
		if o.Only > 0 {
			k = Kind(o.Only - 1)
		} else if k == DotNet && o.Peer == Java {
			k = Java
		}
		if name == "" {
			hostN++
			name = fmt.Sprintf("%s-%d", k, hostN)
			r.Hosts++
		}
		t, sk := timing(), skew()
		defer synctest.Wait() // the host's bootstrap runs to a stop before the driver goes on (order.go)
		if k == CFP {
			w.logf("start cfp %s %+v skew %s", name, t, sk)
			return w.startCFP(name, t, sk)
		}
		if k == Java {
			w.logf("start java %s %+v skew %s", name, t, sk)
			h, err := w.startJava(name, t, sk)
			if err != nil {
				w.violate("java %s: start failed: %v", name, err)
			}
			return h
		}
		w.logf("start dotnet %s %+v skew %s", name, t, sk)
		h, err := w.startDotNet(name, t, sk)
		if err != nil {
			w.violate("dotnet %s: StartAsync failed: %v", name, err)
		}
		return h
	}

	writeN(20 + rng.IntN(100))
	nCFP, nNet := 1+rng.IntN(3), rng.IntN(3)
	for range nCFP {
		start(CFP, "")
	}
	for range nNet {
		start(DotNet, "")
	}

	var resumes, clears []timed
	del := newDeleter(w, seed, allowed("lease-delete"))
	end := time.Now().Add(o.Duration)
	lastKill := time.Time{}
	pick := func(names []string) *host {
		if len(names) == 0 {
			return nil
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.hosts[names[rng.IntN(len(names))]]
	}
	for time.Now().Before(end) {
		time.Sleep(time.Duration(200+rng.IntN(1300)) * time.Millisecond)
		// The hosts' goroutines that woke at this instant run to a stop first: the driver's
		// step (a write a reader polls for at this instant, a kill) never races them.
		synctest.Wait()
		now := time.Now()
		// Each of the step's actions runs to a stop before the next (order.go).
		for len(resumes) > 0 && !resumes[0].at.After(now) {
			w.logf("resume %s", resumes[0].h.name)
			w.resume(resumes[0].h)
			resumes = resumes[1:]
			synctest.Wait()
		}
		for len(clears) > 0 && !clears[0].at.After(now) {
			w.logf("faults off %s", clears[0].h.name)
			w.setFault(clears[0].h, faultNone)
			clears = clears[1:]
			synctest.Wait()
		}
		del.step(now)
		synctest.Wait()
		writeN(rng.IntN(6))
		synctest.Wait()
		live := w.live()
		switch a := rng.IntN(40); {
		case a < 2 && allowed("burst"):
			n := 50 + rng.IntN(150)
			w.logf("burst %d", n)
			writeN(n)
		case a < 5 && allowed("join") && len(live) < 6:
			start(Kind(rng.IntN(2)), "")
		case a < 8 && allowed("kill") && len(live) > 1:
			h := pick(live)
			w.logf("kill %s", h.name)
			w.kill(h, &e)
			killed[h.name] = h
			r.Kills++
			lastKill = now
		case a < 10 && allowed("stop") && len(live) > 1:
			h := pick(live)
			w.logf("stop %s", h.name)
			w.stop(h, &e)
		case a < 13 && allowed("restart") && len(killed) > 0:
			names := make([]string, 0, len(killed))
			for n := range killed {
				names = append(names, n)
			}
			sort.Strings(names)
			old := killed[names[rng.IntN(len(names))]]
			delete(killed, old.name)
			w.logf("restart %s", old.name)
			if start(old.kind, old.name) != nil {
				r.Restarts++
			}
		case a < 16 && allowed("pause") && len(live) > 1:
			h := pick(live)
			d := time.Duration(float64(h.timing.Expiration) * (0.3 + 2.2*rng.Float64())).Truncate(time.Millisecond)
			w.logf("pause %s for %s", h.name, d)
			w.pause(h)
			resumes = insert(resumes, timed{at: now.Add(d), h: h})
			r.Pauses++
		case a < 18 && allowed("split"):
			ps := w.partitions()
			if len(ps) < 12 {
				p := ps[rng.IntN(len(ps))]
				w.logf("split %s %s", p.ID, p.Range)
				if ids, err := w.src.Split(p.ID); err != nil {
					w.violate("split %s: %v", p.ID, err)
				} else {
					w.logf("  into %s", w.rangesOf(ids...))
				}
				r.Splits++
			}
		case a < 20 && allowed("merge"):
			ps := w.partitions()
			if len(ps) > 2 {
				i := rng.IntN(len(ps) - 1)
				w.logf("merge %s %s %s %s", ps[i].ID, ps[i].Range, ps[i+1].ID, ps[i+1].Range)
				if id, err := w.src.Merge(ps[i].ID, ps[i+1].ID); err != nil {
					w.violate("merge: %v", err)
				} else {
					w.logf("  into %s", w.rangesOf(id))
				}
				r.Merges++
			}
		case a < 26 && len(live) > 0:
			h := pick(live)
			f := faultKind(1 + rng.IntN(int(numFaults)-1))
			if !allowed(f.String()) || (f == faultFeed410 && h.kind != CFP) {
				break // the .NET SDK retries a stale route inside the read
			}
			d := time.Duration(1000+rng.IntN(7000)) * time.Millisecond
			w.logf("fault %s on %s for %s", f, h.name, d)
			w.setFault(h, f)
			h.faulted = true
			clears = insert(clears, timed{at: now.Add(d), h: h})
			r.FaultWindows++
		}
	}

	// The faults stop: every frozen host resumes, every fault clears.
	w.logf("faults stop")
	for _, t := range resumes {
		w.resume(t.h)
	}
	for _, t := range clears {
		w.setFault(t.h, faultNone)
	}
	r.Deletions = del.finish()
	if len(w.live()) == 0 {
		start(CFP, "")
	}
	writeN(50)
	// The lease set may settle once the last killed host's leases expired.
	quiet := time.Now()
	if exp := lastKill.Add(maxExpiration(w) + time.Second); exp.After(quiet) {
		quiet = exp
	}
	time.Sleep(time.Until(quiet))
	w.settle(&r, quiet, o.Strict)
	r.MaxLate, r.LateBatches = w.maxLate, w.lateBatches

	w.finish(&r, &e)
	return r
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

func maxExpiration(w *World) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	d := Base.Expiration
	for _, h := range w.hosts {
		d = max(d, h.timing.Expiration+h.skew.Abs())
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

// settle waits for the lease set to settle after quiet and to stay so for StayedCycles.
func (w *World) settle(r *Result, quiet time.Time, strict bool) {
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
			break
		}
		if time.Since(quiet) > settleLimit {
			w.violate("the lease set never settled within %s of the faults' end: %s%s", settleLimit, why, w.describe())
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	took := time.Since(quiet)
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
		now, _ := w.settled()
		if fmt.Sprint(now) != fmt.Sprint(owners) {
			miss("ownership changed after it settled:\n    was %v\n    now %v", owners, now)
			return
		}
	}
}
