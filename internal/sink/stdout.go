// Package sink holds cfp's batch handlers: JSON lines on a writer (Stdout), one command per
// batch (Exec), one long-lived child per lease speaking JSON lines (ExecLines), and the error
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
type Stdout struct {
	W io.Writer

	mu  sync.Mutex
	buf bytes.Buffer
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
	if _, err := s.W.Write(s.buf.Bytes()); err != nil {
		return fmt.Errorf("write batch of lease %s: %w", b.LeaseToken, err)
	}
	if f, ok := s.W.(interface{ Flush() error }); ok {
		if err := f.Flush(); err != nil {
			return fmt.Errorf("flush batch of lease %s: %w", b.LeaseToken, err)
		}
	}
	return nil
}

// appendLine appends item and a newline. An item that spans several lines (the service never
// sends one, but a fake might) is compacted so that the output stays one document per line.
func appendLine(buf *bytes.Buffer, item json.RawMessage) error {
	if bytes.ContainsAny(item, "\r\n") {
		if err := json.Compact(buf, item); err != nil {
			return fmt.Errorf("compact item: %w", err)
		}
	} else {
		buf.Write(item)
	}
	buf.WriteByte('\n')
	return nil
}
