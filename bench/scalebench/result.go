package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// result is what one run prints; the flat fields at the top are cfp's headline numbers.
type result struct {
	Leases            int     `json:"leases"`
	Hosts             int     `json:"hosts"`
	Scale             float64 `json:"scale"`
	AcquireIntervalMS float64 `json:"acquire_interval_ms"`
	LatencyInjectedMS float64 `json:"latency_injected_ms"`
	SteadySeconds     float64 `json:"steady_seconds"`
	// CheckpointIntervalMS is the cfp hosts' checkpoint interval, real time (0: every batch).
	CheckpointIntervalMS float64 `json:"checkpoint_interval_ms"`

	// CyclesClock says how the cycles to balance were counted: "virtual" (the simulation's
	// bubble clock, the same on any machine) or "wall".
	CyclesClock              string  `json:"cycles_clock"`
	CyclesStart              float64 `json:"cycles_start"`
	CyclesJoin               float64 `json:"cycles_join"`
	CyclesKill               float64 `json:"cycles_kill"`
	LeaseRUPerHostHour       float64 `json:"lease_ru_per_host_hour"`
	DotNetLeaseRUPerHostHour float64 `json:"dotnet_lease_ru_per_host_hour"`
	RURatio                  float64 `json:"lease_ru_ratio_cfp_to_dotnet"`
	// The same without checkpoints: what the protocol costs besides recording progress, which
	// both engines write after every batch by default (cfp with -checkpoint-interval folds its
	// renews into its checkpoints, so then only the totals compare).
	LeaseRUNoCheckpoints       float64 `json:"lease_ru_per_host_hour_without_checkpoints"`
	DotNetLeaseRUNoCheckpoints float64 `json:"dotnet_lease_ru_per_host_hour_without_checkpoints"`
	RURatioNoCheckpoints       float64 `json:"lease_ru_ratio_without_checkpoints"`
	// RSSMB is the process's peak resident set (VmHWM) while one cfp host held every lease; the
	// name keeps the key whatever -leases is (see leases).
	RSSMB        float64 `json:"rss_mb_1000_leases"`
	LatencyP50MS float64 `json:"latency_p50_ms"`
	LatencyP99MS float64 `json:"latency_p99_ms"`

	Memory *memoryResult `json:"memory,omitempty"`
	CFP    engineResult  `json:"cfp"`
	DotNet engineResult  `json:"dotnet"`
}

type engineResult struct {
	CyclesStart float64 `json:"cycles_start"`
	CyclesJoin  float64 `json:"cycles_join"`
	// CyclesKill counts from the dead hosts' leases' expiration (CyclesKillRaw from the kill,
	// which includes the expiration's 5 cycles).
	CyclesKill    float64 `json:"cycles_kill"`
	CyclesKillRaw float64 `json:"cycles_kill_from_kill"`
	// Wall are the same events' cycles on the wall clock, when the ones above are virtual.
	Wall    *wallCycles     `json:"cycles_wall_clock,omitempty"`
	Steady  steadyResult    `json:"steady"`
	Latency []latencyResult `json:"latency"`
}

type wallCycles struct {
	Start   float64 `json:"start"`
	Join    float64 `json:"join"`
	Kill    float64 `json:"kill"`
	KillRaw float64 `json:"kill_from_kill"`
}

type steadyResult struct {
	RequestsPerHostHour float64 `json:"requests_per_host_hour"`
	RUPerHostHour       float64 `json:"ru_per_host_hour"`
	RequestsPerLeaseHr  float64 `json:"requests_per_lease_hour"`
	RUPerLeaseHour      float64 `json:"ru_per_lease_hour"`
	// ByKind is requests and RU per host-hour by kind of request.
	ByKind map[string]kindResult `json:"by_kind"`
}

type kindResult struct {
	RequestsPerHostHour float64 `json:"requests_per_host_hour"`
	RUPerHostHour       float64 `json:"ru_per_host_hour"`
}

