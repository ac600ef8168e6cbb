package sink

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/lineio"
)

// AppProtocolVersion is the version of the application protocol App speaks.
const AppProtocolVersion = 1

// App speaks the application protocol, version 1 (docs/scripting.md, "Application protocol,
// version 1"), with one parent process over one channel for every lease the host holds: `cfp
// process --app-protocol 1`, the engine side of the Node.js and Python libraries. It is the
// --exec-lines protocol generalised: each message names its lease, and the parent answers by id.
//
// cfp → parent (Out), one JSON object per line:
//
//	{"type":"hello","protocol":1,"version":"…","owner":"…","processor":"…","prefix":"…"}
//	{"id":1,"type":"acquired","lease":"0","range":{"min":"","max":"FF"},"continuation":""}
//	{"id":2,"type":"batch","lease":"0","range":{…},"continuation":"\"57\"","attempt":1,"items":[…]}
//	{"id":3,"type":"released","lease":"0","reason":"shutdown"}
//	{"id":4,"type":"lost","lease":"0"}
//	{"type":"event","event":{…}}
//	{"type":"stopped","summary":{…}}
//
// parent → cfp (Serve's input): {"id":N,"type":"done"|"checkpoint"|"error","message":"…"} and
// {"type":"stop"}. At most one message per lease is unanswered: the processor calls Handle,
// OpenLease and CloseLease of a lease from one goroutine and each waits for its answer. Writes
// to Out happen on one goroutine and block while the parent does not read; a sender waits for
// that goroutine, so at most one message is held beyond the senders' own (events, which the
// engine must not wait for, queue up to eventQueue and are dropped beyond, with a line on
// Stderr).
type App struct {
	// Stderr receives the lines about the parent's input that cfp ignores (discarded when nil).
	Stderr io.Writer
	// AnswerTimeout bounds the wait for the answer to "acquired" and to each batch (no limit
	// when 0); a batch not answered in time fails with ErrTimeout, and a late answer is dropped.
	AnswerTimeout time.Duration

	out    io.Writer
	msgs   chan appWrite
	events chan []byte
	quit   chan struct{}
	wg     sync.WaitGroup

	lastID atomic.Uint64

	mu      sync.Mutex
	pending map[uint64]chan appAnswer
	ended   bool // the input ended: no answer can come any more

	inputEnded chan struct{} // closed at the end of the input
	stopping   chan struct{} // closed at the first stop, the end of the input or a broken Out
	stopOnce   sync.Once
	broken     chan struct{} // closed when a write to Out failed
	brokenOnce sync.Once
	brokenErr  error

	dropped atomic.Int64 // events dropped since the last report
	closed  sync.Once
}

// eventQueue is how many event lines wait for a parent that does not read before more are
// dropped.
const eventQueue = 1024

type appWrite struct {
	line []byte
	done chan error // nil, or told the write's result
}

// appAnswer is one line from the parent.
type appAnswer struct {
	ID      uint64 `json:"id"`
	Type    string `json:"type"`
	Message string `json:"message"`
}

// appMessage is a message that waits for an answer.
type appMessage struct {
	ID           uint64      `json:"id"`
	Type         string      `json:"type"`
	Lease        string      `json:"lease"`
	Range        *feed.Range `json:"range,omitempty"`
	Continuation *string     `json:"continuation,omitempty"`
	Attempt      int         `json:"attempt,omitempty"`
	Reason       string      `json:"reason,omitempty"`
}

// AppHello is the first line of the channel.
type AppHello struct {
	Type      string `json:"type"`
	Protocol  int    `json:"protocol"`
	Version   string `json:"version"`
	Owner     string `json:"owner"`
	Processor string `json:"processor"`
	Prefix    string `json:"prefix"`
}

// ErrParentGone reports that the parent closed its end of the channel (or exited) while cfp
// waited for an answer or wrote to it: the message counts as not answered, and the host stops.
// Retry passes it through: a batch the application never handled is neither retried nor
// skipped nor dead-lettered, so it comes again from the last checkpoint on the next host.
var ErrParentGone = errors.New("the application closed the channel")

var _ feed.LeaseHandler = (*App)(nil)

