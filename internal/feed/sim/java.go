package sim

import (
	"context"
	"encoding/json"
	"hash/fnv"
	"math/rand/v2"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/feed/javatest"
	"github.com/cfp-dev/cfp/internal/leases"
)

// Java is the kind of a model Java v4 host (javatest): EPK leases, latest version. A lease set
// is in .NET's format or in Java's (feed.LeaseFormat), never both, so a run has .NET hosts or
// Java hosts beside its cfp hosts (Options.Peer), and its cfp hosts bootstrap in the format of
// that peer.
const Java = DotNet + 1

// javaTick is the Java host's 100 ms polling step: a supervisor notices a lost lease or a
// shutdown up to one tick late.
const javaTick = 100 * time.Millisecond

// startJava starts (or restarts) a model Java host.
func (w *World) startJava(name string, t Timing, skew time.Duration) (*host, error) {
	jit := w.jitter(name)
	t = t.jittered(jit)
	h := &host{name: name, kind: Java, timing: t, skew: skew, io: w.newHostIO(name)}
	seed := fnv.New64a()
	_, _ = seed.Write([]byte(name))
	o := javatest.Options{
		Instance: name, Prefix: Prefix,
		AcquireInterval: t.Acquire, RenewInterval: t.Renew, Expiration: t.Expiration,
		LockTime: jit(3 * time.Second), SleepTime: jit(2 * time.Second), PollDelay: jit(500 * time.Millisecond),
		MaxItems: w.batch, StartFromBeginning: true, Now: h.now,
		Rand: rand.New(rand.NewPCG(seed.Sum64(), 7)),
		HandledGone: func(token string, gone leases.Range, created []leases.Range) {
			w.noteJavaGone(name, token, gone, created)
		},
		ReleaseFailed: w.abandonedBy(h),
		Handle: func(ctx context.Context, b javatest.Batch) error {
			items := make([]json.RawMessage, len(b.Items))
			for i, it := range b.Items {
				items[i] = it
			}
			return w.handle(ctx, h, b.Token, items)
		},
	}
	j := javatest.New(&faultSource{src: w.src, io: h.io}, &faultDocs{docs: w.tracedDocs(name), io: h.io, latency: w.writeLatency(name), lostWrite: w.strandedBy(h)}, o)
	if err := j.Start(context.Background()); err != nil {
		return nil, err
	}
	h.java = j
	w.add(h)
	return h, nil
}

// endJava stops (gracefully, or as a kill) h's Java model host, if it runs one.
func endJava(h *host, e *ended, kill bool) {
	if h.java == nil {
		return
	}
	j := h.java
	h.java = nil
	ch := make(chan struct{})
	go func() {
		if kill {
			j.Kill()
		} else {
			j.Stop()
		}
		close(ch)
	}()
	e.waits = append(e.waits, func() { <-ch })
}

// leaseFormatOf is the format cfp hosts bootstrap in beside peer.
func leaseFormatOf(peer Kind) feed.LeaseFormat {
	if peer == Java {
		return feed.LeaseFormatJava
	}
	return feed.LeaseFormatDefault
}

// javaBelievesItOwns reports whether h is a Java host that may be processing a lease it never
// owned: Java's lease updater returns its cached copy without an error after six 412s in a
// row (DocumentServiceLeaseUpdaterImpl.updateLease, RETRY_COUNT_ON_CONFLICT), so an acquire
// under a burst of 412s "succeeds" without writing, and the host processes the lease until its
// next renewal reads it (a renew interval later). Excused while the host's lease writes failed
// and one renew interval (and a tick and a batch in flight) after. The caller holds w.mu.
func (h *host) javaBelievesItOwns(now time.Time) bool {
	if h.kind != Java {
		return false
	}
	win := h.timing.Renew + javaTick + slowHandler
	for _, b := range h.blind {
		if b.from.Before(now) && (b.to.IsZero() || now.Sub(b.to) <= win) {
			return true
		}
	}
	return false
}

// noteJavaGone is a Java host's report of a split it handled (javatest.Options.HandledGone).
// Java's children never reach past the gone lease (FeedRangeGoneSplitHandler cuts its range at
// the partitions' bounds), but a Java host handles the gone range of the lease it cached
// without reading the lease again (PartitionControllerImpl.handleFeedRangeGone): a host that
// was frozen while another took the lease and handled its split creates children over keys the
// other host's children cover (or over a partition merged back since, where a lease of the
// same range was deleted). Those keys are Java's own overlap, excused as .NET's is
// (dotnetwide.go); a split of a lease the host still held is not.
func (w *World) noteJavaGone(host, token string, gone leases.Range, created []leases.Range) {
	w.mu.Lock()
	held := w.owner[token].owner == host
	w.mu.Unlock()
	if held || len(created) == 0 {
		return
	}
	w.logf("java %s split gone lease %s over %s, which it no longer held, into %s: Java's own overlap (PartitionControllerImpl.handleFeedRangeGone)",
		host, token, gone.Normal(), rangesString(created))
	w.addWide(created...)
}
