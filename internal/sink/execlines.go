package sink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/lineio"
)

// ExecLines keeps one long-lived child per lease, started with `sh -c Command`, and talks to it
// in JSON lines, after the Kinesis MultiLangDaemon. The child's environment gets CFP_LEASE_TOKEN,
// CFP_RANGE and CFP_OWNER, and loses the account secrets of secretEnv (COSMOS_KEY,
// COSMOS_CONNECTION_STRING, CFP_LEASE_KEY, CFP_LEASE_CONNECTION_STRING, and the Entra ID
// credentials' AZURE_CLIENT_SECRET, AZURE_CLIENT_CERTIFICATE_PASSWORD, AZURE_PASSWORD,
// IDENTITY_HEADER and MSI_SECRET).
//
// The host writes one JSON object per line to the child's stdin, each with an "id" that grows
// with every message (never reused, across restarts of a child too):
//
//	{"id":1,"type":"initialize","lease":"0","range":"-05C1DFFFFFFFFC","owner":"host-1","continuation":"\"41\""}
//	{"id":2,"type":"batch","lease":"0","range":"-05C1DFFFFFFFFC","continuation":"\"57\"","attempt":1,"items":[{...},{...}]}
//	{"id":3,"type":"lease-lost","lease":"0"}
//	{"id":4,"type":"shutdown","lease":"0","reason":"shutdown"}
//
// and waits for exactly one answer, a JSON line on the child's stdout, to each. An answer
// should echo the message's "id" ({"id":2,"type":"checkpoint"}): the host accepts only the
// answer to the message in flight and drops (with a line on Stderr) a duplicate or a late
// answer. An answer without "id" is accepted when a message is in flight and no answer to it
// was read yet, so older children keep working; a duplicate they write is dropped only when
// it is read before the next message is sent. The answers:
//
//	{"type":"checkpoint"}           batch processed: checkpoint through it now; to shutdown:
//	                                checkpoint the batches answered "done" before the lease is released
//	{"type":"done"}                 batch processed, but hold the checkpoint (the next "checkpoint"
//	                                covers it); to any other message: acknowledged
//	{"type":"error","message":"…"}  batch not processed: it comes again from the last checkpoint
//
// "initialize" is sent once per child before its first batch ("continuation" is the lease's
// checkpoint, empty when it has none; for a child restarted after an exit, the checkpoint at
// that moment, from which the batches come again). "lease-lost" means another host owns the lease now and
// nothing more can be checkpointed; "shutdown" is the end of the lease on this host, with
// reason "shutdown" (the host stops), "rebalance" (another host asked for the lease) or
// "split" (child leases take over). After either, the host closes the child's stdin and the child should
// exit; it is sent SIGTERM after KillDelay and killed after another KillDelay. Batches
// answered "done" but never covered by a "checkpoint" are delivered again after a restart or
// a handler error (at least once). A child that exits early is restarted, with a new
// "initialize", at the lease's next batch. Stdout lines that are not one of these answers are
// copied to Stderr, so a child's debug prints do not break the protocol; the child's stderr
// goes to Stderr too.
type ExecLines struct {
	Command string
	Stderr  io.Writer
	// Env is the base environment (os.Environ() when nil), less the account secrets.
	Env []string
	// Dir is the working directory (the current one when empty).
	Dir string
	// KillDelay bounds each step of a child's shutdown (DefaultKillDelay when 0).
	KillDelay time.Duration
	// AnswerTimeout bounds the wait for the answer to "initialize" and to each batch (no limit
	// when 0): a child that does not answer in time is stopped at once (SIGTERM to its process
	// group, SIGKILL after KillDelay) and the call fails with ErrTimeout; the lease's next batch
	// starts a new child. ("shutdown" and "lease-lost" are bounded by KillDelay.)
	AnswerTimeout time.Duration

	mu       sync.Mutex
	children map[string]*child
	stderr   io.Writer
	// lastID is the id of the last message sent to any child.
	lastID atomic.Uint64
}

var _ feed.LeaseHandler = (*ExecLines)(nil)