// NewApp returns an App writing to out; Serve must be given the parent's input.
func NewApp(out io.Writer, stderr io.Writer) *App {
	if stderr == nil {
		stderr = io.Discard
	}
	a := &App{
		Stderr: lockWriter(stderr), out: out,
		msgs: make(chan appWrite), events: make(chan []byte, eventQueue), quit: make(chan struct{}),
		pending:    make(map[uint64]chan appAnswer),
		inputEnded: make(chan struct{}), stopping: make(chan struct{}), broken: make(chan struct{}),
	}
	a.wg.Add(1)
	go a.writeLoop()
	return a
}

// Stopping is closed when the parent asked to stop, closed its input, or stopped reading
// (a write failed): the host should stop gracefully.
func (a *App) Stopping() <-chan struct{} { return a.stopping }

func (a *App) stop() { a.stopOnce.Do(func() { close(a.stopping) }) }

// writeLoop is the only writer of out.
func (a *App) writeLoop() {
	defer a.wg.Done()
	for {
		var w appWrite
		select {
		case w = <-a.msgs:
		case line := <-a.events:
			w = appWrite{line: line}
		case <-a.quit:
			return
		}
		err := a.brokenErr
		select {
		case <-a.broken:
		default:
			_, err = a.out.Write(w.line)
			if err != nil {
				a.brokenOnce.Do(func() {
					a.brokenErr = fmt.Errorf("write to the application: %w: %w", err, ErrParentGone)
					close(a.broken)
				})
				err = a.brokenErr
				fmt.Fprintf(a.Stderr, "cfp: %v; stopping\n", err)
				a.stop()
			}
		}
		if w.done != nil {
			w.done <- err
		}
	}
}

