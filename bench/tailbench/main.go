// Command tailbench measures how fast `cfp tail` drains a container's change feed, against the
// limits around it, on the same generated data in one run:
//
//	(a) scan   the emulator's storage-only change-feed scan (emulator.ScanChangeFeed): the
//	           physical limit of this machine and data directory;
//	(b) naive  a single-goroutine azcosmos ReadChangeFeed loop over every feed range of the
//	           container in turn, against `cfp emulator` serving the data on a loopback socket:
//	           what a Go user writes today;
//	(c) tail   `cfp tail --from beginning -e -o jsonl > /dev/null` against the same socket, a
//	           child process of a cfp binary built once, with its peak RSS from /usr/bin/time;
//	(c') local the same tail with --local DIR (the emulator in the tail's own process, so its
//	           peak RSS includes the data file that bbolt maps; the anonymous part is shown too).
//
// It prints items/s of each and the ratios c/a and c/b. Run it from the repository root:
//
//	go run ./bench/tailbench -docs 100000
//
// See bench/README.md for the last results.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cfp-dev/cfp/bench/internal/benchutil"
	"github.com/cfp-dev/cfp/emulator"
	"github.com/cfp-dev/cfp/emulator/auth"
	"github.com/cfp-dev/cfp/internal/testproc"
)

type config struct {
	docs       int
	partitions int
	bodyBytes  int
	pageSize   int
	writers    int
	dir        string
	cfp        string
	before     string
	keep       bool
	runs       int
}

func main() {
	var cfg config
	flag.IntVar(&cfg.docs, "docs", 100_000, "documents in the container")
	flag.IntVar(&cfg.partitions, "partitions", 4, "physical partitions of the container")
	flag.IntVar(&cfg.bodyBytes, "body", 200, "approximate size of a document's user properties in bytes")
	flag.IntVar(&cfg.pageSize, "page-size", 1000, "change-feed page size of every contender")
	flag.IntVar(&cfg.writers, "writers", 64, "concurrent upserts while generating the data")
	flag.StringVar(&cfg.dir, "dir", "", "data directory (default: a temporary one, removed at the end)")
	flag.StringVar(&cfg.cfp, "cfp", "", "cfp binary to run for (c) (default: go build . into a temporary directory)")
	flag.StringVar(&cfg.before, "before", "", "another cfp binary (an earlier build) whose tail, against its own `cfp emulator`, runs alternately with (c)'s as `before`")
	flag.BoolVar(&cfg.keep, "keep", false, "keep the data directory")
	flag.IntVar(&cfg.runs, "runs", 3, "runs of each contender; the fastest counts (the machine may be shared)")
	flag.Parse()
	if err := run(cfg); err != nil {
		fmt.Fprintf(os.Stderr, "tailbench: %v\n", err)
		os.Exit(1)
	}
}

type result struct {
	name   string
	items  int
	took   time.Duration
	rssKB  int64 // peak RSS (maximum resident set size)
	anonKB int64 // peak anonymous RSS, sampled from /proc (Linux)
}

func (r result) rate() float64 { return float64(r.items) / r.took.Seconds() }

// best runs fn n times and returns the fastest run, with the highest peak RSS of all runs.
func best(n int, fn func() (result, error)) (result, error) {
	var out result
	for i := range max(n, 1) {
		r, err := fn()
		if err != nil {
			return r, err
		}
		rss, anon := max(out.rssKB, r.rssKB), max(out.anonKB, r.anonKB)
		if i == 0 || r.took < out.took {
			out = r
		}
		out.rssKB, out.anonKB = rss, anon
	}
	return out, nil
}

