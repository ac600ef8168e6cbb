// Command nodebench compares a Node.js handler that does nothing, run by @cfp-dev/changefeed
// (clients/node, over `cfp process --app-protocol 1`), with `cfp process` and its stdout
// delegate into /dev/null, on the same data: both read every document of a fresh lease set
// from the beginning, alternately, against one `cfp emulator` child. The ratio is Node's
// items/s over cfp's (goal, issue 27: >= 0.5). It also reports the CPU time each run took
// (the contender's process with its children, plus the emulator's, from /proc on Linux): on a
// shared machine the wall-clock rates follow the load, the CPU seconds much less.
//
// Run it from the repository root (Node.js 18+ on PATH):
//
//	go run ./bench/nodebench -docs 50000 -runs 3
//
// See bench/README.md for the last results.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cfp-dev/cfp/bench/internal/benchutil"
	"github.com/cfp-dev/cfp/emulator"
	"github.com/cfp-dev/cfp/internal/testproc"
)

type config struct {
	docs, partitions, body, page, runs int
	cfp, dir                           string
	touch                              bool
}

func main() {
	var cfg config
	flag.IntVar(&cfg.docs, "docs", 50_000, "documents to process")
	flag.IntVar(&cfg.partitions, "partitions", 4, "physical partitions of the container")
	flag.IntVar(&cfg.body, "body", 200, "approximate size of a document's user properties in bytes")
	flag.IntVar(&cfg.page, "page-size", 1000, "change-feed page size (--batch-size) of both")
	flag.IntVar(&cfg.runs, "runs", 3, "runs of each contender, alternately (the best counts)")
	flag.StringVar(&cfg.cfp, "cfp", "", "cfp binary (default: go build . into a temporary directory)")
	flag.StringVar(&cfg.dir, "dir", "", "data directory, kept; its documents are reused when it has them")
	flag.BoolVar(&cfg.touch, "touch", false, "the Node handler reads one field (id) of every change, not only the batch's length")
	flag.Parse()
	if err := run(cfg); err != nil {
		fmt.Fprintf(os.Stderr, "nodebench: %v\n", err)
		os.Exit(1)
	}
}

