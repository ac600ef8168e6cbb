package render

import (
	"fmt"
	"io"
	"strings"
	"sync"
)

// Status is a one-line status display on stderr ("caught up on 3/4 ranges", "imported 1200
// documents"). On a terminal each Update rewrites the line in place; off a terminal Updates are
// dropped, so logs and pipes see only the lines written with Done or Println. Safe for
// concurrent use.
type Status struct {
	mu    sync.Mutex
	w     io.Writer
	tty   bool
	width int
	shown bool
}

// NewStatus returns a status line on the streams' stderr.
func NewStatus(ios *IOStreams) *Status {
	return &Status{w: ios.ErrOut, tty: ios.IsStderrTTY, width: ios.Width}
}

// Update replaces the status line with the formatted message (on a terminal only). The message
// is cut to the terminal width so it never wraps.
func (s *Status) Update(format string, args ...any) {
	if !s.tty {
		return
	}
	msg := Safe(firstLine(fmt.Sprintf(format, args...)))
	if s.width > 1 && len([]rune(msg)) > s.width-1 {
		msg = string([]rune(msg)[:s.width-1])
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(s.w, "\r\x1b[K%s", msg)
	s.shown = true
}

// Println clears the status line, if any, and writes the formatted message as a line of its own
// (on a terminal and off it). A later Update draws the status line again below it.
func (s *Status) Println(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clearLocked()
	fmt.Fprintf(s.w, "%s\n", Safe(fmt.Sprintf(format, args...)))
}

// Done clears the status line and writes the final message, if not empty, as a line.
func (s *Status) Done(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clearLocked()
	if format != "" {
		fmt.Fprintf(s.w, "%s\n", Safe(fmt.Sprintf(format, args...)))
	}
}

// Clear removes the status line.
func (s *Status) Clear() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clearLocked()
}

func (s *Status) clearLocked() {
	if s.shown {
		io.WriteString(s.w, "\r\x1b[K")
		s.shown = false
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