func run(cfg config) error {
	tmp, err := os.MkdirTemp("", "tailbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if cfg.dir == "" {
		cfg.dir = filepath.Join(tmp, "data")
	} else if !cfg.keep {
		defer os.RemoveAll(cfg.dir)
	}
	if cfg.cfp == "" {
		fmt.Fprintf(os.Stderr, "building cfp ...\n")
		if cfg.cfp, err = testproc.Build(tmp); err != nil {
			return err
		}
	}

	e, err := emulator.Open(emulator.Options{Dir: cfg.dir, Partitions: cfg.partitions})
	if err != nil {
		return err
	}
	defer e.Close()
	client, err := benchutil.InProcessClient(e)
	if err != nil {
		return err
	}
	cc, existed, err := benchutil.Setup(context.Background(), client)
	if err != nil {
		return err
	}
	if existed {
		fmt.Fprintf(os.Stderr, "reusing the data in %s\n", cfg.dir)
	} else {
		start := time.Now()
		if err := benchutil.Generate(context.Background(), cc, benchutil.GenerateOptions{
			Docs: cfg.docs, Writers: cfg.writers, Payload: benchutil.Payload(cfg.bodyBytes), Progress: os.Stderr,
		}); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "generated %d documents in %s\n", cfg.docs, time.Since(start).Round(time.Millisecond))
	}

	a, err := best(cfg.runs, func() (result, error) { return scan(e, cfg) })
	if err != nil {
		return err
	}
	client.Close()
	if err := e.Close(); err != nil {
		return err
	}

	local, err := best(cfg.runs, func() (result, error) { return tail(cfg, cfg.cfp, "--local="+cfg.dir) })
	if err != nil {
		return err
	}
	local.name = "local"
	srv, err := serve(cfg)
	if err != nil {
		return err
	}
	defer srv.Stop()
	remote, err := benchutil.Client(srv.Endpoint)
	if err != nil {
		return err
	}
	cc, err = remote.NewContainer(benchutil.Database, benchutil.Container)
	if err != nil {
		return err
	}
	b, err := best(cfg.runs, func() (result, error) { return naive(cc, cfg) })
	remote.Close()
	if err != nil {
		return err
	}
	if err := srv.Stop(); err != nil {
		return err
	}
	// (c) and, with -before, the earlier build's tail: each run against its own binary's
	// emulator (one process holds the data directory at a time), alternately, and one more
	// scan (a) in each round, so that all see the same machine load; each round's c/a is
	// printed too (a shared machine's load changes between rounds).
	var c, before result
	var rounds []float64
	for i := range max(cfg.runs, 1) {
		ra, err := scanAgain(cfg)
		if err != nil {
			return err
		}
		if ra.took < a.took {
			a = ra
		}
		for _, bin := range []string{cfg.before, cfg.cfp} {
			if bin == "" {
				continue
			}
			r, err := serveAndTail(cfg, bin)
			if err != nil {
				return err
			}
			acc := &c
			if bin == cfg.before {
				acc, r.name = &before, "before"
			} else {
				rounds = append(rounds, r.rate()/ra.rate())
			}
			rss, anon := max(acc.rssKB, r.rssKB), max(acc.anonKB, r.anonKB)
			if i == 0 || r.took < acc.took {
				*acc = r
			}
			acc.rssKB, acc.anonKB = rss, anon
		}
	}

	fmt.Printf("documents: %d, partitions: %d, body: ~%d B, page size: %d, CPUs: %d, best of %d runs\n",
		cfg.docs, cfg.partitions, cfg.bodyBytes, cfg.pageSize, runtime.NumCPU(), cfg.runs)
	rows := []result{a, b, c, local}
	if cfg.before != "" {
		rows = append(rows, before)
	}
	for _, r := range rows {
		line := fmt.Sprintf("%-6s %9d items %9.3fs %10.0f items/s", r.name, r.items, r.took.Seconds(), r.rate())
		if r.rssKB > 0 {
			line += fmt.Sprintf("   peak RSS %.1f MB", float64(r.rssKB)/1024)
		}
		if r.anonKB > 0 {
			line += fmt.Sprintf(" (anonymous %.1f MB)", float64(r.anonKB)/1024)
		}
		fmt.Println(line)
	}
	fmt.Printf("c/a = %.2f (goal >= 0.65 at 1 KB)   c/b = %.2f (goal >= 1.5)   local/a = %.2f\n",
		c.rate()/a.rate(), c.rate()/b.rate(), local.rate()/a.rate())
	fmt.Printf("c/a of each round (its own scan, then its tail): %s, median %.2f\n", formatRatios(rounds), median(rounds))
	if cfg.before != "" {
		fmt.Printf("before/a = %.2f   c/before = %.2f\n", before.rate()/a.rate(), c.rate()/before.rate())
	}
	return nil
}

// serveAndTail runs one (c): `cfp emulator` of binary bin on the data, and bin's tail against it.
func serveAndTail(cfg config, bin string) (result, error) {
	cfg.cfp = bin
	srv, err := serve(cfg)
	if err != nil {
		return result{}, err
	}
	r, err := tail(cfg, bin, "--endpoint="+srv.Endpoint)
	if serr := srv.Stop(); err == nil {
		err = serr
	}
	return r, err
}

// serve starts `cfp emulator` of cfg.cfp on the data directory and a free loopback port.
func serve(cfg config) (*testproc.Emulator, error) {
	return testproc.StartEmulator(cfg.cfp, testproc.EmulatorOptions{
		Data: cfg.dir, Env: append(os.Environ(), "NO_COLOR=1"), Stderr: os.Stderr,
	})
}

// scanAgain is one more (a), on the data directory opened anew (no cfp emulator holds it
// between the runs of (c)).
func scanAgain(cfg config) (result, error) {
	e, err := emulator.Open(emulator.Options{Dir: cfg.dir, Partitions: cfg.partitions})
	if err != nil {
		return result{}, err
	}
	r, err := scan(e, cfg)
	if cerr := e.Close(); err == nil {
		err = cerr
	}
	return r, err
}

func formatRatios(rs []float64) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = fmt.Sprintf("%.2f", r)
	}
	return strings.Join(parts, " ")
}

