package changefeed_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cfp-dev/cfp/changefeed"
	"github.com/cfp-dev/cfp/emulator"
	"github.com/cfp-dev/cfp/emulator/auth"
	"github.com/cfp-dev/cfp/internal/account"
)

// fixture is an embedded emulator in process and a user's azcosmos client over it, with the
// database "shop", the monitored container "orders" (partitioned on /pk) and the lease container
// "leases" (on /id).
type fixture struct {
	emu    *emulator.Emulator
	client *azcosmos.Client
	orders *azcosmos.ContainerClient
}

func newFixture(t *testing.T, partitions int, opts *azcosmos.ClientOptions) *fixture {
	t.Helper()
	dir := t.TempDir()
	emu, err := emulator.Open(emulator.Options{Dir: dir, Key: auth.WellKnownKey, Partitions: partitions})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = emu.Close() })
	if opts == nil {
		opts = changefeed.ClientOptions(nil)
	}
	opts.Transport = &emulator.Transport{Handler: emu.Handler()}
	cred, err := azcosmos.NewKeyCredential(auth.WellKnownKey)
	if err != nil {
		t.Fatal(err)
	}
	// Each fixture has an endpoint of its own: azcosmos keeps process-wide caches by endpoint.
	client, err := azcosmos.NewClientWithKey(account.LocalEndpoint(dir), cred, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	ctx := context.Background()
	if _, err := client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "shop"}, nil); err != nil {
		t.Fatal(err)
	}
	db, _ := client.NewDatabase("shop")
	for name, pk := range map[string]string{"orders": "/pk", "leases": "/id"} {
		props := azcosmos.ContainerProperties{ID: name, PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{pk}, Version: 2}}
		if _, err := db.CreateContainer(ctx, props, nil); err != nil {
			t.Fatal(err)
		}
	}
	orders, _ := client.NewContainer("shop", "orders")
	return &fixture{emu: emu, client: client, orders: orders}
}

// write upserts orders o<from> .. o<from+n-1>, spread over partition keys.
func (fx *fixture) write(t *testing.T, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		pk := fmt.Sprintf("customer-%d", i%17)
		doc := fmt.Sprintf(`{"id":"o%d","pk":%q,"n":%d}`, i, pk, i)
		if _, err := fx.orders.UpsertItem(context.Background(), azcosmos.NewPartitionKeyString(pk), []byte(doc), nil); err != nil {
			t.Fatal(err)
		}
	}
}

// config is a processor configuration with short timings.
func (fx *fixture) config(processor, instance string) changefeed.Config {
	return changefeed.Config{
		Monitored:       changefeed.Container{Client: fx.client, Database: "shop", Name: "orders"},
		Leases:          changefeed.Container{Name: "leases"},
		Processor:       processor,
		Instance:        instance,
		StartFrom:       changefeed.Beginning(),
		PollInterval:    20 * time.Millisecond,
		AcquireInterval: 200 * time.Millisecond,
		RenewInterval:   time.Second,
		Expiration:      10 * time.Second,
	}
}

// received collects the ids delivered by handlers.
type received struct {
	mu    sync.Mutex
	count map[string]int
	total int
	full  chan struct{} // closed once want distinct ids arrived
	want  int
}

func newReceived(want int) *received {
	return &received{count: map[string]int{}, full: make(chan struct{}), want: want}
}

func (r *received) handle(_ context.Context, b changefeed.Batch) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, it := range b.Items {
		var doc struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(it, &doc); err != nil {
			return err
		}
		r.count[doc.ID]++
		r.total++
	}
	if len(r.count) >= r.want && r.want > 0 {
		close(r.full)
		r.want = 0
	}
	return nil
}

func (r *received) wait(t *testing.T) {
	t.Helper()
	select {
	case <-r.full:
	case <-time.After(60 * time.Second):
		r.mu.Lock()
		defer r.mu.Unlock()
		t.Fatalf("received %d distinct changes within 60s, want %d", len(r.count), r.want)
	}
}

