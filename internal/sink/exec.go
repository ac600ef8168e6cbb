package sink

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/leases"
)

// DefaultKillDelay is how long a child gets to exit after it was asked to stop (SIGTERM) before
// it is killed.
const DefaultKillDelay = 5 * time.Second

// DefaultExecTimeout is the default of `cfp process --exec-timeout`: how long an --exec command
// may run for one batch, and an --exec-lines child may take to answer one message, before it is
// stopped and the batch counts as failed. It is long enough for any reasonable batch and bounds
// how long a hung delegate holds its lease (the host renews the lease while it waits). The
// zero value of Exec.Timeout and ExecLines.AnswerTimeout means no limit.
const DefaultExecTimeout = 10 * time.Minute

// ErrTimeout reports that a delegate did not finish a batch (Exec) or answer a message
// (ExecLines) within its timeout; it was stopped, and the batch is a handler error.
var ErrTimeout = errors.New("delegate timed out")

// Exec runs Command once per batch with `sh -c`, the batch's items as a JSON array on its stdin
// and these variables added to its environment:
//
//	CFP_LEASE_TOKEN   the lease token
//	CFP_RANGE         the lease's EPK range as "min-max"
//	CFP_BATCH_SIZE    the number of items
//	CFP_CONTINUATION  the continuation the host checkpoints when the command succeeds
//
// The account secrets are removed from it (secretEnv): COSMOS_KEY and COSMOS_CONNECTION_STRING,
// the lease account's CFP_LEASE_KEY and CFP_LEASE_CONNECTION_STRING, and the Entra ID
// credentials' AZURE_CLIENT_SECRET, AZURE_CLIENT_CERTIFICATE_PASSWORD, AZURE_PASSWORD,
// IDENTITY_HEADER and MSI_SECRET.
// Exit status 0 means the batch was processed; any other status, or a failure to start, is a
// handler error (the batch comes again). The child's stdout and stderr go to Stdout and Stderr
// (discarded when nil); writes from concurrent children are serialised per Write. A command
// that exits 0 while a background process it started still holds its stdout or stderr open
// has processed its batch: cfp waits KillDelay for that output, then closes the pipes and logs
// a warning (once per lease).
type Exec struct {
	Command string
	Stdout  io.Writer
	Stderr  io.Writer
	// Env is the base environment (os.Environ() when nil), less the account secrets.
	Env []string
	// Dir is the working directory (the current one when empty).
	Dir string
	// KillDelay bounds how long a cancelled child may take to exit (DefaultKillDelay when 0).
	KillDelay time.Duration
	// Timeout bounds one batch's run (no limit when 0): then the command's process group is
	// stopped (SIGTERM, SIGKILL after KillDelay) and Handle fails with ErrTimeout.
	Timeout time.Duration
	// Logger receives warnings about the command (nothing is logged when nil).
	Logger *slog.Logger

	once           sync.Once
	stdout, stderr io.Writer
	warnMu         sync.Mutex
	warned         map[string]bool // leases warned about a background process holding the pipes
}

var _ feed.Handler = (*Exec)(nil)