// send hands line to the writer; it returns once the writer took it (not once it was
// written), or with ctx's error or the channel's. When written is not nil, the writer tells it
// the write's result (it needs room for one value).
func (a *App) send(ctx context.Context, line []byte, written chan error) error {
	select {
	case <-a.broken:
		return a.brokenErr
	default:
	}
	select {
	case a.msgs <- appWrite{line: line, done: written}:
		return nil
	case <-a.broken:
		return a.brokenErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

// sendWait writes line and waits for the write, at most until ctx ends.
func (a *App) sendWait(ctx context.Context, line []byte) error {
	done := make(chan error, 1)
	select {
	case a.msgs <- appWrite{line: line, done: done}:
	case <-a.broken:
		return a.brokenErr
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Hello writes the first line; it waits until it is written (or ctx ends).
func (a *App) Hello(ctx context.Context, h AppHello) error {
	h.Type, h.Protocol = "hello", AppProtocolVersion
	b, err := json.Marshal(h)
	if err != nil {
		return err
	}
	return a.sendWait(ctx, append(b, '\n'))
}

// Event queues {"type":"event","event":e}; it never blocks (an event that finds the queue full
// is dropped and counted).
func (a *App) Event(e any) {
	b, err := json.Marshal(struct {
		Type  string `json:"type"`
		Event any    `json:"event"`
	}{"event", e})
	if err != nil {
		return
	}
	select {
	case a.events <- append(b, '\n'):
		if n := a.dropped.Swap(0); n > 0 {
			fmt.Fprintf(a.Stderr, "cfp: %d event(s) not sent: the application did not read them\n", n)
		}
	default:
		a.dropped.Add(1)
	}
}

// Stopped writes the last line, {"type":"stopped","summary":summary}, after the events still
// queued, and waits until it is written (or ctx ends).
func (a *App) Stopped(ctx context.Context, summary any) error {
	b, err := json.Marshal(struct {
		Type    string `json:"type"`
		Summary any    `json:"summary"`
	}{"stopped", summary})
	if err != nil {
		return err
	}
	for {
		select {
		case line := <-a.events: // queued events go first
			if err := a.sendWait(ctx, line); err != nil {
				return err
			}
			continue
		default:
		}
		break
	}
	return a.sendWait(ctx, append(b, '\n'))
}

// ParentGone ends the channel because the process at its other end is gone although the pipes
// are still open (another process holds them: nobody will answer or read): every message that
// waits for an answer fails with ErrParentGone, nothing more is written, and Stopping is closed.
func (a *App) ParentGone(why string) {
	a.brokenOnce.Do(func() {
		a.brokenErr = fmt.Errorf("%s: %w", why, ErrParentGone)
		close(a.broken)
	})
	a.stop()
}

// Close stops the writer (a write in progress is abandoned to its goroutine). Call it after
// Stopped.
func (a *App) Close() error {
	a.closed.Do(func() { close(a.quit) })
	return nil
}

// Serve reads the parent's lines until the end of in: answers go to the messages that wait
// for them, {"type":"stop"} closes Stopping. At the end of in, every message still waiting is
// answered "not processed" and Stopping is closed. Lines are read through lineio's 2 MiB limit.
func (a *App) Serve(in io.Reader) {
	defer a.endInput()
	r := lineio.NewReader(in)
	for {
		line, err := r.Next()
		var tooLong *lineio.TooLongError
		switch {
		case errors.Is(err, io.EOF):
			return
		case errors.As(err, &tooLong):
			fmt.Fprintf(a.Stderr, "cfp: application line %d skipped: %v\n", r.Line(), err)
			continue
		case err != nil:
			fmt.Fprintf(a.Stderr, "cfp: application input ignored from line %d on: %v\n", r.Line(), err)
			return
		}
		var m appAnswer
		if json.Unmarshal(line, &m) != nil {
			fmt.Fprintf(a.Stderr, "cfp: application line %d ignored: not a JSON object\n", r.Line())
			continue
		}
		switch m.Type {
		case "stop":
			a.stop()
		case "done", "checkpoint", "error":
			a.deliver(m)
		default:
			fmt.Fprintf(a.Stderr, "cfp: application line %d ignored: unknown type %q\n", r.Line(), m.Type)
		}
	}
}

func (a *App) endInput() {
	a.mu.Lock()
	a.ended = true
	a.mu.Unlock()
	close(a.inputEnded)
	a.stop()
}

// deliver hands an answer to the message waiting for it, or drops it.
func (a *App) deliver(m appAnswer) {
	a.mu.Lock()
	ch := a.pending[m.ID]
	delete(a.pending, m.ID)
	a.mu.Unlock()
	if ch == nil {
		fmt.Fprintf(a.Stderr, "cfp: answer %q to message %d dropped: no message with that id waits for an answer\n", m.Type, m.ID)
		return
	}
	ch <- m // buffered: one answer per id
}

// errTimeoutCause is the cause of an answer context that reached AnswerTimeout.
var errTimeoutCause = errors.New("answer timeout")

// ask writes the message built by line(id) and waits for its answer. When written is not nil
// (room for one value), the writer tells it once the line was written.
func (a *App) ask(ctx context.Context, kind, lease string, timeout time.Duration, written chan error, line func(id uint64) ([]byte, error)) (appAnswer, error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, timeout, errTimeoutCause)
		defer cancel()
	}
	id := a.lastID.Add(1)
	ch := make(chan appAnswer, 1)
	a.mu.Lock()
	if a.ended {
		a.mu.Unlock()
		return appAnswer{}, fmt.Errorf("lease %s: %s not sent: %w", lease, kind, ErrParentGone)
	}
	a.pending[id] = ch
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		delete(a.pending, id)
		a.mu.Unlock()
	}()
	b, err := line(id)
	if err != nil {
		return appAnswer{}, fmt.Errorf("lease %s: encode %s: %w", lease, kind, err)
	}
	fail := func(err error) (appAnswer, error) {
		if errors.Is(context.Cause(ctx), errTimeoutCause) {
			err = fmt.Errorf("the application did not answer %s %d within %s: %w", kind, id, timeout, ErrTimeout)
		}
		return appAnswer{}, fmt.Errorf("lease %s: %w", lease, err)
	}
	if err := a.send(ctx, b, written); err != nil {
		return fail(err)
	}
	select {
	case m := <-ch:
		return m, nil
	case <-a.inputEnded:
		return fail(fmt.Errorf("waiting for the answer to %s %d: %w", kind, id, ErrParentGone))
	case <-a.broken:
		return fail(a.brokenErr)
	case <-ctx.Done():
		return fail(ctx.Err())
	}
}

func (a *App) message(m appMessage) func(uint64) ([]byte, error) {
	return func(id uint64) ([]byte, error) {
		m.ID = id
		b, err := json.Marshal(m)
		return append(b, '\n'), err
	}
}

// OpenLease sends "acquired" and waits for the parent's answer ("done"; "error" fails the
// open, which the processor retries with backoff).
func (a *App) OpenLease(ctx context.Context, l feed.LeaseInfo) error {
	cont := l.Continuation
	rng := l.Range
	m, err := a.ask(ctx, "acquired", l.Token, a.AnswerTimeout, nil, a.message(appMessage{
		Type: "acquired", Lease: l.Token, Range: &rng, Continuation: &cont,
	}))
	if err != nil {
		return err
	}
	if m.Type == "error" {
		return fmt.Errorf("lease %s: the application refused it: %s", l.Token, orNoMessage(m.Message))
	}
	return nil
}

// Handle sends the batch and waits for its answer: "checkpoint" (nil), "done"
// (feed.ErrNoCheckpoint) or "error" (a handler error: the batch comes again).
func (a *App) Handle(ctx context.Context, b feed.Batch) error {
	buf := batchBuffers.Get().(*bytes.Buffer)
	written := make(chan error, 1)
	m, err := a.ask(ctx, "batch", b.LeaseToken, a.AnswerTimeout, written, func(id uint64) ([]byte, error) {
		return batchLine(buf, id, b)
	})
	// The buffer is used again once the writer is done with it; a line still being written
	// (an answer that came before the parent read the whole line, or no answer) keeps its own.
	select {
	case <-written:
		putBatchBuffer(buf)
	default:
	}
	if err != nil {
		return err
	}
	switch m.Type {
	case "checkpoint":
		return nil
	case "done":
		return feed.ErrNoCheckpoint
	}
	return fmt.Errorf("lease %s: batch failed in the application: %s", b.LeaseToken, orNoMessage(m.Message))
}

// CloseLease sends "released" (or "lost") and waits for the answer, at most until ctx ends;
// after the end of the input it sends nothing. It returns nil when the parent answered
// "checkpoint" to a release.
func (a *App) CloseLease(ctx context.Context, l feed.LeaseInfo, reason feed.CloseReason) error {
	msg := appMessage{Type: "released", Lease: l.Token, Reason: string(reason)}
	if reason == feed.CloseLeaseLost {
		msg = appMessage{Type: "lost", Lease: l.Token}
	}
	m, err := a.ask(ctx, msg.Type, l.Token, 0, nil, a.message(msg))
	if errors.Is(err, ErrParentGone) {
		return feed.ErrNoCheckpoint
	}
	if err != nil {
		return err
	}
	if m.Type == "checkpoint" && reason != feed.CloseLeaseLost {
		return nil
	}
	return feed.ErrNoCheckpoint
}

// batchBuffers holds the buffers of batch lines between batches: a line of 1,000 documents is
// ~250 KB, allocated anew for every batch before.
var batchBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledBatchBuffer is the largest buffer kept for the next batch line.
const maxPooledBatchBuffer = 8 << 20

func putBatchBuffer(buf *bytes.Buffer) {
	if buf.Cap() <= maxPooledBatchBuffer {
		batchBuffers.Put(buf)
	}
}

// batchLine encodes a batch message into buf (reset first) and returns its bytes. The items
// are copied as they are (the feed's documents are JSON already; one that spans lines is
// compacted), not re-encoded: json.Marshal of []json.RawMessage validates and compacts every
// byte again.
func batchLine(buf *bytes.Buffer, id uint64, b feed.Batch) ([]byte, error) {
	size := 160 + len(b.LeaseToken) + len(b.Continuation)
	for _, it := range b.Items {
		size += len(it) + 1
	}
	buf.Reset()
	buf.Grow(size)
	buf.WriteString(`{"id":`)
	buf.WriteString(strconv.FormatUint(id, 10))
	buf.WriteString(`,"type":"batch","lease":`)
	writeJSONString(buf, b.LeaseToken)
	buf.WriteString(`,"range":`)
	rng, err := json.Marshal(b.Range)
	if err != nil {
		return nil, err
	}
	buf.Write(rng)
	buf.WriteString(`,"continuation":`)
	writeJSONString(buf, b.Continuation)
	buf.WriteString(`,"attempt":`)
	buf.WriteString(strconv.Itoa(b.Attempt))
	buf.WriteString(`,"items":[`)
	for i, it := range b.Items {
		if i > 0 {
			buf.WriteByte(',')
		}
		if bytes.IndexByte(it, '\n') >= 0 || bytes.IndexByte(it, '\r') >= 0 {
			if err := json.Compact(buf, it); err != nil {
				return nil, fmt.Errorf("compact item: %w", err)
			}
		} else {
			buf.Write(it)
		}
	}
	buf.WriteString("]}\n")
	return buf.Bytes(), nil
}

func writeJSONString(buf *bytes.Buffer, s string) {
	b, _ := json.Marshal(s) // a string always encodes
	buf.Write(b)
}

func orNoMessage(s string) string {
	if s == "" {
		return "no message"
	}
	return s
}
