package changefeedtest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cfp-dev/cfp/changefeed"
	"github.com/cfp-dev/cfp/changefeed/changefeedtest"
	"github.com/cfp-dev/cfp/emulator"
)

// seen collects the ids a processor delivers and tells when a set of them has arrived.
type seen struct {
	mu   sync.Mutex
	ids  map[string]int
	more chan struct{}
}

func (s *seen) handle(_ context.Context, b changefeed.Batch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, it := range b.Items {
		var d struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(it, &d); err != nil {
			return err
		}
		s.ids[d.ID]++
	}
	select {
	case s.more <- struct{}{}:
	default:
	}
	return nil
}

// waitFor waits until every id o<from>..o<to-1> was delivered.
func (s *seen) waitFor(t *testing.T, from, to int) {
	t.Helper()
	deadline := time.After(2 * time.Minute)
	for {
		s.mu.Lock()
		missing := 0
		for i := from; i < to; i++ {
			if s.ids[fmt.Sprintf("o%d", i)] == 0 {
				missing++
			}
		}
		s.mu.Unlock()
		if missing == 0 {
			return
		}
		select {
		case <-s.more:
		case <-deadline:
			t.Fatalf("%d of the changes o%d..o%d never reached the processor", missing, from, to-1)
		}
	}
}

func write(t *testing.T, orders *azcosmos.ContainerClient, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		pk := fmt.Sprintf("customer-%d", i%7)
		body := fmt.Sprintf(`{"id":"o%d","customer":%q}`, i, pk)
		if _, err := orders.UpsertItem(context.Background(), azcosmos.NewPartitionKeyString(pk), []byte(body), nil); err != nil {
			t.Fatal(err)
		}
	}
}

// The test kit in use: a change feed processor under test keeps delivering every change while
// its partition splits and while the change feed throttles.
func TestExample_ProcessorThroughASplitAndThrottling(t *testing.T) {
	srv := changefeedtest.New(t, &changefeedtest.Options{Partitions: 1})
	orders := srv.Container(t, "shop", "orders", "/customer")
	srv.Container(t, "shop", "leases", "/id")

	got := &seen{ids: map[string]int{}, more: make(chan struct{}, 1)}
	p, err := changefeed.NewProcessor(changefeed.Config{
		Monitored:       changefeed.Container{Client: srv.Client, Database: "shop", Name: "orders"},
		Leases:          changefeed.Container{Name: "leases"},
		Processor:       "billing",
		Instance:        "host-1",
		StartFrom:       changefeed.Beginning(),
		PollInterval:    20 * time.Millisecond,
		AcquireInterval: 100 * time.Millisecond,
	}, got.handle)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("processor: %v", err)
		}
	})

	write(t, orders, 0, 20)
	got.waitFor(t, 0, 20)

	ranges := srv.Ranges(t, "shop", "orders")
	children := srv.Split(t, "shop", "orders", ranges[0])
	if len(children) != 2 || len(srv.Ranges(t, "shop", "orders")) != 2 {
		t.Fatalf("split %s: children %v, live ranges %v", ranges[0], children, srv.Ranges(t, "shop", "orders"))
	}
	write(t, orders, 20, 40)
	got.waitFor(t, 20, 40)

	srv.Fail(t, emulator.FaultRule{Status: http.StatusTooManyRequests, Count: 5, ChangeFeedOnly: true})
	write(t, orders, 40, 60)
	got.waitFor(t, 40, 60)
	if st, err := srv.Emulator.Status(); err != nil || st.FaultRules != 0 {
		t.Fatalf("fault rules left: %+v %v, want the 5 throttles served before the changes came", st.FaultRules, err)
	}
}

// The client over TLS: the kit's certificate is trusted by the client it returns.
func TestNew_TLS(t *testing.T) {
	srv := changefeedtest.New(t, &changefeedtest.Options{TLS: true})
	orders := srv.Container(t, "shop", "orders", "/customer")
	write(t, orders, 0, 1)
	if _, err := orders.ReadItem(context.Background(), azcosmos.NewPartitionKeyString("customer-0"), "o0", nil); err != nil {
		t.Fatal(err)
	}
	if got := srv.Endpoint[:8]; got != "https://" {
		t.Fatalf("endpoint %s, want https", srv.Endpoint)
	}
}