type hostMessage struct {
	// ID numbers the message: unique and increasing within an ExecLines, across restarts of
	// its children.
	ID           uint64            `json:"id"`
	Type         string            `json:"type"`
	Lease        string            `json:"lease"`
	Range        string            `json:"range,omitempty"`
	Owner        string            `json:"owner,omitempty"`
	Continuation *string           `json:"continuation,omitempty"`
	Attempt      int               `json:"attempt,omitempty"`
	Reason       string            `json:"reason,omitempty"`
	Items        []json.RawMessage `json:"items,omitempty"`
}

type childAnswer struct {
	// ID is the id of the message answered; 0 when the child does not send one.
	ID      uint64 `json:"id"`
	Type    string `json:"type"`
	Message string `json:"message"`
}

// ErrChildExited reports that an ExecLines child ended while the host waited for an answer.
var ErrChildExited = errors.New("child process exited")

type child struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	answers chan childAnswer
	eof     chan struct{} // closed when the child's stdout is closed
	quit    chan struct{} // closed when the host stops listening
	cancel  context.CancelFunc

	// mu guards inFlight, the id of the message the host waits for an answer to (0: none).
	mu       sync.Mutex
	inFlight uint64

	stopOnce sync.Once
	stopErr  error
}

func (x *ExecLines) killDelay() time.Duration {
	if x.KillDelay > 0 {
		return x.KillDelay
	}
	return DefaultKillDelay
}

// errAnswerTimeout is the cause of an answer context that reached AnswerTimeout.
var errAnswerTimeout = errors.New("answer timeout")

// answerCtx bounds the wait for one answer by AnswerTimeout.
func (x *ExecLines) answerCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if x.AnswerTimeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeoutCause(ctx, x.AnswerTimeout, errAnswerTimeout)
}

// OpenLease starts the lease's child and sends "initialize".
func (x *ExecLines) OpenLease(ctx context.Context, l feed.LeaseInfo) error {
	_, err := x.childFor(ctx, l.Token, l.Range, l.Owner, l.Continuation)
	return err
}

// Handle sends the batch and waits for the child's answer.
func (x *ExecLines) Handle(ctx context.Context, b feed.Batch) error {
	// A child started here replaces one that exited: it resumes from the lease's checkpoint.
	c, err := x.childFor(ctx, b.LeaseToken, b.Range, b.Owner, b.Checkpoint)
	if err != nil {
		return err
	}
	cont := b.Continuation
	actx, cancel := x.answerCtx(ctx)
	defer cancel()
	a, err := x.ask(actx, b.LeaseToken, c, hostMessage{
		Type: "batch", Lease: b.LeaseToken, Range: b.Range.String(),
		Continuation: &cont, Attempt: b.Attempt, Items: b.Items,
	})
	if err != nil {
		return err
	}
	switch a.Type {
	case "checkpoint":
		return nil
	case "done":
		return feed.ErrNoCheckpoint
	default:
		msg := a.Message
		if msg == "" {
			msg = "no message"
		}
		return fmt.Errorf("child for lease %s: batch failed: %s", b.LeaseToken, msg)
	}
}

// CloseLease tells the lease's child that the lease ended ("lease-lost" or "shutdown") and
// waits for it to exit. For a shutdown or rebalance it returns nil when the child answered "checkpoint"
// and feed.ErrNoCheckpoint otherwise.
func (x *ExecLines) CloseLease(ctx context.Context, l feed.LeaseInfo, reason feed.CloseReason) error {
	x.mu.Lock()
	c := x.children[l.Token]
	delete(x.children, l.Token)
	x.mu.Unlock()
	if c == nil {
		return feed.ErrNoCheckpoint
	}
	select {
	case <-c.eof: // the child already ended: nothing to tell it
		_ = x.stop(c)
		return feed.ErrNoCheckpoint
	default:
	}
	msg := hostMessage{Type: "shutdown", Lease: l.Token, Reason: string(reason)}
	if reason == feed.CloseLeaseLost {
		msg = hostMessage{Type: "lease-lost", Lease: l.Token}
	}
	actx, cancel := context.WithTimeout(ctx, x.killDelay())
	a, askErr := x.ask(actx, l.Token, c, msg)
	cancel()
	waitErr := x.stop(c)
	if errors.Is(askErr, ErrChildExited) {
		return feed.ErrNoCheckpoint // it ended on its own while told to: fine, but no checkpoint
	}
	if askErr != nil {
		return errors.Join(askErr, waitErr)
	}
	if waitErr != nil {
		return waitErr
	}
	if a.Type == "checkpoint" {
		return nil
	}
	return feed.ErrNoCheckpoint
}

