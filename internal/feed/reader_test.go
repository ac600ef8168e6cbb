package feed_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/feed/feedtest"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func itemIDs(t testing.TB, items []json.RawMessage) []string {
	t.Helper()
	var out []string
	for _, it := range items {
		var v struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(it, &v); err != nil {
			t.Fatalf("item %s: %v", it, err)
		}
		out = append(out, v.ID)
	}
	return out
}

func write(t testing.TB, src *feedtest.MemSource, pk, id string) int64 {
	t.Helper()
	lsn, err := src.Write(pk, fmt.Appendf(nil, `{"id":%q,"pk":%q}`, id, pk))
	if err != nil {
		t.Fatal(err)
	}
	return lsn
}

func beginning() feed.StartFrom { return feed.StartFrom{Kind: feed.StartBeginning} }

func TestReader_PagesThenCaughtUpThenPoll(t *testing.T) {
	t.Parallel()
	clock := feedtest.NewClock(t0)
	src := feedtest.NewMemSource(1, feedtest.WithClock(clock.Now))
	for i := range 5 {
		write(t, src, "a", fmt.Sprintf("d%d", i))
	}
	r := feed.NewReader(src, feed.ReadRequest{PartitionID: "0", Start: beginning(), MaxItems: 2},
		feed.ReaderOptions{Poll: time.Second, Sleep: clock.Sleep})
	ctx := context.Background()
	var got []string
	for range 3 {
		p, err := r.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Items) == 0 {
			t.Fatalf("empty page before the end; got %v so far", got)
		}
		got = append(got, itemIDs(t, p.Items)...)
	}
	if want := []string{"d0", "d1", "d2", "d3", "d4"}; !slices.Equal(got, want) {
		t.Fatalf("items = %v, want %v", got, want)
	}
	if len(clock.Sleeps()) != 0 {
		t.Fatalf("slept between non-empty pages: %v", clock.Sleeps())
	}
	p, err := r.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Items) != 0 || !p.NotModified {
		t.Fatalf("want caught-up page, got %+v", p)
	}
	if len(clock.Sleeps()) != 0 {
		t.Fatal("slept before returning the caught-up page")
	}
	if r.Continuation() != `"5"` {
		t.Fatalf("continuation = %q", r.Continuation())
	}
	write(t, src, "a", "d5")
	p, err = r.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := itemIDs(t, p.Items); !slices.Equal(got, []string{"d5"}) {
		t.Fatalf("after poll: %v", got)
	}
	if s := clock.Sleeps(); !slices.Equal(s, []time.Duration{time.Second}) {
		t.Fatalf("sleeps = %v, want one poll interval", s)
	}
}

func TestReader_ThrottleBackoff(t *testing.T) {
	t.Parallel()
	clock := feedtest.NewClock(t0)
	src := feedtest.NewMemSource(1)
	write(t, src, "a", "d0")
	src.Fail(4, &feed.ThrottledError{Status: 429, RetryAfter: 700 * time.Millisecond})
	r := feed.NewReader(src, feed.ReadRequest{PartitionID: "0", Start: beginning()}, feed.ReaderOptions{
		MinBackoff: 100 * time.Millisecond, MaxBackoff: time.Second, Sleep: clock.Sleep,
		Rand: func() float64 { return 0.5 },
	})
	p, err := r.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := itemIDs(t, p.Items); !slices.Equal(got, []string{"d0"}) {
		t.Fatalf("items = %v", got)
	}
	// 100ms, 200ms, 400ms (+10% jitter) are below RetryAfter; 800ms+80ms is above it; all capped at 1s.
	want := []time.Duration{700 * time.Millisecond, 700 * time.Millisecond, 700 * time.Millisecond, 880 * time.Millisecond}
	if s := clock.Sleeps(); !slices.Equal(s, want) {
		t.Fatalf("sleeps = %v, want %v", s, want)
	}
}

