// Command scalebench measures the change feed processor at production scale: H hosts of the
// real engine (feed.Processor) in one process over an in-memory source with L partitions and an
// in-memory lease container, against H hosts of the .NET v3 host model (internal/feed/dotnettest)
// on the same workload. The lease container is wrapped by a counter that counts requests by kind
// and charges them RU by the service's published figures (see counter.go), and optionally waits
// -latency before each request.
//
// Lease timings are .NET's defaults (acquire 13s, renew 17s, expiration 60s, poll 5s) divided by
// -scale, and so is the steady write load's period, so that a run finishes in a couple of
// minutes: costs per host-hour are converted back to real time (counts × scale). Delivery
// latency is measured with the poll interval and write load at real time (5s, the default, and
// 100ms), lease timings still scaled (they do not enter the latency once balanced).
//
// Run it from the repository root:
//
//	go run ./bench/scalebench -leases 1000 -hosts 50
//
// See bench/README.md for the last results.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

type config struct {
	leases, hosts int
	latency       time.Duration
	duration      time.Duration // the steady-state measurement (wall time)
	latencyFor    time.Duration // each delivery-latency measurement (wall time)
	scale         float64
	writes        float64       // documents per second of real time
	checkpoint    time.Duration // cfp's CheckpointInterval, real time (0: after every batch)
	maxCycles     int
	polls         []time.Duration // the poll intervals of the latency runs
	engines       []engine
	json          bool
	rss           bool
	// virtual counts the cycles to balance in virtual time (virtual.go); otherwise on the wall
	// clock, as the rest of the bench runs.
	virtual bool
}

func main() {
	var cfg config
	flag.IntVar(&cfg.leases, "leases", 300, "leases (physical partitions of the monitored container)")
	flag.IntVar(&cfg.hosts, "hosts", 20, "hosts of each engine")
	flag.DurationVar(&cfg.latency, "latency", 0, "latency added to every lease-container request")
	flag.DurationVar(&cfg.duration, "duration", 8*time.Second, "steady-state measurement, wall time")
	flag.DurationVar(&cfg.latencyFor, "latency-duration", 6*time.Second, "each delivery-latency measurement, wall time")
	flag.Float64Var(&cfg.scale, "scale", 13, "lease timings and write period divided by this (13: acquire interval 1s)")
	flag.Float64Var(&cfg.writes, "writes", 100, "steady write load, documents per second of real time")
	flag.DurationVar(&cfg.checkpoint, "checkpoint-interval", 0, "cfp hosts' --checkpoint-interval, real time (0: a checkpoint after every batch, as .NET)")
	flag.IntVar(&cfg.maxCycles, "max-cycles", 10, "give up waiting for balance after this many acquire cycles (half that for the hosts the join starts from)")
	polls := flag.String("latency-polls", "5s,100ms", "poll intervals of the delivery-latency runs (real time)")
	engines := flag.String("engines", "cfp,dotnet", "engines to measure (cfp, dotnet; empty: only the memory of one host)")
	flag.BoolVar(&cfg.json, "json", false, "print one JSON object instead of the table")
	flag.BoolVar(&cfg.rss, "rss", true, "measure one host holding every lease first (peak RSS)")
	clock := flag.String("cycles", "virtual", "count the cycles to balance in virtual time (virtual: the simulation's TestBalanceAtScale, the same on any machine) or on the wall clock (wall: moves with the CPU's load)")
	flag.Parse()
	switch *clock {
	case "virtual":
		cfg.virtual = true
	case "wall":
	default:
		fmt.Fprintf(os.Stderr, "scalebench: -cycles: %q is neither virtual nor wall\n", *clock)
		os.Exit(2)
	}
	for _, f := range strings.Split(*polls, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(f))
		if err != nil || d <= 0 {
			fmt.Fprintf(os.Stderr, "scalebench: -latency-polls: bad duration %q\n", f)
			os.Exit(2)
		}
		cfg.polls = append(cfg.polls, d)
	}
	for _, name := range strings.Split(*engines, ",") {
		switch strings.TrimSpace(name) {
		case "":
		case cfpEngine.name:
			cfg.engines = append(cfg.engines, cfpEngine)
		case dotnetEngine.name:
			cfg.engines = append(cfg.engines, dotnetEngine)
		default:
			fmt.Fprintf(os.Stderr, "scalebench: -engines: unknown engine %q\n", name)
			os.Exit(2)
		}
	}
	if cfg.hosts < 2 || cfg.leases < 1 || cfg.scale <= 0 {
		fmt.Fprintln(os.Stderr, "scalebench: -hosts must be at least 2, -leases at least 1, -scale positive")
		os.Exit(2)
	}
	res, err := run(context.Background(), cfg, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "scalebench:", err)
		os.Exit(1)
	}
	if cfg.json {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(res)
		return
	}
	printTable(os.Stdout, res)
}

