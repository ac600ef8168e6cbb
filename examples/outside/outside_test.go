package outside

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cfp-dev/cfp/changefeed"
	"github.com/cfp-dev/cfp/changefeed/changefeedtest"
	"github.com/cfp-dev/cfp/changefeed/prom"
)

func write(t *testing.T, c *azcosmos.ContainerClient, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		pk := fmt.Sprintf("customer-%d", i%23)
		doc := fmt.Sprintf(`{"id":"o%d","pk":%q}`, i, pk)
		if _, err := c.UpsertItem(context.Background(), azcosmos.NewPartitionKeyString(pk), []byte(doc), nil); err != nil {
			t.Fatal(err)
		}
	}
}

// seen keeps the ids the handler was given, and, as a hook placed after the Prometheus one,
// the items of the batch events by lease: once it saw an event, the metrics counted it.
type seen struct {
	mu      sync.Mutex
	ids     map[string]bool
	byLease map[string]int // items of the batch events, by lease token
	items   int
	want    int
	got     chan struct{}
}

func (s *seen) handle(_ context.Context, b changefeed.Batch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, it := range b.Items {
		var d struct{ ID string }
		if err := json.Unmarshal(it, &d); err != nil {
			return err
		}
		s.ids[d.ID] = true
	}
	return nil
}

func (s *seen) OnEvent(e changefeed.Event) {
	if e.Type != changefeed.EventBatch {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.byLease[e.Lease] += e.Items
	s.items += e.Items
	if s.want > 0 && s.items >= s.want {
		s.want = 0
		close(s.got)
	}
}

// await waits until the batch events counted n items.
func (s *seen) await(t *testing.T, n int) {
	t.Helper()
	s.mu.Lock()
	got := make(chan struct{})
	s.want, s.got = n, got
	if s.items >= n {
		s.want = 0
		close(got)
	}
	s.mu.Unlock()
	select {
	case <-got:
	case <-time.After(60 * time.Second):
		s.mu.Lock()
		defer s.mu.Unlock()
		t.Fatalf("%d changes handled in 60s, want %d", s.items, n)
	}
}

// scrape reads the sum of a metric's samples from the metrics endpoint.
func scrape(t *testing.T, base, metric string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sum := 0.0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, metric+"{") {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		sum += v
	}
	return sum
}

func probe(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// TestProcessorWithPrometheus: a processor with the Prometheus hook delivers every change
// across a split of a partition, and its endpoint serves what cfp process serves: the items
// processed by the leases it holds, the leases owned (three once the split partition's lease became two), the split
// as lease moves and the request charges, /readyz 200 while it runs and 503 once it stopped.
func TestProcessorWithPrometheus(t *testing.T) {
	srv := changefeedtest.New(t, &changefeedtest.Options{Partitions: 2})
	client := srv.Client
	orders := srv.Container(t, "shop", "orders", "/pk")
	srv.Container(t, "shop", "leases", "/id")
	cfg := changefeed.Config{
		Monitored:       changefeed.Container{Client: client, Database: "shop", Name: "orders"},
		Leases:          changefeed.Container{Name: "leases"},
		Processor:       "outside",
		Instance:        "host-a",
		StartFrom:       changefeed.Beginning(),
		PollInterval:    20 * time.Millisecond,
		AcquireInterval: 100 * time.Millisecond,
		RenewInterval:   time.Second,
		Expiration:      10 * time.Second,
	}
	s := &seen{ids: map[string]bool{}, byLease: map[string]int{}}
	m := prom.New(cfg)
	cfg.Hooks = append(cfg.Hooks, m, s)
	probes := httptest.NewServer(m.Handler())
	defer probes.Close()

	var mu sync.Mutex
	splits := 0
	cfg.OnEvent = func(e changefeed.Event) {
		if e.Type == changefeed.EventSplit {
			mu.Lock()
			splits++
			mu.Unlock()
		}
	}
	p, err := changefeed.NewProcessor(cfg, s.handle)
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := probe(t, probes.URL+"/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz before Run: %d, want 503", code)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()

	write(t, orders, 0, 60)
	s.await(t, 60)
	children := srv.Split(t, "shop", "orders", "0")
	write(t, orders, 60, 60)
	s.await(t, 120)

	if code, body := probe(t, probes.URL+"/readyz"); code != http.StatusOK {
		t.Errorf("/readyz while running: %d %q, want 200", code, body)
	}
	// The series of a lease go with it: the split partition's lease was released.
	s.mu.Lock()
	if len(s.ids) != 120 {
		t.Errorf("%d distinct changes delivered, want 120", len(s.ids))
	}
	held := 0
	for token, n := range s.byLease {
		if token != "0" {
			held += n
		}
	}
	s.mu.Unlock()
	if got := scrape(t, probes.URL, "cfp_process_items_total"); got != float64(held) {
		t.Errorf("cfp_process_items_total = %v, want the %d items delivered by the leases held", got, held)
	}
	if got := scrape(t, probes.URL, "cfp_process_owned_leases"); got != float64(1+len(children)) {
		t.Errorf("cfp_process_owned_leases = %v, want %d (partition 0 split into %v)", got, 1+len(children), children)
	}
	if got := scrape(t, probes.URL, "cfp_process_request_units_total"); got <= 0 {
		t.Errorf("cfp_process_request_units_total = %v, want the RU spent", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	m.Stop()
	mu.Lock()
	defer mu.Unlock()
	if splits != 1 {
		t.Errorf("%d split events, want 1", splits)
	}
	if code, _ := probe(t, probes.URL+"/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz after Run returned: %d, want 503", code)
	}
}
