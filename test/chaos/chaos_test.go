//go:build unix

package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/cfp-dev/cfp/internal/account"
	"github.com/cfp-dev/cfp/internal/cosmos"
	"github.com/cfp-dev/cfp/internal/leases"
	"github.com/cfp-dev/cfp/internal/testproc"
)

// The default of every flag is the short CI run.
var (
	flagDocs       = flag.Int("chaos.docs", 2000, "documents the writer writes (seq 0..N-1)")
	flagHosts      = flag.Int("chaos.hosts", 3, "cfp process hosts")
	flagKillEvery  = flag.Duration("chaos.kill-every", 3*time.Second, "mean time between two SIGKILLs of a random host (0: no kills)")
	flagDuration   = flag.Duration("chaos.duration", 15*time.Second, "how long the writer takes to write every document")
	flagDrain      = flag.Duration("chaos.drain", 45*time.Second, "how long to wait after the writer for every document to be delivered")
	flagSplits     = flag.Int("chaos.splits", 1, "partition splits, spread over the writer's duration")
	flagPauses     = flag.Int("chaos.pauses", 1, "times a random host is frozen (SIGSTOP) past its lease expiration, then resumed (SIGCONT) as a zombie owner")
	flagPause      = flag.Duration("chaos.pause", 6*time.Second, "how long a frozen host stays frozen (the hosts' lease expiration is 4s)")
	flagMaxItems   = flag.Int("chaos.max-items", 20, "--max-items of the hosts (the batch size bounds the duplicates)")
	flagPartitions = flag.Int("chaos.partitions", 4, "physical partitions of the monitored container")
	flagDelay      = flag.Duration("chaos.handler-delay", 30*time.Millisecond, "the batch handler sleeps up to this long after recording a batch, widening the window in which a kill causes a duplicate")
	flagWriters    = flag.Int("chaos.writers", 4, "concurrent upserts of the writer")
	flagSeed       = flag.Uint64("chaos.seed", 0, "seed of the chaos loop's choices (0: from the clock; logged)")
	flagKeep       = flag.Bool("chaos.keep", false, "keep the run's directory (host logs, record files, emulator data) and print it")
)

const (
	chaosDatabase  = "chaos"
	chaosContainer = "items"
	chaosLeases    = "leases"
	chaosProcessor = "chaos"
	samplePeriod   = 200 * time.Millisecond
	stopGrace      = 30 * time.Second
)

// run is the state of one chaos run that the chaos loop and the report share.
type run struct {
	t   *testing.T
	cfg hostConfig
	rnd *rand.Rand

	mu      sync.Mutex
	hosts   map[string]*hostProc // by slot
	gens    map[string]int       // restarts per slot
	checker *leaseChecker
	kills   int
	splits  int
	pauses  int
	// paused is the frozen host, if any, and when to resume it.
	paused   *hostProc
	resumeAt time.Time
	crashes  int // hosts that exited without being killed
	exposure int // Σ over kills of the leases the victim held (+1 for a stale sample)
}

