package cosmos

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/emulator"
	"github.com/cfp-dev/cfp/emulator/auth"
	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/testproc"
)

// lockedBuffer is a log sink that the SDK's goroutines may write while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// openLocalLogged opens an embedded-emulator account whose info log goes to the returned
// buffer, with cfg's retry and timeout settings.
func openLocalLogged(t *testing.T, cfg Config) (*Account, *lockedBuffer) {
	t.Helper()
	logs := &lockedBuffer{}
	cfg.LocalDir = t.TempDir()
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	a, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Open(local) error = %v", err)
	}
	t.Cleanup(func() { _ = a.Close() })
	return a, logs
}

// TestRequestPolicy_FaultSchedules injects a fault schedule before the account's first request
// (the account read included) and runs a start-up's reads through it: database and container
// metadata, partition key ranges, a query, a lease read and a change-feed page. Every read
// retries 429 and 503 and succeeds; each retry is logged at info, without the key.
func TestRequestPolicy_FaultSchedules(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		rule emulator.FaultRule
	}{
		{"four 429s at start", emulator.FaultRule{Status: 429, Count: 4, IncludeAccount: true}},
		{"429s with a long retry-after", emulator.FaultRule{Status: 429, Count: 2, RetryAfter: 120 * time.Millisecond, IncludeAccount: true}},
		{"one 503 at start", emulator.FaultRule{Status: 503, Count: 1, IncludeAccount: true}},
		{"three 503s at start", emulator.FaultRule{Status: 503, Count: 3, IncludeAccount: true}},
		{"slow answers", emulator.FaultRule{Latency: 20 * time.Millisecond, Count: 3, IncludeAccount: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a, logs := openLocalLogged(t, Config{LocalPartitions: 2})
			if err := a.Emulator().InjectFaults(tc.rule); err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			// The first requests: the account read, then the database read.
			if err := a.CreateDatabaseIfNotExists(ctx, "db"); err != nil {
				t.Fatalf("CreateDatabaseIfNotExists() through %s: %v", tc.name, err)
			}
			c, err := a.CreateContainerIfNotExists(ctx, "db", "orders", "/pk", nil)
			if err != nil {
				t.Fatalf("CreateContainerIfNotExists() through %s: %v", tc.name, err)
			}
			want := upsert(t, c, somePKs, 0, 4)
			// Reads only from here on: fault them again.
			if err := a.Emulator().InjectFaults(tc.rule); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Info(ctx); err != nil {
				t.Fatalf("Info() through %s: %v", tc.name, err)
			}
			if err := a.Emulator().InjectFaults(tc.rule); err != nil {
				t.Fatal(err)
			}
			parts, err := c.Partitions(ctx)
			if err != nil || len(parts) != 2 {
				t.Fatalf("Partitions() through %s = %d, %v", tc.name, len(parts), err)
			}
			if err := a.Emulator().InjectFaults(tc.rule); err != nil {
				t.Fatal(err)
			}
			n := 0
			if err := c.Query(ctx, "SELECT * FROM c", nil, func([]byte) error { n++; return nil }); err != nil || n != len(want) {
				t.Fatalf("Query() through %s = %d, %v", tc.name, n, err)
			}
			if err := a.Emulator().InjectFaults(tc.rule); err != nil {
				t.Fatal(err)
			}
			docs := a.LeaseDocuments("db", "orders")
			if _, err := docs.QueryPrefix(ctx, "doc-"); err != nil {
				t.Fatalf("QueryPrefix() through %s: %v", tc.name, err)
			}
			if err := a.Emulator().InjectFaults(tc.rule); err != nil {
				t.Fatal(err)
			}
			got := 0
			for _, p := range parts {
				page, err := c.ReadPage(ctx, feed.ReadRequest{PartitionID: p.ID, Start: feed.StartFrom{Kind: feed.StartBeginning}})
				if err != nil {
					t.Fatalf("ReadPage(%s) through %s: %v", p.ID, tc.name, err)
				}
				got += len(page.Items)
			}
			if got != len(want) {
				t.Fatalf("ReadPage() read %d items, want %d", got, len(want))
			}
			out := logs.String()
			retries := strings.Count(out, "msg=\"retrying request\"")
			if tc.rule.Status != 0 && retries < 6*tc.rule.Count {
				t.Errorf("%d retries logged, want at least %d:\n%s", retries, 6*tc.rule.Count, out)
			}
			if tc.rule.Status == 503 && !strings.Contains(out, "reason=\"service unavailable\"") {
				t.Errorf("a 503 retry is not logged as service unavailable:\n%s", out)
			}
			if strings.Contains(out, auth.WellKnownKey) || strings.Contains(out, "Authorization") {
				t.Errorf("the retry log holds a credential:\n%s", out)
			}
		})
	}
}

