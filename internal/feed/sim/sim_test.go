package sim

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

var (
	seedFlag   = flag.Uint64("seed", 0, "replay this one seed (TestSim)")
	seedsFlag  = flag.Int("seeds", 0, "how many seeds TestSim runs (default 200, or CFP_SIM_SEEDS)")
	firstFlag  = flag.Uint64("first", 1, "the first seed TestSim runs")
	onlyFlag   = flag.String("only", "", "make every host cfp, dotnet or java (default: cfp and the -peer kind)")
	peerFlag   = flag.String("peer", "dotnet", "the kind of the non-cfp hosts: dotnet or java (one lease set is in one format)")
	traceFlag  = flag.Bool("deliveries", false, "log every delivery of a replayed seed")
	reqFlag    = flag.Bool("requests", false, "log every request of every host of a replayed seed, and its lease writes' latencies (with -deliveries' lines): to find where two replays part")
	strictFlag = flag.Bool("strict", true, "make the liveness bounds (settle, stay settled) failures; -strict=false only logs them")
	fpFlag     = flag.Bool("fingerprint", false, "print every seed's fingerprint (a hash of its ownership changes and deliveries at their virtual instants) to compare replays")
	faultFlag  = flag.String("faults", "", "comma-separated fault kinds to draw (default all): "+strings.Join(FaultKinds(), ","))
)

// TestSim plays seeds of the full simulation (every fault kind, cfp and .NET hosts), each in
// its own bubble, when asked: -seed=N replays one, -seeds=N (or CFP_SIM_SEEDS) runs N from
// -first. A failing seed prints the command that replays it. CI runs TestSim_CI.
func TestSim(t *testing.T) {
	first, n := *firstFlag, *seedsFlag
	if *seedFlag != 0 {
		first, n = *seedFlag, 1
	}
	if v := os.Getenv("CFP_SIM_SEEDS"); n == 0 && v != "" {
		if _, err := fmt.Sscan(v, &n); err != nil {
			t.Fatalf("CFP_SIM_SEEDS=%q: %v", v, err)
		}
	}
	if n == 0 {
		t.Skip("give -seed=N, -seeds=N or CFP_SIM_SEEDS=N for the full simulation (TestSim_CI is the CI part)")
	}
	var opts Options
	if *faultFlag != "" {
		opts.Faults = strings.Split(*faultFlag, ",")
	}
	switch *onlyFlag {
	case "cfp":
		opts.Only = int(CFP) + 1
	case "dotnet":
		opts.Only = int(DotNet) + 1
	case "java":
		opts.Only = int(Java) + 1
	}
	if *peerFlag == "java" {
		opts.Peer = Java
	}
	opts.Trace, opts.Strict, opts.Requests = *traceFlag, *strictFlag, *reqFlag
	runSeeds(t, first, n, opts, faultArg())
}

// TestSim_CI is the simulation's CI part: 120 seeds of cfp hosts, 80 seeds of cfp and .NET
// hosts (the full mix) and 40 seeds of cfp and Java hosts, each under every fault kind (25, 15
// and 8 under the race detector), safety invariants and liveness bounds enforced
// (-strict=false only logs the liveness bounds).
func TestSim_CI(t *testing.T) {
	if *seedFlag != 0 || *seedsFlag != 0 {
		t.Skip("TestSim runs the seeds asked for")
	}
	nCFP, nMixed, nJava := 120, 80, 40
	if raceEnabled {
		nCFP, nMixed, nJava = 25, 15, 8 // the same seeds, fewer: the detector is after data races here
	}
	t.Run("cfp", func(t *testing.T) {
		t.Parallel()
		runSeeds(t, 1, nCFP, Options{Only: int(CFP) + 1, Strict: *strictFlag}, " -only=cfp")
	})
	t.Run("mixed", func(t *testing.T) {
		t.Parallel()
		runSeeds(t, 1001, nMixed, Options{Strict: *strictFlag}, "")
	})
	t.Run("java", func(t *testing.T) {
		t.Parallel()
		runSeeds(t, 2001, nJava, Options{Peer: Java, Strict: *strictFlag}, " -peer=java")
	})
}

// knownFailing are CI seeds that find an open bug (docs/architecture.md, "The deployment
// simulation", findings); TestSim replays them.
var knownFailing = map[uint64]string{}

