package render

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
)

// ErrOutput marks a failure to write to stdout (a closed pipe) or to encode a change for it:
// the message says so.
var ErrOutput = errors.New("write output")

// ChangeWriter turns changes into output, with a ChangePrinter, in a buffer that is written
// out at least every flush interval (StartFlusher), so a live tail shows changes promptly and a
// bulk tail writes big blocks. The write to stdout happens outside mu, so a stdout nobody
// reads never blocks the state saver or the shutdown; Written counts the changes that reached
// stdout, for the tail's state.
type ChangeWriter struct {
	ios *IOStreams
	p   ChangePrinter
	ctx context.Context

	// Lock order: wmu before mu. wmu serialises writes to stdout (held while one blocks); mu
	// guards the buffer, n and the status line, and is never held across a write to stdout.
	wmu     sync.Mutex
	mu      sync.Mutex
	w       *bytes.Buffer // changes not yet written out
	spare   *bytes.Buffer // the buffer being written (under wmu)
	n       int64         // changes put in the buffer so far
	written atomic.Int64  // changes written to stdout
	werr    error         // the first failed write to stdout (under wmu); every later one fails
	line    []byte

	// status is the status line on stderr, redrawn below each change when stdout and stderr
	// share a terminal; statusMsg is its text.
	status    *Status
	statusMsg string
}

// changeBufferSize is the output buffer beyond which Emit writes it out at once.
const changeBufferSize = 64 << 10

// SetStatus shows msg on the status line and keeps it for redrawing.
func (t *ChangeWriter) SetStatus(s *Status, msg string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.status, t.statusMsg = s, msg
	s.Update("%s", msg)
}

// NewChangeWriter returns a writer of changes to the streams' stdout in p's format.
func NewChangeWriter(ios *IOStreams, p ChangePrinter) *ChangeWriter {
	t := &ChangeWriter{ios: ios, p: p, ctx: context.Background(),
		w: bytes.NewBuffer(make([]byte, 0, changeBufferSize+4096)), spare: bytes.NewBuffer(make([]byte, 0, changeBufferSize+4096))}
	t.w.Write(p.Open(nil))
	return t
}

// Written returns how many changes reached stdout.
func (t *ChangeWriter) Written() int64 { return t.written.Load() }

// StartFlusher writes the buffer out every d until the returned function is called. stop
// waits for the flusher at most grace: it may be blocked on a stdout nobody reads.
func (t *ChangeWriter) StartFlusher(d, grace time.Duration) (stop func()) {
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(d)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				_ = t.drain()
			}
		}
	}()
	return func() {
		close(done)
		timer := time.NewTimer(grace)
		defer timer.Stop()
		select {
		case <-stopped:
		case <-timer.C:
		}
	}
}

// drain writes the buffered output to stdout. It must be called without t.mu.
func (t *ChangeWriter) drain() error {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	if t.werr != nil {
		return t.werr
	}
	t.mu.Lock()
	if t.w.Len() == 0 {
		t.mu.Unlock()
		return nil
	}
	t.w, t.spare = t.spare, t.w
	n, status, msg := t.n, t.status, t.statusMsg
	t.mu.Unlock()
	tty := t.ios.IsStdoutTTY && status != nil
	if tty {
		status.Clear()
	}
	_, err := t.ios.Out.Write(t.spare.Bytes())
	t.spare.Reset()
	if err != nil {
		t.werr = fmt.Errorf("%w: %w", ErrOutput, err)
		return t.werr
	}
	t.written.Store(n)
	if tty {
		status.Update("%s", msg)
	}
	return nil
}

// FlushWithin writes the buffered output, waiting at most d for stdout; it reports whether
// everything buffered when it was called reached stdout.
func (t *ChangeWriter) FlushWithin(d time.Duration) bool {
	t.mu.Lock()
	target := t.n
	t.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = t.drain()
	}()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
	}
	return t.written.Load() >= target
}

// Emit puts one change in the buffer and writes the buffer out when it is full (or at once on
// a terminal). feed.Tail calls it one change at a time.
func (t *ChangeWriter) Emit(ch feed.Change) error {
	t.mu.Lock()
	line, err := t.p.Append(t.ctx, t.line[:0], ch, t.n)
	if err != nil {
		t.mu.Unlock()
		return err
	}
	t.line = line
	t.w.Write(line)
	t.n++
	full := t.ios.IsStdoutTTY || t.w.Len() >= changeBufferSize
	t.mu.Unlock()
	if full {
		return t.drain()
	}
	return t.writeErr()
}

// writeErr returns the error of a failed write to stdout, if one failed; it does not wait for
// a write in flight.
func (t *ChangeWriter) writeErr() error {
	if !t.wmu.TryLock() {
		return nil
	}
	defer t.wmu.Unlock()
	return t.werr
}

// Close ends the output (the closing bracket of -o json) and writes it out, waiting at most
// grace for stdout when the tail was interrupted.
func (t *ChangeWriter) Close(interrupted bool, grace time.Duration) error {
	t.mu.Lock()
	t.w.Write(t.p.Close(nil, t.n))
	t.mu.Unlock()
	if !interrupted {
		return t.drain()
	}
	if !t.FlushWithin(grace) {
		if err := t.writeErr(); err != nil {
			return err
		}
		return fmt.Errorf("%w: stdout is blocked", ErrOutput)
	}
	return t.writeErr()
}
