package sim

import (
	"encoding/json"
	"flag"
	"os"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
)

var (
	scaleLeases = flag.Int("scale-leases", 0, "leases of TestBalanceAtScale (0: skip it)")
	scaleHosts  = flag.Int("scale-hosts", 50, "hosts of TestBalanceAtScale")
	scaleKinds  = flag.String("scale-kinds", "cfp,dotnet", "host kinds TestBalanceAtScale measures, each alone")
	scaleJSON   = flag.String("scale-json", "", "write TestBalanceAtScale's figures to this file as JSON (bench/scalebench reads it)")
)

// TestBalanceAtScale is scalebench's balance figures in virtual time: cycles until balanced
// after all hosts start together, after half as many join, after a tenth are killed (from
// their leases' expiry), for cfp hosts and for .NET-model hosts, each on their own set.
//
//	go test ./internal/feed/sim -run TestBalanceAtScale -scale-leases=1000 -scale-hosts=50 -v
//
// cfp hosts must balance within 3 cycles after each event (the bound); the .NET
// model's figures are printed beside them, not bounded (it steals one lease per cycle).
func TestBalanceAtScale(t *testing.T) {
	if *scaleLeases == 0 {
		t.Skip("give -scale-leases=N (and -scale-hosts=H) to measure")
	}
	var mu sync.Mutex
	figures := map[string]ScaleCycles{}
	if *scaleJSON != "" {
		t.Cleanup(func() {
			b, err := json.Marshal(figures)
			if err == nil {
				err = os.WriteFile(*scaleJSON, b, 0o644)
			}
			if err != nil {
				t.Errorf("-scale-json: %v", err)
			}
		})
	}
	for _, k := range strings.Split(*scaleKinds, ",") {
		kind := CFP
		limit := 30
		if k == "dotnet" {
			kind, limit = DotNet, 4**scaleLeases/max(1, *scaleHosts)
		}
		t.Run(k, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, err := BalanceAtScale(kind, *scaleLeases, *scaleHosts, max(limit, 30))
				if err != nil {
					t.Fatal(err)
				}
				mu.Lock()
				figures[k] = c
				mu.Unlock()
				t.Logf("%s, %d leases x %d hosts, cycles until balanced (virtual time): start %d, %d join %d: %d, %d killed: %d after the expiry (%d from the kill)",
					k, *scaleLeases, *scaleHosts, c.Start, *scaleHosts/2, *scaleHosts-*scaleHosts/2, c.Join, max(1, *scaleHosts/10), c.Kill, c.KillRaw)
				if kind == CFP && (c.Start > 3 || c.Join > 3 || c.Kill > 3) {
					t.Errorf("cfp balanced in %d / %d / %d cycles (start / join / kill), want at most 3 each", c.Start, c.Join, c.Kill)
				}
			})
		})
	}
}

// TestBalanceAtScale_Small runs the scale measure at a size CI affords: 100 leases over 10
// cfp hosts, each event within 3 cycles.
func TestBalanceAtScale_Small(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c, err := BalanceAtScale(CFP, 100, 10, 30)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("100 x 10: start %d, join %d, kill %d (%d from the kill)", c.Start, c.Join, c.Kill, c.KillRaw)
		if c.Start > 3 || c.Join > 3 || c.Kill > 3 {
			t.Errorf("balanced in %d / %d / %d cycles (start / join / kill), want at most 3 each", c.Start, c.Join, c.Kill)
		}
	})
}