// Close stops every child still running (the processor closes each lease itself; Close is the
// safety net for other callers).
func (x *ExecLines) Close() error {
	x.mu.Lock()
	cs := x.children
	x.children = nil
	x.mu.Unlock()
	var errs []error
	for _, c := range cs {
		errs = append(errs, x.stop(c))
	}
	return errors.Join(errs...)
}

// childFor returns the lease's running child, starting and initializing one if needed.
func (x *ExecLines) childFor(ctx context.Context, token string, rng feed.Range, owner, cont string) (*child, error) {
	x.mu.Lock()
	if x.children == nil {
		x.children = make(map[string]*child)
	}
	if x.stderr == nil {
		x.stderr = lockWriter(x.Stderr)
		if x.stderr == nil {
			x.stderr = io.Discard
		}
	}
	c := x.children[token]
	x.mu.Unlock()
	if c != nil {
		select {
		case <-c.eof:
			_ = x.stop(c) // exited on its own: reap it and start a new one
		default:
			return c, nil
		}
	}
	c, err := x.start(ctx, token, rng, owner)
	if err != nil {
		return nil, err
	}
	actx, cancel := x.answerCtx(ctx)
	a, err := x.ask(actx, token, c, hostMessage{
		Type: "initialize", Lease: token, Range: rng.String(), Owner: owner, Continuation: &cont,
	})
	cancel()
	if err == nil && a.Type != "done" && a.Type != "checkpoint" {
		err = fmt.Errorf("child for lease %s: initialize failed: %s", token, a.Message)
	}
	if err != nil {
		_ = x.stop(c)
		return nil, err
	}
	x.mu.Lock()
	x.children[token] = c
	x.mu.Unlock()
	return c, nil
}

func (x *ExecLines) start(ctx context.Context, token string, rng feed.Range, owner string) (*child, error) {
	cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	cmd := shell(cctx, x.Command, x.killDelay())
	cmd.Dir = x.Dir
	cmd.Env = append(baseEnv(x.Env), "CFP_LEASE_TOKEN="+token, "CFP_RANGE="+rng.String(), "CFP_OWNER="+owner)
	cmd.Stderr = x.stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		cancel()
		return nil, fmt.Errorf("start child for lease %s: %w", token, err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		return nil, fmt.Errorf("start child for lease %s: %w", token, err)
	}
	if err := cmd.Start(); err != nil {
		cancel()
		return nil, fmt.Errorf("start child for lease %s: %w", token, err)
	}
	c := &child{
		cmd: cmd, stdin: stdin, cancel: cancel,
		answers: make(chan childAnswer), eof: make(chan struct{}), quit: make(chan struct{}),
	}
	go x.listen(c, stdout)
	return c, nil
}

