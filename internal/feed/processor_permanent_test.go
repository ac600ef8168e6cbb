package feed_test

import (
	"context"
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

// badRequest is a 400 the service gives for a continuation it refuses: retrying it does not help.
type badRequest struct{}

func (badRequest) Error() string {
	return "read change feed: HTTP 400 BadRequest: invalid continuation"
}
func (badRequest) Permanent() bool { return true }

// failingSource fails every read with readErr, and the partition listing with listErr, once
// armed.
type failingSource struct {
	feed.Source
	armed   atomic.Bool
	readErr error
	listErr error
}

func (s *failingSource) ReadPage(ctx context.Context, req feed.ReadRequest) (feed.Page, error) {
	if s.armed.Load() {
		return feed.Page{}, s.readErr
	}
	return s.Source.ReadPage(ctx, req)
}

func (s *failingSource) Partitions(ctx context.Context) ([]feed.Partition, error) {
	if s.armed.Load() && s.listErr != nil {
		return nil, s.listErr
	}
	return s.Source.Partitions(ctx)
}

// cycleLog records what every acquire cycle reported, with the (virtual) time.
type cycleLog struct {
	mu  sync.Mutex
	at  []time.Time
	err []error
}

func (c *cycleLog) add(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at = append(c.at, time.Now())
	c.err = append(c.err, err)
}

func (c *cycleLog) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.at)
}

// firstFailingAfter returns when the first cycle after t reported a *ReadsFailingError.
func (c *cycleLog) firstFailingAfter(t time.Time) (time.Time, *feed.ReadsFailingError) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, at := range c.at {
		var rf *feed.ReadsFailingError
		if at.After(t) && errors.As(c.err[i], &rf) {
			return at, rf
		}
	}
	return time.Time{}, nil
}

// TestProcessor_PermanentReadErrorsFailTheCycleWithinOneAcquireInterval: a lease whose reads
// fail with an error retrying does not fix (a 400) was retried for ever as an infrastructure
// error while the host looked healthy. Now every acquire cycle reports a *ReadsFailingError
// (readiness turns red) within one acquire interval, the error events say Permanent, and the
// cycles report nil again once reads work. A transient error (throttling) does neither.
func TestProcessor_PermanentReadErrorsFailTheCycleWithinOneAcquireInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, tc := range []struct {
			name      string
			err       error
			permanent bool
		}{
			{"bad request", badRequest{}, true},
			{"throttled", &feed.ThrottledError{Status: 429, RetryAfter: time.Second}, false},
		} {
			src := &failingSource{Source: feedtest.NewMemSource(2), readErr: tc.err}
			opts := feed.ProcessorOptions{Instance: "a", StartFrom: feed.StartFrom{Kind: feed.StartBeginning}} // default intervals
			cy := &cycleLog{}
			opts.OnAcquireCycle = cy.add
			ev := &events{}
			opts.Notify = ev.add
			p, err := feed.NewProcessor(src, leases.NewStore(leases.NewMemDocuments("/id"), testPrefix, leases.StoreOptions{}),
				feed.HandlerFunc(func(context.Context, feed.Batch) error { return nil }), opts)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- p.Run(ctx) }()
			time.Sleep(2 * feed.DefaultAcquireInterval)
			synctest.Wait()
			if len(p.Owned()) != 2 {
				t.Fatalf("%s: owned %v, want both leases", tc.name, p.Owned())
			}

			// Arm just after a cycle: the worst phase, the failing reads then meet the next cycle
			// a whole acquire interval later, whatever the bootstrap's length set the phase to.
			for n := cy.len(); cy.len() == n; {
				time.Sleep(10 * time.Millisecond)
			}
			armed := time.Now()
			src.armed.Store(true)
			time.Sleep(3 * feed.DefaultAcquireInterval)
			synctest.Wait()
			at, rf := cy.firstFailingAfter(armed)
			if !tc.permanent {
				if rf != nil {
					t.Errorf("%s: a cycle reported %v for a transient error", tc.name, rf)
				}
			} else {
				if rf == nil {
					t.Fatalf("%s: no cycle reported the failing reads within 3 acquire intervals", tc.name)
				}
				t.Logf("%s: the first cycle reporting the failing reads came %s after the reads failed", tc.name, at.Sub(armed))
				if d := at.Sub(armed); d > feed.DefaultAcquireInterval {
					t.Errorf("%s: the first cycle reporting the failing reads came %s after the reads failed, want within one acquire interval (%s)", tc.name, d, feed.DefaultAcquireInterval)
				}
				if len(rf.Leases) != 2 {
					t.Errorf("%s: failing leases %v, want both", tc.name, rf.Leases)
				}
			}
			permanent := 0
			for _, e := range ev.of(feed.EventError) {
				if e.Permanent {
					permanent++
				}
			}
			if (permanent > 0) != tc.permanent {
				t.Errorf("%s: %d error events marked permanent, want some: %v", tc.name, permanent, tc.permanent)
			}

			// Reads work again: the cycles report nil again.
			src.armed.Store(false)
			time.Sleep(2 * feed.DefaultMaxErrorBackoff)
			synctest.Wait()
			healed := time.Now()
			time.Sleep(2 * feed.DefaultAcquireInterval)
			synctest.Wait()
			if _, rf := cy.firstFailingAfter(healed); rf != nil {
				t.Errorf("%s: a cycle still reports %v after reads work again", tc.name, rf)
			}
			cancel()
			if err := <-done; err != nil {
				t.Errorf("%s: Run() = %v", tc.name, err)
			}
		}
	})
}

