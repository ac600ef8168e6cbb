package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/feed/dotnettest"
	"github.com/cfp-dev/cfp/internal/feed/feedtest"
	"github.com/cfp-dev/cfp/internal/leases"
)

// .NET's defaults, which both engines run with (scaled).
const (
	acquireReal    = 13 * time.Second
	renewReal      = 17 * time.Second
	expirationReal = 60 * time.Second
	pollReal       = 5 * time.Second
	lockTimeReal   = 30 * time.Second
	sleepTimeReal  = 15 * time.Second
)

// host is one processor instance of either engine.
type host interface {
	owned() int
	kill() // stop at once, release nothing
	stop() // shut down gracefully
}

// engine starts hosts of one kind.
type engine struct {
	name  string
	start func(w *world, instance string) (host, error)
}

var cfpEngine = engine{name: "cfp", start: startCFP}
var dotnetEngine = engine{name: "dotnet", start: startDotNet}

// world is one workload: a source with cfg.leases partitions, a steady writer, a counted lease
// container, and the hosts started on it.
type world struct {
	cfg                        config
	e                          engine
	src                        *feedtest.MemSource
	docs                       *counter
	prefix                     string
	acquire, renew, expiration time.Duration
	poll, lockTime, sleepTime  time.Duration
	lat                        *latencies
	ctx                        context.Context
	cancel                     context.CancelFunc
	writer                     sync.WaitGroup
	hosts                      []host
	spread                     string // how far from balanced the last wait that gave up was
	n                          int
}

// newWorld starts the writer (writes documents per second of wall time) on a fresh source and
// lease container; hosts poll every poll.
func newWorld(ctx context.Context, cfg config, e engine, poll time.Duration, writes float64) (*world, error) {
	w := &world{cfg: cfg, e: e, src: feedtest.NewMemSource(cfg.leases),
		acquire: scaled(cfg, acquireReal), renew: scaled(cfg, renewReal), expiration: scaled(cfg, expirationReal),
		lockTime: scaled(cfg, lockTimeReal), sleepTime: scaled(cfg, sleepTimeReal), poll: poll, lat: &latencies{}}
	if e.name == dotnetEngine.name {
		w.prefix = "scalebenchlocalhost_AAAAAA==_AAAAAAAAAAA="
	} else {
		w.prefix = leases.Prefix("scalebench", "localhost", "db", "coll")
	}
	w.docs = newCounter(leases.NewMemDocuments("/id"), w.prefix, cfg.latency)
	w.ctx, w.cancel = context.WithCancel(ctx)
	w.writer.Add(1)
	go w.write(writes)
	return w, nil
}

// write upserts new documents at rate per second until the world closes.
func (w *world) write(rate float64) {
	defer w.writer.Done()
	const tick = 10 * time.Millisecond
	t := time.NewTicker(tick)
	defer t.Stop()
	due, n := 0.0, 0
	for {
		select {
		case <-w.ctx.Done():
			return
		case <-t.C:
		}
		due += rate * tick.Seconds()
		for ; due >= 1; due-- {
			n++
			id := "d" + strconv.Itoa(n)
			body := fmt.Sprintf(`{"id":%q,"t":%d}`, id, time.Now().UnixNano())
			_, _ = w.src.Write("k"+strconv.Itoa(n), []byte(body))
		}
	}
}

func (w *world) handle(items []json.RawMessage) {
	now := time.Now().UnixNano()
	for _, it := range items {
		var d struct {
			T int64 `json:"t"`
		}
		if json.Unmarshal(it, &d) == nil {
			w.lat.record(d.T, now)
		}
	}
}

// add starts n more hosts and returns them.
func (w *world) add(n int) ([]host, error) {
	var out []host
	for range n {
		h, err := w.e.start(w, fmt.Sprintf("%s-host-%d", w.e.name, w.n))
		if err != nil {
			return nil, err
		}
		w.n++
		out = append(out, h)
		w.hosts = append(w.hosts, h)
	}
	return out, nil
}