func run(cfg config) error {
	node, err := exec.LookPath("node")
	if err != nil {
		return fmt.Errorf("node: %w", err)
	}
	ver, _ := exec.Command(node, "--version").Output()
	handler := "does nothing"
	if cfg.touch {
		handler = "reads the id of every change"
	}
	fmt.Printf("nodebench: %s/%s, %d CPUs, node %s, %d documents of ~%d B, batch size %d, the Node handler %s\n",
		runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), strings.TrimSpace(string(ver)), cfg.docs, cfg.body, cfg.page, handler)
	tmp, err := os.MkdirTemp("", "nodebench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if cfg.cfp == "" {
		fmt.Fprintln(os.Stderr, "building cfp ...")
		if cfg.cfp, err = testproc.Build(tmp); err != nil {
			return err
		}
	}
	dir := cfg.dir
	if dir == "" {
		dir = filepath.Join(tmp, "data")
	}
	if err := generate(dir, cfg); err != nil {
		return err
	}
	srv, err := testproc.StartEmulator(cfg.cfp, testproc.EmulatorOptions{
		Data: dir, Args: []string{"--partitions", strconv.Itoa(cfg.partitions)},
		Env: append(os.Environ(), "NO_COLOR=1"), Stderr: os.Stderr,
	})
	if err != nil {
		return err
	}
	defer srv.Stop()

	var cfpRuns, nodeRuns []timing
	var ratios, cpuRatios []float64
	for i := range cfg.runs {
		emu0, emuOK := processCPU(srv.Pid())
		c, err := cfpOnce(cfg, srv.Endpoint, fmt.Sprintf("cfp-%d-%d", i, time.Now().UnixNano()))
		if err != nil {
			return err
		}
		emu1, _ := processCPU(srv.Pid())
		n, err := nodeOnce(cfg, node, srv.Endpoint, fmt.Sprintf("node-%d-%d", i, time.Now().UnixNano()))
		if err != nil {
			return err
		}
		emu2, _ := processCPU(srv.Pid())
		c.emulatorCPU, n.emulatorCPU = emu1-emu0, emu2-emu1
		cfpRuns, nodeRuns = append(cfpRuns, c), append(nodeRuns, n)
		fmt.Printf("run %d (load %s): cfp process (stdout) %s wall, %.0f items/s from the first batch; node handler %s wall, %.0f items/s from the first batch; ratio %.2f\n",
			i+1, loadAverage(), c.wall.Round(time.Millisecond), rate(cfg.docs, c.steady), n.wall.Round(time.Millisecond), rate(cfg.docs, n.steady), c.steady.Seconds()/n.steady.Seconds())
		ratios = append(ratios, c.steady.Seconds()/n.steady.Seconds())
		if emuOK {
			fmt.Printf("  CPU: cfp run %.2fs (cfp %.2fs + emulator %.2fs), node run %.2fs (node and its cfp %.2fs + emulator %.2fs); cfp run / node run %.2f\n",
				c.totalCPU().Seconds(), c.cpu.Seconds(), c.emulatorCPU.Seconds(), n.totalCPU().Seconds(), n.cpu.Seconds(), n.emulatorCPU.Seconds(), c.totalCPU().Seconds()/n.totalCPU().Seconds())
			cpuRatios = append(cpuRatios, c.totalCPU().Seconds()/n.totalCPU().Seconds())
		}
	}
	slices.Sort(ratios)
	fmt.Printf("median of the runs' ratios, from the first batch: %.2f\n", ratios[len(ratios)/2])
	if len(cpuRatios) > 0 {
		slices.Sort(cpuRatios)
		fmt.Printf("median of the runs' CPU ratios (cfp run / node run, emulator included): %.2f\n", cpuRatios[len(cpuRatios)/2])
	}
	best := func(ts []timing, f func(timing) time.Duration) time.Duration {
		ds := make([]time.Duration, len(ts))
		for i, t := range ts {
			ds[i] = f(t)
		}
		return slices.Min(ds)
	}
	wall := func(t timing) time.Duration { return t.wall }
	steady := func(t timing) time.Duration { return t.steady }
	cw, nw := best(cfpRuns, wall), best(nodeRuns, wall)
	cs, ns := best(cfpRuns, steady), best(nodeRuns, steady)
	fmt.Printf("best, from the first batch to the last: cfp process %.0f items/s, node %.0f items/s: node/cfp = %.2f (goal >= 0.50)\n",
		rate(cfg.docs, cs), rate(cfg.docs, ns), cs.Seconds()/ns.Seconds())
	fmt.Printf("best, wall from the start (start-up, bootstrap and first acquire included): cfp process %s, node %s: node/cfp = %.2f\n",
		cw.Round(time.Millisecond), nw.Round(time.Millisecond), cw.Seconds()/nw.Seconds())
	return srv.Stop()
}

func rate(n int, d time.Duration) float64 { return float64(n) / d.Seconds() }

// loadAverage is the 1-minute load average (Linux), or "?".
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "?"
}

// processCPU is the user and system CPU time process pid used so far, from /proc/PID/stat
// (Linux; false elsewhere). It assumes the usual 100 clock ticks per second.
func processCPU(pid int) (time.Duration, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// Fields after the command name in parentheses (which may hold spaces): state is field 3,
	// utime 14 and stime 15.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(utime+stime) * (time.Second / 100), true
}

// generate writes cfg.docs documents into dir in process (reused when there).
func generate(dir string, cfg config) error {
	e, err := emulator.Open(emulator.Options{Dir: dir, Partitions: cfg.partitions})
	if err != nil {
		return err
	}
	defer e.Close()
	client, err := benchutil.InProcessClient(e)
	if err != nil {
		return err
	}
	ctx := context.Background()
	cc, existed, err := benchutil.Setup(ctx, client)
	if err != nil || existed {
		return err
	}
	start := time.Now()
	if err := benchutil.Generate(ctx, cc, benchutil.GenerateOptions{Docs: cfg.docs, Writers: 32, Payload: benchutil.Payload(cfg.body)}); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "generated %d documents in %s\n", cfg.docs, time.Since(start).Round(time.Millisecond))
	return nil
}

