package sink_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/feed/feedtest"
	"github.com/cfp-dev/cfp/internal/leases"
	"github.com/cfp-dev/cfp/internal/sink"
)

// appMsg is a message cfp writes on the application channel, as a parent decodes it.
type appMsg struct {
	ID           uint64            `json:"id"`
	Type         string            `json:"type"`
	Lease        string            `json:"lease"`
	Range        *feed.Range       `json:"range"`
	Continuation *string           `json:"continuation"`
	Attempt      int               `json:"attempt"`
	Reason       string            `json:"reason"`
	Items        []json.RawMessage `json:"items"`
	Event        json.RawMessage   `json:"event"`
	Summary      json.RawMessage   `json:"summary"`
}

// parent is the application's end of an App's channel: it decodes what cfp writes when the
// test reads it, and writes answers.
type parent struct {
	t      *testing.T
	app    *sink.App
	stderr *syncBuffer
	in     *io.PipeWriter // the parent's answers (cfp's stdin)
	out    *bufio.Reader  // cfp's stdout
	outR   *io.PipeReader
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newParent(t *testing.T) *parent {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	stderr := &syncBuffer{}
	app := sink.NewApp(outW, stderr)
	go app.Serve(inR)
	p := &parent{t: t, app: app, stderr: stderr, in: inW, out: bufio.NewReader(outR), outR: outR}
	t.Cleanup(func() {
		_ = inW.Close()
		_ = outR.Close()
		_ = app.Close()
	})
	return p
}

// next reads cfp's next line, skipping events.
func (p *parent) next() appMsg {
	p.t.Helper()
	for {
		line, err := p.out.ReadBytes('\n')
		if err != nil {
			p.t.Fatalf("read the channel: %v", err)
		}
		var m appMsg
		if err := json.Unmarshal(line, &m); err != nil {
			p.t.Fatalf("line %q: %v", line, err)
		}
		if m.Type != "event" {
			return m
		}
	}
}

func (p *parent) answer(id uint64, typ string) {
	p.t.Helper()
	p.send(fmt.Sprintf(`{"id":%d,"type":%q,"message":"boom"}`, id, typ))
}

func (p *parent) send(line string) {
	p.t.Helper()
	if _, err := io.WriteString(p.in, line+"\n"); err != nil {
		p.t.Fatalf("answer: %v", err)
	}
}

func batchOf(lease string, items ...string) feed.Batch {
	b := feed.Batch{LeaseToken: lease, Range: feed.Range{Min: "", Max: "FF"}, Continuation: `"` + lease + `7"`, Attempt: 1}
	for _, it := range items {
		b.Items = append(b.Items, json.RawMessage(it))
	}
	return b
}

// TestApp_MessagesOfLeasesInterleaveAndAnswersGoByID drives two leases at once over one
// channel: their messages interleave, answers come back in another order and reach the right
// lease, and checkpoint, done and error mean what --exec-lines gives them.
func TestApp_MessagesOfLeasesInterleaveAndAnswersGoByID(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newParent(t)
		ctx := context.Background()
		results := make(chan error, 2)
		for _, l := range []string{"0", "1"} {
			go func() {
				results <- p.app.OpenLease(ctx, feed.LeaseInfo{Token: l, Range: feed.Range{Min: "", Max: "FF"}, Continuation: `"3"`})
			}()
		}
		a, b := p.next(), p.next()
		if a.Type != "acquired" || b.Type != "acquired" || a.Lease == b.Lease || a.ID == b.ID {
			t.Fatalf("got %+v and %+v, want acquired for two leases with their own ids", a, b)
		}
		if *a.Continuation != `"3"` || a.Range == nil || a.Range.Max != "FF" {
			t.Errorf("acquired %+v: want the checkpoint and the range", a)
		}
		p.answer(b.ID, "done")
		p.answer(a.ID, "done")
		for range 2 {
			if err := <-results; err != nil {
				t.Fatalf("open: %v", err)
			}
		}

		handled := map[string]chan error{"0": make(chan error, 1), "1": make(chan error, 1)}
		go func() { handled["0"] <- p.app.Handle(ctx, batchOf("0", `{"id":"x"}`, "{\n\"id\": \"y\"}")) }()
		go func() { handled["1"] <- p.app.Handle(ctx, batchOf("1", `{"id":"z"}`)) }()
		byLease := map[string]appMsg{}
		for range 2 {
			m := p.next()
			byLease[m.Lease] = m
		}
		m0, m1 := byLease["0"], byLease["1"]
		if m0.Type != "batch" || len(m0.Items) != 2 || string(m0.Items[1]) != `{"id":"y"}` || *m0.Continuation != `"07"` || m0.Attempt != 1 {
			t.Fatalf("batch of lease 0: %+v", m0)
		}
		if m1.ID <= a.ID || m1.ID <= b.ID {
			t.Errorf("batch id %d after acquired ids %d, %d: ids must grow", m1.ID, a.ID, b.ID)
		}
		p.answer(m1.ID, "checkpoint")
		if err := <-handled["1"]; err != nil {
			t.Errorf("lease 1 answered checkpoint: Handle = %v, want nil", err)
		}
		synctest.Wait()
		select {
		case err := <-handled["0"]:
			t.Fatalf("lease 0 finished (%v) with lease 1's answer", err)
		default:
		}
		// An answer to a message already answered, and one to an id never sent: dropped.
		p.answer(m1.ID, "error")
		p.answer(999, "checkpoint")
		p.answer(m0.ID, "done")
		if err := <-handled["0"]; !errors.Is(err, feed.ErrNoCheckpoint) {
			t.Errorf("lease 0 answered done: Handle = %v, want ErrNoCheckpoint", err)
		}
		synctest.Wait()
		if got := strings.Count(p.stderr.String(), "dropped"); got != 2 {
			t.Errorf("stderr has %d dropped answers, want 2:\n%s", got, p.stderr)
		}

		go func() { handled["1"] <- p.app.Handle(ctx, batchOf("1", `{"id":"w"}`)) }()
		m := p.next()
		p.answer(m.ID, "error")
		if err := <-handled["1"]; err == nil || errors.Is(err, feed.ErrNoCheckpoint) || !strings.Contains(err.Error(), "boom") {
			t.Errorf("answered error: Handle = %v, want a failure with the message", err)
		}

		go func() { handled["0"] <- p.app.CloseLease(ctx, feed.LeaseInfo{Token: "0"}, feed.CloseRebalance) }()
		m = p.next()
		if m.Type != "released" || m.Reason != "rebalance" || m.Lease != "0" {
			t.Fatalf("close: %+v, want released with reason rebalance", m)
		}
		p.answer(m.ID, "checkpoint")
		if err := <-handled["0"]; err != nil {
			t.Errorf("released answered checkpoint: CloseLease = %v, want nil (checkpoint what was done)", err)
		}
		go func() { handled["1"] <- p.app.CloseLease(ctx, feed.LeaseInfo{Token: "1"}, feed.CloseLeaseLost) }()
		m = p.next()
		if m.Type != "lost" || m.Lease != "1" {
			t.Fatalf("close: %+v, want lost", m)
		}
		p.answer(m.ID, "checkpoint")
		if err := <-handled["1"]; !errors.Is(err, feed.ErrNoCheckpoint) {
			t.Errorf("lost: CloseLease = %v, want ErrNoCheckpoint (nothing may be checkpointed)", err)
		}
	})
}

