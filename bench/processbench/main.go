// Command processbench measures `cfp process`, the change feed processor host, three ways:
//
//	throughput  `cfp process --start-from beginning` with the stdout delegate into /dev/null
//	            (a no-op handler that still writes every change) against `cfp tail --from
//	            beginning -e` on the same data, both child processes of a cfp binary built once,
//	            against a `cfp emulator` child of the same binary serving the data on a loopback
//	            socket; the ratio process/tail is the cost of leases, checkpoints and balancing
//	            (goal >= 0.9). With -before BIN, an earlier build's tail and process (against its
//	            own emulator) run alternately with this one's, so both see the same load;
//	balance     in process (feed.Processor over an in-memory source and lease store): how many
//	            acquire cycles it takes until 4 hosts hold 8 of 32 leases each, when they start
//	            together and when 3 join a host that holds all 32 (goal <= 4);
//	failover    two `cfp process` children share 4 leases; one is killed with SIGKILL and changes
//	            are written to every partition: the time until the survivor has delivered all
//	            of them (including those in the victim's leases), for each -expirations setting.
//
// Run it from the repository root:
//
//	go run ./bench/processbench -docs 50000
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
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cfp-dev/cfp/bench/internal/benchutil"
	"github.com/cfp-dev/cfp/emulator"
	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/feed/feedtest"
	"github.com/cfp-dev/cfp/internal/leases"
	"github.com/cfp-dev/cfp/internal/testproc"
)

type config struct {
	docs        int
	partitions  int
	bodyBytes   int
	pageSize    int
	runs        int
	expirations []time.Duration
	cfp         string
	before      string
	dir         string
	only        string
}

func main() {
	var cfg config
	var exps string
	flag.IntVar(&cfg.docs, "docs", 50_000, "documents for the throughput comparison")
	flag.IntVar(&cfg.partitions, "partitions", 4, "physical partitions of the container")
	flag.IntVar(&cfg.bodyBytes, "body", 200, "approximate size of a document's user properties in bytes")
	flag.IntVar(&cfg.pageSize, "page-size", 1000, "change-feed page size of tail and process (--max-items)")
	flag.IntVar(&cfg.runs, "runs", 3, "runs of each throughput contender (the best counts)")
	flag.StringVar(&exps, "expirations", "5s,10s", "lease expirations to measure failover with")
	flag.StringVar(&cfg.cfp, "cfp", "", "cfp binary (default: go build . into a temporary directory)")
	flag.StringVar(&cfg.before, "before", "", "another cfp binary (an earlier build) whose tail and process, against its own `cfp emulator`, run alternately with this one's in the throughput comparison")
	flag.StringVar(&cfg.dir, "dir", "", "data directory, kept; its documents are reused when it has them (default: a temporary one, removed at the end)")
	flag.StringVar(&cfg.only, "only", "", "run only throughput, balance or failover")
	flag.Parse()
	for s := range strings.SplitSeq(exps, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil {
			fmt.Fprintf(os.Stderr, "processbench: -expirations: %v\n", err)
			os.Exit(2)
		}
		cfg.expirations = append(cfg.expirations, d)
	}
	if err := run(cfg); err != nil {
		fmt.Fprintf(os.Stderr, "processbench: %v\n", err)
		os.Exit(1)
	}
}

func run(cfg config) error {
	fmt.Printf("processbench: %s/%s, %d CPUs\n", runtime.GOOS, runtime.GOARCH, runtime.NumCPU())
	if cfg.only == "" || cfg.only == "balance" {
		if err := balance(); err != nil {
			return err
		}
		if cfg.only == "balance" {
			return nil
		}
	}
	tmp, err := os.MkdirTemp("", "processbench-")
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
	gen := cfg
	if cfg.only == "failover" {
		gen.docs = 0 // the container only
	}
	if err := generate(dir, gen); err != nil {
		return err
	}
	if cfg.only == "" || cfg.only == "throughput" {
		if err := throughput(cfg, dir); err != nil {
			return err
		}
	}
	if cfg.only == "" || cfg.only == "failover" {
		srv, err := serve(cfg.cfp, dir, cfg)
		if err != nil {
			return err
		}
		defer srv.Stop()
		for _, exp := range cfg.expirations {
			if err := failover(cfg, srv.Endpoint, exp); err != nil {
				return err
			}
		}
		return srv.Stop()
	}
	return nil
}

