package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"

	"github.com/cfp-dev/cfp/emulator"
	"github.com/cfp-dev/cfp/internal/cosmos"
	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/leases"
	"github.com/cfp-dev/cfp/internal/render"
)

// Exit codes of cfp; `cfp help exit-codes` documents them and scripts rely on them.
const (
	exitOK          = 0
	exitError       = 1
	exitUsage       = 2
	exitThreshold   = 3
	exitAuth        = 4
	exitNoLeases    = 5
	exitGone        = 6
	exitInterrupted = 130
)

// UsageError is a mistake in how cfp was called: a bad flag, a missing argument, a conflict
// between options, or no account configured. It exits 2. Usage is shown unless Brief is set
// (the message alone says what to fix).
type UsageError struct {
	Err   error
	Brief bool
}

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// usageErrorf returns a *UsageError (usage shown) with a formatted message.
func usageErrorf(format string, args ...any) error {
	return &UsageError{Err: fmt.Errorf(format, args...)}
}

// briefUsageErrorf returns a *UsageError that prints only its one-line message.
func briefUsageErrorf(format string, args ...any) error {
	return &UsageError{Err: fmt.Errorf(format, args...), Brief: true}
}

// ExitError ends cfp with a chosen exit code: 3 for a crossed threshold (estimate --max-lag,
// leases list --check) or a partial failure. Err, when set, is printed like any error; a nil
// Err exits silently (the command already said what happened).
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}
func (e *ExitError) Unwrap() error { return e.Err }

// AuthFailure is implemented by errors that mean the account refused cfp's credentials or
// permissions (401, 403, a failed token acquisition). Such errors exit 4. internal/cosmos
// implements it on its error types; cmd never inspects status codes itself.
type AuthFailure interface {
	AuthError() bool
}

// hinted is implemented by errors that know what the user should try; the hint is printed as
// a second line, "Try: <hint>".
type hinted interface {
	Hint() string
}

// withHint wraps err with a hint for the user. errors.Is/As still see err.
func withHint(err error, hint string) error {
	if err == nil {
		return nil
	}
	return &hintError{err: err, hint: hint}
}

type hintError struct {
	err  error
	hint string
}

func (e *hintError) Error() string { return e.err.Error() }
func (e *hintError) Unwrap() error { return e.err }
func (e *hintError) Hint() string  { return e.hint }

// exitCode maps the error a command returned to cfp's exit code. interrupted reports whether
// the run's context was cancelled by a signal: an interrupted run exits 130 unless the command
// chose its code with an *ExitError.
func exitCode(err error, interrupted bool) int {
	var exitErr *ExitError
	if errors.As(err, &exitErr) {
		return exitErr.Code
	}
	if interrupted {
		return exitInterrupted
	}
	if err == nil {
		return exitOK
	}
	var usage *UsageError
	if errors.As(err, &usage) {
		return exitUsage
	}
	if isAuthFailure(err) {
		return exitAuth
	}
	return exitError
}

func isAuthFailure(err error) bool {
	var ae *cosmos.AuthError
	if errors.As(err, &ae) {
		return true
	}
	for _, e := range flatten(err) {
		if a, ok := e.(AuthFailure); ok && a.AuthError() {
			return true
		}
	}
	return false
}

// hintOf returns the outermost hint in err's chain, else a hint for a cause cfp knows (auth,
// not found, throttling, an unreachable endpoint), or "".
func hintOf(err error) string {
	for _, e := range flatten(err) {
		if h, ok := e.(hinted); ok {
			if s := strings.TrimSpace(h.Hint()); s != "" {
				return s
			}
		}
	}
	var ae *cosmos.AuthError
	var throttled *feed.ThrottledError
	var opErr *net.OpError
	switch {
	case errors.As(err, &ae):
		return ae.Hint
	case errors.Is(err, leases.ErrNotFound):
		return "check the names in -d/--database, -c/--container and --lease-container; 'cfp config' shows what cfp uses"
	case errors.As(err, &throttled) && throttled.Status == http.StatusServiceUnavailable:
		return "the service is unavailable (HTTP 503), usually for a short time: retry later; if it lasts, check the account's region in the Azure status page"
	case errors.As(err, &throttled):
		return "the account is throttling requests (HTTP 429): retry later or raise the container's throughput"
	case errors.As(err, &opErr) && opErr.Op == "dial":
		return "check the endpoint and the network; for a local emulator, start 'cfp emulator' or use --local"
	}
	return ""
}

// flatten lists err and everything it wraps, depth first.
func flatten(err error) []error {
	var out []error
	var walk func(error)
	walk = func(e error) {
		if e == nil {
			return
		}
		out = append(out, e)
		switch x := e.(type) {
		case interface{ Unwrap() error }:
			walk(x.Unwrap())
		case interface{ Unwrap() []error }:
			for _, c := range x.Unwrap() {
				walk(c)
			}
		}
	}
	walk(err)
	return out
}

// printError writes err as "cfp: <message>" on one line, plus "Try: <hint>" when the error
// carries a hint. Secrets are masked and newlines folded, so the message is always one line.
// Interruptions and silent exit errors print nothing.
func printError(w io.Writer, err error, redact func(string) string) {
	if err == nil || errors.Is(err, context.Canceled) {
		return
	}
	var exitErr *ExitError
	if errors.As(err, &exitErr) && exitErr.Err == nil {
		return
	}
	// An unreachable endpoint is the whole story: the step that first dialled it is noise.
	var unreachable *cosmos.UnreachableError
	if errors.As(err, &unreachable) {
		err = unreachable
	}
	msg := render.Safe(oneLine(redact(err.Error())))
	fmt.Fprintf(w, "cfp: %s\n", msg)
	if h := hintOf(err); h != "" {
		fmt.Fprintf(w, "Try: %s\n", render.Safe(oneLine(redact(h))))
	}
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// heldDirError is a data directory that a running `cfp emulator` serves; Try: says to connect to
// it instead. It wraps the *emulator.LockedError.
type heldDirError struct {
	*emulator.LockedError
}

func (e *heldDirError) Error() string {
	holder := "another process"
	if e.PID > 0 {
		holder = fmt.Sprintf("process %d", e.PID)
	}
	return fmt.Sprintf("data directory %s is in use: %s serves it on %s", e.Dir, holder, e.Addr)
}

func (e *heldDirError) Unwrap() error { return e.LockedError }

func (e *heldDirError) Hint() string {
	return fmt.Sprintf("--endpoint http://%s/ (with the emulator's key) instead of --local=%s", e.Addr, e.Dir)
}

// explainLocked turns a data directory held by a serving emulator into a one-line error with
// a Try: hint to connect to it, and a corrupt one into its own one-line error. Other errors
// pass unchanged.
func explainLocked(err error) error {
	var ce *emulator.CorruptError
	if errors.As(err, &ce) {
		return ce // "data directory X is corrupt: ...", nothing to add
	}
	var le *emulator.LockedError
	if errors.As(err, &le) && le.Addr != "" {
		return &heldDirError{LockedError: le}
	}
	return err
}