// run measures everything cfg asks for, logging progress to log.
func run(ctx context.Context, cfg config, log io.Writer) (*result, error) {
	res := &result{Leases: cfg.leases, Hosts: cfg.hosts, Scale: cfg.scale, LatencyInjectedMS: ms(cfg.latency), CheckpointIntervalMS: ms(cfg.checkpoint),
		AcquireIntervalMS: ms(scaled(cfg, acquireReal)), SteadySeconds: cfg.duration.Seconds()}
	if cfg.rss {
		fmt.Fprintf(log, "scalebench: one cfp host holding %d leases\n", cfg.leases)
		m, err := measureMemory(ctx, cfg)
		if err != nil {
			return nil, err
		}
		res.Memory = m
		res.RSSMB = m.VmHWMMB
		fmt.Fprintf(log, "  peak RSS (VmHWM) %.0f MB, heap in use %.0f MB, %d goroutines\n", m.VmHWMMB, m.HeapInuseMB, m.Goroutines)
	}
	for _, e := range cfg.engines {
		fmt.Fprintf(log, "scalebench: %s: %d hosts, %d leases\n", e.name, cfg.hosts, cfg.leases)
		er, err := measureEngine(ctx, cfg, e, log)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e.name, err)
		}
		if e.name == cfpEngine.name {
			res.CFP = er
		} else {
			res.DotNet = er
		}
	}
	res.CyclesClock = "wall"
	if cfg.virtual && len(cfg.engines) > 0 {
		fmt.Fprintf(log, "scalebench: cycles to balance in virtual time (go test ./internal/feed/sim -run TestBalanceAtScale)\n")
		v, err := virtualCycles(ctx, cfg, log)
		if err != nil {
			return nil, err
		}
		res.CyclesClock = "virtual"
		for name, er := range map[string]*engineResult{cfpEngine.name: &res.CFP, dotnetEngine.name: &res.DotNet} {
			c, ok := v[name]
			if !ok {
				continue
			}
			er.Wall = &wallCycles{Start: er.CyclesStart, Join: er.CyclesJoin, Kill: er.CyclesKill, KillRaw: er.CyclesKillRaw}
			er.CyclesStart, er.CyclesJoin, er.CyclesKill, er.CyclesKillRaw = float64(c.Start), float64(c.Join), float64(c.Kill), float64(c.KillRaw)
		}
	}
	res.CyclesStart, res.CyclesJoin, res.CyclesKill = res.CFP.CyclesStart, res.CFP.CyclesJoin, res.CFP.CyclesKill
	res.LeaseRUPerHostHour = res.CFP.Steady.RUPerHostHour
	res.DotNetLeaseRUPerHostHour = res.DotNet.Steady.RUPerHostHour
	if res.DotNetLeaseRUPerHostHour > 0 {
		res.RURatio = res.LeaseRUPerHostHour / res.DotNetLeaseRUPerHostHour
	}
	res.LeaseRUNoCheckpoints = res.CFP.Steady.RUPerHostHour - res.CFP.Steady.ByKind["checkpoint"].RUPerHostHour
	res.DotNetLeaseRUNoCheckpoints = res.DotNet.Steady.RUPerHostHour - res.DotNet.Steady.ByKind["checkpoint"].RUPerHostHour
	if res.DotNetLeaseRUNoCheckpoints > 0 {
		res.RURatioNoCheckpoints = res.LeaseRUNoCheckpoints / res.DotNetLeaseRUNoCheckpoints
	}
	for _, l := range res.CFP.Latency {
		if l.PollMS == ms(pollReal) {
			res.LatencyP50MS, res.LatencyP99MS = l.P50MS, l.P99MS
		}
	}
	return res, nil
}