// serve starts `cfp emulator` of binary bin on the data directory and a free loopback port.
func serve(bin, dir string, cfg config) (*testproc.Emulator, error) {
	return testproc.StartEmulator(bin, testproc.EmulatorOptions{
		Data: dir, Args: []string{"--partitions", strconv.Itoa(cfg.partitions)},
		Env: append(os.Environ(), "NO_COLOR=1"), Stderr: os.Stderr,
	})
}

// --- data and the emulator ---------------------------------------------------------------------

// generate writes cfg.docs documents {id, pk, n, payload} of about cfg.bodyBytes into dir, in
// process.
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
	defer client.Close()
	ctx := context.Background()
	cc, existed, err := benchutil.Setup(ctx, client)
	if err != nil {
		return err
	}
	if existed {
		fmt.Fprintf(os.Stderr, "reusing the documents in %s\n", dir)
		return nil
	}
	start := time.Now()
	if err := benchutil.Generate(ctx, cc, benchutil.GenerateOptions{Docs: cfg.docs, Writers: 32, Payload: benchutil.Payload(cfg.bodyBytes)}); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "generated %d documents in %s\n", cfg.docs, time.Since(start).Round(time.Millisecond))
	return nil
}

// --- throughput --------------------------------------------------------------------------------

// throughput times tail and process of cfg.cfp (and of cfg.before) on the data in dir, each
// build against its own emulator; the fastest run of each counts. A round runs the builds one
// after the other, so that both see the same machine load.
func throughput(cfg config, dir string) error {
	fastest := map[string]*contender{}
	ratios := map[string][]float64{} // each run's process/tail in items/s, by build
	bins := []string{cfg.cfp}
	if cfg.before != "" {
		bins = []string{cfg.before, cfg.cfp}
	}
	load0 := loadAverage()
	for i := range max(cfg.runs, 1) {
		for _, bin := range bins {
			label := "this"
			if bin == cfg.before {
				label = "before"
			}
			tailRun, procRun, err := throughputOnce(cfg, bin, dir, fmt.Sprintf("tput%d-%d%s", os.Getpid(), i, label))
			if err != nil {
				return err
			}
			if c := fastest[bin]; c == nil {
				fastest[bin] = &contender{tail: tailRun, process: procRun}
			} else {
				c.tail, c.process = c.tail.faster(tailRun), c.process.faster(procRun)
			}
			ratio := tailRun.wall.Seconds() / procRun.wall.Seconds()
			ratios[bin] = append(ratios[bin], ratio)
			fmt.Fprintf(os.Stderr, "run %d %-6s tail %s, process %s, process/tail %.2f\n", i+1, label, tailRun, procRun, ratio)
		}
	}
	rate := func(d time.Duration) float64 { return float64(cfg.docs) / d.Seconds() }
	fmt.Printf("\nthroughput: %d documents of ~%d B, %d partitions, page size %d, best of %d; load average %s before, %s after\n",
		cfg.docs, cfg.bodyBytes, cfg.partitions, cfg.pageSize, cfg.runs, load0, loadAverage())
	for _, bin := range bins {
		c, name := fastest[bin], ""
		if bin == cfg.before {
			name = "before "
		}
		fmt.Printf("  %stail     %8.0f items/s  (%s)\n", name, rate(c.tail.wall), c.tail)
		fmt.Printf("  %sprocess  %8.0f items/s  (%s; stdout delegate, checkpoint per batch)\n", name, rate(c.process.wall), c.process)
		rs := ratios[bin]
		slices.Sort(rs)
		fmt.Printf("  %sprocess/tail = %.2f of the fastest runs, median of the runs' %.2f (%.2f-%.2f) (goal >= 0.9)\n",
			name, rate(c.process.wall)/rate(c.tail.wall), rs[len(rs)/2], rs[0], rs[len(rs)-1])
	}
	if cfg.before != "" {
		b, c := fastest[cfg.before], fastest[cfg.cfp]
		fmt.Printf("  process/before process = %.2f   tail/before tail = %.2f (items/s)\n",
			b.process.wall.Seconds()/c.process.wall.Seconds(), b.tail.wall.Seconds()/c.tail.wall.Seconds())
	}
	return nil
}

// contender is the fastest tail and process run of one build.
type contender struct{ tail, process timing }

