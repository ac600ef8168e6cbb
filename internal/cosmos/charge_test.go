package cosmos

import (
	"context"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/leases"
)

// chargeTally sums charges by kind, and by lease, safely.
type chargeTally struct {
	mu      sync.Mutex
	byKind  map[leases.ChargeKind]float64
	byLease map[string]float64
}

func (c *chargeTally) record(kind leases.ChargeKind, lease string, ru float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.byKind[kind] += ru
	if lease != "" {
		c.byLease[lease] += ru
	}
}

// TestChargeRecorder_ProcessorReportsTheEmulatorsCharges: a processor run over the emulator
// reports, under the context's recorder, exactly the request charges the emulator answered:
// the change-feed reads of the monitored container as change_feed, every request to the lease
// container's documents under a lease kind, with checkpoints and renews among them.
func TestChargeRecorder_ProcessorReportsTheEmulatorsCharges(t *testing.T) {
	t.Parallel()
	// The emulator's charges by class ("feed", "leases"), until the test freezes them: from
	// then on responses carry no charge, so a request cancelled by the end of the run (which
	// the emulator charged but the client never saw) does not make the totals differ.
	var smu sync.Mutex
	served := map[string]float64{}
	frozen := false
	wrap := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			class := ""
			switch {
			case strings.HasPrefix(r.URL.Path, "/dbs/db/colls/orders/docs") && r.Header.Get("A-IM") != "":
				class = "feed"
			case strings.HasPrefix(r.URL.Path, "/dbs/db/colls/leases/docs"):
				class = "leases"
			}
			smu.Lock()
			// The handler spells its header names as the gateway does, in lower case; Get and
			// Del would look for X-Ms-Request-Charge.
			charge := strings.ToLower("X-Ms-Request-Charge")
			if frozen {
				delete(rec.Header(), charge)
			} else if v, err := strconv.ParseFloat(strings.Join(rec.Header()[charge], ""), 64); err == nil && class != "" {
				served[class] += v
			}
			smu.Unlock()
			for k, vs := range rec.Header() {
				w.Header()[k] = vs
			}
			w.WriteHeader(rec.Code)
			_, _ = w.Write(rec.Body.Bytes())
		})
	}
	a, err := Open(context.Background(), Config{LocalDir: t.TempDir(), LocalPartitions: 2,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Wrap: wrap})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	orders := newFeedContainer(t, a)
	ctx := context.Background()
	if _, err := a.CreateContainerIfNotExists(ctx, "db", "leases", "/id", nil); err != nil {
		t.Fatal(err)
	}
	info, err := orders.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	store := leases.NewStore(a.LeaseDocuments("db", "leases"), leases.Prefix("ru", a.Host(), info.DatabaseRID, info.ContainerRID), leases.StoreOptions{})
	want := upsert(t, orders, somePKs, 0, 40)

	tally := &chargeTally{byKind: map[leases.ChargeKind]float64{}, byLease: map[string]float64{}}
	var mu sync.Mutex
	handled := 0
	p, err := feed.NewProcessor(orders, store, feed.HandlerFunc(func(_ context.Context, b feed.Batch) error {
		mu.Lock()
		handled += len(b.Items)
		mu.Unlock()
		return nil
	}), feed.ProcessorOptions{
		Instance: "h1", StartFrom: feed.StartFrom{Kind: feed.StartBeginning}, MaxItems: 10,
		AcquireInterval: 20 * time.Millisecond, RenewInterval: 20 * time.Millisecond, Expiration: 3 * time.Second,
		PollInterval: 5 * time.Millisecond, ErrorBackoff: 5 * time.Millisecond, MaxErrorBackoff: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(leases.WithChargeRecorder(ctx, tally.record))
	runErr := make(chan error, 1)
	go func() { runErr <- p.Run(rctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := handled
		mu.Unlock()
		tally.mu.Lock()
		renewed := tally.byKind[leases.ChargeRenew] > 0
		tally.mu.Unlock()
		if n >= len(want) && renewed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("handled %d of %d changes (renewed: %v)", n, len(want), renewed)
		}
		time.Sleep(10 * time.Millisecond)
	}
	smu.Lock()
	frozen = true
	smu.Unlock()
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-6*math.Max(1, b) }
	// sums returns what the recorder got (change feed, lease container) and what the emulator
	// charged.
	sums := func() (feedRU, leaseRU, servedFeed, servedLeases float64) {
		tally.mu.Lock()
		for k, v := range tally.byKind {
			if k == leases.ChargeChangeFeed {
				feedRU += v
			} else {
				leaseRU += v
			}
		}
		tally.mu.Unlock()
		smu.Lock()
		defer smu.Unlock()
		return feedRU, leaseRU, served["feed"], served["leases"]
	}
	// The requests in flight when the charges froze report theirs soon after.
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if f, l, sf, sl := sums(); near(f, sf) && near(l, sl) {
			break
		}
	}
	stop()
	if err := <-runErr; err != nil {
		t.Fatalf("Run() = %v", err)
	}
	feedRU, leaseRU, servedFeed, servedLeases := sums()
	if feedRU <= 0 || !near(feedRU, servedFeed) {
		t.Errorf("change_feed RU = %v, want the emulator's change-feed charges %v", feedRU, servedFeed)
	}
	tally.mu.Lock()
	defer tally.mu.Unlock()
	if !near(leaseRU, servedLeases) {
		t.Errorf("lease RU = %v by kind %v, want the emulator's lease-container charges %v", leaseRU, tally.byKind, servedLeases)
	}
	// 40 documents in batches of at most 10 on 2 partitions: at least 4 checkpoints, each a
	// replace of a lease document, which costs more than the 1 KB create's 4.95 RU.
	for _, k := range []leases.ChargeKind{leases.ChargeCheckpoint, leases.ChargeRenew, leases.ChargeAcquire, leases.ChargeLeaseList} {
		if tally.byKind[k] <= 0 {
			t.Errorf("%s RU = 0, want > 0 (by kind %v)", k, tally.byKind)
		}
	}
	if got := tally.byKind[leases.ChargeCheckpoint]; got < 4*4.95 {
		t.Errorf("checkpoint RU = %v, want at least 4 lease replaces of 4.95 RU or more", got)
	}
	if len(tally.byLease) != 2 {
		t.Errorf("RU by lease = %v, want the 2 leases", tally.byLease)
	}
}