// measureEngine runs the three balance events, the steady state and the two latency runs.
func measureEngine(ctx context.Context, cfg config, e engine, log io.Writer) (engineResult, error) {
	var er engineResult
	leasePoll := scaled(cfg, pollReal)
	// 1. All hosts start together; steady state; H/10 killed.
	w, err := newWorld(ctx, cfg, e, leasePoll, cfg.writes*cfg.scale)
	if err != nil {
		return er, err
	}
	all, err := w.add(cfg.hosts)
	if err != nil {
		w.close()
		return er, err
	}
	er.CyclesStart = w.cyclesUntilBalanced(all)
	fmt.Fprintf(log, "  start together: %s cycles %s\n", fmtCycles(er.CyclesStart), w.spread)
	w.sleep(2 * w.acquire) // let handoffs in flight settle
	before := w.docs.snapshot()
	t0 := time.Now()
	w.sleep(cfg.duration)
	er.Steady = steadyOf(w.docs.snapshot().sub(before), time.Since(t0), cfg, len(all))
	fmt.Fprintf(log, "  steady: %.0f RU per host-hour\n", er.Steady.RUPerHostHour)
	kill := max(1, cfg.hosts/10)
	var wg sync.WaitGroup
	for _, h := range all[:kill] {
		wg.Go(h.kill)
	}
	wg.Wait()
	er.CyclesKillRaw = w.cyclesUntilBalanced(all[kill:])
	er.CyclesKill = er.CyclesKillRaw
	if er.CyclesKill > 0 {
		er.CyclesKill = max(1, er.CyclesKill-expirationCycles)
	}
	fmt.Fprintf(log, "  after %d killed: %s cycles (%s from the kill) %s\n", kill, fmtCycles(er.CyclesKill), fmtCycles(er.CyclesKillRaw), w.spread)
	w.close()

	// 2. H/2 join H - H/2 that are balanced.
	w, err = newWorld(ctx, cfg, e, leasePoll, cfg.writes*cfg.scale)
	if err != nil {
		return er, err
	}
	first, err := w.add(cfg.hosts - cfg.hosts/2)
	if err != nil {
		w.close()
		return er, err
	}
	if c := w.cyclesUntilBalancedWithin(first, max(1, cfg.maxCycles/2)); c < 0 {
		// The .NET model steals one lease per cycle: measure the join from where it got.
		fmt.Fprintf(log, "  the first %d hosts did not balance within %d cycles: %s\n", len(first), max(1, cfg.maxCycles/2), w.spread)
	}
	w.sleep(w.acquire)
	more, err := w.add(cfg.hosts / 2)
	if err != nil {
		w.close()
		return er, err
	}
	joined := append(first, more...)
	er.CyclesJoin = w.cyclesUntilBalanced(joined)
	fmt.Fprintf(log, "  %d join %d: %s cycles %s\n", cfg.hosts/2, len(first), fmtCycles(er.CyclesJoin), w.spread)
	w.close()

	// 3. Delivery latency at each poll interval (the default, 5s, and 100ms), at real time.
	for _, poll := range cfg.polls {
		l, err := measureLatency(ctx, cfg, e, poll)
		if err != nil {
			return er, err
		}
		l.PollMS = ms(poll)
		er.Latency = append(er.Latency, l)
		fmt.Fprintf(log, "  latency at poll %s: p50 %.0fms p99 %.0fms (%d documents)\n", poll, l.P50MS, l.P99MS, l.Documents)
	}
	return er, nil
}

// expirationCycles is how many acquire cycles the dead hosts' leases take to expire (60s / 13s,
// rounded up): no host of either engine may take them earlier.
const expirationCycles = 5

func measureLatency(ctx context.Context, cfg config, e engine, poll time.Duration) (latencyResult, error) {
	w, err := newWorld(ctx, cfg, e, poll, cfg.writes)
	if err != nil {
		return latencyResult{}, err
	}
	defer w.close()
	hs, err := w.add(cfg.hosts)
	if err != nil {
		return latencyResult{}, err
	}
	w.untilHeld(hs)           // every lease held; balanced or not does not enter the latency
	w.sleep(poll + w.acquire) // every worker past its first read
	w.lat.start()
	w.sleep(cfg.latencyFor)
	return w.lat.result(), nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func scaled(cfg config, d time.Duration) time.Duration {
	return time.Duration(float64(d) / cfg.scale)
}