// timing is one run of a child: its wall time until it had every change, and the CPU time
// (user and system) the child used in all.
type timing struct{ wall, cpu time.Duration }

func (t timing) String() string {
	return fmt.Sprintf("%s, CPU %s", t.wall.Round(time.Millisecond), t.cpu.Round(time.Millisecond))
}

// faster returns the run with the shorter wall time.
func (t timing) faster(u timing) timing {
	if u.wall < t.wall {
		return u
	}
	return t
}

func cpuOf(ps *os.ProcessState) time.Duration { return ps.UserTime() + ps.SystemTime() }

// throughputOnce serves dir with bin's emulator and runs bin's tail, then bin's process as
// processor name.
func throughputOnce(cfg config, bin, dir, name string) (tailRun, procRun timing, err error) {
	srv, err := serve(bin, dir, cfg)
	if err != nil {
		return timing{}, timing{}, err
	}
	defer srv.Stop()
	cfg.cfp = bin
	if tailRun, err = tailOnce(cfg, srv.Endpoint); err != nil {
		return timing{}, timing{}, err
	}
	if procRun, err = processOnce(cfg, srv.Endpoint, name); err != nil {
		return timing{}, timing{}, err
	}
	return tailRun, procRun, srv.Stop()
}

// loadAverage is the 1-minute load average (Linux), or "?".
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "?"
}

// tailOnce runs cfp tail with its stdout on /dev/null (a nil Stdout; io.Discard would be a
// pipe that this process drains).
func tailOnce(cfg config, endpoint string) (timing, error) {
	cmd := exec.Command(cfg.cfp, "--endpoint", endpoint, "tail", "-d", benchutil.Database, "-c", benchutil.Container,
		"--from", "beginning", "-e", "-o", "jsonl", "--batch-size", strconv.Itoa(cfg.pageSize))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return timing{}, fmt.Errorf("cfp tail: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return timing{wall: time.Since(start), cpu: cpuOf(cmd.ProcessState)}, nil
}

// event is the part of a `cfp process --events jsonl` line the bench reads.
type event struct {
	Type  string    `json:"type"`
	Time  time.Time `json:"time"`
	Owner string    `json:"owner"`
	Lease string    `json:"lease"`
	Range struct {
		Min string `json:"min"`
		Max string `json:"max"`
	} `json:"range"`
	Items int `json:"items"`
}

// host is a `cfp process` child with its events parsed as they come.
type host struct {
	cmd    *exec.Cmd
	events chan event
	done   chan error
	stderr *bytes.Buffer
}

// startHost starts cfp with args and --events jsonl; a nil stdout is /dev/null.
func startHost(cfp string, stdout io.Writer, args ...string) (*host, error) {
	cmd := exec.Command(cfp, append(args, "--events", "jsonl")...)
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	cmd.Stdout = stdout
	pipe, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	h := &host{cmd: cmd, events: make(chan event, 4096), done: make(chan error, 1), stderr: new(bytes.Buffer)}
	go func() {
		sc := bufio.NewScanner(pipe)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var e event
			if json.Unmarshal(sc.Bytes(), &e) == nil && e.Type != "" {
				select {
				case h.events <- e:
				default: // nobody listens to this kind any more
				}
			} else {
				h.stderr.Write(append(sc.Bytes(), '\n'))
			}
		}
		close(h.events)
		h.done <- cmd.Wait()
	}()
	return h, nil
}

// interrupt stops the host gracefully and waits for it.
func (h *host) interrupt() error {
	_ = h.cmd.Process.Signal(os.Interrupt)
	for range h.events {
	}
	return <-h.done
}

// processOnce runs cfp process with its stdout on /dev/null until its batch events add up to
// every document.
func processOnce(cfg config, endpoint, name string) (timing, error) {
	start := time.Now()
	h, err := startHost(cfg.cfp, nil, "--endpoint", endpoint, "process", "-d", benchutil.Database, "-c", benchutil.Container,
		"-p", name, "--create-lease-container", "--from", "beginning", "--batch-size", strconv.Itoa(cfg.pageSize),
		"--lease-acquire-interval", "1s", "--poll-interval", "100ms")
	if err != nil {
		return timing{}, err
	}
	items := 0
	for e := range h.events {
		if e.Type == "batch" {
			items += e.Items
			if items >= cfg.docs {
				took := time.Since(start)
				if err := h.interrupt(); err != nil {
					return timing{}, fmt.Errorf("cfp process: %w: %s", err, h.stderr)
				}
				return timing{wall: took, cpu: cpuOf(h.cmd.ProcessState)}, nil
			}
		}
	}
	err = <-h.done
	return timing{}, fmt.Errorf("cfp process ended after %d of %d items: %v: %s", items, cfg.docs, err, h.stderr)
}

