// Package testproc runs cfp the way a user does, for the end-to-end tests (test/chaos,
// test/jssdk) and the whole-command benchmarks (bench/...): it builds the cfp binary, serves a
// `cfp emulator` child on a free loopback port, reads its endpoint and well-known key from the
// serving line and stops it. It also holds the small helpers those callers share: a clean
// environment for the children and the tail of a log file for failure messages.
package testproc

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Build builds the cfp command into dir and returns the binary's path. The error wraps
// exec.ErrNotFound when there is no go command on PATH, and holds the compiler's output when
// the build fails.
func Build(dir string) (string, error) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("build cfp: %w", err)
	}
	bin := filepath.Join(dir, "cfp")
	if out, err := exec.Command(gobin, "build", "-o", bin, "github.com/cfp-dev/cfp").CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build cfp: %w\n%s", err, bytes.TrimSpace(out))
	}
	return bin, nil
}

// EmulatorOptions configures StartEmulator.
type EmulatorOptions struct {
	// Data is the data directory (--data).
	Data string
	// Args are more flags of `cfp emulator`, such as --partitions 4 or --log-level debug.
	// The key must stay the well-known one.
	Args []string
	// Env is the child's environment; nil means CleanEnv().
	Env []string
	// Stderr receives the emulator's log; nil discards it.
	Stderr io.Writer
	// Log, when set, is a file created to receive the emulator's log in place of Stderr; the
	// errors of StartEmulator and Stop then end with its last lines.
	Log string
	// StartTimeout bounds the wait for the serving line; 0 means 60s.
	StartTimeout time.Duration
	// StopGrace is how long Stop waits after the interrupt before it kills the emulator;
	// 0 means 20s.
	StopGrace time.Duration
}

// Emulator is a running `cfp emulator` child, serving on a loopback port.
type Emulator struct {
	// Endpoint, Key and ConnectionString are those of its serving line.
	Endpoint         string
	Key              string
	ConnectionString string

	cmd   *exec.Cmd
	grace time.Duration
	log   string
	done  chan struct{}
	err   error // Wait's result, once done is closed
	once  sync.Once
}

// StartEmulator starts `cfp emulator --addr 127.0.0.1:0 -o jsonl` of binary bin and waits for
// its serving line. The caller must Stop it.
func StartEmulator(bin string, opts EmulatorOptions) (*Emulator, error) {
	if opts.Env == nil {
		opts.Env = CleanEnv()
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 60 * time.Second
	}
	if opts.StopGrace == 0 {
		opts.StopGrace = 20 * time.Second
	}
	args := append([]string{"emulator", "--addr", "127.0.0.1:0", "--data", opts.Data, "-o", "jsonl"}, opts.Args...)
	cmd := exec.Command(bin, args...)
	cmd.Env = opts.Env
	first := &firstLine{line: make(chan []byte, 1)}
	cmd.Stdout, cmd.Stderr = first, opts.Stderr
	if opts.Log != "" {
		logf, err := os.Create(opts.Log)
		if err != nil {
			return nil, fmt.Errorf("create the emulator log: %w", err)
		}
		defer logf.Close() // the child has its own descriptor once started
		cmd.Stderr = logf
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start cfp emulator: %w", err)
	}
	e := &Emulator{cmd: cmd, grace: opts.StopGrace, log: opts.Log, done: make(chan struct{})}
	go func() {
		e.err = cmd.Wait()
		close(e.done)
	}()

	timer := time.NewTimer(opts.StartTimeout)
	defer timer.Stop()
	var line []byte
	select {
	case line = <-first.line:
	case <-e.done:
		return nil, e.withLog(fmt.Errorf("cfp emulator exited before it served: %v", e.err), 20)
	case <-timer.C:
		_ = e.Stop()
		return nil, e.withLog(fmt.Errorf("cfp emulator did not serve within %s", opts.StartTimeout), 20)
	}
	var view struct {
		Type             string `json:"type"`
		Endpoint         string `json:"endpoint"`
		Key              string `json:"key"`
		ConnectionString string `json:"connection_string"`
	}
	// The line holds the key: it never goes into an error.
	if err := json.Unmarshal(line, &view); err != nil || view.Type != "serving" || view.Endpoint == "" ||
		view.Key == "" || view.ConnectionString == "" {
		_ = e.Stop()
		return nil, e.withLog(fmt.Errorf("cfp emulator printed a line of type %q, want a serving line with an endpoint and the well-known key (%v)", view.Type, err), 20)
	}
	e.Endpoint, e.Key, e.ConnectionString = view.Endpoint, view.Key, view.ConnectionString
	return e, nil
}

// Stop interrupts the emulator, waits for it (killing it after the grace period) and returns
// how it ended: nil for a clean exit. It is idempotent: later calls return nil.
func (e *Emulator) Stop() error {
	err := error(nil)
	e.once.Do(func() {
		if !e.Exited() {
			_ = e.cmd.Process.Signal(os.Interrupt)
		}
		select {
		case <-e.done:
			if e.err != nil {
				err = fmt.Errorf("cfp emulator did not stop cleanly: %w", e.err)
			}
		case <-time.After(e.grace):
			_ = e.cmd.Process.Kill()
			<-e.done
			err = fmt.Errorf("cfp emulator ignored the interrupt for %s; killed", e.grace)
		}
	})
	return e.withLog(err, 10)
}

// withLog appends the last n lines of the emulator's log file, if it has one, to a non-nil err.
func (e *Emulator) withLog(err error, n int) error {
	if err == nil || e.log == "" {
		return err
	}
	return fmt.Errorf("%w\n%s", err, Tail(e.log, n))
}

// Pid is the emulator process's id (for its CPU time in /proc, say).
func (e *Emulator) Pid() int { return e.cmd.Process.Pid }

// Exited reports whether the emulator has ended.
func (e *Emulator) Exited() bool {
	select {
	case <-e.done:
		return true
	default:
		return false
	}
}

// firstLine is the emulator's stdout: it hands its first line to line and drops the rest.
// exec.Cmd writes to it from one goroutine.
type firstLine struct {
	buf  []byte
	sent bool
	line chan []byte
}

func (w *firstLine) Write(p []byte) (int, error) {
	if !w.sent {
		w.buf = append(w.buf, p...)
		if line, _, ok := bytes.Cut(w.buf, []byte{'\n'}); ok {
			w.sent = true
			w.line <- line
			w.buf = nil
		}
	}
	return len(p), nil
}

// CleanEnv is this process's environment without any COSMOS_* or CFP_* setting, so that a
// child never reaches (or prints) an account configured in the caller's shell, and with
// NO_COLOR=1.
func CleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "COSMOS_") || strings.HasPrefix(kv, "CFP_") || strings.HasPrefix(kv, "NO_COLOR=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "NO_COLOR=1")
}

// Tail returns the last n lines of the file name, for failure messages; the error's text when
// the file cannot be read.
func Tail(name string, n int) string {
	f, err := os.Open(name)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	if err := sc.Err(); err != nil && !errors.Is(err, io.EOF) {
		lines = append(lines, "("+err.Error()+")")
	}
	return strings.Join(lines, "\n")
}
