package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/feed/dotnettest"
	"github.com/cfp-dev/cfp/internal/leases"
)

// errHandler is a failing handler's error.
var errHandler = errors.New("handler failed (injected)")

// handle is every host's handler: the gate (a frozen host's handler call waits, a dead host's
// is not recorded), the ownership check, the injected failure or slowness, then the record.
func (w *World) handle(ctx context.Context, h *host, token string, items []json.RawMessage) error {
	f, err := h.io.enter("handle " + token)
	if err != nil {
		return err
	}
	w.begin(h, token)
	switch f {
	case faultHandlerErr:
		w.mu.Lock()
		w.retries++
		w.mu.Unlock()
		return errHandler
	case faultHandlerSlow:
		t := time.NewTimer(slowHandler)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
	if _, err := h.io.enter("handled " + token); err != nil {
		return err // killed while it worked: nothing it did is visible
	}
	w.deliver(h.name, token, items)
	if w.trace {
		w.logf("deliver %s %s %s", h.name, token, itemsOf(items))
	}
	return nil
}

func (h *host) now() time.Time { return time.Now().Add(h.skew) }

// startCFP starts (or restarts, under the same name) a cfp host.
func (w *World) startCFP(name string, t Timing, skew time.Duration) *host {
	jit := w.jitter(name)
	t = t.jittered(jit)
	h := &host{name: name, kind: CFP, timing: t, skew: skew, io: w.newHostIO(name), done: make(chan error, 1)}
	opts := feed.ProcessorOptions{
		Instance:             name,
		AcquireInterval:      t.Acquire,
		RenewInterval:        t.Renew,
		Expiration:           t.Expiration,
		PollInterval:         jit(500 * time.Millisecond),
		ErrorBackoff:         jit(200 * time.Millisecond),
		MaxErrorBackoff:      jit(2 * time.Second),
		ShutdownTimeout:      jit(5 * time.Second),
		ReleaseTimeout:       jit(5 * time.Second),
		MaxItems:             w.batch,
		StartFrom:            feed.StartFrom{Kind: feed.StartBeginning},
		LeaseFormat:          w.format,
		Now:                  h.now,
		LeaseRand:            w.random(name),
		Logger:               slog.New(rebuffLog{w: w, h: h}),
		ForeignRenewInterval: Base.Renew,
	}
	store := leases.NewStore(&faultDocs{docs: w.tracedDocs(name), io: h.io, latency: w.writeLatency(name)}, Prefix, leases.StoreOptions{Now: h.now})
	p, err := feed.NewProcessor(&faultSource{src: w.src, io: h.io, throttled: w.throttledRead(h)}, store, feed.HandlerFunc(func(ctx context.Context, b feed.Batch) error {
		return w.handle(ctx, h, b.LeaseToken, b.Items)
	}), opts)
	if err != nil {
		w.violate("cfp %s: NewProcessor: %v", name, err)
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() {
		err := p.Run(ctx)
		h.exited.Store(true)
		if err != nil && ctx.Err() == nil {
			w.logf("cfp %s: Run() = %v", name, err)
		}
		h.done <- err
	}()
	w.add(h)
	return h
}

// startDotNet starts (or restarts) a model .NET host. Its StartAsync may fail only under an
// injected fault; the caller retries later.
func (w *World) startDotNet(name string, t Timing, skew time.Duration) (*host, error) {
	jit := w.jitter(name)
	t = t.jittered(jit)
	h := &host{name: name, kind: DotNet, timing: t, skew: skew, io: w.newHostIO(name)}
	o := dotnettest.Options{
		Instance: name, Prefix: Prefix,
		AcquireInterval: t.Acquire, RenewInterval: t.Renew, Expiration: t.Expiration,
		LockTime: jit(3 * time.Second), SleepTime: jit(2 * time.Second), PollDelay: jit(500 * time.Millisecond),
		MaxItems: w.batch, StartFromBeginning: true, Now: h.now,
		Handle: func(ctx context.Context, b dotnettest.Batch) error {
			return w.handle(ctx, h, b.Token, b.Items)
		},
	}
	o.HandledGone = func(token string, gone leases.Range, created []leases.Range) { w.noteGone(name, token, gone, created) }
	o.ReleaseFailed = w.abandonedBy(h)
	if w.trace {
		o.Trace = func(format string, args ...any) { w.logf("trace %s: "+format, append([]any{name}, args...)...) }
	}
	n := dotnettest.New(&faultSource{src: w.src, io: h.io}, &faultDocs{docs: w.tracedDocs(name), io: h.io, latency: w.writeLatency(name), lostWrite: w.strandedBy(h)}, o)
	if err := n.Start(context.Background()); err != nil {
		return nil, err
	}
	h.net = n
	w.add(h)
	return h, nil
}

func (w *World) add(h *host) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.hosts[h.name]; !ok {
		w.order = append(w.order, h.name)
	}
	w.hosts[h.name] = h
}

// ended collects hosts that were stopped or killed, so that the run waits for them.
type ended struct {
	waits []func()
}

// kill abandons h: its requests fail from now on and nothing it does afterwards is seen; its
// leases stay owned until they expire.
func (w *World) kill(h *host, e *ended) {
	h.io.set(dead)
	w.unpauseRecord(h)
	endJava(h, e, true)
	if h.cancel != nil {
		h.cancel()
		h.cancel = nil
		done := h.done
		e.waits = append(e.waits, func() { <-done })
	}
	if h.net != nil {
		n := h.net
		h.net = nil
		ch := make(chan struct{})
		go func() { n.Kill(); close(ch) }()
		e.waits = append(e.waits, func() { <-ch })
	}
}

// stop stops h gracefully: it releases its leases.
func (w *World) stop(h *host, e *ended) {
	endJava(h, e, false)
	if h.cancel != nil {
		h.cancel()
		h.cancel = nil
		done := h.done
		name, faulted := h.name, h.faulted
		e.waits = append(e.waits, func() {
			if err := <-done; err != nil && !faulted {
				w.violate("cfp %s: Run() = %v after a graceful stop", name, err)
			}
		})
	}
	if h.net != nil {
		n := h.net
		h.net = nil
		ch := make(chan struct{})
		go func() { n.Stop(); close(ch) }()
		e.waits = append(e.waits, func() { <-ch })
	}
}

func (w *World) pause(h *host) {
	w.mu.Lock()
	h.pauses = append(h.pauses, span{from: time.Now()})
	w.mu.Unlock()
	h.io.set(paused)
}

func (w *World) resume(h *host) {
	w.unpauseRecord(h)
	if h.io.get() == paused {
		h.io.set(running)
	}
}

func (w *World) unpauseRecord(h *host) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if n := len(h.pauses); n > 0 && h.pauses[n-1].to.IsZero() {
		h.pauses[n-1].to = time.Now()
	}
}

func itemsOf(items []json.RawMessage) string {
	var b []byte
	for _, it := range items {
		var d struct {
			ID  string `json:"id"`
			LSN int64  `json:"_lsn"`
		}
		_ = json.Unmarshal(it, &d)
		b = fmt.Appendf(b, " %s@%d", d.ID, d.LSN)
	}
	return string(b)
}

// setFault changes the fault h is answered with, and records when its lease store failed.
func (w *World) setFault(h *host, f faultKind) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	if n := len(h.blind); n > 0 && h.blind[n-1].to.IsZero() {
		h.blind[n-1].to = now
	}
	switch f {
	case faultLease429, faultLease503, faultLeaseLost:
		h.blind = append(h.blind, span{from: now})
	case faultLease412:
		if h.kind == Java {
			h.blind = append(h.blind, span{from: now}) // its updater gives up silently
		}
	}
	h.io.setFault(f)
}
