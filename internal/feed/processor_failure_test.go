package feed_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/feed/feedtest"
	"github.com/cfp-dev/cfp/internal/leases"
)

// poisonError is a delegate's failure with the facts an --exec command gives.
type poisonError struct{ attempts int }

func (poisonError) Error() string   { return "exec for lease 0: command exited with status 3" }
func (poisonError) ExitStatus() int { return 3 }
func (poisonError) StderrTail() []string {
	return []string{"reading order o2", "poison: AccountKey=c2VjcmV0 field total is not a number"}
}
func (e poisonError) FailedAttempts() int { return e.attempts }

// poisoned reports whether a batch holds the document with id "poison".
func poisoned(b feed.Batch) bool {
	for _, it := range b.Items {
		if strings.Contains(string(it), `"id":"poison"`) {
			return true
		}
	}
	return false
}

// estimateOnce is one `cfp estimate`: the leases as stored and one read each.
func estimateOnce(t *testing.T, src feed.Source, store *leases.Store) feed.LeaseLag {
	t.Helper()
	ls, err := store.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	lags, _, err := feed.Estimate(context.Background(), src, ls, feed.EstimateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(lags) != 1 {
		t.Fatalf("%d leases, want 1", len(lags))
	}
	return lags[0]
}

// TestProcessor_HungHandlerIsStuckInOneEstimate: the handler hangs on a poison document. Once
// the batch has been in the handler for the stuck threshold, one estimate (no watch, no memory
// of earlier estimates) says stuck, since the poison document was written, and the lease's
// failure record says the batch is in flight since it was delivered; an error event says so.
func TestProcessor_HungHandlerIsStuckInOneEstimate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		src := feedtest.NewMemSource(1)
		store := leases.NewStore(leases.NewMemDocuments("/id"), testPrefix, leases.StoreOptions{})
		events := make(chan feed.Event, 100)
		h := feed.HandlerFunc(func(ctx context.Context, b feed.Batch) error {
			if poisoned(b) {
				<-ctx.Done()
				return ctx.Err()
			}
			return nil
		})
		p, err := feed.NewProcessor(src, store, h, feed.ProcessorOptions{Instance: "a", StartFrom: feed.StartFrom{Kind: feed.StartBeginning},
			Notify: func(e feed.Event) {
				if e.Type == feed.EventError {
					events <- e
				}
			}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := src.Write("a", []byte(`{"id":"o1"}`)); err != nil {
			t.Fatal(err)
		}
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- p.Run(runCtx) }()
		time.Sleep(2 * feed.DefaultAcquireInterval)
		synctest.Wait()
		if l := estimateOnce(t, src, store); l.Verdict != feed.VerdictIdle {
			t.Fatalf("before the poison: %s, want idle", l.Verdict)
		}

		written := time.Now()
		if _, err := src.Write("a", []byte(`{"id":"poison"}`)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(feed.DefaultStuckThreshold / 2)
		synctest.Wait()
		if l := estimateOnce(t, src, store); l.Verdict == feed.VerdictStuck {
			t.Fatalf("stuck after %s, before the threshold %s", feed.DefaultStuckThreshold/2, feed.DefaultStuckThreshold)
		}
		time.Sleep(feed.DefaultStuckThreshold)
		synctest.Wait()
		l := estimateOnce(t, src, store)
		if l.Verdict != feed.VerdictStuck || l.Progress != feed.ProgressStuck {
			t.Fatalf("one estimate %s after the poison: verdict %s, progress %s; want stuck", time.Since(written), l.Verdict, l.Progress)
		}
		if want := written.Truncate(time.Second); !l.Since.Equal(want) || l.StuckFor < feed.DefaultStuckThreshold {
			t.Errorf("stuck since %v for %s, want since %v (the poison's _ts)", l.Since, l.StuckFor, want)
		}
		f := l.Failure
		if f == nil || f.InFlightSince == nil || f.InFlightSince.Before(written) || !strings.Contains(f.Error, "not returned") {
			t.Fatalf("failure record %+v, want the batch in flight since after %v", f, written)
		}
		select {
		case e := <-events:
			var inflight *feed.InFlightError
			if !errors.As(e.Err, &inflight) || e.Cause != feed.CauseUser {
				t.Errorf("event %+v, want an in-flight error of cause user", e)
			}
		default:
			t.Error("no error event for the batch in flight")
		}
		cancel()
		<-done
	})
}