// --- balance -----------------------------------------------------------------------------------

// balance counts acquire cycles until 4 hosts hold 8 of 32 leases each.
func balance() error {
	const interval = 100 * time.Millisecond
	fmt.Printf("\nbalance: 32 leases, 4 hosts, acquire interval %s (cycles = elapsed / interval, rounded up)\n", interval)
	for _, sc := range []struct {
		name  string
		first int // hosts started first, which converge before the others start
	}{{"4 hosts start together", 0}, {"3 hosts join one that holds all 32", 1}} {
		var all []float64
		for range 5 {
			c, err := balanceOnce(interval, sc.first)
			if err != nil {
				return err
			}
			all = append(all, c)
		}
		slices.Sort(all)
		fmt.Printf("  %-36s cycles: median %.0f, max %.0f (goal <= 4)\n", sc.name, all[len(all)/2], all[len(all)-1])
	}
	return nil
}

func balanceOnce(interval time.Duration, first int) (float64, error) {
	src := feedtest.NewMemSource(32)
	docs := leases.NewMemDocuments("/id")
	store := leases.NewStore(docs, leases.Prefix("bench", "localhost", "db", "coll"), leases.StoreOptions{})
	noop := feed.HandlerFunc(func(context.Context, feed.Batch) error { return nil })
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	procs := make([]*feed.Processor, 4)
	for i := range procs {
		p, err := feed.NewProcessor(src, store, noop, feed.ProcessorOptions{
			Instance: fmt.Sprintf("host-%d", i), AcquireInterval: interval, RenewInterval: time.Second,
			Expiration: 10 * time.Second, PollInterval: 50 * time.Millisecond,
		})
		if err != nil {
			return 0, err
		}
		procs[i] = p
	}
	start := func(ps []*feed.Processor) {
		for _, p := range ps {
			wg.Go(func() { _ = p.Run(ctx) })
		}
	}
	wait := func(ps []*feed.Processor, each int, limit time.Duration) (time.Duration, error) {
		t0 := time.Now()
		for {
			ok := true
			for _, p := range ps {
				if len(p.Owned()) != each {
					ok = false
				}
			}
			if ok {
				return time.Since(t0), nil
			}
			if time.Since(t0) > limit {
				return 0, fmt.Errorf("hosts did not converge to %d leases each within %s", each, limit)
			}
			time.Sleep(time.Millisecond)
		}
	}
	if first > 0 {
		start(procs[:first])
		if _, err := wait(procs[:first], 32/first, 30*time.Second); err != nil {
			return 0, err
		}
		start(procs[first:])
	} else {
		start(procs)
	}
	took, err := wait(procs, 8, 30*time.Second)
	if err != nil {
		return 0, err
	}
	return math.Ceil(float64(took) / float64(interval)), nil
}

// --- failover ----------------------------------------------------------------------------------

