//go:build unix

package java

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/internal/testproc"
)

// The full mixed run's flags. The default is the short instance CI runs; the long form is
//
//	go test ./test/peers/java -run TestFullMixedRun -v -timeout 3h -runs 20 -changes 5000 -spread 60s
//
// which repeats it 20 times, each with its own seed (-seed, then -seed+1, ...; 0 draws the
// first from the clock). A failed run names its seed: -seed S -runs 1 replays its schedule.
var (
	fullRuns    = flag.Int("runs", 1, "full mixed run: how many runs, each with the next seed")
	fullChanges = flag.Int("changes", 600, "full mixed run: changes written per run")
	fullSeed    = flag.Uint64("seed", 0, "full mixed run: the seed of the first run's schedule (0: from the clock)")
	fullSpread  = flag.Duration("spread", 15*time.Second, "full mixed run: the writes are spread evenly over this time")
)

// fullBatch is the batch size of every host in the full run (Java's maxItemCount, cfp's
// --batch-size): the unit of the duplicate bound.
const fullBatch = 50

// fullEvent is one disruption of the full run, fired when `at` changes have been written.
type fullEvent struct {
	at   int
	what string
}

// fullSchedule draws the run's disruptions from seed: where among the n writes each happens
// (between 10% and 90% of them, in a random order), which partition splits and which two
// adjacent partitions (of the other three) merge.
func fullSchedule(seed uint64, n int) []fullEvent {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	s := rng.IntN(4)
	var pairs [][2]int
	for i := range 3 {
		if i != s && i+1 != s {
			pairs = append(pairs, [2]int{i, i + 1})
		}
	}
	p := pairs[rng.IntN(len(pairs))]
	var events []fullEvent
	for _, what := range []string{"kill java-1", "kill cfp-1", fmt.Sprintf("split %d", s), fmt.Sprintf("merge %d+%d", p[0], p[1]), "start java-3"} {
		events = append(events, fullEvent{at: n/10 + rng.IntN(n*8/10), what: what})
	}
	slices.SortStableFunc(events, func(a, b fullEvent) int { return a.at - b.at })
	return events
}

// TestFullMixedRun: 2 Java hosts and 2 cfp hosts start together on one lease set of 4
// partitions; while the changes are written a Java host and a cfp host are killed with
// SIGKILL, a partition splits, two others merge and a new Java host joins, each at a point
// drawn from the seed. At the end every change is delivered at least once, every lease is
// owned by a live host, `cfp leases list --check` finds no range without a lease, the leases
// are balanced (the live hosts' counts differ by one at most), and the duplicates stay within
// one batch per lease for each of the two kills and each of the two partition changes.
func TestFullMixedRun(t *testing.T) {
	seed := *fullSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	var results []fullResult
	for i := range *fullRuns {
		s := seed + uint64(i)
		var res fullResult
		t.Run(fmt.Sprintf("seed=%d", s), func(t *testing.T) {
			res = fullRun(t, s, *fullChanges)
		})
		res.seed = s
		results = append(results, res)
	}
	if len(results) > 1 {
		var b strings.Builder
		fmt.Fprintf(&b, "%d runs of %d changes:\n", len(results), *fullChanges)
		for _, r := range results {
			fmt.Fprintf(&b, "  seed %d: failed %v, lost %d, stranded %d, duplicates %d (bound %d), leases %v, %v\n",
				r.seed, r.failed, r.lost, r.stranded, r.dups, r.bound, r.leases, r.took.Round(time.Second))
		}
		t.Log(b.String())
	}
}

// fullResult is what one run measured.
type fullResult struct {
	seed                 uint64
	lost, stranded, dups int
	bound                int
	took                 time.Duration
	failed               bool
	leases               map[string]int
}