// listen reads the child's stdout until it closes, forwarding answers to c.answers and other
// lines to stderr. An answer is forwarded only when it answers the message in flight: with an
// id, that message's id; without one (children written before ids existed), any answer read
// while a message is in flight. Others (a duplicate, a late answer to an earlier message, an
// answer while nothing was asked) are reported on stderr and dropped, so they can never
// checkpoint a batch the child did not process. Lines are read through a limit: a line over
// lineio.MaxLine is skipped, and output without line ends is drained and discarded.
func (x *ExecLines) listen(c *child, stdout io.Reader) {
	defer close(c.eof)
	r := lineio.NewReader(stdout)
	for {
		line, err := r.Next()
		var tooLong *lineio.TooLongError
		switch {
		case errors.Is(err, io.EOF):
			return
		case errors.As(err, &tooLong):
			fmt.Fprintf(x.stderr, "cfp: child output line %d skipped: %v\n", r.Line(), err)
			continue
		case err != nil:
			fmt.Fprintf(x.stderr, "cfp: child output ignored from line %d on: %v\n", r.Line(), err)
			_, _ = io.Copy(io.Discard, stdout)
			return
		}
		var a childAnswer
		if json.Unmarshal(line, &a) != nil || (a.Type != "done" && a.Type != "checkpoint" && a.Type != "error") {
			if line[len(line)-1] != '\n' {
				line = append(line, '\n')
			}
			_, _ = x.stderr.Write(line)
			continue
		}
		c.mu.Lock()
		want := c.inFlight
		ok := want != 0 && (a.ID == 0 || a.ID == want)
		if ok {
			c.inFlight = 0 // one answer per message: a second one is a duplicate
		}
		c.mu.Unlock()
		if !ok {
			fmt.Fprintf(x.stderr, "cfp: child answer %q to message %d dropped: %s\n", a.Type, a.ID, answerMismatch(want))
			continue
		}
		select {
		case c.answers <- a:
		case <-c.quit: // nobody listens any more: keep draining so the child never blocks
		}
	}
}

func answerMismatch(want uint64) string {
	if want == 0 {
		return "no message is waiting for an answer"
	}
	return fmt.Sprintf("the message waiting for an answer is %d", want)
}

// ask sends one message and waits for the answer, the child's exit or the end of ctx (which
// stops the child: its state is unknown after an abandoned message).
func (x *ExecLines) ask(ctx context.Context, token string, c *child, m hostMessage) (childAnswer, error) {
	m.ID = x.lastID.Add(1)
	c.mu.Lock()
	c.inFlight = m.ID
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		if c.inFlight == m.ID {
			c.inFlight = 0
		}
		c.mu.Unlock()
	}()
	line, err := json.Marshal(m)
	if err != nil {
		return childAnswer{}, fmt.Errorf("encode %s message for lease %s: %w", m.Type, token, err)
	}
	written := make(chan error, 1)
	go func() {
		_, err := c.stdin.Write(append(line, '\n'))
		written <- err
	}()
	for {
		select {
		case err := <-written:
			if err != nil {
				x.forget(token, c)
				return childAnswer{}, fmt.Errorf("send %s to child for lease %s: %w", m.Type, token, errors.Join(ErrChildExited, err))
			}
			written = nil
		case a := <-c.answers:
			return a, nil
		case <-c.eof:
			x.forget(token, c)
			return childAnswer{}, fmt.Errorf("child for lease %s, waiting for an answer to %s: %w", token, m.Type, ErrChildExited)
		case <-ctx.Done():
			x.forget(token, c)
			if errors.Is(context.Cause(ctx), errAnswerTimeout) {
				c.cancel() // hung: SIGTERM to its process group now, SIGKILL after KillDelay
				_ = x.stop(c)
				return childAnswer{}, fmt.Errorf("child for lease %s did not answer %s within %s: %w", token, m.Type, x.AnswerTimeout, ErrTimeout)
			}
			_ = x.stop(c)
			return childAnswer{}, fmt.Errorf("child for lease %s, waiting for an answer to %s: %w", token, m.Type, ctx.Err())
		}
	}
}

// forget removes c from the lease map if it is still the lease's child.
func (x *ExecLines) forget(token string, c *child) {
	x.mu.Lock()
	if x.children[token] == c {
		delete(x.children, token)
	}
	x.mu.Unlock()
}

// stop closes the child's stdin, waits for it to exit (SIGTERM after KillDelay, kill after
// another KillDelay) and reaps it. It is idempotent.
func (x *ExecLines) stop(c *child) error {
	c.stopOnce.Do(func() { c.stopErr = x.reap(c) })
	return c.stopErr
}

func (x *ExecLines) reap(c *child) error {
	close(c.quit)
	_ = c.stdin.Close()
	t := time.NewTimer(x.killDelay())
	defer t.Stop()
	select {
	case <-c.eof:
	case <-t.C:
		c.cancel() // SIGTERM now, SIGKILL after WaitDelay
	}
	err := c.cmd.Wait()
	c.cancel()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return nil // a child told to stop may exit as it likes
	}
	return err
}
