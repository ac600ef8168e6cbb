package changefeed_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/cfp-dev/cfp/changefeed"
)

// recordingHook implements every hook interface and keeps what it was told.
type recordingHook struct {
	mu          sync.Mutex
	events      map[changefeed.EventType]int
	eventItems  int
	starts      int
	ends        int
	endItems    int
	endErrs     int
	cycles      int
	cycleErrs   int
	chargeKinds map[changefeed.ChargeKind]float64
	leaseRU     float64
}

func newRecordingHook() *recordingHook {
	return &recordingHook{events: map[changefeed.EventType]int{}, chargeKinds: map[changefeed.ChargeKind]float64{}}
}

func (h *recordingHook) OnEvent(e changefeed.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events[e.Type]++
	if e.Type == changefeed.EventBatch {
		h.eventItems += e.Items
	}
}

func (h *recordingHook) OnBatchStart(changefeed.Batch) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.starts++
}

func (h *recordingHook) OnBatchEnd(b changefeed.Batch, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ends++
	if err != nil {
		h.endErrs++
		return
	}
	h.endItems += len(b.Items)
}

func (h *recordingHook) OnCycleDone(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cycles++
	if err != nil {
		h.cycleErrs++
	}
}

func (h *recordingHook) OnRequestCharge(kind changefeed.ChargeKind, lease string, ru float64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.chargeKinds[kind] += ru
	if lease != "" && kind == changefeed.ChargeChangeFeed {
		h.leaseRU += ru
	}
}

// eventsOnly implements HookEvent alone: the processor calls what a hook implements.
type eventsOnly struct {
	mu sync.Mutex
	n  int
}

func (h *eventsOnly) OnEvent(changefeed.Event) {
	h.mu.Lock()
	h.n++
	h.mu.Unlock()
}

// TestProcessor_Hooks: every hook interface a Config.Hooks value implements is called: each
// batch between OnBatchStart and OnBatchEnd (a failed attempt ends with its error), the batch
// events, the acquire cycles and the request charges of the change-feed reads, by lease; a
// hook with only OnEvent gets the events; Config.OnEvent still works beside them.
func TestProcessor_Hooks(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, 2, nil)
	fx.write(t, 0, 30)
	all, evs := newRecordingHook(), &eventsOnly{}
	var onEvent sync.Mutex
	onEvents := 0
	cfg := fx.config("hooks", "host-a")
	cfg.Hooks = []changefeed.Hook{all, evs, "a value that implements no hook"}
	cfg.OnEvent = func(changefeed.Event) { onEvent.Lock(); onEvents++; onEvent.Unlock() }
	r := newReceived(30)
	var failOnce sync.Once
	p, err := changefeed.NewProcessor(cfg, func(ctx context.Context, b changefeed.Batch) error {
		failed := false
		failOnce.Do(func() { failed = true })
		if failed {
			return errors.New("first attempt fails")
		}
		return r.handle(ctx, b)
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := runAll(context.Background(), p)
	r.wait(t)
	if errs := stop(); errs[0] != nil {
		t.Fatalf("Run: %v", errs[0])
	}

	all.mu.Lock()
	defer all.mu.Unlock()
	if all.starts == 0 || all.starts != all.ends {
		t.Errorf("%d batch starts, %d ends: want as many, at least one", all.starts, all.ends)
	}
	if all.endErrs != 1 {
		t.Errorf("%d batches ended with an error, want the 1 failed attempt", all.endErrs)
	}
	if all.endItems != 30 || all.eventItems != 30 || all.events[changefeed.EventBatch] != all.ends-1 {
		t.Errorf("batches ended with %d items, batch events %d (%d items), want 30 items in %d events",
			all.endItems, all.events[changefeed.EventBatch], all.eventItems, all.ends-1)
	}
	if all.events[changefeed.EventAcquired] != 2 || all.events[changefeed.EventReleased] != 2 {
		t.Errorf("events %v, want 2 leases acquired and released", all.events)
	}
	if all.cycles == 0 || all.cycleErrs != 0 {
		t.Errorf("%d acquire cycles, %d failed: want at least one, none failed", all.cycles, all.cycleErrs)
	}
	if all.leaseRU <= 0 || all.chargeKinds[changefeed.ChargeChangeFeed] < all.leaseRU || len(all.chargeKinds) < 3 {
		t.Errorf("charges %v (change feed by lease %.2f RU): want the change-feed reads by lease and the lease container's requests", all.chargeKinds, all.leaseRU)
	}
	evs.mu.Lock()
	defer evs.mu.Unlock()
	onEvent.Lock()
	defer onEvent.Unlock()
	total := 0
	for _, n := range all.events {
		total += n
	}
	if evs.n != total || onEvents != total {
		t.Errorf("the events-only hook got %d events, Config.OnEvent %d, the full hook %d: want the same", evs.n, onEvents, total)
	}
}