// Handle runs the command for one batch.
func (e *Exec) Handle(ctx context.Context, b feed.Batch) error {
	e.once.Do(func() {
		e.stdout = lockWriter(e.Stdout)
		e.stderr = lockWriter(e.Stderr)
	})
	rctx := ctx
	if e.Timeout > 0 {
		var cancel context.CancelFunc
		rctx, cancel = context.WithTimeout(ctx, e.Timeout)
		defer cancel()
	}
	cmd := shell(rctx, e.Command, e.KillDelay)
	cmd.Dir = e.Dir
	cmd.Env = append(baseEnv(e.Env), batchEnv(b)...)
	cmd.Env = append(cmd.Env, "CFP_BATCH_SIZE="+strconv.Itoa(len(b.Items)))
	cmd.Stdin = bytes.NewReader(jsonArray(b.Items))
	cmd.Stdout = e.stdout
	tail := &stderrTail{}
	cmd.Stderr = tail
	if e.stderr != nil {
		cmd.Stderr = io.MultiWriter(e.stderr, tail)
	}
	err := cmd.Run()
	if errors.Is(err, exec.ErrWaitDelay) && cmd.ProcessState != nil && cmd.ProcessState.Success() {
		// The command exited 0; only a process it left behind kept the pipes open.
		e.warnPipesHeld(ctx, b.LeaseToken)
		err = nil
	}
	if err != nil && ctx.Err() == nil && rctx.Err() != nil {
		return fmt.Errorf("exec for lease %s: command still ran after %s: %w", b.LeaseToken, e.Timeout, ErrTimeout)
	}
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return &ExecError{Lease: b.LeaseToken, Status: exit.ExitCode(), Stderr: tail.lines()}
		}
		return fmt.Errorf("exec for lease %s: %w", b.LeaseToken, err)
	}
	return nil
}

// ExecError is the failure of an --exec command that exited with a status other than 0: the
// status and the last lines of what it wrote to stderr, which the processor records on the
// lease (leases.Failure) so that `cfp estimate` and `cfp leases show` say why.
type ExecError struct {
	Lease  string
	Status int
	// Stderr is the end of the command's stderr: at most leases.MaxFailureStderrLines lines
	// and leases.MaxFailureStderrBytes bytes.
	Stderr []string
}

func (e *ExecError) Error() string {
	return fmt.Sprintf("exec for lease %s: command exited with status %d", e.Lease, e.Status)
}

// ExitStatus returns the command's exit status.
func (e *ExecError) ExitStatus() int { return e.Status }

// StderrTail returns the last lines of the command's stderr.
func (e *ExecError) StderrTail() []string { return e.Stderr }

// stderrTail keeps the end of a command's stderr, as it passes through to the host's stderr.
type stderrTail struct {
	mu  sync.Mutex
	buf []byte
}

// stderrKeep is how much of the end of a command's stderr stderrTail keeps.
const stderrKeep = 4 * leases.MaxFailureStderrBytes

func (t *stderrTail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > stderrKeep {
		kept := t.buf[len(t.buf)-stderrKeep:]
		// The cut may fall inside a secret, whose remnant no redaction would recognise: the
		// partial first word goes too.
		if i := bytes.IndexFunc(kept, unicode.IsSpace); i >= 0 {
			kept = kept[i:]
		} else {
			kept = nil
		}
		t.buf = append(t.buf[:0], kept...)
	}
	return len(p), nil
}

// lines returns the last non-blank lines kept, within the bounds of a lease's failure record.
func (t *stderrTail) lines() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for l := range strings.SplitSeq(strings.ReplaceAll(string(t.buf), "\r\n", "\n"), "\n") {
		if l = strings.TrimRight(l, " \t\r"); strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return leases.TailLines(out, leases.MaxFailureStderrLines, leases.MaxFailureStderrBytes)
}

// warnPipesHeld logs, once per lease, that a background process kept the command's output open.
func (e *Exec) warnPipesHeld(ctx context.Context, lease string) {
	if e.Logger == nil {
		return
	}
	e.warnMu.Lock()
	defer e.warnMu.Unlock()
	if e.warned[lease] {
		return
	}
	if e.warned == nil {
		e.warned = map[string]bool{}
	}
	e.warned[lease] = true
	e.Logger.WarnContext(ctx, "exec command exited 0 but a background process kept its output open: batch processed, output cut off after the kill delay",
		"lease", lease, "kill_delay", killDelayOr(e.KillDelay), "hint", "redirect the background process's output (cmd >/dev/null 2>&1 &)")
}

// killDelayOr returns d, or DefaultKillDelay when d is not positive.
func killDelayOr(d time.Duration) time.Duration {
	if d <= 0 {
		return DefaultKillDelay
	}
	return d
}