// runAll runs the processors until stop is called, and returns their Run errors.
func runAll(ctx context.Context, ps ...*changefeed.Processor) (stop func() []error) {
	ctx, cancel := context.WithCancel(ctx)
	errs := make([]error, len(ps))
	var wg sync.WaitGroup
	for i, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = p.Run(ctx)
		}()
	}
	return func() []error {
		cancel()
		wg.Wait()
		return errs
	}
}

// settledGoroutines waits until the calling synctest bubble has at most want goroutines
// (goroutines of the SDK's transport and of stopped timers end a little after their owners), and
// returns their number and, when more are left, their stacks.
func settledGoroutines(want int) (int, string) {
	n, stacks := bubbleGoroutines()
	for i := 0; i < 100 && n > want; i++ {
		time.Sleep(20 * time.Millisecond)
		n, stacks = bubbleGoroutines()
	}
	return n, stacks
}

// bubbleGoroutines counts the goroutines of the calling goroutine's synctest bubble, from the
// runtime's traceback headers ("goroutine 7 [select, synctest bubble 3]:"), and returns their
// stacks. runtime.NumGoroutine counts the whole process, where the runtime's finalizer and cleanup
// goroutines count as user goroutines while they run one (isSystemGoroutine in
// runtime/traceback.go): a collection on a loaded machine adds one at any moment, and the
// bubble's sleeps are virtual, so they give it no real time to end.
func bubbleGoroutines() (int, string) {
	buf := make([]byte, 1<<16)
	for {
		if n := runtime.Stack(buf, true); n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	dump := string(buf)
	self, _, _ := strings.Cut(dump, "\n") // the caller's own goroutine comes first
	_, bubble, ok := strings.Cut(self, ", synctest bubble ")
	if !ok {
		panic("bubbleGoroutines called outside a synctest bubble")
	}
	id := ", synctest bubble " + bubble[:strings.IndexFunc(bubble, func(r rune) bool { return r < '0' || r > '9' })]
	var n int
	var stacks []string
	for _, g := range strings.Split(dump, "\n\n") {
		header, _, _ := strings.Cut(g, "\n")
		if strings.Contains(header, id+"]") || strings.Contains(header, id+" ") {
			n++
			stacks = append(stacks, g)
		}
	}
	return n, strings.Join(stacks, "\n\n")
}

// TestBubbleGoroutines: the goroutine count that the leak checks use counts the bubble's own
// goroutines, and none that start outside it meanwhile (a finalizer's, for one).
func TestBubbleGoroutines(t *testing.T) {
	spawn, spawned, release := make(chan struct{}), make(chan struct{}), make(chan struct{})
	defer close(release)
	go func() { // outside the bubble: starts a goroutine when told to, and stays
		<-spawn
		go func() { <-release }()
		close(spawned)
		<-release
	}()
	synctest.Test(t, func(t *testing.T) {
		before, _ := bubbleGoroutines()
		close(spawn)
		<-spawned
		if after, _ := bubbleGoroutines(); after != before {
			t.Errorf("a goroutine started outside the bubble: %d goroutines before, %d after", before, after)
		}
		stop := make(chan struct{})
		go func() { <-stop }()
		if got, stacks := bubbleGoroutines(); got != before+1 {
			t.Errorf("a goroutine started in the bubble: %d goroutines before, %d after, want %d; stacks:\n%s", before, got, before+1, stacks)
		}
		close(stop)
	})
}

// TestProcessor_TwoHostsThenEstimate: two hosts on one lease container deliver every change,
// stop cleanly (Run returns nil, no goroutine left, every lease released), and the estimator then
// counts exactly the changes written while they were stopped. It is not parallel: it counts
// goroutines (the parallel tests start only once the others finished).
func TestProcessor_TwoHostsThenEstimate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fx := newFixture(t, 4, nil)
		const first, later = 120, 25
		fx.write(t, 0, first)

		before, _ := bubbleGoroutines()
		got := newReceived(first)
		var events sync.Map // EventType -> true
		var ps []*changefeed.Processor
		for _, inst := range []string{"host-a", "host-b"} {
			cfg := fx.config("billing", inst)
			cfg.OnEvent = func(e changefeed.Event) { events.Store(e.Type, true) }
			p, err := changefeed.NewProcessor(cfg, got.handle)
			if err != nil {
				t.Fatal(err)
			}
			ps = append(ps, p)
		}
		stop := runAll(context.Background(), ps...)
		got.wait(t)
		for i, err := range stop() {
			if err != nil {
				t.Errorf("processor %d Run() = %v, want nil after its context ended", i, err)
			}
		}
		if after, stacks := settledGoroutines(before); after > before {
			t.Errorf("goroutines: %d before the processors, %d after Run returned:\n%s", before, after, stacks)
		}
		got.mu.Lock()
		for i := 0; i < first; i++ {
			if got.count[fmt.Sprintf("o%d", i)] == 0 {
				t.Errorf("change o%d was never delivered", i)
			}
		}
		if got.total != first {
			t.Logf("%d deliveries of %d changes (at least once)", got.total, first)
		}
		got.mu.Unlock()
		for _, typ := range []changefeed.EventType{changefeed.EventAcquired, changefeed.EventBatch, changefeed.EventCheckpoint, changefeed.EventReleased} {
			if _, ok := events.Load(typ); !ok {
				t.Errorf("no %s event was notified", typ)
			}
		}

		fx.write(t, first, later)
		time.Sleep(time.Second) // the bubble's clock: the changes are a second old when estimated
		est, err := changefeed.NewEstimator(fx.config("billing", ""))
		if err != nil {
			t.Fatal(err)
		}
		e, err := est.Estimate(context.Background())
		if err != nil {
			t.Fatalf("Estimate() error = %v", err)
		}
		if e.TotalLag != later {
			t.Errorf("Estimate().TotalLag = %d, want %d (the changes written while no host ran): %+v", e.TotalLag, later, e.Leases)
		}
		if len(e.Leases) != 4 {
			t.Errorf("Estimate() has %d leases, want 4 (one per partition)", len(e.Leases))
		}
		var sum int64
		for _, l := range e.Leases {
			sum += l.Lag
			if l.State != changefeed.LeaseUnowned || !l.Estimated || l.Continuation == "" {
				t.Errorf("lease %s = %+v, want released (unowned), measured, with a continuation", l.Lease, l)
			}
			if l.Lag > 0 && l.TimeLag < time.Second {
				t.Errorf("lease %s has lag %d but a time lag of %s, want at least the second since the write", l.Lease, l.Lag, l.TimeLag)
			}
		}
		if sum != e.TotalLag {
			t.Errorf("the leases' lags add up to %d, TotalLag is %d", sum, e.TotalLag)
		}

		// The lease-level estimate, as cfp estimate uses it: the same lags, each lease judged
		// (released with changes pending: stalled), a subset estimated on its own.
		ls, err := est.Leases(context.Background())
		if err != nil {
			t.Fatalf("Leases() error = %v", err)
		}
		lags, total, err := est.EstimateLeases(context.Background(), ls, changefeed.EstimateOptions{Formula: changefeed.FormulaDotNet})
		if err != nil {
			t.Fatalf("EstimateLeases() error = %v", err)
		}
		if total.TotalLag != later || changefeed.Summarize(lags).TotalLag != later {
			t.Errorf("EstimateLeases() total lag = %d (Summarize %d), want %d", total.TotalLag, changefeed.Summarize(lags).TotalLag, later)
		}
		for i, l := range lags {
			want := changefeed.VerdictIdle
			if l.Lag > 0 {
				want = changefeed.VerdictStalled
			}
			if l.Token != e.Leases[i].Lease || l.Lag != e.Leases[i].Lag || l.Verdict != want {
				t.Errorf("EstimateLeases() lease %d = %s lag %d verdict %q, want %s lag %d verdict %q", i, l.Token, l.Lag, l.Verdict, e.Leases[i].Lease, e.Leases[i].Lag, want)
			}
		}
		one, _, err := est.EstimateLeases(context.Background(), ls[1:2], changefeed.EstimateOptions{})
		if err != nil || len(one) != 1 || one[0].Token != lags[1].Token || one[0].Lag != lags[1].Lag {
			t.Errorf("EstimateLeases(one lease) = %+v, %v, want lease %s alone with lag %d", one, err, lags[1].Token, lags[1].Lag)
		}
	})
}