// TestChaos runs `cfp process --exec` hosts against one `cfp emulator` while a writer writes
// sequence-numbered documents, a chaos loop SIGKILLs and restarts hosts and partitions split,
// then checks that every document was delivered, that no checkpoint moved backwards and that
// the duplicates stay within what the kills and lease moves explain.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("the chaos test runs cfp processes for tens of seconds; skipped under -short")
	}
	k, nHosts := *flagDocs, *flagHosts
	if k < 1 || nHosts < 1 || *flagMaxItems < 1 || *flagDuration <= 0 {
		t.Fatalf("bad flags: -chaos.docs, -chaos.hosts, -chaos.max-items and -chaos.duration must be positive")
	}
	seed := *flagSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("chaos: docs=%d hosts=%d kill-every=%s duration=%s splits=%d max-items=%d handler-delay=%s partitions=%d seed=%d",
		k, nHosts, *flagKillEvery, *flagDuration, *flagSplits, *flagMaxItems, *flagDelay, *flagPartitions, seed)

	dir := t.TempDir()
	if *flagKeep {
		var err error
		if dir, err = os.MkdirTemp("", "cfp-chaos-"); err != nil {
			t.Fatal(err)
		}
		t.Logf("chaos: run directory %s", dir)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if dl, ok := t.Deadline(); ok {
		ctx, cancel = context.WithDeadline(ctx, dl.Add(-15*time.Second))
		defer cancel()
	}

	began := time.Now()
	bin := buildCFP(t, dir)
	emu := startEmulator(t, bin, dir, *flagPartitions)
	acct, err := account.Open(ctx, account.Config{ConnectionString: emu.ConnectionString})
	if err != nil {
		t.Fatalf("open the emulator account: %v", err)
	}
	defer acct.Close()
	if err := acct.CreateDatabaseIfNotExists(ctx, chaosDatabase); err != nil {
		t.Fatal(err)
	}
	items, err := acct.CreateContainerIfNotExists(ctx, chaosDatabase, chaosContainer, "/id", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := acct.CreateContainerIfNotExists(ctx, chaosDatabase, chaosLeases, "/id", nil); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}

	r := &run{
		t: t,
		cfg: hostConfig{
			bin: bin, dir: dir, connectionString: emu.ConnectionString,
			database: chaosDatabase, container: chaosContainer, processor: chaosProcessor,
			recorder: "exec " + shellQuote(exe), maxItems: *flagMaxItems, handlerDelay: *flagDelay,
		},
		rnd:     rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		hosts:   map[string]*hostProc{},
		gens:    map[string]int{},
		checker: newLeaseChecker(),
	}
	defer r.killAll()
	for i := 1; i <= nHosts; i++ {
		slot := fmt.Sprintf("h%d", i)
		h, err := startHost(r.cfg, slot, slot)
		if err != nil {
			t.Fatal(err)
		}
		r.hosts[slot] = h
	}

	// The sampler checks the lease documents every samplePeriod until the hosts are stopped.
	leaseDocs := acct.LeaseDocuments(chaosDatabase, chaosLeases)
	sampleCtx, stopSampling := context.WithCancel(ctx)
	sampled := make(chan struct{})
	var sampleErrs atomic.Int64
	go func() {
		defer close(sampled)
		tick := time.NewTicker(samplePeriod)
		defer tick.Stop()
		for {
			if err := r.sample(sampleCtx, leaseDocs); err != nil && sampleCtx.Err() == nil {
				sampleErrs.Add(1)
			}
			select {
			case <-sampleCtx.Done():
				return
			case <-tick.C:
			}
		}
	}()

	// The writer upserts seq 0..K-1 at a steady pace; the chaos loop runs until it is done.
	var written atomic.Int64
	writeDone := make(chan error, 1)
	writeStart := time.Now()
	go func() { writeDone <- writeDocs(ctx, items, k, *flagDuration, *flagWriters, &written) }()
	if err := r.chaos(ctx, items, writeStart, writeDone); err != nil {
		t.Fatalf("writer: %v (wrote %d of %d)", err, written.Load(), k)
	}
	t.Logf("chaos: writer wrote %d documents in %s", written.Load(), time.Since(writeStart).Round(time.Millisecond))

	// Drain: wait until every document was delivered, or the drain deadline.
	led := newLedger(k)
	drainStart := time.Now()
	for {
		if err := led.scan(dir); err != nil {
			t.Fatal(err)
		}
		r.reviveCrashed()
		if led.lost() == 0 || time.Since(drainStart) > *flagDrain || ctx.Err() != nil {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	drained := time.Since(drainStart)

	// Stop every host gracefully, all at once, then sample the leases a last time.
	stopped := r.stopAll()
	stopSampling()
	<-sampled
	if err := r.sample(ctx, leaseDocs); err != nil {
		t.Errorf("sample the leases after the stop: %v", err)
	}
	if err := led.scan(dir); err != nil {
		t.Fatal(err)
	}
	stopEmulator(t, emu)

	r.report(led, k, drained, time.Since(began), stopped, sampleErrs.Load())
}

// chaos kills a random host every ~kill-every and restarts it, splits partitions at even
// intervals of the writer's duration, and returns when the writer is done.
func (r *run) chaos(ctx context.Context, items *cosmos.Container, writeStart time.Time, writeDone <-chan error) error {
	var splitAt []time.Time
	for i := 1; i <= *flagSplits; i++ {
		splitAt = append(splitAt, writeStart.Add(*flagDuration*time.Duration(i)/time.Duration(*flagSplits+1)))
	}
	var pauseAt []time.Time
	for i := 1; i <= *flagPauses; i++ {
		pauseAt = append(pauseAt, writeStart.Add(*flagDuration*time.Duration(2*i-1)/time.Duration(2*(*flagPauses+1))))
	}
	nextKill := time.Now().Add(r.jitter(*flagKillEvery))
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	defer r.resume()
	for {
		select {
		case err := <-writeDone:
			return err
		case <-ctx.Done():
			return ctx.Err()
		case now := <-tick.C:
			r.reviveCrashed()
			if r.paused != nil && !now.Before(r.resumeAt) {
				r.resume()
			}
			if len(pauseAt) > 0 && !now.Before(pauseAt[0]) && r.paused == nil {
				pauseAt = pauseAt[1:]
				r.pauseOne()
			}
			if len(splitAt) > 0 && !now.Before(splitAt[0]) {
				splitAt = splitAt[1:]
				if err := r.split(ctx, items); err != nil {
					r.t.Errorf("split: %v", err)
				}
			}
			if *flagKillEvery > 0 && !now.Before(nextKill) {
				r.killOne()
				nextKill = time.Now().Add(r.jitter(*flagKillEvery))
			}
		}
	}
}

// jitter returns d ±40%.
func (r *run) jitter(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.6 + 0.8*r.rnd.Float64()))
}