// TestProcessor_DeletedMonitoredContainerEndsRun: when the reads answer not found and so
// does the partition listing (the monitored container was deleted), Run stops every worker,
// releases the leases and returns a *MonitoredGoneError, instead of retrying for ever.
func TestProcessor_DeletedMonitoredContainerEndsRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		notFound := func() error { return errors.Join(errors.New("read change feed of shop/orders"), leases.ErrNotFound) }
		src := &failingSource{Source: feedtest.NewMemSource(2), readErr: notFound(), listErr: notFound()}
		docs := leases.NewMemDocuments("/id")
		store := leases.NewStore(docs, testPrefix, leases.StoreOptions{})
		opts := feed.ProcessorOptions{Instance: "a", StartFrom: feed.StartFrom{Kind: feed.StartBeginning}}
		p, err := feed.NewProcessor(src, store, feed.HandlerFunc(func(context.Context, feed.Batch) error { return nil }), opts)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- p.Run(context.Background()) }()
		time.Sleep(2 * feed.DefaultAcquireInterval)
		synctest.Wait()
		if len(p.Owned()) != 2 {
			t.Fatalf("owned %v, want both leases", p.Owned())
		}
		src.armed.Store(true)
		select {
		case err := <-done:
			var gone *feed.MonitoredGoneError
			if !errors.As(err, &gone) || !errors.Is(err, leases.ErrNotFound) {
				t.Fatalf("Run() = %v, want a *MonitoredGoneError", err)
			}
		case <-time.After(10 * time.Minute):
			t.Fatal("Run did not return within 10 minutes of the container's deletion")
		}
		ls, err := store.List(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range ls {
			if l.Owner != "" {
				t.Errorf("lease %s still owned by %q after Run returned", l.Token, l.Owner)
			}
		}
	})
}

// TestProcessor_PermanentReadErrorsShowInTheEstimate: the lease of a host whose reads fail
// permanently looked active to an estimator. The owner now writes the failure into the lease
// (ReadFailure), an estimate shows the lease "failing", and once reads work the mark goes.
func TestProcessor_PermanentReadErrorsShowInTheEstimate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		mem := feedtest.NewMemSource(2)
		src := &failingSource{Source: mem, readErr: badRequest{}}
		store := leases.NewStore(leases.NewMemDocuments("/id"), testPrefix, leases.StoreOptions{})
		p, err := feed.NewProcessor(src, store, feed.HandlerFunc(func(context.Context, feed.Batch) error { return nil }),
			feed.ProcessorOptions{Instance: "a", StartFrom: feed.StartFrom{Kind: feed.StartBeginning}})
		if err != nil {
			t.Fatal(err)
		}
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- p.Run(runCtx) }()
		time.Sleep(2 * feed.DefaultAcquireInterval)
		synctest.Wait()
		estimate := func() []feed.LeaseLag {
			t.Helper()
			ls, err := store.List(ctx)
			if err != nil {
				t.Fatal(err)
			}
			lags, _, err := feed.Estimate(ctx, mem, ls, feed.EstimateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return lags
		}
		for _, l := range estimate() {
			if l.Progress == feed.ProgressFailing {
				t.Fatalf("lease %s failing before any read failed", l.Token)
			}
		}

		src.armed.Store(true)
		time.Sleep(feed.DefaultAcquireInterval)
		synctest.Wait()
		for _, l := range estimate() {
			if l.Progress != feed.ProgressFailing || !strings.Contains(feed.ReadFailure(l.Lease), "HTTP 400") {
				t.Errorf("lease %s: progress %q, failure %q; want failing with the 400", l.Token, l.Progress, feed.ReadFailure(l.Lease))
			}
		}

		src.armed.Store(false)
		time.Sleep(2 * feed.DefaultMaxErrorBackoff)
		synctest.Wait()
		for _, l := range estimate() {
			if l.Progress == feed.ProgressFailing || feed.ReadFailure(l.Lease) != "" {
				t.Errorf("lease %s: progress %q, failure %q after reads work again", l.Token, l.Progress, feed.ReadFailure(l.Lease))
			}
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run() = %v", err)
		}
	})
}