// TestProcessor_HandlerErrorRedelivers: a handler error delivers the same changes again, with
// Attempt counting, and the error is notified with CauseUser.
func TestProcessor_HandlerErrorRedelivers(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		fx := newFixture(t, 1, nil)
		fx.write(t, 0, 5)
		boom := errors.New("boom")
		var mu sync.Mutex
		var attempts []int
		var firstItems, againItems string
		done := make(chan struct{})
		var userErr error
		cfg := fx.config("retry", "host-a")
		cfg.OnEvent = func(e changefeed.Event) {
			if e.Type == changefeed.EventError && e.Cause == changefeed.CauseUser {
				mu.Lock()
				userErr = e.Err
				mu.Unlock()
			}
		}
		p, err := changefeed.NewProcessor(cfg, func(_ context.Context, b changefeed.Batch) error {
			mu.Lock()
			defer mu.Unlock()
			attempts = append(attempts, b.Attempt)
			items := fmt.Sprint(len(b.Items), string(b.Items[0]))
			if b.Attempt == 1 {
				firstItems = items
				return boom
			}
			if againItems == "" {
				againItems = items
				close(done)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		stop := runAll(context.Background(), p)
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			t.Fatal("the batch was not delivered again within 60s")
		}
		if errs := stop(); errs[0] != nil {
			t.Fatalf("Run() = %v", errs[0])
		}
		mu.Lock()
		defer mu.Unlock()
		if attempts[0] != 1 || attempts[1] != 2 {
			t.Errorf("attempts = %v, want 1 then 2", attempts)
		}
		if firstItems != againItems {
			t.Errorf("the second delivery = %s, want the first one again: %s", againItems, firstItems)
		}
		if !errors.Is(userErr, boom) {
			t.Errorf("the error event's Err = %v, want the handler's error", userErr)
		}
	})
}