// pauseOne freezes a random host's process group with SIGSTOP until resume: its leases expire
// and move to other hosts while it still believes it owns them.
func (r *run) pauseOne() {
	r.mu.Lock()
	slots := r.slots()
	h := r.hosts[slots[r.rnd.IntN(len(slots))]]
	r.paused, r.resumeAt = h, time.Now().Add(*flagPause)
	r.pauses++
	r.mu.Unlock()
	h.signal(syscall.SIGSTOP)
	r.t.Logf("chaos: %s pause: SIGSTOP %s for %s", time.Now().Format("15:04:05.000"), h.instance, *flagPause)
}

// resume wakes the frozen host, if any, with SIGCONT.
func (r *run) resume() {
	r.mu.Lock()
	h := r.paused
	r.paused = nil
	r.mu.Unlock()
	if h != nil {
		h.signal(syscall.SIGCONT)
		r.t.Logf("chaos: %s resume: SIGCONT %s", time.Now().Format("15:04:05.000"), h.instance)
	}
}

// killOne SIGKILLs a random host other than the frozen one and restarts it after up to a
// second, under the same instance name every other time and under a new one otherwise.
func (r *run) killOne() {
	r.mu.Lock()
	slots := slices.DeleteFunc(r.slots(), func(s string) bool { return r.paused != nil && r.hosts[s] == r.paused })
	if len(slots) == 0 {
		r.mu.Unlock()
		return
	}
	slot := slots[r.rnd.IntN(len(slots))]
	victim := r.hosts[slot]
	held := 0
	for _, o := range r.checker.live {
		if o.owner == victim.instance {
			held++
		}
	}
	r.kills++
	r.exposure += held + 1
	n := r.kills
	delay := time.Duration(r.rnd.Int64N(int64(time.Second)))
	r.mu.Unlock()

	victim.kill()
	instance := slot
	if n%2 == 0 {
		r.mu.Lock()
		r.gens[slot]++
		instance = fmt.Sprintf("%s-g%d", slot, r.gens[slot])
		r.mu.Unlock()
	}
	r.t.Logf("chaos: %s kill %d: SIGKILL %s (held %d leases), restart as %s in %s",
		time.Now().Format("15:04:05.000"), n, victim.instance, held, instance, delay.Round(time.Millisecond))
	time.Sleep(delay)
	r.restart(slot, instance)
}

// reviveCrashed restarts hosts that exited on their own; every such exit is a test failure,
// and too many end the test. It runs on the test's goroutine.
func (r *run) reviveCrashed() {
	r.mu.Lock()
	var crashed []*hostProc
	for _, slot := range r.slots() {
		if h := r.hosts[slot]; h.exited() {
			crashed = append(crashed, h)
		}
	}
	r.crashes += len(crashed)
	crashes := r.crashes
	r.mu.Unlock()
	for _, h := range crashed {
		r.t.Errorf("host %s exited by itself after %s: %v\n%s", h.instance, time.Since(h.started).Round(time.Millisecond),
			h.err, testproc.Tail(filepath.Join(r.cfg.dir, h.slot+".log"), 15))
		if limit := 2 * len(r.hosts); crashes > limit {
			r.t.Fatalf("%d hosts exited by themselves; giving up", crashes)
		}
		r.restart(h.slot, h.instance)
	}
}

