// Package sink holds cfp's batch handlers: JSON lines on a writer (Stdout), one command per
// batch (Exec), one long-lived child per lease speaking JSON lines (ExecLines), the parent
// process serving every lease over one channel (App, the application protocol), and the error
// policy wrapper (Retry) with its dead-letter file. Every handler here implements feed.Handler.
package sink

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"

	"github.com/cfp-dev/cfp/internal/feed"
)

// Stdout writes every changed document of a batch as one line, exactly as the feed returned it,
// to W. Batches of different leases never interleave: a batch is written with one Write under a
// lock, and W is flushed (when it has a Flush method, such as *bufio.Writer) before Handle
// returns, so the host's checkpoint always follows the write.
//
// Lines are whole even when a write fails part way (a full disk): when W is a seekable file
// (Seek and Truncate, like *os.File), the file is cut back to where the batch started, so the
// retried batch follows the last whole line; otherwise the next write starts with a line end, so
// the retried batch starts on a line of its own. W should not buffer (a *bufio.Writer keeps a
// write error for ever); the batch is already one Write.
type Stdout struct {
	W io.Writer

	mu  sync.Mutex
	buf bytes.Buffer
	// torn is set when a write stopped inside a line that could not be cut back.
	torn bool
}

// truncater is a file that can be cut back after a failed write.
type truncater interface {
	io.Seeker
	Truncate(size int64) error
}

var _ feed.Handler = (*Stdout)(nil)

// NewStdout returns a Stdout handler writing to w.
func NewStdout(w io.Writer) *Stdout { return &Stdout{W: w} }

// Handle writes the batch's items, one per line.
func (s *Stdout) Handle(ctx context.Context, b feed.Batch) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf.Reset()
	for _, it := range b.Items {
		if err := appendLine(&s.buf, it); err != nil {
			return fmt.Errorf("lease %s: %w", b.LeaseToken, err)
		}
	}
	if err := s.write(); err != nil {
		return fmt.Errorf("write batch of lease %s: %w", b.LeaseToken, err)
	}
	if f, ok := s.W.(interface{ Flush() error }); ok {
		if err := f.Flush(); err != nil {
			return fmt.Errorf("flush batch of lease %s: %w", b.LeaseToken, err)
		}
	}
	return nil
}

// write writes s.buf with one Write, leaving W at a line boundary when it fails; s.mu is held.
func (s *Stdout) write() error {
	out := s.buf.Bytes()
	if s.torn {
		out = append([]byte{'\n'}, out...)
	}
	start := int64(-1)
	tr, canCut := s.W.(truncater)
	if canCut {
		if off, err := tr.Seek(0, io.SeekCurrent); err == nil {
			start = off
		}
	}
	n, err := s.W.Write(out)
	if err == nil {
		s.torn = false
		return nil
	}
	if n > 0 && start >= 0 {
		if terr := tr.Truncate(start); terr == nil {
			if _, serr := tr.Seek(start, io.SeekStart); serr == nil {
				return err
			}
		}
	}
	if n > 0 && out[n-1] != '\n' {
		s.torn = true
	} else if n > 0 {
		s.torn = false
	}
	return err
}

// appendLine appends item and a newline. An item that spans several lines (the service never
// sends one, but a fake might) is compacted so that the output stays one document per line.
// The look for line ends is two IndexByte calls (vectorized), not ContainsAny, which tests
// every byte against the set one at a time: it was a fifth of `cfp process`'s CPU at 1 KB.
func appendLine(buf *bytes.Buffer, item json.RawMessage) error {
	if bytes.IndexByte(item, '\n') >= 0 || bytes.IndexByte(item, '\r') >= 0 {
		if err := json.Compact(buf, item); err != nil {
			return fmt.Errorf("compact item: %w", err)
		}
	} else {
		buf.Write(item)
	}
	buf.WriteByte('\n')
	return nil
}