// TestProcessor_StopFromHandler: Stop(err) ends Run with a *StopError that unwraps to err.
func TestProcessor_StopFromHandler(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		fx := newFixture(t, 1, nil)
		fx.write(t, 0, 3)
		cause := errors.New("disk full")
		p, err := changefeed.NewProcessor(fx.config("stop", "host-a"), func(context.Context, changefeed.Batch) error {
			return changefeed.Stop(cause)
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		err = p.Run(ctx)
		var stop *changefeed.StopError
		if !errors.Is(err, cause) || !errors.As(err, &stop) {
			t.Fatalf("Run() = %v, want a *StopError wrapping %v", err, cause)
		}
	})
}

// TestProcessor_ModeMismatch: a processor refuses a lease set of the other mode, with an error
// that errors.Is and errors.As recognise.
func TestProcessor_ModeMismatch(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		fx := newFixture(t, 2, nil)
		fx.write(t, 0, 2)
		got := make(chan struct{}, 1)
		cfg := fx.config("audit", "host-a")
		cfg.OnEvent = func(e changefeed.Event) {
			if e.Type == changefeed.EventAcquired {
				select {
				case got <- struct{}{}:
				default:
				}
			}
		}
		latest, err := changefeed.NewProcessor(cfg, func(context.Context, changefeed.Batch) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		stop := runAll(context.Background(), latest)
		<-got
		if errs := stop(); errs[0] != nil {
			t.Fatal(errs[0])
		}

		cfg = fx.config("audit", "host-b")
		cfg.Mode, cfg.StartFrom = changefeed.AllVersionsAndDeletes, changefeed.Now()
		all, err := changefeed.NewProcessor(cfg, func(context.Context, changefeed.Batch) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		err = all.Run(context.Background())
		var mm *changefeed.ModeMismatchError
		if !errors.Is(err, changefeed.ErrModeMismatch) || !errors.As(err, &mm) || mm.ProcessorMode != "Full-Fidelity Feed" {
			t.Fatalf("Run() of an all-versions processor on latest-version leases = %v, want a ModeMismatchError", err)
		}
	})
}