// TestApp_EndOfInputIsAStop checks what happens when the parent closes its end (or dies): the
// batch waiting for an answer is not processed, the host is told to stop, and the releases
// that follow wait for nobody.
func TestApp_EndOfInputIsAStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newParent(t)
		done := make(chan error, 1)
		go func() { done <- p.app.Handle(context.Background(), batchOf("0", `{"id":"x"}`)) }()
		p.next()
		select {
		case <-p.app.Stopping():
			t.Fatal("stopping before anything was asked")
		default:
		}
		_ = p.in.Close()
		if err := <-done; !errors.Is(err, sink.ErrParentGone) {
			t.Errorf("Handle = %v, want ErrParentGone", err)
		}
		<-p.app.Stopping()
		if err := p.app.CloseLease(context.Background(), feed.LeaseInfo{Token: "0"}, feed.CloseShutdown); !errors.Is(err, feed.ErrNoCheckpoint) {
			t.Errorf("CloseLease after the end of input = %v, want ErrNoCheckpoint at once", err)
		}
	})
}

// TestApp_StopLetsInFlightBatchesFinish: {"type":"stop"} asks the host to stop, and the batch
// in flight still gets its answer.
func TestApp_StopLetsInFlightBatchesFinish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newParent(t)
		done := make(chan error, 1)
		go func() { done <- p.app.Handle(context.Background(), batchOf("0", `{"id":"x"}`)) }()
		m := p.next()
		p.send(`{"type":"stop"}`)
		<-p.app.Stopping()
		p.answer(m.ID, "checkpoint")
		if err := <-done; err != nil {
			t.Errorf("Handle after stop = %v, want nil", err)
		}
	})
}

