package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
)

// TestChangeWriter_InterruptedOnABlockedPipeStopsAtALineEnd: stdout is a pipe already part full
// (20,000 bytes) that nobody reads; the tail buffered 6 changes of 10,900 bytes, more than a
// pipe write takes whole (PIPE_BUF), and is interrupted. Its reader starts only 2 s later, and the
// tail's process ends as soon as Close returns (the test then closes the pipe, as an exit does,
// cutting off a write still blocked). What the reader gets must end at a line end. The buffer
// used to be one write, which the pipe took in part: Close gave up after the grace and the
// reader's last line was torn. Now the pieces that reached the pipe end inside the fourth
// change, and Close waits for the reader to take the rest of it.
func TestChangeWriter_InterruptedOnABlockedPipeStopsAtALineEnd(t *testing.T) {
	t.Parallel()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	prefill := strings.Repeat(strings.Repeat("p", 3999)+"\n", 5)
	if _, err := io.WriteString(w, prefill); err != nil {
		t.Fatal(err)
	}
	ios, _, _, _ := Test()
	ios.Out = w
	cw := NewChangeWriter(ios, NewChangePrinter(ios, FormatJSONL, nil, false))
	for i := range 6 {
		item := fmt.Sprintf(`{"id":"d%d","pad":"%s"}`, i, strings.Repeat("x", 10880))
		if err := cw.Emit(feed.Change{Item: json.RawMessage(item)}); err != nil {
			t.Fatal(err)
		}
	}
	closed := make(chan error, 1)
	go func() { closed <- cw.Close(true, 50*time.Millisecond) }()
	var closeErr error
	exited := false
	select {
	case closeErr = <-closed:
		// cfp exits: a write still blocked is cut off, whatever part of it landed stays.
		_ = w.Close()
		exited = true
	case <-time.After(2 * time.Second):
	}
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(r)
		got <- b
	}()
	if !exited {
		closeErr = <-closed
		_ = w.Close()
	}
	out := <-got
	if closeErr == nil {
		t.Error("Close of an interrupted tail with a blocked stdout: nil, want the error that stdout is blocked")
	}
	if !bytes.HasPrefix(out, []byte(prefill)) {
		t.Fatalf("the pipe lost what it held before the tail")
	}
	rest := out[len(prefill):]
	if len(rest) > 0 && rest[len(rest)-1] != '\n' {
		t.Fatalf("the output ends inside a line: %d bytes after the last line end", len(rest)-1-bytes.LastIndexByte(rest, '\n'))
	}
	for i, line := range bytes.Split(bytes.TrimSuffix(rest, []byte("\n")), []byte("\n")) {
		if len(rest) > 0 && !json.Valid(line) {
			t.Fatalf("line %d is not a whole change: %.60q", i+1, line)
		}
	}
}

// BenchmarkChangeWriter_Pipe: a bulk tail's output of 1 KB changes into a pipe that a reader
// drains (the pieces of at most PIPE_BUF that keep an interrupted output whole).
func BenchmarkChangeWriter_Pipe(b *testing.B) {
	r, w, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		_, _ = io.Copy(io.Discard, r)
	}()
	ios, _, _, _ := Test()
	ios.Out = w
	cw := NewChangeWriter(ios, NewChangePrinter(ios, FormatJSONL, nil, false))
	ch := feed.Change{Item: json.RawMessage(fmt.Sprintf(`{"id":"d","pad":"%s"}`, strings.Repeat("x", 1000)))}
	b.ReportAllocs()
	b.SetBytes(int64(len(ch.Item) + 1))
	for b.Loop() {
		if err := cw.Emit(ch); err != nil {
			b.Fatal(err)
		}
	}
	if err := cw.Close(false, time.Second); err != nil {
		b.Fatal(err)
	}
	_ = w.Close()
	<-drained
}