// TestProcessor_FailingHandlerIsRecordedOnTheLease: a delegate fails on a poison document until
// the host stops on it (the error policy's feed.Stop). One estimate afterwards says failing,
// with the delegate's error, exit status, the end of its stderr with the key redacted, the
// attempts and since when, although no host owns the lease any more.
func TestProcessor_FailingHandlerIsRecordedOnTheLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		src := feedtest.NewMemSource(1)
		store := leases.NewStore(leases.NewMemDocuments("/id"), testPrefix, leases.StoreOptions{})
		calls := 0
		h := feed.HandlerFunc(func(ctx context.Context, b feed.Batch) error {
			if !poisoned(b) {
				return nil
			}
			calls++
			if calls < 3 {
				return poisonError{attempts: 1}
			}
			return feed.Stop(poisonError{attempts: 2})
		})
		redact := func(s string) string { return strings.ReplaceAll(s, "c2VjcmV0", "[REDACTED]") }
		p, err := feed.NewProcessor(src, store, h, feed.ProcessorOptions{Instance: "a", StartFrom: feed.StartFrom{Kind: feed.StartBeginning}, Redact: redact})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := src.Write("a", []byte(`{"id":"o1"}`)); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- p.Run(ctx) }()
		time.Sleep(2 * feed.DefaultAcquireInterval)
		synctest.Wait()
		first := time.Now()
		if _, err := src.Write("a", []byte(`{"id":"poison"}`)); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err == nil {
			t.Fatal("Run() = nil, want the stop error")
		}
		l := estimateOnce(t, src, store)
		if l.Verdict != feed.VerdictFailing || l.State != leases.StateUnowned {
			t.Fatalf("verdict %s, state %s; want failing, unowned", l.Verdict, l.State)
		}
		f := l.Failure
		if f == nil {
			t.Fatal("no failure record")
		}
		if f.ExitStatus == nil || *f.ExitStatus != 3 || f.Attempts != 4 || !strings.Contains(f.Error, "status 3") || f.Since.Before(first) || !l.Since.Equal(f.Since) {
			t.Errorf("failure %+v (exit %v), want exit 3 after 4 attempts since after %v", f, f.ExitStatus, first)
		}
		if got := strings.Join(f.Stderr, "|"); got != "reading order o2|poison: AccountKey=[REDACTED] field total is not a number" {
			t.Errorf("stderr %q", got)
		}
	})
}

// failureWrites counts the lease writes that change the failure record.
type failureWrites struct {
	leases.Documents
	mu     sync.Mutex
	last   map[string]string // by document id
	writes int
}

func (d *failureWrites) Replace(ctx context.Context, id, pk, ifMatch string, body []byte) (leases.Document, error) {
	doc, err := d.Documents.Replace(ctx, id, pk, ifMatch, body)
	if err == nil {
		var v struct {
			Properties map[string]string `json:"properties"`
		}
		if json.Unmarshal(body, &v) == nil {
			d.mu.Lock()
			if f := v.Properties[leases.PropFailure]; f != d.last[id] {
				d.last[id] = f
				d.writes++
			}
			d.mu.Unlock()
		}
	}
	return doc, err
}

// TestProcessor_FailureRecordWritesAreBounded: a handler that fails every batch of a lease for
// ten minutes (the host retrying with its backoff) gets its failure recorded at the first
// failure and then at most once per stuck threshold, not once per failure, and the record
// counts every attempt.
func TestProcessor_FailureRecordWritesAreBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		src := feedtest.NewMemSource(1)
		docs := &failureWrites{Documents: leases.NewMemDocuments("/id"), last: map[string]string{}}
		store := leases.NewStore(docs, testPrefix, leases.StoreOptions{})
		var calls atomic.Int64
		h := feed.HandlerFunc(func(context.Context, feed.Batch) error {
			calls.Add(1)
			return errors.New("boom")
		})
		p, err := feed.NewProcessor(src, store, h, feed.ProcessorOptions{Instance: "a", StartFrom: feed.StartFrom{Kind: feed.StartBeginning},
			ErrorBackoff: time.Second, MaxErrorBackoff: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := src.Write("a", []byte(`{"id":"poison"}`)); err != nil {
			t.Fatal(err)
		}
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- p.Run(runCtx) }()
		const run = 10 * time.Minute
		time.Sleep(run)
		synctest.Wait()
		l := estimateOnce(t, src, store)
		cancel()
		<-done
		n, writes := calls.Load(), docs.writes
		t.Logf("%d failed deliveries in %s, %d writes of the failure record", n, run, writes)
		if max := 1 + int(run/feed.DefaultStuckThreshold); writes < 2 || writes > max {
			t.Errorf("%d writes of the failure record, want 2..%d", writes, max)
		}
		if n < int64(3*writes) {
			t.Errorf("only %d failures for %d writes: the test does not show the bound", n, writes)
		}
		if l.Verdict != feed.VerdictFailing || l.Failure == nil || l.Failure.Attempts < int(n)-int(feed.DefaultStuckThreshold/(5*time.Second))-1 {
			t.Errorf("verdict %s, record %+v after %d failures", l.Verdict, l.Failure, n)
		}
	})
}