// TestRequestPolicy_WritesAndBudget: a 503 on a write is not retried (the service may have done
// it) and says "service unavailable"; more 429s than the retry budget end in a ThrottledError
// with the service's retry-after.
func TestRequestPolicy_WritesAndBudget(t *testing.T) {
	t.Parallel()
	a, _ := openLocalLogged(t, Config{LocalPartitions: 1, Retry: RetryOptions{MaxRetries: 2, MinBackoff: time.Millisecond}})
	c := newFeedContainer(t, a)
	ctx := context.Background()
	if err := a.Emulator().InjectFaults(emulator.FaultRule{Status: 503, Count: 1}); err != nil {
		t.Fatal(err)
	}
	err := c.UpsertItem(ctx, "alpha", []byte(`{"id":"x","pk":"alpha"}`))
	var th *feed.ThrottledError
	if !errors.As(err, &th) || th.Status != 503 || !strings.Contains(err.Error(), "service unavailable") || strings.Contains(err.Error(), "throttled") {
		t.Fatalf("UpsertItem() through a 503 error = %v, want a service-unavailable ThrottledError", err)
	}
	if err := a.Emulator().InjectFaults(emulator.FaultRule{Status: 429, Count: 10, RetryAfter: 7 * time.Millisecond, ChangeFeedOnly: true}); err != nil {
		t.Fatal(err)
	}
	_, err = c.ReadPage(ctx, feed.ReadRequest{PartitionID: "0", Start: feed.StartFrom{Kind: feed.StartBeginning}})
	if !errors.As(err, &th) || th.Status != 429 || th.RetryAfter != 7*time.Millisecond {
		t.Fatalf("ReadPage() through ten 429s with 2 retries error = %v, want ThrottledError{429, 7ms}", err)
	}
}

// TestRequestPolicy_Timeout: an endpoint that accepts connections and never answers fails each
// attempt after the request timeout, with a *RequestTimeoutError, instead of hanging.
func TestRequestPolicy_Timeout(t *testing.T) {
	t.Parallel()
	addr := testproc.SilentListener(t)
	a, err := Open(context.Background(), Config{
		Endpoint: "http://" + addr + "/", Key: auth.WellKnownKey,
		RequestTimeout: 150 * time.Millisecond, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = a.Container("db", "orders").Partitions(ctx)
	var te *RequestTimeoutError
	if !errors.As(err, &te) || te.After != 150*time.Millisecond {
		t.Fatalf("Partitions() against a silent endpoint error = %v, want RequestTimeoutError after 150ms", err)
	}
	if ctx.Err() != nil {
		t.Fatalf("Partitions() returned only at the test deadline: %v", err)
	}
}

func TestRequestPolicy_Backoff(t *testing.T) {
	t.Parallel()
	p := newRequestPolicy(slog.New(slog.DiscardHandler), 0, RetryOptions{MinBackoff: 100 * time.Millisecond, MaxBackoff: time.Second})
	cases := []struct {
		n          int
		retryAfter time.Duration
		rand       float64
		want       time.Duration
	}{
		{1, 0, 0.5, 100 * time.Millisecond},
		{2, 0, 0.5, 200 * time.Millisecond},
		{3, 0, 0, 320 * time.Millisecond},                     // 400ms - 20%
		{4, 0, 0.999999, 960 * time.Millisecond},              // 800ms + 20%, just under
		{9, 0, 0.5, time.Second},                              // capped
		{1, 2 * time.Second, 0.5, 2 * time.Second},            // retry-after wins
		{9, 10 * time.Millisecond, 0, 800 * time.Millisecond}, // backoff wins over a short retry-after
	}
	for _, tc := range cases {
		p.rand = func() float64 { return tc.rand }
		got := p.backoff(tc.n, tc.retryAfter).Round(10 * time.Millisecond)
		if got != tc.want {
			t.Errorf("backoff(%d, %s) with jitter %v = %s, want %s", tc.n, tc.retryAfter, tc.rand, got, tc.want)
		}
	}
}