func (r *run) restart(slot, instance string) {
	h, err := startHost(r.cfg, slot, instance)
	if err != nil {
		r.t.Errorf("restart %s: %v", instance, err)
		return
	}
	r.mu.Lock()
	r.hosts[slot] = h
	r.mu.Unlock()
}

// slots returns the host slots in order; r.mu must be held.
func (r *run) slots() []string {
	s := make([]string, 0, len(r.hosts))
	for slot := range r.hosts {
		s = append(s, slot)
	}
	sort.Strings(s)
	return s
}

// split splits a random live partition of the monitored container with `cfp emulator split`.
func (r *run) split(ctx context.Context, items *cosmos.Container) error {
	parts, err := items.Partitions(ctx)
	if err != nil {
		return err
	}
	p := parts[r.rnd.IntN(len(parts))]
	out, err := runCFP(ctx, r.cfg, "emulator", "split", "-d", chaosDatabase, "-c", chaosContainer, "--range", p.ID, "-o", "json")
	if err != nil {
		return err
	}
	var v struct {
		Children []struct {
			ID string `json:"id"`
		} `json:"children"`
	}
	if err := json.Unmarshal(out, &v); err != nil || len(v.Children) != 2 {
		return fmt.Errorf("cfp emulator split printed %q, want two children (%v)", out, err)
	}
	r.mu.Lock()
	r.splits++
	r.mu.Unlock()
	r.t.Logf("chaos: %s split range %s %s into %s and %s", time.Now().Format("15:04:05.000"), p.ID, p.Range,
		v.Children[0].ID, v.Children[1].ID)
	return nil
}

// sample reads the processor's leases once and hands them to the checker.
func (r *run) sample(ctx context.Context, docs leases.Documents) error {
	all, err := docs.QueryPrefix(ctx, chaosProcessor)
	if err != nil {
		return err
	}
	var ls []*leases.Lease
	for _, d := range all {
		l, err := leases.Decode(d)
		if errors.Is(err, leases.ErrNotLease) {
			continue // .info and .lock markers
		}
		if err != nil {
			return fmt.Errorf("decode %s: %w", d.ID, err)
		}
		ls = append(ls, l)
	}
	r.mu.Lock()
	r.checker.observe(ls)
	r.mu.Unlock()
	return nil
}

// stopAll sends SIGINT to every host at once and returns the instances that stopped with exit
// 0 or 130 in time; other outcomes are test failures.
func (r *run) stopAll() []string {
	r.mu.Lock()
	hosts := make([]*hostProc, 0, len(r.hosts))
	for _, slot := range r.slots() {
		hosts = append(hosts, r.hosts[slot])
	}
	r.mu.Unlock()
	var (
		mu      sync.Mutex
		stopped []string
		g       errgroup.Group
	)
	for _, h := range hosts {
		g.Go(func() error {
			code, err := h.interrupt(stopGrace)
			switch {
			case err != nil:
				r.t.Errorf("stop: %v\n%s", err, testproc.Tail(filepath.Join(r.cfg.dir, h.slot+".log"), 15))
			case code != 0 && code != 130:
				r.t.Errorf("host %s exited %d on SIGINT, want 0 or 130\n%s", h.instance, code, testproc.Tail(filepath.Join(r.cfg.dir, h.slot+".log"), 15))
			default:
				mu.Lock()
				stopped = append(stopped, h.instance)
				mu.Unlock()
			}
			return nil
		})
	}
	_ = g.Wait()
	return stopped
}

// killAll SIGKILLs whatever host still runs (cleanup after a failure).
func (r *run) killAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, h := range r.hosts {
		if !h.exited() {
			h.kill()
		}
	}
}