func runSeeds(t *testing.T, first uint64, n int, opts Options, args string) {
	var failed, liveness atomic.Int64
	began := time.Now()
	t.Run("seeds", func(t *testing.T) {
		for seed := first; seed < first+uint64(n); seed++ {
			t.Run(fmt.Sprint(seed), func(t *testing.T) {
				if why, ok := knownFailing[seed]; ok && n > 1 {
					t.Skipf("known finding: %s", why)
				}
				t.Parallel()
				var r Result
				synctest.Test(t, func(*testing.T) { r = Run(seed, opts) })
				if *fpFlag {
					fmt.Printf("seed %d%s fingerprint %s\n", seed, args, r.Fingerprint)
				}
				if len(r.Violations) > 0 || testing.Verbose() && n == 1 {
					for _, l := range r.Log {
						t.Log(l)
					}
				}
				if len(r.Liveness) > 0 {
					liveness.Add(1)
					t.Logf("liveness bound missed (logged only, -strict=false): %s\n  replay: go test ./internal/feed/sim -run 'TestSim$' -seed=%d%s -v",
						strings.Join(r.Liveness, "; "), seed, args)
				}
				if len(r.Violations) > 0 {
					failed.Add(1)
					t.Errorf("%s\n  %s\nreplay: go test ./internal/feed/sim -run 'TestSim$' -seed=%d%s -v",
						r.Summary(), strings.Join(r.Violations, "\n  "), seed, args)
					return
				}
				if n == 1 {
					t.Log(r.Summary())
				}
			})
		}
	})
	t.Logf("%d seeds from %d: %d failed, %d missed a liveness bound, %s", n, first, failed.Load(), liveness.Load(), time.Since(began).Round(time.Millisecond))
}

func faultArg() string {
	s := ""
	if *faultFlag != "" {
		s += " -faults=" + *faultFlag
	}
	if *onlyFlag != "" {
		s += " -only=" + *onlyFlag
	}
	if *peerFlag != "dotnet" {
		s += " -peer=" + *peerFlag
	}
	if !*strictFlag {
		s += " -strict=false"
	}
	return s
}

// TestBalance_100LeasesOver10Hosts pins how fast cfp hosts balance 100 leases, in acquire
// cycles of virtual time: within 3 after all ten start, within 3 after an eleventh joins, and
// within 3 after a killed host's leases expired.
func TestBalance_100LeasesOver10Hosts(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c, err := Balance(100, 10, 30)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("balanced in %d cycles after the start, %d after a join, %d after a kill (its leases expire after %d)", c.Start, c.Join, c.Kill, ExpiryCycles)
		if c.Start > 3 || c.Join > 3 || c.Kill > ExpiryCycles+3 {
			t.Errorf("balanced in %d cycles after the start, %d after a join, %d after a kill; want at most 3, 3 and %d (3 after the expiry)", c.Start, c.Join, c.Kill, ExpiryCycles+3)
		}
	})
}

// TestSim_ReplaysExactly replays seeds three times each and wants one fingerprint per seed: the
// schedule a seed plays is the seed's, not the Go scheduler's (order.go), so that the command
// a failing seed prints replays it. Seeds without faults (hosts of both kinds starting
// together, writes, the settling and the graceful stop), and seeds under every fault kind of
// cfp hosts alone, of the full mix and of cfp and Java hosts. Before the hosts' lease writes
// had a latency drawn from what they write and their workers a random source each (issue 22),
// each of the seeds with faults here gave 2 or 3 fingerprints in 3 replays; before the driver
// waited for the goroutines of its instant and the hosts' timers were offset, 5 replays of
// seed 1004 without faults gave 3. Under the race detector, the first seed of each kind.
func TestSim_ReplaysExactly(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		seeds []uint64
		opts  Options
		args  string
	}{
		{"no-faults", []uint64{1001, 1002, 1003}, Options{Faults: []string{}}, " -faults=none"},
		{"cfp", []uint64{1, 5, 6}, Options{Only: int(CFP) + 1}, " -only=cfp"},
		{"mixed", []uint64{1017, 1029}, Options{}, ""},
		{"java", []uint64{2001, 2006}, Options{Peer: Java}, " -peer=java"},
	} {
		if raceEnabled {
			c.seeds = c.seeds[:1] // the detector is after data races here, and is slow
		}
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			for _, seed := range c.seeds {
				var fps []string
				for range 3 {
					var r Result
					synctest.Test(t, func(*testing.T) { r = Run(seed, c.opts) })
					if len(r.Violations) > 0 {
						t.Fatalf("seed %d%s: %s", seed, c.args, strings.Join(r.Violations, "; "))
					}
					fps = append(fps, r.Fingerprint)
				}
				if fps[0] != fps[1] || fps[0] != fps[2] {
					t.Errorf("seed %d%s replayed with fingerprints %v, want one\n  replay: go test ./internal/feed/sim -run 'TestSim$' -seed=%d%s -count=5 -fingerprint -v\n  where they part: the same with -requests, diff the logs",
						seed, c.args, fps, seed, c.args)
				}
			}
		})
	}
}