// TestApp_AnswerTimeout: a batch not answered within AnswerTimeout fails with ErrTimeout, and
// the late answer is dropped.
func TestApp_AnswerTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newParent(t)
		p.app.AnswerTimeout = time.Minute
		done := make(chan error, 1)
		start := time.Now()
		go func() { done <- p.app.Handle(context.Background(), batchOf("0", `{"id":"x"}`)) }()
		m := p.next()
		err := <-done
		if !errors.Is(err, sink.ErrTimeout) {
			t.Fatalf("Handle = %v, want ErrTimeout", err)
		}
		if waited := time.Since(start); waited != time.Minute {
			t.Errorf("gave up after %s, want 1m", waited)
		}
		p.answer(m.ID, "checkpoint")
		synctest.Wait()
		if !strings.Contains(p.stderr.String(), "dropped") {
			t.Errorf("the late answer was not reported as dropped: %q", p.stderr)
		}
	})
}

// brokenPipe fails every write as a closed stdout does.
type brokenPipe struct{}

func (brokenPipe) Write([]byte) (int, error) { return 0, syscall.EPIPE }

// TestApp_ParentNotReadingStops: a parent that closed stdout (it died) makes the write fail:
// the batch is not processed and the host is told to stop.
func TestApp_ParentNotReadingStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var stderr syncBuffer
		app := sink.NewApp(brokenPipe{}, &stderr)
		inR, inW := io.Pipe()
		defer inW.Close()
		go app.Serve(inR)
		defer app.Close()
		err := app.Handle(context.Background(), batchOf("0", `{"id":"x"}`))
		if !errors.Is(err, syscall.EPIPE) {
			t.Errorf("Handle = %v, want EPIPE", err)
		}
		<-app.Stopping()
	})
}

// TestApp_ProcessorBackpressure runs the engine over an App whose parent is slow: while a
// lease's batch is unanswered, the host reads no further pages beyond its one page of
// read-ahead, however long it waits; once the parent answers, every change comes, in order.
// Closing the input then stops the host: it releases its lease.
func TestApp_ProcessorBackpressure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := feedtest.NewMemSource(1)
		for i := range 40 {
			if _, err := src.Write(fmt.Sprintf("pk%d", i), fmt.Appendf(nil, `{"id":"doc%d"}`, i)); err != nil {
				t.Fatal(err)
			}
		}
		docs := leases.NewMemDocuments("/id")
		p := newParent(t)
		proc, err := feed.NewProcessor(src, leases.NewStore(docs, "apptest", leases.StoreOptions{}), p.app, feed.ProcessorOptions{
			Instance: "a", AcquireInterval: time.Second, RenewInterval: 2 * time.Second, Expiration: 10 * time.Second,
			PollInterval: 100 * time.Millisecond, MaxItems: 2, StartFrom: feed.StartFrom{Kind: feed.StartBeginning},
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		runErr := make(chan error, 1)
		go func() { runErr <- proc.Run(ctx) }()
		go func() {
			<-p.app.Stopping()
			cancel()
		}()

		m := p.next()
		if m.Type != "acquired" {
			t.Fatalf("first message %+v, want acquired", m)
		}
		p.answer(m.ID, "done")
		first := p.next()
		if first.Type != "batch" || len(first.Items) != 2 {
			t.Fatalf("got %+v, want a batch of 2", first)
		}
		synctest.Wait()
		held := src.Reads()
		t.Logf("reads while the first batch waits: %d", held)
		time.Sleep(10 * time.Minute) // a slow handler: the host waits, renewing its lease
		synctest.Wait()
		if got := src.Reads(); got != held || got > 2 {
			t.Errorf("reads while the first batch is unanswered: %d, then %d after 10 minutes; want at most 2 (the batch and one page ahead), unchanged", held, got)
		}
		p.answer(first.ID, "checkpoint")
		seen := []string{}
		for _, it := range first.Items {
			seen = append(seen, string(it))
		}
		for len(seen) < 40 {
			m := p.next()
			if m.Type != "batch" {
				t.Fatalf("got %+v, want a batch", m)
			}
			for _, it := range m.Items {
				seen = append(seen, string(it))
			}
			p.answer(m.ID, "checkpoint")
		}
		for i, s := range seen {
			if want := fmt.Sprintf(`"id":"doc%d"`, i); !strings.Contains(s, want) {
				t.Fatalf("change %d is %s, want %s (in order, each once)", i, s, want)
			}
		}
		_ = p.in.Close() // the parent exits: nothing more is asked of it
		if err := <-runErr; err != nil {
			t.Fatalf("Run = %v", err)
		}
		ls, err := leases.NewStore(docs, "apptest", leases.StoreOptions{}).List(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(ls) != 1 || ls[0].Owner != "" || ls[0].Continuation == "" {
			t.Errorf("after the parent left: lease %+v, want released with a checkpoint", ls[0])
		}
	})
}

