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
	seedFlag  = flag.Uint64("seed", 0, "replay this one seed (TestSim)")
	seedsFlag = flag.Int("seeds", 0, "how many seeds TestSim runs (default 200, or CFP_SIM_SEEDS)")
	firstFlag = flag.Uint64("first", 1, "the first seed TestSim runs")
	onlyFlag  = flag.String("only", "", "make every host cfp or dotnet (default: both)")
	traceFlag = flag.Bool("deliveries", false, "log every delivery of a replayed seed")
	faultFlag = flag.String("faults", "", "comma-separated fault kinds to draw (default all): "+strings.Join(FaultKinds(), ","))
)

// TestSim plays many seeds of the deployment simulation, each in its own bubble. A failing
// seed prints the command that replays it.
func TestSim(t *testing.T) {
	first, n := *firstFlag, *seedsFlag
	if *seedFlag != 0 {
		first, n = *seedFlag, 1
	}
	if n == 0 {
		n = 200
		if v := os.Getenv("CFP_SIM_SEEDS"); v != "" {
			if _, err := fmt.Sscan(v, &n); err != nil {
				t.Fatalf("CFP_SIM_SEEDS=%q: %v", v, err)
			}
		}
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
	}
	opts.Trace = *traceFlag
	var failed atomic.Int64
	began := time.Now()
	t.Run("seeds", func(t *testing.T) {
		for seed := first; seed < first+uint64(n); seed++ {
			t.Run(fmt.Sprint(seed), func(t *testing.T) {
				t.Parallel()
				var r Result
				synctest.Test(t, func(*testing.T) { r = Run(seed, opts) })
				if len(r.Violations) > 0 || testing.Verbose() && n == 1 {
					for _, l := range r.Log {
						t.Log(l)
					}
				}
				if len(r.Violations) > 0 {
					failed.Add(1)
					t.Errorf("%s\n  %s\nreplay: go test ./internal/feed/sim -run 'TestSim$' -seed=%d%s -v",
						r.Summary(), strings.Join(r.Violations, "\n  "), seed, faultArg())
					return
				}
				if n == 1 {
					t.Log(r.Summary())
				}
			})
		}
	})
	t.Logf("%d seeds from %d, %d failed, %s", n, first, failed.Load(), time.Since(began).Round(time.Millisecond))
}

func faultArg() string {
	s := ""
	if *faultFlag != "" {
		s += " -faults=" + *faultFlag
	}
	if *onlyFlag != "" {
		s += " -only=" + *onlyFlag
	}
	return s
}
