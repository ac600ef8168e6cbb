// Package lineio reads untrusted input with bounds: lines no longer than a limit (an over-long
// line is reported and skipped, never held in memory whole) and whole files no larger than a
// limit. Every command that reads JSON lines or a file given by the user reads it through here,
// so that a one-line 200 MB array or /dev/zero costs a bounded amount of memory.
package lineio

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
)

// MaxLine is the longest line commands accept: the service's 2 MB document limit, plus room
// for a line end. A longer line could never be written as one document.
const MaxLine = 2<<20 + 2

// MaxSkip bounds how much of one over-long line is read and discarded while looking for its
// end; past it the input is abandoned (ErrNoLineEnd), so an endless input without newlines
// (/dev/zero) ends instead of being read forever.
const MaxSkip = 64 << 20

// TooLongError reports a line longer than the limit. The line was skipped up to its end; the
// next call to Next returns the line after it.
type TooLongError struct {
	// Line is the 1-based line number.
	Line int
	// Max is the limit in bytes.
	Max int
	// Array is whether the line starts with '[' (a JSON array given where JSON lines were
	// expected).
	Array bool
}

func (e *TooLongError) Error() string {
	return fmt.Sprintf("longer than %s, the service's document limit", FormatSize(e.Max))
}

// Hint suggests the fix for a JSON array given as one line.
func (e *TooLongError) Hint() string {
	if e.Array {
		return "the line looks like a JSON array: give one document per line, e.g. jq -c '.[]' FILE | cfp ..."
	}
	return ""
}

// ErrNoLineEnd is returned (wrapped in a *NoLineEndError) when an over-long line has no end
// within MaxSkip: the input is not JSON lines and reading stops.
var ErrNoLineEnd = errors.New("no line end")

// NoLineEndError reports an input abandoned inside an endless line.
type NoLineEndError struct {
	Line    int
	Skipped int64
	Array   bool
}

func (e *NoLineEndError) Error() string {
	return fmt.Sprintf("line %d has no end in its first %s: not JSON lines, stopped reading", e.Line, FormatSize(int(e.Skipped)))
}

func (e *NoLineEndError) Unwrap() error { return ErrNoLineEnd }

// Hint suggests the fix for a JSON array given as one line.
func (e *NoLineEndError) Hint() string {
	return (&TooLongError{Array: e.Array}).Hint()
}

// FormatSize prints a byte count in MiB when it is at least one, else in bytes.
func FormatSize(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// Reader reads lines of at most Max bytes (line end included). It is not safe for concurrent
// use.
type Reader struct {
	r       *bufio.Reader
	max     int
	maxSkip int64
	buf     []byte
	line    int
	eof     bool
}

// NewReader returns a Reader of r with the limits MaxLine and MaxSkip.
func NewReader(r io.Reader) *Reader { return NewReaderLimits(r, MaxLine, MaxSkip) }

// NewReaderLimits returns a Reader of r with the given limits (for tests and small protocols).
func NewReaderLimits(r io.Reader, maxLine int, maxSkip int64) *Reader {
	size := min(maxLine, 64<<10)
	size = max(size, 16)
	return &Reader{r: bufio.NewReaderSize(r, size), max: maxLine, maxSkip: maxSkip}
}

// Line is the number of the line Next returned last (1-based).
func (lr *Reader) Line() int { return lr.line }

// Next returns the next line, its line end included (the last line may lack one). The slice
// is valid until the next call. At the end of the input it returns io.EOF. A line over the
// limit returns a *TooLongError after skipping to its end (the following call goes on with
// the next line); a line without an end within the skip limit returns a *NoLineEndError, and
// so does every later call.
func (lr *Reader) Next() ([]byte, error) {
	if lr.eof {
		return nil, io.EOF
	}
	lr.line++
	lr.buf = lr.buf[:0]
	for {
		chunk, err := lr.r.ReadSlice('\n')
		if len(lr.buf)+len(chunk) > lr.max {
			return nil, lr.skip(firstByte(lr.buf, chunk), int64(len(lr.buf)+len(chunk)), err)
		}
		lr.buf = append(lr.buf, chunk...)
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			lr.eof = true
			if len(lr.buf) == 0 {
				return nil, io.EOF
			}
			return lr.buf, nil
		case err != nil:
			return nil, err
		}
		return lr.buf, nil
	}
}

// skip discards the rest of an over-long line whose first non-blank byte is first.
func (lr *Reader) skip(first byte, skipped int64, err error) error {
	lr.buf = lr.buf[:0]
	if cap(lr.buf) > lr.max {
		lr.buf = nil
	}
	for errors.Is(err, bufio.ErrBufferFull) {
		if skipped > lr.maxSkip {
			lr.eof = true
			return &NoLineEndError{Line: lr.line, Skipped: skipped, Array: first == '['}
		}
		var chunk []byte
		chunk, err = lr.r.ReadSlice('\n')
		skipped += int64(len(chunk))
	}
	if errors.Is(err, io.EOF) {
		lr.eof = true
	} else if err != nil {
		return err
	}
	return &TooLongError{Line: lr.line, Max: lr.max, Array: first == '['}
}

func firstByte(a, b []byte) byte {
	for _, s := range [][]byte{a, b} {
		for _, c := range s {
			switch c {
			case ' ', '\t', '\r', '\n':
				continue
			}
			return c
		}
	}
	return 0
}

// MaxFile is the largest file ReadFile reads: state files, lease exports and keys are far
// smaller.
const MaxFile = 256 << 20

// TooLargeError reports a file over the limit.
type TooLargeError struct {
	Name string
	Max  int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s is larger than %s", e.Name, FormatSize(int(e.Max)))
}

// ReadAll reads r to its end, at most max bytes; name names it in the error.
func ReadAll(r io.Reader, name string, max int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, &TooLargeError{Name: name, Max: max}
	}
	return b, nil
}

// ReadFile reads the named file, at most max bytes (a *TooLargeError beyond).
func ReadFile(name string, max int64) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadAll(f, name, max)
}