// TestApp_ParentGoneIsNeitherRetriedNorSkipped: a batch whose parent went away was not
// processed; the retry policy passes that through at once, even with --on-error skip, so the
// batch comes again from the checkpoint. Before, Retry waited 1s+2s+4s of backoff (the
// takeover after a kill -9 of a Node process took 7.5 s in clients/node's test) and then
// skipped the batch: it would have been checkpointed past, never handled.
func TestApp_ParentGoneIsNeitherRetriedNorSkipped(t *testing.T) {
	for _, how := range []string{"input closed", "output broken"} {
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var app *sink.App
				var p *parent
				if how == "input closed" {
					p = newParent(t)
					app = p.app
				} else {
					app = sink.NewApp(brokenPipe{}, io.Discard)
					inR, inW := io.Pipe()
					defer inW.Close()
					go app.Serve(inR)
					defer app.Close()
				}
				r := &sink.Retry{Handler: app, MaxRetries: 3, OnError: sink.OnErrorSkip}
				done := make(chan error, 1)
				start := time.Now()
				go func() { done <- r.Handle(context.Background(), batchOf("0", `{"id":"x"}`)) }()
				if p != nil {
					p.next()
					_ = p.in.Close()
				}
				err := <-done
				if !errors.Is(err, sink.ErrParentGone) {
					t.Errorf("Retry.Handle = %v, want ErrParentGone (not processed, not skipped)", err)
				}
				if waited := time.Since(start); waited != 0 {
					t.Errorf("the policy waited %s before giving the batch back", waited)
				}
			})
		})
	}
}

// TestApp_ParentGoneFailsWhatWaitsAndWritesNothingMore: when cfp learns that its parent exited
// although the pipes are open (another process holds them), the batch waiting for its answer
// counts as not processed, a release is not asked, and nothing more is written (a write would
// block on the pipe nobody reads: synctest reports the deadlock).
func TestApp_ParentGoneFailsWhatWaitsAndWritesNothingMore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newParent(t)
		done := make(chan error, 1)
		go func() { done <- p.app.Handle(context.Background(), batchOf("0", `{"id":"x"}`)) }()
		p.next()
		p.app.ParentGone("the application that started cfp (pid 7) exited")
		if err := <-done; !errors.Is(err, sink.ErrParentGone) {
			t.Errorf("Handle = %v, want ErrParentGone", err)
		}
		<-p.app.Stopping()
		if err := p.app.CloseLease(context.Background(), feed.LeaseInfo{Token: "0"}, feed.CloseShutdown); !errors.Is(err, feed.ErrNoCheckpoint) {
			t.Errorf("CloseLease after the parent is gone = %v, want ErrNoCheckpoint at once", err)
		}
		if err := p.app.Handle(context.Background(), batchOf("1", `{"id":"y"}`)); !errors.Is(err, sink.ErrParentGone) {
			t.Errorf("a later Handle = %v, want ErrParentGone without a write", err)
		}
		if err := p.app.Stopped(context.Background(), map[string]any{"reason": "shutdown"}); err == nil {
			t.Error("Stopped wrote its line to a parent that is gone")
		}
	})
}

// TestApp_BatchLinesReuseBuffers checks that batch lines come whole and exact when their
// buffers are reused: a long batch, then short ones, then a long one again, each line holding
// its own items only.
func TestApp_BatchLinesReuseBuffers(t *testing.T) {
	p := newParent(t)
	ctx := context.Background()
	items := func(n, size int) []json.RawMessage {
		var out []json.RawMessage
		for i := range n {
			out = append(out, json.RawMessage(fmt.Sprintf(`{"id":"%d","pad":%q}`, i, strings.Repeat("x", size))))
		}
		return out
	}
	for round, b := range []feed.Batch{
		{LeaseToken: "0", Continuation: `"1"`, Items: items(500, 300)},
		{LeaseToken: "1", Continuation: `"2"`, Items: items(1, 3)},
		{LeaseToken: "0", Continuation: `"3"`, Items: items(2, 10)},
		{LeaseToken: "1", Continuation: `"4"`, Items: items(700, 200)},
	} {
		errc := make(chan error, 1)
		go func() { errc <- p.app.Handle(ctx, b) }()
		m := p.next()
		if m.Type != "batch" || m.Lease != b.LeaseToken || *m.Continuation != b.Continuation || len(m.Items) != len(b.Items) {
			t.Fatalf("round %d: got %s of lease %s at %s with %d items, want the batch of lease %s at %s with %d", round, m.Type, m.Lease, *m.Continuation, len(m.Items), b.LeaseToken, b.Continuation, len(b.Items))
		}
		for i, it := range m.Items {
			if !bytes.Equal(it, b.Items[i]) {
				t.Fatalf("round %d: item %d is %s, want %s", round, i, it, b.Items[i])
			}
		}
		p.answer(m.ID, "checkpoint")
		if err := <-errc; err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
}
