//go:build unix

package chaos

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// buildCFP builds the cfp binary into dir and returns its path.
func buildCFP(t *testing.T, dir string) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("the chaos test builds cfp and needs the go command: %v", err)
	}
	bin := filepath.Join(dir, "cfp")
	cmd := exec.Command(gobin, "build", "-o", bin, "github.com/cfp-dev/cfp")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build cfp: %v\n%s", err, out)
	}
	return bin
}

// emulatorProc is a `cfp emulator` child process.
type emulatorProc struct {
	cmd              *exec.Cmd
	done             chan struct{}
	err              error // Wait's result, once done is closed
	endpoint         string
	connectionString string
	log              string
}

// startEmulator serves dir/data on a free loopback port and waits for its "serving" line.
func startEmulator(t *testing.T, bin, dir string, partitions int) *emulatorProc {
	t.Helper()
	out := filepath.Join(dir, "emulator.out")
	logName := filepath.Join(dir, "emulator.log")
	stdout, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer stdout.Close()
	stderr, err := os.Create(logName)
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	cmd := exec.Command(bin, "emulator", "--addr", "127.0.0.1:0", "--data", filepath.Join(dir, "data"),
		"--partitions", fmt.Sprint(partitions), "-o", "jsonl")
	cmd.Env = cleanEnv()
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start cfp emulator: %v", err)
	}
	e := &emulatorProc{cmd: cmd, log: logName, done: make(chan struct{})}
	go func() {
		e.err = cmd.Wait()
		close(e.done)
	}()
	t.Cleanup(func() { e.stop(t) })

	var view struct {
		Type             string `json:"type"`
		Endpoint         string `json:"endpoint"`
		ConnectionString string `json:"connection_string"`
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		b, _ := os.ReadFile(out)
		if line, _, ok := bytes.Cut(b, []byte{'\n'}); ok {
			if err := json.Unmarshal(line, &view); err != nil || view.Type != "serving" || view.ConnectionString == "" {
				t.Fatalf("cfp emulator printed %q, want a serving line with a connection string (%v)", line, err)
			}
			break
		}
		if e.exited() || time.Now().After(deadline) {
			t.Fatalf("cfp emulator did not start serving:\n%s", tail(logName, 20))
		}
		time.Sleep(50 * time.Millisecond)
	}
	e.endpoint, e.connectionString = view.Endpoint, view.ConnectionString
	return e
}

// stop interrupts the emulator and waits for it (idempotent).
func (e *emulatorProc) stop(t *testing.T) {
	if e.exited() {
		return
	}
	_ = e.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-e.done:
		if e.err != nil {
			t.Errorf("cfp emulator did not stop cleanly on SIGINT: %v\n%s", e.err, tail(e.log, 10))
		}
	case <-time.After(20 * time.Second):
		_ = syscall.Kill(-e.cmd.Process.Pid, syscall.SIGKILL)
		<-e.done
		t.Errorf("cfp emulator ignored SIGINT for 20s; killed")
	}
}

// exited reports whether the emulator has ended.
func (e *emulatorProc) exited() bool {
	select {
	case <-e.done:
		return true
	default:
		return false
	}
}

// hostConfig is what every `cfp process` host of a run shares.
type hostConfig struct {
	bin, dir         string
	connectionString string
	database         string
	container        string
	processor        string
	recorder         string // the --exec command
	maxItems         int
	handlerDelay     time.Duration
}

// hostProc is one running `cfp process` host.
type hostProc struct {
	slot     string // h1, h2, ...: its record file and log
	instance string // --instance
	cmd      *exec.Cmd
	done     chan struct{}
	err      error // Wait's result, once done is closed
	started  time.Time
}

// startHost starts `cfp process` for slot as instance.
func startHost(cfg hostConfig, slot, instance string) (*hostProc, error) {
	logf, err := os.OpenFile(filepath.Join(cfg.dir, slot+".log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	fmt.Fprintf(logf, "=== %s start instance %s\n", time.Now().Format(time.RFC3339Nano), instance)
	cmd := exec.Command(cfg.bin, "process",
		"-d", cfg.database, "-c", cfg.container, "-p", cfg.processor,
		"--instance", instance,
		"--exec", cfg.recorder,
		"--start-from", "beginning",
		"--max-items", fmt.Sprint(cfg.maxItems),
		"--lease-acquire-interval", "1s",
		"--lease-renew-interval", "1s",
		"--lease-expiration", "4s",
		"--poll-interval", "200ms",
		"--log-level", "info",
	)
	cmd.Env = append(cleanEnv(),
		"COSMOS_CONNECTION_STRING="+cfg.connectionString,
		recorderFileEnv+"="+filepath.Join(cfg.dir, slot+".jsonl"),
		recorderHostEnv+"="+instance,
		recorderDelayEnv+"="+cfg.handlerDelay.String(),
	)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group, so that a SIGKILL takes the host and its batch in flight at once.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start cfp process %s: %w", instance, err)
	}
	h := &hostProc{slot: slot, instance: instance, cmd: cmd, done: make(chan struct{}), started: time.Now()}
	go func() {
		h.err = cmd.Wait()
		close(h.done)
	}()
	return h, nil
}

// kill SIGKILLs the host's process group and waits for the host.
func (h *hostProc) kill() {
	_ = syscall.Kill(-h.cmd.Process.Pid, syscall.SIGKILL)
	<-h.done
}

// signal sends sig to the host's process group (SIGSTOP and SIGCONT freeze and wake it).
func (h *hostProc) signal(sig syscall.Signal) {
	_ = syscall.Kill(-h.cmd.Process.Pid, sig)
}

// interrupt sends SIGINT to the host (not its children: the host stops them) and waits up to
// grace; it returns the exit code, or an error when the host had to be killed.
func (h *hostProc) interrupt(grace time.Duration) (int, error) {
	select {
	case <-h.done:
		return -1, fmt.Errorf("host %s had already exited: %v", h.instance, h.err)
	default:
	}
	_ = h.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-h.done:
	case <-time.After(grace):
		h.kill()
		return -1, fmt.Errorf("host %s did not exit within %s of SIGINT; killed", h.instance, grace)
	}
	var ee *exec.ExitError
	if errors.As(h.err, &ee) {
		return ee.ExitCode(), nil
	}
	if h.err != nil {
		return -1, h.err
	}
	return 0, nil
}

// exited reports whether the host ended on its own.
func (h *hostProc) exited() bool {
	select {
	case <-h.done:
		return true
	default:
		return false
	}
}

// runCFP runs a short cfp command against the emulator and returns its stdout.
func runCFP(ctx context.Context, cfg hostConfig, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, cfg.bin, args...)
	cmd.Env = append(cleanEnv(), "COSMOS_CONNECTION_STRING="+cfg.connectionString)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("cfp %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return out, nil
}

// cleanEnv is the test's environment without any COSMOS_*/CFP_* setting that could point the
// children at another account.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "COSMOS_") || strings.HasPrefix(kv, "CFP_") || strings.HasPrefix(kv, "NO_COLOR=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "NO_COLOR=1")
}

// tail returns the last n lines of a file, for failure messages.
func tail(name string, n int) string {
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
	return strings.Join(lines, "\n")
}