// failover kills one of two hosts with SIGKILL and measures how long until the survivor has
// delivered a probe written to every partition, among them the victim's.
func failover(cfg config, endpoint string, expiration time.Duration) error {
	name := fmt.Sprintf("fo%d-%d", os.Getpid(), expiration/time.Second)
	renew := expiration / 4
	common := []string{"--endpoint", endpoint, "process", "-d", benchutil.Database, "-c", benchutil.Container, "-p", name,
		"--create-lease-container", "--from", "now", "--lease-expiration", expiration.String(),
		"--lease-renew-interval", renew.String(), "--lease-acquire-interval", "1s", "--poll-interval", "100ms"}
	seen := &probeWriter{at: map[string]time.Time{}}
	a, err := startHost(cfg.cfp, seen, append(common, "--instance", "survivor")...)
	if err != nil {
		return err
	}
	defer a.interrupt()
	victimOut := &probeWriter{at: map[string]time.Time{}}
	b, err := startHost(cfg.cfp, victimOut, append(common, "--instance", "victim")...)
	if err != nil {
		return err
	}
	// Wait until each holds 2 leases (counting from the events).
	held := map[string]map[string]bool{"survivor": {}, "victim": {}}
	victimRanges := func() []string {
		var out []string
		for l := range held["victim"] {
			out = append(out, l)
		}
		slices.Sort(out)
		return out
	}
	deadline := time.After(60 * time.Second)
	merged := make(chan event, 1024)
	forward := func(h *host) {
		for e := range h.events {
			select {
			case merged <- e:
			default: // the bench stopped listening
			}
		}
	}
	go forward(a)
	go forward(b)
	for len(held["survivor"]) != 2 || len(held["victim"]) != 2 {
		select {
		case e := <-merged:
			switch e.Type {
			case "acquired":
				held[e.Owner][e.Lease+" "+e.Range.Min+"-"+e.Range.Max] = true
			case "released", "lost":
				delete(held[e.Owner], e.Lease+" "+e.Range.Min+"-"+e.Range.Max)
			}
		case <-deadline:
			return fmt.Errorf("failover %s: hosts did not balance 2/2: %v", expiration, held)
		}
	}
	time.Sleep(2 * renew) // both hosts renewed at least once: the victim's leases are fresh
	if err := b.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	killed := time.Now()
	// Write one probe per key of 64: every partition gets some.
	client, err := benchutil.Client(endpoint)
	if err != nil {
		return err
	}
	defer client.Close()
	cc, err := client.NewContainer(benchutil.Database, benchutil.Container)
	if err != nil {
		return err
	}
	var ids []string
	for i := range 64 {
		id := fmt.Sprintf("probe-%s-%02d", name, i)
		pk := "q" + strconv.Itoa(i)
		body, _ := json.Marshal(map[string]any{"id": id, "pk": pk})
		if _, err := cc.UpsertItem(context.Background(), azcosmos.NewPartitionKeyString(pk), body, nil); err != nil {
			return err
		}
		ids = append(ids, id)
	}
	var takeover time.Time
	timeout := time.After(3*expiration + 30*time.Second)
	for {
		if last, ok := seen.all(ids); ok {
			fast, slow := seen.split(ids, killed, time.Second)
			fmt.Printf("\nfailover: expiration %s, renew %s, acquire interval 1s, poll 100ms; victim held %v\n", expiration, renew, victimRanges())
			fmt.Printf("  kill -9 -> survivor takes the victim's leases: %s\n", takeover.Sub(killed).Round(10*time.Millisecond))
			fmt.Printf("  kill -9 -> last probe delivered:               %s (%d probes in the survivor's own leases within 1s, %d waited for the takeover)\n",
				last.Sub(killed).Round(10*time.Millisecond), fast, slow)
			return nil
		}
		select {
		case e := <-merged:
			if e.Type == "acquired" && e.Owner == "survivor" && takeover.IsZero() {
				takeover = e.Time
			}
		case <-time.After(20 * time.Millisecond):
		case <-timeout:
			return fmt.Errorf("failover %s: the survivor did not deliver every probe", expiration)
		}
	}
}

// probeWriter records when each probe id first appears on a host's stdout.
type probeWriter struct {
	mu  sync.Mutex
	buf []byte
	at  map[string]time.Time
}

var probeRE = regexp.MustCompile(`"id":"(probe-[^"]+)"`)

func (p *probeWriter) Write(b []byte) (int, error) {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			break
		}
		if m := probeRE.FindSubmatch(p.buf[:i]); m != nil {
			if _, ok := p.at[string(m[1])]; !ok {
				p.at[string(m[1])] = now
			}
		}
		p.buf = p.buf[i+1:]
	}
	return len(b), nil
}

// all reports whether every id was seen, and when the last one was.
func (p *probeWriter) all(ids []string) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var last time.Time
	for _, id := range ids {
		t, ok := p.at[id]
		if !ok {
			return time.Time{}, false
		}
		if t.After(last) {
			last = t
		}
	}
	return last, true
}

// split counts the ids seen within d of since, and the others.
func (p *probeWriter) split(ids []string, since time.Time, d time.Duration) (fast, slow int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, id := range ids {
		if p.at[id].Sub(since) <= d {
			fast++
		} else {
			slow++
		}
	}
	return fast, slow
}