// report logs the run's numbers and fails the test on a lost document, a checkpoint that
// moved backwards, duplicates beyond the bound, or a lease still held by a stopped host.
func (r *run) report(led *ledger, k int, drained, wall time.Duration, stopped []string, sampleErrs int64) {
	t := r.t
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.checker
	// Each kill can repeat at most the one batch per lease the victim had handled but not yet
	// checkpointed; so can each lease that changed hands (stolen, expired, handed off) and each
	// lease at a split.
	disruptions := r.exposure + c.ownerChanges + c.maxLeases*r.splits
	bound := *flagMaxItems * disruptions
	var perHost []string
	active := 0
	bySlot := r.hostsDelivered(led)
	for _, slot := range r.slots() {
		perHost = append(perHost, fmt.Sprintf("%s=%d", slot, bySlot[slot]))
		if bySlot[slot] > 0 {
			active++
		}
	}
	t.Logf("chaos: RESULT docs=%d hosts=%d kills=%d splits=%d pauses=%d lost=%d duplicates=%d (bound %d = %d items x %d disruptions) "+
		"deliveries=%d batches=%d max-per-doc=%d owner-changes=%d leases(max live)=%d drain=%s wall=%s",
		k, len(r.hosts), r.kills, r.splits, r.pauses, led.lost(), led.duplicates(), bound, *flagMaxItems, disruptions,
		led.deliveries, led.batches, led.maxCount(), c.ownerChanges, c.maxLeases,
		drained.Round(time.Millisecond), wall.Round(time.Millisecond))
	t.Logf("chaos: deliveries per instance: %s; lease samples %d (%d failed); final owners: %s",
		strings.Join(r.instanceDeliveries(led), " "), c.samples, sampleErrs, c.owners())

	if led.lost() > 0 {
		t.Errorf("lost %d of %d documents (never delivered), e.g. seq %v", led.lost(), k, led.missing(20))
	}
	if led.foreign > 0 {
		t.Errorf("%d delivered items had no seq the writer wrote", led.foreign)
	}
	for _, v := range c.violations {
		t.Errorf("checkpoint moved backwards: %s", v)
	}
	if led.duplicates() > bound {
		t.Errorf("%d duplicates, more than the %d that %d kills, %d lease moves and %d splits explain",
			led.duplicates(), bound, r.kills, c.ownerChanges, r.splits)
	}
	if want := min(2, *flagHosts); active < want {
		t.Errorf("only %d host slots delivered anything, want at least %d: %s", active, want, strings.Join(perHost, " "))
	}
	if c.samples < 2 || c.maxLeases == 0 {
		t.Errorf("the lease sampler saw no leases in %d samples", c.samples)
	}
	for _, o := range c.live {
		for _, s := range stopped {
			if o.owner == s {
				t.Errorf("lease %s is still owned by %s after it stopped on SIGINT; a stopped host must release its leases", o.token, s)
			}
		}
	}
	if t.Failed() {
		t.Logf("chaos: run directory %s (use -chaos.keep to keep it)", r.cfg.dir)
	}
}

// hostsDelivered returns the items delivered per slot.
func (r *run) hostsDelivered(led *ledger) map[string]int {
	out := map[string]int{}
	for inst, n := range led.perHost {
		slot, _, _ := strings.Cut(inst, "-")
		out[slot] += n
	}
	return out
}

func (r *run) instanceDeliveries(led *ledger) []string {
	var out []string
	for inst, n := range led.perHost {
		out = append(out, fmt.Sprintf("%s=%d", inst, n))
	}
	sort.Strings(out)
	return out
}

// writeDocs upserts {"id":"d<seq>","seq":seq} for seq 0..k-1, spread evenly over d, with up
// to workers upserts in flight. A failed upsert is retried; one that keeps failing ends the
// write with its error.
func writeDocs(ctx context.Context, c *cosmos.Container, k int, d time.Duration, workers int, written *atomic.Int64) error {
	g, ctx := errgroup.WithContext(ctx)
	seqs := make(chan int)
	g.Go(func() error {
		defer close(seqs)
		start := time.Now()
		for i := range k {
			if wait := time.Until(start.Add(d * time.Duration(i) / time.Duration(k))); wait > 0 {
				select {
				case <-time.After(wait):
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			select {
			case seqs <- i:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	for range max(1, workers) {
		g.Go(func() error {
			for seq := range seqs {
				id := fmt.Sprintf("d%d", seq)
				body := fmt.Appendf(nil, `{"id":%q,"seq":%d,"writtenAt":%q}`, id, seq, time.Now().UTC().Format(time.RFC3339Nano))
				var err error
				for attempt := range 10 {
					if err = c.UpsertItem(ctx, id, body); err == nil || ctx.Err() != nil {
						break
					}
					time.Sleep(time.Duration(attempt+1) * 100 * time.Millisecond)
				}
				if err != nil {
					return fmt.Errorf("upsert seq %d: %w", seq, err)
				}
				written.Add(1)
			}
			return nil
		})
	}
	return g.Wait()
}

// shellQuote quotes s for sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