type latencyResult struct {
	PollMS    float64 `json:"poll_ms"`
	Documents int     `json:"documents"`
	P50MS     float64 `json:"p50_ms"`
	P99MS     float64 `json:"p99_ms"`
	MaxMS     float64 `json:"max_ms"`
}

type memoryResult struct {
	Leases int `json:"leases"`
	// VmHWMMB is /proc/self/status VmHWM: the whole process's peak RSS, the in-memory source
	// and lease container included; 0 where /proc is missing.
	VmHWMMB float64 `json:"vmhwm_mb"`
	// HeapInuseMB and SysMB are runtime.MemStats at the end of the run.
	HeapInuseMB        float64 `json:"heap_inuse_mb"`
	SysMB              float64 `json:"sys_mb"`
	Goroutines         int     `json:"goroutines"`
	GoroutinesPerLease float64 `json:"goroutines_per_lease"`
}

// steadyOf converts counts over wall time el of hosts hosts into real host-hours.
func steadyOf(c counts, el time.Duration, cfg config, hosts int) steadyResult {
	realHours := el.Hours() * cfg.scale
	perHost := func(v float64) float64 { return v / realHours / float64(hosts) }
	perLease := func(v float64) float64 { return v / realHours / float64(cfg.leases) }
	s := steadyResult{
		RequestsPerHostHour: perHost(float64(c.totalRequests())), RUPerHostHour: perHost(c.totalRU()),
		RequestsPerLeaseHr: perLease(float64(c.totalRequests())), RUPerLeaseHour: perLease(c.totalRU()),
		ByKind: map[string]kindResult{},
	}
	for i, name := range opNames {
		if c.Requests[i] == 0 {
			continue
		}
		s.ByKind[name] = kindResult{RequestsPerHostHour: perHost(float64(c.Requests[i])), RUPerHostHour: perHost(float64(c.MilliRU[i]) / 1000)}
	}
	return s
}

// measureMemory runs one cfp host until it holds every lease, lets it run three more cycles
// under the write load and reads the process's peak RSS and goroutines.
func measureMemory(ctx context.Context, cfg config) (*memoryResult, error) {
	w, err := newWorld(ctx, cfg, cfpEngine, scaled(cfg, pollReal), cfg.writes*cfg.scale)
	if err != nil {
		return nil, err
	}
	defer w.close()
	base := runtime.NumGoroutine()
	hs, err := w.add(1)
	if err != nil {
		return nil, err
	}
	if w.cyclesUntilBalanced(hs) < 0 {
		return nil, fmt.Errorf("one host did not take all %d leases within %d cycles", cfg.leases, cfg.maxCycles)
	}
	w.sleep(3 * w.acquire)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	g := runtime.NumGoroutine() - base
	return &memoryResult{Leases: cfg.leases, VmHWMMB: vmHWM(), HeapInuseMB: mb(ms.HeapInuse), SysMB: mb(ms.Sys),
		Goroutines: g, GoroutinesPerLease: float64(g) / float64(cfg.leases)}, nil
}

func mb(b uint64) float64 { return float64(b) / (1 << 20) }

// vmHWM returns /proc/self/status's VmHWM in MB, 0 when unavailable.
func vmHWM() float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err != nil {
				return 0
			}
			return kb / 1024
		}
	}
	return 0
}

func fmtCycles(c float64) string {
	if c < 0 {
		return "not balanced"
	}
	return strconv.FormatFloat(c, 'f', 0, 64)
}

func ratio(a, b float64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", a/b)
}