// cfpOnce runs `cfp process` with the stdout delegate into /dev/null until its batch events
// add up to every document: the time from its start.
func cfpOnce(cfg config, endpoint, name string) (timing, error) {
	cmd := exec.Command(cfg.cfp, "--endpoint", endpoint, "process", "-d", benchutil.Database, "-c", benchutil.Container,
		"-p", name, "--create-lease-container", "--from", "beginning", "--batch-size", strconv.Itoa(cfg.page),
		"--lease-acquire-interval", "1s", "--poll-interval", "100ms", "--events", "jsonl")
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	pipe, err := cmd.StderrPipe()
	if err != nil {
		return timing{}, err
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return timing{}, err
	}
	sc := bufio.NewScanner(pipe)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	items := 0
	var took, steady time.Duration
	var first time.Time
	var other bytes.Buffer
	for sc.Scan() {
		var e struct {
			Type  string    `json:"type"`
			Time  time.Time `json:"time"`
			Items int       `json:"items"`
		}
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			other.Write(append(sc.Bytes(), '\n'))
			continue
		}
		if e.Type == "batch" {
			if items == 0 {
				first = e.Time
			}
			items += e.Items
			if items >= cfg.docs && took == 0 {
				took = time.Since(start)
				steady = e.Time.Sub(first)
				_ = cmd.Process.Signal(os.Interrupt)
			}
		}
	}
	if err := cmd.Wait(); err != nil || took == 0 {
		return timing{}, fmt.Errorf("cfp process: %d of %d items, %v: %s", items, cfg.docs, err, other.String())
	}
	return timing{wall: took, steady: steady, cpu: cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()}, nil
}

// nodeOnce runs bench/nodebench/handler.mjs: the time from its start until its handler saw
// every document, as it reports it, plus its start-up (measured here up to the report).
func nodeOnce(cfg config, node, endpoint, name string) (timing, error) {
	cmd := exec.Command(node, filepath.Join("bench", "nodebench", "handler.mjs"))
	cmd.Env = append(os.Environ(), "NO_COLOR=1", "CFP_PATH="+cfg.cfp, "BENCH_ENDPOINT="+endpoint,
		"BENCH_PROCESSOR="+name, "BENCH_DOCS="+strconv.Itoa(cfg.docs), "BENCH_PAGE="+strconv.Itoa(cfg.page))
	if cfg.touch {
		cmd.Env = append(cmd.Env, "BENCH_TOUCH=1")
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		return timing{}, err
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return timing{}, err
	}
	sc := bufio.NewScanner(pipe)
	var t timing
	missing := 0
	for sc.Scan() {
		var r struct {
			Items, Missing int
			MS, First      float64
		}
		if json.Unmarshal(sc.Bytes(), &r) == nil && r.Items >= cfg.docs && t.wall == 0 {
			t.wall = time.Since(start)
			t.steady = time.Duration((r.MS - r.First) * float64(time.Millisecond))
			missing = r.Missing
		}
	}
	if err := cmd.Wait(); err != nil || t.wall == 0 {
		return timing{}, fmt.Errorf("node handler: %v: %s", err, stderr.String())
	}
	if missing > 0 {
		return timing{}, fmt.Errorf("node handler: %d changes without a string id", missing)
	}
	// Node waited for its cfp child (stop()), so its rusage includes that child's.
	t.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	return t, nil
}

// timing is one run: wall, from the child's start until every document was handled (start-up,
// the lease store's bootstrap and the first acquire included); steady, from the first batch
// handled to the last; cpu, the user and system time of the child and the children it waited
// for (Node's cfp), start-up and shutdown included; emulatorCPU, the emulator's during the run.
type timing struct{ wall, steady, cpu, emulatorCPU time.Duration }

func (t timing) totalCPU() time.Duration { return t.cpu + t.emulatorCPU }