// TestProcessor_AllVersionsAndDeletes: the all-versions mode delivers a delete, as the service's
// envelope, and marks the batch with its mode.
func TestProcessor_AllVersionsAndDeletes(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		fx := newFixture(t, 1, nil)
		cfg := fx.config("avad", "host-a")
		cfg.Mode, cfg.StartFrom = changefeed.AllVersionsAndDeletes, changefeed.Now()
		acquired := make(chan struct{})
		var once sync.Once
		cfg.OnEvent = func(e changefeed.Event) {
			if e.Type == changefeed.EventCheckpoint || e.Type == changefeed.EventAcquired {
				once.Do(func() { close(acquired) })
			}
		}
		deleted := make(chan changefeed.Batch, 1)
		p, err := changefeed.NewProcessor(cfg, func(_ context.Context, b changefeed.Batch) error {
			for _, it := range b.Items {
				if strings.Contains(string(it), `"delete"`) {
					select {
					case deleted <- b:
					default:
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		stop := runAll(context.Background(), p)
		defer stop()
		<-acquired
		// The lease starts from now when it is first read: write until a read has happened.
		time.Sleep(300 * time.Millisecond)
		fx.write(t, 0, 1)
		if _, err := fx.orders.DeleteItem(context.Background(), azcosmos.NewPartitionKeyString("customer-0"), "o0", nil); err != nil {
			t.Fatal(err)
		}
		select {
		case b := <-deleted:
			if b.Mode != changefeed.AllVersionsAndDeletes {
				t.Errorf("Batch.Mode = %s, want all-versions", b.Mode)
			}
		case <-time.After(60 * time.Second):
			t.Fatal("no delete was delivered within 60s")
		}
	})
}

// TestProcessor_ClientWithoutOptions: a monitored client built without ClientOptions cannot read
// all versions and deletes: the read fails with ErrClientOptions (reported as an infra error)
// and nothing is delivered.
func TestProcessor_ClientWithoutOptions(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		fx := newFixture(t, 1, &azcosmos.ClientOptions{})
		cfg := fx.config("plain", "host-a")
		cfg.Mode, cfg.StartFrom = changefeed.AllVersionsAndDeletes, changefeed.Now()
		failed := make(chan error, 1)
		cfg.OnEvent = func(e changefeed.Event) {
			if e.Type == changefeed.EventError && e.Cause == changefeed.CauseInfra {
				select {
				case failed <- e.Err:
				default:
				}
			}
		}
		var delivered sync.Once
		gotBatch := false
		p, err := changefeed.NewProcessor(cfg, func(context.Context, changefeed.Batch) error {
			delivered.Do(func() { gotBatch = true })
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		stop := runAll(context.Background(), p)
		fx.write(t, 0, 3)
		select {
		case err := <-failed:
			if !errors.Is(err, changefeed.ErrClientOptions) {
				t.Errorf("the infra error = %v, want ErrClientOptions", err)
			}
		case <-time.After(60 * time.Second):
			t.Fatal("no infra error within 60s")
		}
		stop()
		if gotBatch {
			t.Error("a batch was delivered from reads made without the mode headers")
		}
	})
}

// TestRun_MissingContainers: a missing monitored or lease container ends Run at once with
// ErrNotFound; the estimator says the same.
func TestRun_MissingContainers(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		fx := newFixture(t, 1, nil)
		noop := func(context.Context, changefeed.Batch) error { return nil }
		for name, edit := range map[string]func(*changefeed.Config){
			"monitored": func(c *changefeed.Config) { c.Monitored.Name = "nope" },
			"leases":    func(c *changefeed.Config) { c.Leases.Name = "nope" },
			"database":  func(c *changefeed.Config) { c.Leases.Database = "nope" },
		} {
			cfg := fx.config("missing", "host-a")
			edit(&cfg)
			p, err := changefeed.NewProcessor(cfg, noop)
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Run(context.Background()); !errors.Is(err, changefeed.ErrNotFound) {
				t.Errorf("%s: Run() = %v, want ErrNotFound", name, err)
			}
			est, _ := changefeed.NewEstimator(cfg)
			if _, err := est.Estimate(context.Background()); !errors.Is(err, changefeed.ErrNotFound) {
				t.Errorf("%s: Estimate() = %v, want ErrNotFound", name, err)
			}
		}
	})
}

// TestRun_NotTwiceAtOnce: a second Run while the first runs fails; Run may run again after.
func TestRun_NotTwiceAtOnce(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		fx := newFixture(t, 1, nil)
		started := make(chan struct{})
		var once sync.Once
		cfg := fx.config("twice", "host-a")
		cfg.OnEvent = func(e changefeed.Event) {
			if e.Type == changefeed.EventAcquired {
				once.Do(func() { close(started) })
			}
		}
		p, err := changefeed.NewProcessor(cfg, func(context.Context, changefeed.Batch) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		stop := runAll(context.Background(), p)
		<-started
		if err := p.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "already running") {
			t.Errorf("second Run() = %v, want an already running error", err)
		}
		if errs := stop(); errs[0] != nil {
			t.Fatal(errs[0])
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := p.Run(ctx); err != nil {
			t.Errorf("Run() after the first returned, with an ended context = %v, want nil", err)
		}
	})
}