// cyclesUntilBalanced waits until hs hold every lease between them, evenly (counts differ by
// at most one), and returns the acquire cycles it took (elapsed / interval, rounded up), or -1
// when it did not happen within cfg.maxCycles. Held is the sum of the hosts' Owned(): when it
// exceeded the leases during the wait (hosts counting leases others hold), w.spread says by
// how much at the peak and for how long at a stretch.
func (w *world) cyclesUntilBalanced(hs []host) float64 {
	return w.cyclesUntilBalancedWithin(hs, w.cfg.maxCycles)
}

// cyclesUntilBalancedWithin is cyclesUntilBalanced giving up after maxCycles.
func (w *world) cyclesUntilBalancedWithin(hs []host, maxCycles int) float64 {
	t0 := time.Now()
	w.spread = ""
	limit := time.Duration(maxCycles) * w.acquire
	peak := 0
	var overSince time.Time
	var overLongest time.Duration
	over := func() string {
		if peak <= w.cfg.leases {
			return ""
		}
		return fmt.Sprintf("; over %d held at a peak of %d, for up to %.1f acquire intervals at a stretch", w.cfg.leases, peak, float64(overLongest)/float64(w.acquire))
	}
	for {
		total, lo, hi := holdings(hs)
		now := time.Now()
		el := now.Sub(t0)
		peak = max(peak, total)
		switch {
		case total <= w.cfg.leases:
			overSince = time.Time{}
		case overSince.IsZero():
			overSince = now
		default:
			overLongest = max(overLongest, now.Sub(overSince))
		}
		if total == w.cfg.leases && hi-lo <= 1 {
			w.spread = strings.TrimPrefix(over(), "; ")
			return math.Ceil(float64(el) / float64(w.acquire))
		}
		if el > limit {
			w.spread = fmt.Sprintf("%d of %d leases held, %d to %d per host", total, w.cfg.leases, lo, hi) + over() + w.unheld(hs)
			return -1
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// untilHeld waits until hs hold every lease between them, at most cfg.maxCycles acquire
// cycles: the latency runs need every lease processed, not balanced (the .NET model rarely is
// within the limit, and waiting for it took a fifth of a default run).
func (w *world) untilHeld(hs []host) {
	limit := time.Now().Add(time.Duration(w.cfg.maxCycles) * w.acquire)
	for time.Now().Before(limit) {
		if total, _, _ := holdings(hs); total >= w.cfg.leases {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// holdings sums the leases hs count as theirs, with the fewest and the most of one host.
func holdings(hs []host) (total, lo, hi int) {
	lo = math.MaxInt
	for _, h := range hs {
		n := h.owned()
		total += n
		lo, hi = min(lo, n), max(hi, n)
	}
	return total, lo, hi
}

func (w *world) sleep(d time.Duration) { time.Sleep(d) }

// close stops every host that is still running, then the writer.
func (w *world) close() {
	var wg sync.WaitGroup
	for _, h := range w.hosts {
		wg.Add(1)
		go func() { defer wg.Done(); h.stop() }()
	}
	wg.Wait()
	w.cancel()
	w.writer.Wait()
}

// ---- cfp

type cfpHost struct {
	p      *feed.Processor
	k      *killable
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

func startCFP(w *world, instance string) (host, error) {
	k := &killable{Documents: w.docs}
	store := leases.NewStore(k, w.prefix, leases.StoreOptions{})
	handler := feed.HandlerFunc(func(_ context.Context, b feed.Batch) error { w.handle(b.Items); return nil })
	p, err := feed.NewProcessor(w.src, store, handler, feed.ProcessorOptions{
		Instance: instance, AcquireInterval: w.acquire, RenewInterval: w.renew, Expiration: w.expiration,
		PollInterval: w.poll, ReleaseTimeout: 5 * time.Second, ShutdownTimeout: 5 * time.Second,
		CheckpointInterval: scaled(w.cfg, w.cfg.checkpoint),
	})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(w.ctx)
	h := &cfpHost{p: p, k: k, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(h.done)
		_ = p.Run(ctx)
	}()
	return h, nil
}

func (h *cfpHost) owned() int {
	select {
	case <-h.done:
		return 0
	default:
	}
	return len(h.p.Owned())
}

func (h *cfpHost) kill() {
	h.k.dead.Store(true)
	h.stop()
}

func (h *cfpHost) stop() {
	h.once.Do(func() {
		h.cancel()
		<-h.done
	})
}

// ---- the .NET model

type dotnetHost struct {
	h       *dotnettest.Host
	started chan error
	once    sync.Once
	stopped atomic.Bool
}

func startDotNet(w *world, instance string) (host, error) {
	k := &killable{Documents: w.docs}
	h := dotnettest.New(w.src, k, dotnettest.Options{
		Instance: instance, Prefix: w.prefix,
		AcquireInterval: w.acquire, RenewInterval: w.renew, Expiration: w.expiration,
		LockTime: w.lockTime, SleepTime: w.sleepTime, PollDelay: w.poll,
		Handle: func(_ context.Context, b dotnettest.Batch) error { w.handle(b.Items); return nil },
	})
	d := &dotnetHost{h: h, started: make(chan error, 1)}
	go func() { d.started <- h.Start(w.ctx) }()
	return d, nil
}

func (d *dotnetHost) owned() int {
	if d.stopped.Load() {
		return 0
	}
	return len(d.h.Owned())
}

func (d *dotnetHost) end(f func()) {
	d.once.Do(func() {
		if err := <-d.started; err == nil {
			f()
		}
		d.stopped.Store(true)
	})
}

func (d *dotnetHost) kill() { d.end(d.h.Kill) }
func (d *dotnetHost) stop() { d.end(d.h.Stop) }

// ---- delivery latency

type latencies struct {
	mu   sync.Mutex
	from int64 // unix ns; 0: not recording
	vals []time.Duration
}

func (l *latencies) start() {
	l.mu.Lock()
	l.from, l.vals = time.Now().UnixNano(), nil
	l.mu.Unlock()
}

func (l *latencies) record(written, now int64) {
	l.mu.Lock()
	if l.from != 0 && written >= l.from {
		l.vals = append(l.vals, time.Duration(now-written))
	}
	l.mu.Unlock()
}

func (l *latencies) result() latencyResult {
	l.mu.Lock()
	v := slices.Clone(l.vals)
	l.mu.Unlock()
	slices.Sort(v)
	r := latencyResult{Documents: len(v)}
	if len(v) == 0 {
		return r
	}
	q := func(p float64) float64 { return ms(v[min(len(v)-1, int(p*float64(len(v))))]) }
	r.P50MS, r.P99MS, r.MaxMS = q(0.50), q(0.99), ms(v[len(v)-1])
	return r
}

// unheld describes up to three lease documents that no cfp host of hs counts as its own, as
// stored (owner, handoff properties, timestamp): what a wait that gave up with a lease unheld
// was waiting for.
func (w *world) unheld(hs []host) string {
	held := map[string]bool{}
	for _, h := range hs {
		c, ok := h.(*cfpHost)
		if !ok {
			return ""
		}
		for _, t := range c.p.Owned() {
			held[t] = true
		}
	}
	docs, err := w.docs.QueryPrefix(context.Background(), w.prefix)
	if err != nil {
		return ""
	}
	var out []string
	for _, d := range docs {
		var l struct {
			LeaseToken string          `json:"LeaseToken"`
			Owner      string          `json:"Owner"`
			Timestamp  string          `json:"timestamp"`
			Properties json.RawMessage `json:"properties"`
		}
		if json.Unmarshal(d.Body, &l) != nil || l.LeaseToken == "" || held[l.LeaseToken] {
			continue
		}
		out = append(out, fmt.Sprintf("lease %s owner %q timestamp %s properties %s", l.LeaseToken, l.Owner, l.Timestamp, l.Properties))
		if len(out) == 3 {
			break
		}
	}
	if len(out) == 0 {
		return ""
	}
	return "; not held: " + strings.Join(out, "; ")
}