// shell builds `sh -c command` in a process group of its own; when ctx ends the whole group is
// asked to stop with SIGTERM and killed killDelay later.
func shell(ctx context.Context, command string, killDelay time.Duration) *exec.Cmd {
	killDelay = killDelayOr(killDelay)
	cmd := exec.CommandContext(ctx, "sh", "-c", command)
	ownGroup(cmd)
	cmd.Cancel = func() error { return terminate(cmd, killDelay) }
	cmd.WaitDelay = killDelay
	return cmd
}

// secretEnv names the variables that hold the secrets of the monitored account and of a
// separate lease account: cfp's own, and those of the Microsoft Entra ID credentials cfp uses
// with --auth entra (azidentity's DefaultAzureCredential). Exec and ExecLines never pass
// them to a child (the names are matched ignoring case, as Windows does), so a delegate that
// prints or logs its environment cannot leak the account key or a credential that gets a token
// for the account. The child still runs as the same user: this prevents accidents, it is not a
// sandbox.
//
// The Entra ID variables are every one whose value is a secret among those azidentity v1.15.0
// reads (github.com/Azure/azure-sdk-for-go/sdk/azidentity): azidentity.go and
// environment_credential.go (AZURE_CLIENT_SECRET, AZURE_CLIENT_CERTIFICATE_PASSWORD,
// AZURE_PASSWORD), and managed_identity_client.go with the MSAL managed identity client it
// drives (github.com/AzureAD/microsoft-authentication-library-for-go apps/managedidentity:
// managedidentity.go, servicefabric.go, azure_ml.go), which sends IDENTITY_HEADER (App Service,
// Service Fabric) and MSI_SECRET (Azure ML) as the secret of the token request. The others
// hold no secret and stay: ids (AZURE_CLIENT_ID, AZURE_TENANT_ID, AZURE_USERNAME), endpoints
// (IDENTITY_ENDPOINT, MSI_ENDPOINT, IMDS_ENDPOINT, AZURE_AUTHORITY_HOST, ...) and file paths
// (AZURE_CLIENT_CERTIFICATE_PATH, AZURE_FEDERATED_TOKEN_FILE), whose files the child, as the
// same user, could read whatever its environment says.
var secretEnv = []string{
	// cfp's own: the account keys and connection strings.
	"COSMOS_KEY", "COSMOS_CONNECTION_STRING", "CFP_LEASE_KEY", "CFP_LEASE_CONNECTION_STRING",
	// azidentity's environment credential.
	"AZURE_CLIENT_SECRET", "AZURE_CLIENT_CERTIFICATE_PASSWORD", "AZURE_PASSWORD",
	// azidentity's managed identity credential.
	"IDENTITY_HEADER", "MSI_SECRET",
}

// baseEnv returns a copy of env (os.Environ() when nil) without the variables of secretEnv.
func baseEnv(env []string) []string {
	if env == nil {
		env = os.Environ()
	}
	out := make([]string, 0, len(env)+4)
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.ContainsFunc(secretEnv, func(s string) bool { return strings.EqualFold(s, name) }) {
			out = append(out, kv)
		}
	}
	return out
}

func batchEnv(b feed.Batch) []string {
	return []string{
		"CFP_LEASE_TOKEN=" + b.LeaseToken,
		"CFP_RANGE=" + b.Range.String(),
		"CFP_CONTINUATION=" + b.Continuation,
	}
}

// jsonArray joins raw items into one JSON array without re-encoding them.
func jsonArray(items []json.RawMessage) []byte {
	n := 2
	for _, it := range items {
		n += len(it) + 1
	}
	out := make([]byte, 0, n)
	out = append(out, '[')
	for i, it := range items {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, it...)
	}
	return append(out, ']')
}

// lockedWriter serialises Writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func lockWriter(w io.Writer) io.Writer {
	if w == nil {
		return nil
	}
	if _, ok := w.(*lockedWriter); ok {
		return w
	}
	return &lockedWriter{w: w}
}