func TestNewProcessor_Validates(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		client, err := azcosmos.NewClientFromConnectionString("AccountEndpoint=http://localhost:8081/;AccountKey="+auth.WellKnownKey+";", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close()
		good := changefeed.Config{
			Monitored: changefeed.Container{Client: client, Database: "shop", Name: "orders"},
			Leases:    changefeed.Container{Name: "leases"},
			Processor: "p", Instance: "i",
		}
		noop := func(context.Context, changefeed.Batch) error { return nil }
		if _, err := changefeed.NewProcessor(good, noop); err != nil {
			t.Fatalf("NewProcessor(good) = %v", err)
		}
		for _, tc := range []struct {
			name string
			edit func(*changefeed.Config)
			want string
		}{
			{"no client", func(c *changefeed.Config) { c.Monitored.Client = nil }, "Monitored.Client is required"},
			{"no container", func(c *changefeed.Config) { c.Monitored.Name = "" }, "Monitored.Database and Monitored.Name"},
			{"no lease container", func(c *changefeed.Config) { c.Leases.Name = "" }, "Leases.Name is required"},
			{"no processor", func(c *changefeed.Config) { c.Processor = "" }, "Processor name"},
			{"no instance", func(c *changefeed.Config) { c.Instance = " " }, "Instance name is required"},
			{"bad mode", func(c *changefeed.Config) { c.Mode = 7 }, "unknown Mode 7"},
			{"renew after expiry", func(c *changefeed.Config) { c.RenewInterval, c.Expiration = time.Minute, time.Second }, "renew interval"},
			{"negative batch", func(c *changefeed.Config) { c.MaxItems = -1 }, "max items"},
			{"all versions from the beginning", func(c *changefeed.Config) {
				c.Mode, c.StartFrom = changefeed.AllVersionsAndDeletes, changefeed.Beginning()
			}, "from now only"},
		} {
			cfg := good
			tc.edit(&cfg)
			_, err := changefeed.NewProcessor(cfg, noop)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: NewProcessor() = %v, want an error containing %q", tc.name, err, tc.want)
			}
		}
		if _, err := changefeed.NewProcessor(good, nil); err == nil {
			t.Error("NewProcessor(nil handler) = nil error")
		}
		est := good
		est.Instance = ""
		if _, err := changefeed.NewEstimator(est); err != nil {
			t.Errorf("NewEstimator() without an Instance = %v, want nil", err)
		}
	})
}

func TestStartFromAndMode_String(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		at := time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC)
		got := []string{changefeed.Now().String(), changefeed.StartFrom{}.String(), changefeed.Beginning().String(),
			changefeed.Time(at).String(), changefeed.LatestVersion.String(), changefeed.AllVersionsAndDeletes.String(),
			changefeed.Range{Min: "", Max: "FF"}.String()}
		want := []string{"now", "now", "beginning", "2026-12-01T09:30:00Z", "latest", "all-versions", "-FF"}
		sort.Strings(got)
		sort.Strings(want)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("String() values = %v, want %v", got, want)
		}
	})
}