func TestReader_ThrottleGivesUp(t *testing.T) {
	t.Parallel()
	clock := feedtest.NewClock(t0)
	src := feedtest.NewMemSource(1)
	src.Fail(10, &feed.ThrottledError{Status: 429, RetryAfter: 5 * time.Second})
	r := feed.NewReader(src, feed.ReadRequest{PartitionID: "0", Start: beginning()}, feed.ReaderOptions{
		MaxBackoff: 2 * time.Second, MaxThrottleRetries: 2, Sleep: clock.Sleep,
	})
	_, err := r.Next(context.Background())
	var th *feed.ThrottledError
	if !errors.As(err, &th) {
		t.Fatalf("err = %v, want throttled", err)
	}
	if s := clock.Sleeps(); !slices.Equal(s, []time.Duration{5 * time.Second, 5 * time.Second}) {
		t.Fatalf("sleeps = %v: RetryAfter above the cap must still be honoured", s)
	}
}

func TestReader_RangeGoneKeepsPosition(t *testing.T) {
	t.Parallel()
	src := feedtest.NewMemSource(1)
	for i := range 3 {
		write(t, src, fmt.Sprint(i), fmt.Sprintf("d%d", i))
	}
	r := feed.NewReader(src, feed.ReadRequest{PartitionID: "0", Start: beginning(), MaxItems: 2}, feed.ReaderOptions{})
	ctx := context.Background()
	if _, err := r.Next(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Split("0"); err != nil {
		t.Fatal(err)
	}
	_, err := r.Next(ctx)
	var gone *feed.RangeGoneError
	if !errors.As(err, &gone) || gone.PartitionID != "0" {
		t.Fatalf("err = %v, want range gone", err)
	}
	if r.Continuation() != `"2"` {
		t.Fatalf("continuation after gone = %q, want the last page's", r.Continuation())
	}
}

func TestReader_OtherErrorsWrappedAndRetryable(t *testing.T) {
	t.Parallel()
	src := feedtest.NewMemSource(1)
	write(t, src, "a", "d0")
	boom := errors.New("connection reset")
	src.Fail(1, boom)
	r := feed.NewReader(src, feed.ReadRequest{PartitionID: "0", Start: beginning()}, feed.ReaderOptions{})
	ctx := context.Background()
	if _, err := r.Next(ctx); !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	p, err := r.Next(ctx)
	if err != nil || len(p.Items) != 1 {
		t.Fatalf("retry: %+v %v", p, err)
	}
}

func TestReader_CancelDuringPoll(t *testing.T) {
	t.Parallel()
	src := feedtest.NewMemSource(1)
	r := feed.NewReader(src, feed.ReadRequest{PartitionID: "0", Start: beginning()}, feed.ReaderOptions{Poll: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	if _, err := r.Next(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := r.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
}

func TestReader_SeekRewinds(t *testing.T) {
	t.Parallel()
	src := feedtest.NewMemSource(1)
	for i := range 3 {
		write(t, src, "a", fmt.Sprintf("d%d", i))
	}
	r := feed.NewReader(src, feed.ReadRequest{PartitionID: "0", Start: beginning()}, feed.ReaderOptions{})
	ctx := context.Background()
	if _, err := r.Next(ctx); err != nil {
		t.Fatal(err)
	}
	r.Seek(feed.StartFrom{Kind: feed.StartContinuation, Continuation: `"1"`})
	p, err := r.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := itemIDs(t, p.Items); !slices.Equal(got, []string{"d1", "d2"}) {
		t.Fatalf("after seek: %v", got)
	}
}

func BenchmarkReaderThroughput(b *testing.B) {
	src := feedtest.NewMemSource(1)
	const n = 10000
	doc := make([]byte, 0, 256)
	for i := range n {
		doc = fmt.Appendf(doc[:0], `{"id":"d%d","pk":"p%d","payload":"0123456789abcdef0123456789abcdef0123456789abcdef"}`, i, i%50)
		if _, err := src.Write(fmt.Sprintf("p%d", i%50), doc); err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	items := 0
	for b.Loop() {
		r := feed.NewReader(src, feed.ReadRequest{PartitionID: "0", Start: beginning(), MaxItems: 1000}, feed.ReaderOptions{})
		for {
			p, err := r.Next(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if len(p.Items) == 0 {
				break
			}
			items += len(p.Items)
		}
	}
	b.ReportMetric(float64(items)/b.Elapsed().Seconds(), "items/s")
}