func printTable(w io.Writer, r *result) {
	fmt.Fprintf(w, "scalebench: %d leases, %d hosts; lease timings / %.0f (acquire interval %.0fms); injected latency %.0fms; steady state %.0fs wall = %.0fs real; cfp checkpoint interval %s\n",
		r.Leases, r.Hosts, r.Scale, r.AcquireIntervalMS, r.LatencyInjectedMS, r.SteadySeconds, r.SteadySeconds*r.Scale, time.Duration(r.CheckpointIntervalMS*float64(time.Millisecond)))
	c, d := r.CFP, r.DotNet
	fmt.Fprintf(w, "\n| measure | cfp | .NET model | cfp/.NET |\n|---|---:|---:|---:|\n")
	row := func(name, a, b, q string) { fmt.Fprintf(w, "| %s | %s | %s | %s |\n", name, a, b, q) }
	row("cycles until balanced counted in", r.CyclesClock+" time", r.CyclesClock+" time", "")
	row("cycles until balanced, all start together", fmtCycles(c.CyclesStart), fmtCycles(d.CyclesStart), "")
	row(fmt.Sprintf("cycles until balanced, %d join %d", r.Hosts/2, r.Hosts-r.Hosts/2), fmtCycles(c.CyclesJoin), fmtCycles(d.CyclesJoin), "")
	row(fmt.Sprintf("cycles until balanced after %d killed (after expiry; from the kill)", max(1, r.Hosts/10)),
		fmtCycles(c.CyclesKill)+"; "+fmtCycles(c.CyclesKillRaw), fmtCycles(d.CyclesKill)+"; "+fmtCycles(d.CyclesKillRaw), "")
	if c.Wall != nil || d.Wall != nil {
		wall := func(w *wallCycles) string {
			if w == nil {
				return "-"
			}
			return fmtCycles(w.Start) + " / " + fmtCycles(w.Join) + " / " + fmtCycles(w.Kill)
		}
		row("the same on the wall clock (start / join / kill; moves with the CPU's load)", wall(c.Wall), wall(d.Wall), "")
	}
	row("lease requests per host-hour", f0(c.Steady.RequestsPerHostHour), f0(d.Steady.RequestsPerHostHour), ratio(c.Steady.RequestsPerHostHour, d.Steady.RequestsPerHostHour))
	row("lease RU per host-hour", f0(c.Steady.RUPerHostHour), f0(d.Steady.RUPerHostHour), ratio(c.Steady.RUPerHostHour, d.Steady.RUPerHostHour))
	row("lease RU per lease-hour", f0(c.Steady.RUPerLeaseHour), f0(d.Steady.RUPerLeaseHour), ratio(c.Steady.RUPerLeaseHour, d.Steady.RUPerLeaseHour))
	row("lease RU per host-hour, checkpoints aside", f0(r.LeaseRUNoCheckpoints), f0(r.DotNetLeaseRUNoCheckpoints), ratio(r.LeaseRUNoCheckpoints, r.DotNetLeaseRUNoCheckpoints))
	for _, k := range opNames {
		a, b := c.Steady.ByKind[k], d.Steady.ByKind[k]
		if a.RequestsPerHostHour == 0 && b.RequestsPerHostHour == 0 {
			continue
		}
		row("  "+k+": requests / RU per host-hour", f0(a.RequestsPerHostHour)+" / "+f0(a.RUPerHostHour), f0(b.RequestsPerHostHour)+" / "+f0(b.RUPerHostHour), ratio(a.RUPerHostHour, b.RUPerHostHour))
	}
	for i, l := range c.Latency {
		b := "-"
		if i < len(d.Latency) {
			b = f0(d.Latency[i].P50MS) + " / " + f0(d.Latency[i].P99MS)
		}
		row(fmt.Sprintf("delivery latency p50 / p99 (ms), poll %s", time.Duration(l.PollMS*float64(time.Millisecond))), f0(l.P50MS)+" / "+f0(l.P99MS), b, "")
	}
	if m := r.Memory; m != nil {
		fmt.Fprintf(w, "\none cfp host holding %d leases: peak RSS (VmHWM, whole process) %.0f MB, heap in use %.0f MB, %d goroutines (%.2f per lease)\n",
			m.Leases, m.VmHWMMB, m.HeapInuseMB, m.Goroutines, m.GoroutinesPerLease)
	}
}

func f0(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }
