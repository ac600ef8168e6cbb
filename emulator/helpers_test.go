package emulator_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cfp-dev/cfp/emulator"
	"github.com/cfp-dev/cfp/emulator/auth"
)

// hostSeq gives every client its own endpoint host: azcosmos keeps process-wide
// caches keyed by endpoint (container properties, partition key ranges), which two emulators
// behind one endpoint string would share.
var hostSeq atomic.Int64

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func openEmu(t testing.TB, opts emulator.Options) *emulator.Emulator {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	e, err := emulator.Open(opts)
	if err != nil {
		t.Fatalf("open emulator: %v", err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

func newClient(t testing.TB, e *emulator.Emulator, key string) *azcosmos.Client {
	t.Helper()
	if key == "" {
		key = auth.WellKnownKey
	}
	cred, err := azcosmos.NewKeyCredential(key)
	if err != nil {
		t.Fatal(err)
	}
	endpoint := fmt.Sprintf("http://emu-%d.test/", hostSeq.Add(1))
	c, err := azcosmos.NewClientWithKey(endpoint, cred, &azcosmos.ClientOptions{ClientOptions: azcore.ClientOptions{
		Transport: emulator.Transport{Handler: e.Handler()},
		Retry:     policy.RetryOptions{RetryDelay: time.Millisecond, MaxRetryDelay: 20 * time.Millisecond},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// setupContainer creates database db and container coll partitioned on /pk.
func setupContainer(t testing.TB, c *azcosmos.Client, db, coll string) *azcosmos.ContainerClient {
	t.Helper()
	ctx := context.Background()
	if _, err := c.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: db}, nil); err != nil {
		t.Fatalf("create database: %v", err)
	}
	d, err := c.NewDatabase(db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.CreateContainer(ctx, azcosmos.ContainerProperties{ID: coll, PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/pk"}}}, nil); err != nil {
		t.Fatalf("create container: %v", err)
	}
	cc, err := c.NewContainer(db, coll)
	if err != nil {
		t.Fatal(err)
	}
	return cc
}

type doc struct {
	ID  string `json:"id"`
	PK  string `json:"pk"`
	V   int    `json:"v"`
	RID string `json:"_rid,omitempty"`
	LSN int64  `json:"_lsn,omitempty"`
}

func upsert(t testing.TB, cc *azcosmos.ContainerClient, d doc) {
	t.Helper()
	b, _ := json.Marshal(d)
	if _, err := cc.UpsertItem(context.Background(), azcosmos.NewPartitionKeyString(d.PK), b, nil); err != nil {
		t.Fatalf("upsert %s: %v", d.ID, err)
	}
}

func statusOf(err error) int {
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		return re.StatusCode
	}
	return 0
}

// drainRange reads the change feed of one feed range from a composite continuation (or from the
// beginning when cont is ""), until an empty page; it returns the documents and the last
// continuation.
func drainRange(t testing.TB, cc *azcosmos.ContainerClient, fr *azcosmos.FeedRange, cont string, pageSize int32) ([]doc, string) {
	t.Helper()
	var out []doc
	for i := 0; ; i++ {
		if i > 10000 {
			t.Fatal("change feed did not end")
		}
		opts := &azcosmos.ChangeFeedOptions{MaxItemCount: pageSize}
		if cont != "" {
			opts.Continuation = &cont
		} else {
			opts.FeedRange = fr
		}
		resp, err := cc.ReadChangeFeed(context.Background(), opts)
		if err != nil {
			t.Fatalf("read change feed: %v", err)
		}
		cont = resp.ContinuationToken
		if resp.Count == 0 {
			return out, cont
		}
		for _, raw := range resp.Items {
			var d doc
			if err := json.Unmarshal(raw, &d); err != nil {
				t.Fatal(err)
			}
			out = append(out, d)
		}
	}
}

// drainAll reads every feed range from the beginning.
func drainAll(t testing.TB, cc *azcosmos.ContainerClient) ([]doc, []string) {
	t.Helper()
	frs, err := cc.ReadFeedRanges(context.Background(), nil)
	if err != nil {
		t.Fatalf("read feed ranges: %v", err)
	}
	var all []doc
	var conts []string
	for i := range frs {
		docs, cont := drainRange(t, cc, &frs[i], "", 3)
		all = append(all, docs...)
		conts = append(conts, cont)
	}
	return all, conts
}

// nowContinuation is azcosmos's composite continuation meaning "from now" on feed range fr.
func nowContinuation(collRID string, fr azcosmos.FeedRange) string {
	b, _ := json.Marshal(map[string]any{"version": 1, "resourceId": collRID, "continuation": []map[string]any{
		{"minInclusive": fr.MinInclusive, "maxExclusive": fr.MaxExclusive, "continuationToken": "*"},
	}})
	return string(b)
}

// checkExactlyOnce asserts that got holds each id of want exactly once, at version want[id].
func checkExactlyOnce(t testing.TB, got []doc, want map[string]int) {
	t.Helper()
	seen := map[string]int{}
	for _, d := range got {
		seen[d.ID]++
		if seen[d.ID] > 1 {
			t.Errorf("document %s delivered more than once", d.ID)
		}
		if v, ok := want[d.ID]; !ok {
			t.Errorf("unexpected document %s (v%d)", d.ID, d.V)
		} else if d.V != v {
			t.Errorf("document %s delivered at v%d, want latest v%d", d.ID, d.V, v)
		}
	}
	for id := range want {
		if seen[id] == 0 {
			t.Errorf("document %s missing from the change feed", id)
		}
	}
}

// rawRequest sends a signed request straight to the handler.
func rawRequest(t testing.TB, e *emulator.Emulator, method, path string, hdr map[string]string, body string) (*http.Response, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://raw.test"+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	if err := emulator.SignRequest(req, ""); err != nil {
		t.Fatal(err)
	}
	resp, err := emulator.Transport{Handler: e.Handler()}.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	return resp, b
}
