//go:build unix

package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/internal/testproc"
)

// buildCFP builds the cfp binary into dir and returns its path.
func buildCFP(t *testing.T, dir string) string {
	t.Helper()
	bin, err := testproc.Build(dir)
	if errors.Is(err, exec.ErrNotFound) {
		t.Skipf("the chaos test builds cfp and needs the go command: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// startEmulator serves dir/data on a free loopback port, its log in dir/emulator.log, and stops
// it when the test ends.
func startEmulator(t *testing.T, bin, dir string, partitions int) *testproc.Emulator {
	t.Helper()
	e, err := testproc.StartEmulator(bin, testproc.EmulatorOptions{
		Data: filepath.Join(dir, "data"),
		Args: []string{"--partitions", fmt.Sprint(partitions)},
		Log:  filepath.Join(dir, "emulator.log"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopEmulator(t, e) })
	return e
}

// stopEmulator stops the emulator, failing the test if it did not stop cleanly (idempotent).
func stopEmulator(t *testing.T, e *testproc.Emulator) {
	t.Helper()
	if err := e.Stop(); err != nil {
		t.Error(err)
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
		"--from", "beginning",
		"--batch-size", fmt.Sprint(cfg.maxItems),
		"--lease-acquire-interval", "1s",
		"--lease-renew-interval", "1s",
		"--lease-expiration", "4s",
		"--poll-interval", "200ms",
		"--log-level", "info",
	)
	cmd.Env = append(testproc.CleanEnv(),
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
	cmd.Env = append(testproc.CleanEnv(), "COSMOS_CONNECTION_STRING="+cfg.connectionString)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("cfp %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return out, nil
}