func median(rs []float64) float64 {
	if len(rs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(rs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// scan is (a): the storage-only scan.
func scan(e *emulator.Emulator, cfg config) (result, error) {
	var bytesRead int
	start := time.Now()
	n, err := e.ScanChangeFeed(benchutil.Database, benchutil.Container, cfg.pageSize, func(doc []byte) { bytesRead += len(doc) })
	r := result{name: "scan", items: n, took: time.Since(start)}
	if err == nil && n != cfg.docs {
		err = fmt.Errorf("scan read %d documents, want %d", n, cfg.docs)
	}
	return r, err
}

// naive is (b): one goroutine, azcosmos ReadChangeFeed over each feed range of the container
// in turn (the SDK requires a feed range or its continuation), until a range has no more changes.
func naive(cc *azcosmos.ContainerClient, cfg config) (result, error) {
	ctx := context.Background()
	start := time.Now()
	ranges, err := cc.ReadFeedRanges(ctx, nil)
	if err != nil {
		return result{}, err
	}
	items := 0
	for i := range ranges {
		opts := &azcosmos.ChangeFeedOptions{MaxItemCount: int32(cfg.pageSize), FeedRange: &ranges[i]}
		for {
			resp, err := cc.ReadChangeFeed(ctx, opts)
			if err != nil {
				return result{}, fmt.Errorf("naive read change feed: %w", err)
			}
			if len(resp.Items) == 0 {
				break
			}
			items += len(resp.Items)
			cont := resp.ContinuationToken
			opts = &azcosmos.ChangeFeedOptions{MaxItemCount: int32(cfg.pageSize), Continuation: &cont}
		}
	}
	r := result{name: "naive", items: items, took: time.Since(start)}
	if items != cfg.docs {
		return r, fmt.Errorf("naive loop read %d documents, want %d", items, cfg.docs)
	}
	return r, nil
}

var summaryRE = regexp.MustCompile(`tail caught up: (\d+) change`)

// tail is (c): cfp tail as a child process, stdout to /dev/null. --log-level info makes it
// print its summary line on stderr, which says how many changes it wrote.
func tail(cfg config, bin, account string) (result, error) {
	devNull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		return result{}, err
	}
	defer devNull.Close()
	var stderr bytes.Buffer
	args := []string{account, "tail", "-d", benchutil.Database, "-c", benchutil.Container,
		"--from", "beginning", "-e", "-o", "jsonl", "--batch-size", strconv.Itoa(cfg.pageSize), "--log-level", "info"}
	// The child's getrusage maximum RSS would include this process's RSS at fork time (Linux
	// keeps the high-water mark across exec), so peak RSS comes from /usr/bin/time, a small
	// parent of its own, or else from sampling the child's VmHWM.
	rssFile := filepath.Join(os.TempDir(), fmt.Sprintf("tailbench-rss-%d", os.Getpid()))
	defer os.Remove(rssFile)
	name := bin
	if _, err := os.Stat("/usr/bin/time"); err == nil {
		args = append([]string{"-f", "%M", "-o", rssFile, bin}, args...)
		name = "/usr/bin/time"
	}
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = devNull, &stderr
	cmd.Env = append(os.Environ(), "NO_COLOR=1", "COSMOS_KEY="+auth.WellKnownKey)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return result{}, err
	}
	peaks := sample(cmd.Process.Pid, name != bin)
	err = cmd.Wait()
	took := time.Since(start)
	hwm, anon := peaks()
	if err != nil {
		return result{}, fmt.Errorf("cfp tail: %w: %s", err, lastLine(stderr.String()))
	}
	r := result{name: "tail", took: took, rssKB: hwm, anonKB: anon}
	if b, err := os.ReadFile(rssFile); err == nil {
		if kb, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil {
			r.rssKB = kb
		}
	}
	m := summaryRE.FindStringSubmatch(stderr.String())
	if m == nil {
		return r, errors.New("cfp tail printed no summary: " + lastLine(stderr.String()))
	}
	r.items, _ = strconv.Atoi(m[1])
	if r.items != cfg.docs {
		return r, fmt.Errorf("cfp tail wrote %d changes, want %d", r.items, cfg.docs)
	}
	return r, nil
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// sample samples the VmHWM and RssAnon of process pid (of its only child when child is set)
// every 10ms until the returned function is called, which returns their peaks in kilobytes (0
// where /proc is missing).
func sample(pid int, child bool) func() (hwm, anon int64) {
	var peakHWM, peakAnon atomic.Int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			target := pid
			if child {
				b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
				target, _ = strconv.Atoi(strings.TrimSpace(string(b)))
			}
			if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", target)); target > 0 && err == nil {
				for line := range strings.Lines(string(b)) {
					for prefix, peak := range map[string]*atomic.Int64{"VmHWM:": &peakHWM, "RssAnon:": &peakAnon} {
						if v, ok := strings.CutPrefix(line, prefix); ok {
							kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
							if kb > peak.Load() {
								peak.Store(kb)
							}
						}
					}
				}
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	})
	return func() (int64, int64) { close(done); wg.Wait(); return peakHWM.Load(), peakAnon.Load() }
}