// fullRun runs the full mixed run with n changes and the schedule of seed.
func fullRun(t *testing.T, seed uint64, n int) (res fullResult) {
	start := time.Now()
	defer func() { res.took, res.failed = time.Since(start), t.Failed() }()
	events := fullSchedule(seed, n)
	t.Logf("seed %d, %d changes over %v, schedule %v", seed, n, *fullSpread, events)
	r := newRig(t)
	const processor = "full"
	batch := fmt.Sprint(fullBatch)
	hosts := map[string]*host{
		"java-1": r.startJava(processor, "java-1", "epk", "--max-items", batch),
		"java-2": r.startJava(processor, "java-2", "epk", "--max-items", batch),
	}
	// The Java hosts create the lease set; the cfp hosts start as soon as it exists and keep
	// its format. (A set cfp creates for Java hosts needs --lease-format java:
	// TestJavaHostJoinsASetCFPBootstrapped.)
	r.waitFor(120*time.Second, "the Java hosts' lease set",
		func() bool { return len(r.leases(processor)) == 4 },
		func() string { return fmt.Sprint(r.owners(processor)) }, hosts["java-1"], hosts["java-2"])
	hosts["cfp-1"] = r.startCFP(processor, "cfp-1", "--batch-size", batch)
	hosts["cfp-2"] = r.startCFP(processor, "cfp-2", "--batch-size", batch)
	all := func() []*host {
		var hs []*host
		for _, h := range hosts {
			hs = append(hs, h)
		}
		return hs
	}
	live := func() []*host {
		var hs []*host
		for _, h := range hosts {
			if !h.exited() {
				hs = append(hs, h)
			}
		}
		return hs
	}
	r.waitFor(120*time.Second, "the 4 leases owned, one by each host",
		func() bool {
			o := r.owners(processor)
			return o["java-1"] == 1 && o["java-2"] == 1 && o["cfp-1"] == 1 && o["cfp-2"] == 1
		},
		func() string { return fmt.Sprint(r.owners(processor)) }, all()...)

	ctx := context.Background()
	c := r.acct.Container(database, feedName)
	next := 0
	began := time.Now()
	for i := range n {
		// Paced, so that the disruptions fall among the hosts' reads rather than all at once.
		if due := began.Add(*fullSpread * time.Duration(i) / time.Duration(n)); time.Until(due) > 0 {
			time.Sleep(time.Until(due))
		}
		for next < len(events) && events[next].at == i {
			r.fullEvent(processor, events[next].what, hosts)
			next++
		}
		id := docID(i)
		body := fmt.Sprintf(`{"id":%q,"pk":%q,"n":%d}`, id, "pk-"+id, i)
		if err := c.UpsertItem(ctx, "pk-"+id, []byte(body)); err != nil {
			t.Fatalf("write %s: %v", id, err)
		}
	}
	t.Logf("%d changes written in %v", n, time.Since(start).Round(time.Second))

	balanced := func() (bool, map[string]int) {
		o := r.owners(processor)
		lo, hi := -1, 0
		for _, h := range live() {
			k := o[h.name]
			if lo < 0 || k < lo {
				lo = k
			}
			hi = max(hi, k)
		}
		owned := 0
		for _, h := range live() {
			owned += o[h.name]
		}
		return owned == len(r.leases(processor)) && hi-lo <= 1, o
	}
	r.waitFor(240*time.Second, "every change delivered and the leases balanced over the live hosts",
		func() bool {
			got, _, _ := coverage(union(t, all()...), n)
			ok, _ := balanced()
			return got == n && ok
		},
		func() string {
			got, lost, dups := coverage(union(t, all()...), n)
			_, o := balanced()
			return fmt.Sprintf("owners %v, %d delivered, %d lost, %d duplicates", o, got, lost, dups)
		}, live()...)

	// No range without a lease: the leases cover the key space, without gap or overlap.
	cmd := exec.Command(r.bin, "leases", "list", "--endpoint", r.endpoint, "--ca-file", r.pem,
		"-d", database, "-c", feedName, "--lease-container", leaseName, "-p", processor, "--check")
	cmd.Env = append(testproc.CleanEnv(), "COSMOS_KEY="+r.emu.Key)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "check: no problems found") {
		t.Errorf("cfp leases list --check: %v\n%s", err, out)
		res.stranded = strings.Count(string(out), "error gap")
	}
	ls := r.leases(processor)
	for _, l := range ls {
		if l.Owner != "java-2" && l.Owner != "cfp-2" && l.Owner != "java-3" {
			t.Errorf("lease %s is owned by %q, not by a live host", l.Token, l.Owner)
			res.stranded++
		}
	}
	_, res.lost, res.dups = coverage(union(t, all()...), n)
	// A killed host may have delivered one batch per lease it held without checkpointing it; a
	// split or merge may hand a range over with a batch in flight. The bound is one batch per
	// lease for each of those four disruptions.
	res.bound = 4 * fullBatch * len(ls)
	res.leases = r.owners(processor)
	if res.dups > res.bound {
		t.Errorf("%d duplicates, more than the bound of %d (4 disruptions x %d leases x batch %d)", res.dups, res.bound, len(ls), fullBatch)
	}
	var per []string
	for _, name := range []string{"java-1", "java-2", "cfp-1", "cfp-2", "java-3"} {
		per = append(per, fmt.Sprintf("%s %d", name, len(hosts[name].delivered(t))))
	}
	t.Logf("seed %d: %d changes, %d lost, %d stranded, %d duplicates (bound %d); deliveries %s; leases %v; %v",
		seed, n, res.lost, res.stranded, res.dups, res.bound, strings.Join(per, ", "), res.leases, time.Since(start).Round(time.Second))
	for _, h := range live() {
		h.stop(t)
	}
	return res
}

// fullEvent fires one disruption of the full run.
func (r *rig) fullEvent(processor, what string, hosts map[string]*host) {
	r.t.Helper()
	r.t.Logf("%s: %s", time.Now().Format("15:04:05.000"), what)
	verb, arg, _ := strings.Cut(what, " ")
	switch verb {
	case "kill":
		hosts[arg].kill()
	case "start":
		hosts[arg] = r.startJava(processor, arg, "epk", "--max-items", fmt.Sprint(fullBatch))
	case "split", "merge":
		args := []string{"emulator", verb, "--endpoint", r.endpoint, "--ca-file", r.pem, "-d", database, "-c", feedName}
		for _, rng := range strings.Split(arg, "+") {
			args = append(args, "--range", rng)
		}
		cmd := exec.Command(r.bin, args...)
		cmd.Env = append(testproc.CleanEnv(), "COSMOS_KEY="+r.emu.Key)
		if out, err := cmd.CombinedOutput(); err != nil {
			r.t.Fatalf("cfp %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	default:
		r.t.Fatalf("unknown event %q", what)
	}
}
