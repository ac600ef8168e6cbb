package render

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
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
//
// An interrupted tail's output ends at a line boundary even when stdout is a pipe nobody reads
// (Close): into a pipe or a socket the buffer is written in pieces that end at line ends (a line
// longer than a piece takes several), each no longer than PIPE_BUF, which a pipe takes whole or
// not at all. When stdout stays blocked past the grace, the writes stop at the next line end: a
// piece still blocked never lands in a pipe once cfp exits, and a line begun is completed first
// if stdout takes it within OpenLineGrace.
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

	// piece is the longest write to stdout (0: the whole buffer at once); atomic says stdout
	// takes a write of at most piece bytes whole or not at all (a pipe).
	piece  int
	atomic bool
	// stopping says the writes stop at the next line end (Close of an interrupted tail).
	stopping atomic.Bool
	// lmu guards lineOpen, which is non-nil while stdout may hold part of a line (a long
	// line's first pieces, or a write in flight that stdout may take in part); it is closed
	// once stdout is at a line end again or a write failed.
	lmu      sync.Mutex
	lineOpen chan struct{}
}

// pipeBuf is PIPE_BUF, the longest write a pipe takes whole or not at all: 4096 bytes on Linux,
// POSIX's minimum of 512 elsewhere.
var pipeBuf = map[bool]int{true: 4096, false: 512}[runtime.GOOS == "linux"]

// errStopped ends the writes of an interrupted tail whose stdout stayed blocked.
var errStopped = fmt.Errorf("%w: stdout is blocked", ErrOutput)

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
	if f, ok := ios.Out.(*os.File); ok && !ios.IsStdoutTTY {
		if st, err := f.Stat(); err == nil {
			switch {
			case st.Mode()&os.ModeNamedPipe != 0:
				t.piece, t.atomic = pipeBuf, true
			case st.Mode()&os.ModeSocket != 0:
				t.piece = pipeBuf
			}
		}
	}
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
	err := t.writeOut(t.spare.Bytes())
	t.spare.Reset()
	if errors.Is(err, errStopped) {
		t.werr = err
		return t.werr
	}
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

// writeOut writes b to stdout, in pieces of at most t.piece bytes that end at line ends where a
// line fits (t.wmu held). Once stopping, it stops at the first line end with errStopped.
func (t *ChangeWriter) writeOut(b []byte) error {
	for len(b) > 0 {
		if t.stopping.Load() && !t.inLine() {
			return errStopped
		}
		n := len(b)
		if t.piece > 0 && n > t.piece {
			n = t.piece
			if i := bytes.LastIndexByte(b[:n], '\n'); i >= 0 {
				n = i + 1
			}
		}
		if t.piece > 0 && !t.atomic {
			// A socket may take this write in part: until it returns, a line may be open. (A
			// terminal or a file gets the whole buffer in one write, as before: a terminal
			// shows what it got, and a file never stays blocked.)
			t.setInLine(true)
		}
		if _, err := t.ios.Out.Write(b[:n]); err != nil {
			t.setInLine(false) // nothing more will be written: release a waiting Close
			return err
		}
		t.setInLine(b[n-1] != '\n')
		b = b[n:]
	}
	return nil
}

// inLine reports whether stdout may hold part of a line.
func (t *ChangeWriter) inLine() bool {
	t.lmu.Lock()
	defer t.lmu.Unlock()
	return t.lineOpen != nil
}

// setInLine records whether stdout may hold part of a line.
func (t *ChangeWriter) setInLine(open bool) {
	t.lmu.Lock()
	defer t.lmu.Unlock()
	switch {
	case open && t.lineOpen == nil:
		t.lineOpen = make(chan struct{})
	case !open && t.lineOpen != nil:
		close(t.lineOpen)
		t.lineOpen = nil
	}
}

// OpenLineGrace bounds how long an interrupted tail waits, after its grace, for a stdout that
// holds part of a line to take the rest of it (Close).
const OpenLineGrace = 10 * time.Second

// stopAtLineEnd makes the writes to stdout stop at the next line end and waits until stdout is
// at one, at most wait: a line begun is completed (or its write fails), a piece not yet taken is
// abandoned. It reports whether stdout is at a line end.
func (t *ChangeWriter) stopAtLineEnd(wait time.Duration) bool {
	t.stopping.Store(true)
	t.lmu.Lock()
	open := t.lineOpen
	t.lmu.Unlock()
	if open == nil {
		return true
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-open:
		return true
	case <-timer.C:
		return false
	}
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
// grace for stdout when the tail was interrupted. When stdout stays blocked longer, the output
// stops at a line end: Close waits, at most OpenLineGrace more, for stdout to take the rest of a
// line it holds part of (into a pipe, only a line longer than PIPE_BUF is written in parts), and
// the rest is not written.
func (t *ChangeWriter) Close(interrupted bool, grace time.Duration) error {
	t.mu.Lock()
	t.w.Write(t.p.Close(nil, t.n))
	t.mu.Unlock()
	if !interrupted {
		return t.drain()
	}
	if !t.FlushWithin(grace) {
		t.stopAtLineEnd(OpenLineGrace)
		if err := t.writeErr(); err != nil {
			return err
		}
		return errStopped
	}
	return t.writeErr()
}