func TestClientOptions_KeepsTheCallersOptions(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		in := &azcosmos.ClientOptions{PreferredRegions: []string{"West US 2"}}
		out := changefeed.ClientOptions(in)
		if out == in || len(in.PerCallPolicies) != 0 {
			t.Error("ClientOptions changed its argument")
		}
		if len(out.PerCallPolicies) == 0 || fmt.Sprint(out.PreferredRegions) != "[West US 2]" {
			t.Errorf("ClientOptions() = %+v, want the caller's regions and the change feed policies", out)
		}
		if len(changefeed.ClientOptions(nil).PerCallPolicies) != len(out.PerCallPolicies) {
			t.Error("ClientOptions(nil) has other policies")
		}
	})
}

// TestProcessor_MergeIsAMergeEvent: when two partitions merge, the leases over them are replaced
// and OnEvent says so with EventMerge (not EventSplit), naming the lease that replaced each; every
// change before and after the merge is delivered.
func TestProcessor_MergeIsAMergeEvent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fx := newFixture(t, 2, nil)
		fx.write(t, 0, 40)
		got := newReceived(40)
		var mu sync.Mutex
		var merged, split []changefeed.Event
		cfg := fx.config("billing", "host-a")
		cfg.OnEvent = func(e changefeed.Event) {
			mu.Lock()
			defer mu.Unlock()
			switch e.Type {
			case changefeed.EventMerge:
				merged = append(merged, e)
			case changefeed.EventSplit:
				split = append(split, e)
			}
		}
		p, err := changefeed.NewProcessor(cfg, got.handle)
		if err != nil {
			t.Fatal(err)
		}
		stop := runAll(context.Background(), p)
		defer stop()
		got.wait(t)
		if _, err := fx.emu.Merge("shop", "orders", []string{"0", "1"}); err != nil {
			t.Fatal(err)
		}
		fx.write(t, 40, 20)
		deadline := time.Now().Add(30 * time.Second)
		for {
			mu.Lock()
			n := len(merged)
			mu.Unlock()
			got.mu.Lock()
			delivered := len(got.count)
			got.mu.Unlock()
			if n == 2 && delivered == 60 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("after the merge: %d merge events (want 2), %d of 60 changes delivered", n, delivered)
			}
			time.Sleep(20 * time.Millisecond)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(split) != 0 {
			t.Errorf("a merge was notified as a split: %+v", split)
		}
		for _, e := range merged {
			if len(e.Children) != 1 || e.Lease == "" {
				t.Errorf("merge event %+v, want the replaced lease and the one lease that replaced it", e)
			}
		}
	})
}

// TestProcessor_HandlerPanicIsTheBatchsError: a handler that panics does not kill the program:
// the panic is the batch's error (an error event with a *PanicError), its stack goes to the
// log, and the batch comes again.
func TestProcessor_HandlerPanicIsTheBatchsError(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, 1, nil)
	fx.write(t, 0, 3)
	var logs syncBuffer
	var mu sync.Mutex
	var eventErr error
	done := make(chan struct{})
	cfg := fx.config("panic", "host-a")
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	cfg.OnEvent = func(e changefeed.Event) {
		if e.Type == changefeed.EventError && e.Cause == changefeed.CauseUser {
			mu.Lock()
			eventErr = e.Err
			mu.Unlock()
		}
	}
	p, err := changefeed.NewProcessor(cfg, func(_ context.Context, b changefeed.Batch) error {
		if b.Attempt == 1 {
			panic("handler bug")
		}
		select {
		case <-done:
		default:
			close(done)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := runAll(context.Background(), p)
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the batch was not delivered again within 60s after the handler panicked")
	}
	if errs := stop(); errs[0] != nil {
		t.Fatalf("Run() = %v", errs[0])
	}
	mu.Lock()
	defer mu.Unlock()
	var pe *changefeed.PanicError
	if !errors.As(eventErr, &pe) || pe.Value != "handler bug" || pe.Lease == "" {
		t.Errorf("the error event's Err = %v, want a *PanicError with the panic's value", eventErr)
	}
	if out := logs.String(); !strings.Contains(out, "handler panicked") || !strings.Contains(out, "changefeed_test.go") {
		t.Errorf("the log has no panic with its stack:\n%s", out)
	}
}

// syncBuffer is a bytes.Buffer safe for the processor's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
