// Package render is cfp's presentation layer: the process's IO streams and what is known about
// them (TTY, width, colour), output formats (table, JSON, JSON lines) with --jq filtering, tables
// for eyes and TSV for pipes, human ages versus RFC 3339 times, and a status line for stderr.
// Commands receive an *IOStreams and never write to os.Stdout directly.
package render

import (
	"bytes"
	"io"
	"os"
	"strconv"

	"github.com/mattn/go-isatty"
	"golang.org/x/term"
)

// DefaultWidth is the width assumed when the terminal's width is unknown (in a pipe or a test).
const DefaultWidth = 80

// IOStreams are the streams a command reads and writes, with the facts about them that decide
// how output looks. The zero value is not usable; build one with System or Test.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer

	IsStdinTTY  bool
	IsStdoutTTY bool
	IsStderrTTY bool

	// ColorEnabled says whether stdout may carry ANSI colour; see ColorPolicy.
	ColorEnabled bool
	// StderrColorEnabled says the same for stderr.
	StderrColorEnabled bool
	// Width is the terminal width in columns (DefaultWidth when unknown).
	Width int
	// Wide shows tables whole on a terminal: identifiers unabbreviated and every column,
	// whatever the width (--wide).
	Wide bool
}

// System returns the process's own streams. getenv reads the environment for the colour policy
// and COLUMNS; nil means os.Getenv.
func System(getenv func(string) string) *IOStreams {
	if getenv == nil {
		getenv = os.Getenv
	}
	ios := &IOStreams{
		In:          os.Stdin,
		Out:         os.Stdout,
		ErrOut:      os.Stderr,
		IsStdinTTY:  isTerminal(os.Stdin),
		IsStdoutTTY: isTerminal(os.Stdout),
		IsStderrTTY: isTerminal(os.Stderr),
		Width:       DefaultWidth,
	}
	ios.ColorEnabled = ColorPolicy(getenv, ios.IsStdoutTTY)
	ios.StderrColorEnabled = ColorPolicy(getenv, ios.IsStderrTTY)
	if w, _, err := term.GetSize(int(os.Stdout.Fd())); err == nil && w > 0 {
		ios.Width = w
	} else if n, err := strconv.Atoi(getenv("COLUMNS")); err == nil && n > 0 {
		ios.Width = n
	}
	return ios
}

// Test returns streams backed by buffers: stdin reads from in, stdout and stderr write to out and
// errOut. Nothing is a TTY, colour is off and the width is DefaultWidth; tests flip the fields
// they need.
func Test() (ios *IOStreams, in, out, errOut *bytes.Buffer) {
	in, out, errOut = new(bytes.Buffer), new(bytes.Buffer), new(bytes.Buffer)
	ios = &IOStreams{In: in, Out: out, ErrOut: errOut, Width: DefaultWidth}
	return ios, in, out, errOut
}

// SetTTY marks stdin, stdout and stderr as terminals (or not), for tests; colour stays as it is.
func (s *IOStreams) SetTTY(tty bool) {
	s.IsStdinTTY, s.IsStdoutTTY, s.IsStderrTTY = tty, tty, tty
}

// CanPrompt reports whether cfp may ask the user a question: stdin and stdout are terminals.
func (s *IOStreams) CanPrompt() bool {
	return s.IsStdinTTY && s.IsStdoutTTY
}

// ColorPolicy decides whether a stream may carry colour, in one place:
//   - NO_COLOR (any non-empty value) turns colour off;
//   - CLICOLOR_FORCE (non-empty, not "0") turns it on, even off a terminal;
//   - CLICOLOR=0 turns it off;
//   - otherwise colour is on exactly when the stream is a terminal and TERM is not "dumb".
func ColorPolicy(getenv func(string) string, isTTY bool) bool {
	if getenv("NO_COLOR") != "" {
		return false
	}
	if v := getenv("CLICOLOR_FORCE"); v != "" && v != "0" {
		return true
	}
	if getenv("CLICOLOR") == "0" {
		return false
	}
	return isTTY && getenv("TERM") != "dumb"
}

func isTerminal(f *os.File) bool {
	return isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())
}
