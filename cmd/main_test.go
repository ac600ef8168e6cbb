package cmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/cfp-dev/cfp/emulator/auth"
	"github.com/cfp-dev/cfp/internal/cosmos"
	"github.com/cfp-dev/cfp/internal/leases"
	"github.com/cfp-dev/cfp/internal/render"
)

type authErr struct{}

func (authErr) Error() string   { return "token refused" }
func (authErr) AuthError() bool { return true }

func TestExitCode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		err         error
		interrupted bool
		want        int
	}{
		{"ok", nil, false, 0},
		{"error", errors.New("boom"), false, 1},
		{"usage", usageErrorf("bad"), false, 2},
		{"wrapped usage", fmt.Errorf("x: %w", &UsageError{Err: errors.New("bad")}), false, 2},
		{"threshold", &ExitError{Code: 3}, false, 3},
		{"cosmos auth", fmt.Errorf("list leases: %w", &cosmos.AuthError{Status: 401}), false, 4},
		{"auth interface", fmt.Errorf("open: %w", authErr{}), false, 4},
		{"auth in a join", errors.Join(errors.New("a"), authErr{}), false, 4},
		{"interrupted", context.Canceled, true, 130},
		{"interrupted clean", nil, true, 130},
		{"interrupted but chose", &ExitError{Code: 0}, true, 0},
	}
	for _, tt := range tests {
		if got := exitCode(tt.err, tt.interrupted); got != tt.want {
			t.Errorf("%s: exitCode = %d, want %d", tt.name, got, tt.want)
		}
	}
}

func TestPrintError(t *testing.T) {
	t.Parallel()
	noRedact := func(s string) string { return s }
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"plain", errors.New("read lease 0: boom"), "cfp: read lease 0: boom\n"},
		{"multi-line folded", errors.New("first\nsecond  line"), "cfp: first second line\n"},
		{"hint", withHint(errors.New("no leases"), "run cfp process first"), "cfp: no leases\nTry: run cfp process first\n"},
		{"wrapped hint", fmt.Errorf("list: %w", withHint(errors.New("x"), "y")), "cfp: list: x\nTry: y\n"},
		{"auth hint", &cosmos.AuthError{Status: 401, Op: "read feed", Hint: "check the key"}, "cfp: read feed: unauthorized (HTTP 401)\nTry: check the key\n"},
		{"not found hint", fmt.Errorf("read container db/c: %w", leases.ErrNotFound), "cfp: read container db/c: not found\nTry: check the names in"},
		{"canceled is silent", fmt.Errorf("read: %w", context.Canceled), ""},
		{"silent exit", &ExitError{Code: 3}, ""},
		{"exit with message", &ExitError{Code: 3, Err: errors.New("lag 12 > 10")}, "cfp: lag 12 > 10\n"},
	}
	for _, tt := range tests {
		var b bytes.Buffer
		printError(&b, tt.err, noRedact)
		if !strings.HasPrefix(b.String(), tt.want) || (tt.want == "" && b.Len() > 0) {
			t.Errorf("%s: printed %q, want %q", tt.name, b.String(), tt.want)
		}
	}
}

func TestPrintError_RedactsSecrets(t *testing.T) {
	t.Parallel()
	f := &factory{}
	f.addSecret("c2VjcmV0a2V5")
	var b bytes.Buffer
	printError(&b, withHint(errors.New("bad key c2VjcmV0a2V5"), "key c2VjcmV0a2V5 is wrong"), f.redact)
	if strings.Contains(b.String(), "c2VjcmV0a2V5") {
		t.Errorf("printed a secret: %q", b.String())
	}
	if !strings.Contains(b.String(), "[REDACTED]") {
		t.Errorf("printed %q, want the key masked", b.String())
	}
}

// run runs cfp in process with the given environment and returns exit code, stdout, stderr.
func run(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	ios, _, out, errOut := render.Test()
	code := MainWithIO(context.Background(), args, ios, func(k string) string { return env[k] })
	return code, out.String(), errOut.String()
}

func TestMainWithIO_UsageErrorShowsShortUsage(t *testing.T) {
	t.Parallel()
	code, out, errOut := run(t, nil, "version", "--nope")
	if code != 2 || out != "" {
		t.Fatalf("exit %d, stdout %q; want 2 and nothing", code, out)
	}
	lines := strings.Split(errOut, "\n")
	if lines[0] != "cfp: unknown flag: --nope" {
		t.Errorf("first line = %q", lines[0])
	}
	if !strings.Contains(errOut, "Usage: cfp version") || strings.Contains(errOut, "--connection-string") {
		t.Errorf("stderr = %q, want the short usage without the global flags", errOut)
	}
}

func TestMainWithIO_NoAccountIsOneLine(t *testing.T) {
	t.Parallel()
	code, _, errOut := run(t, nil, "estimate", "-d", "shop", "-c", "orders", "-p", "p")
	if code != 2 || strings.Count(errOut, "\n") != 1 {
		t.Errorf("exit %d, stderr %q; want 2 and one line", code, errOut)
	}
}

func TestMainWithIO_Interrupted(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ios, _, _, _ := render.Test()
	if code := MainWithIO(ctx, []string{"version"}, ios, func(string) string { return "" }); code != 130 {
		t.Errorf("exit %d after cancellation, want 130", code)
	}
}

func TestAccountConfig(t *testing.T) {
	t.Parallel()
	const ep = "https://acct.documents.azure.com:443/"
	tests := []struct {
		name    string
		env     map[string]string
		args    []string
		want    accountConfig
		wantErr string
	}{
		{name: "endpoint and env key", env: map[string]string{"COSMOS_ENDPOINT": ep, "COSMOS_KEY": "a2V5a2V5"},
			want: accountConfig{Endpoint: ep, Key: "a2V5a2V5", Auth: "key"}},
		{name: "endpoint alone is entra", env: map[string]string{"COSMOS_ENDPOINT": ep},
			want: accountConfig{Endpoint: ep, Auth: "entra"}},
		{name: "flag beats env", env: map[string]string{"COSMOS_ENDPOINT": "https://other/"}, args: []string{"--endpoint", ep},
			want: accountConfig{Endpoint: ep, Auth: "entra"}},
		{name: "loopback endpoint takes the emulator key", env: map[string]string{"COSMOS_ENDPOINT": "http://localhost:8081/"},
			want: accountConfig{Endpoint: "http://localhost:8081/", Key: auth.WellKnownKey, Auth: "key"}},
		{name: "loopback IP endpoint takes the emulator key", args: []string{"--endpoint", "http://127.0.0.1:18081/"},
			want: accountConfig{Endpoint: "http://127.0.0.1:18081/", Key: auth.WellKnownKey, Auth: "key"}},
		{name: "loopback with --auth entra stays entra", args: []string{"--endpoint", "http://localhost:8081/", "--auth", "entra"},
			want: accountConfig{Endpoint: "http://localhost:8081/", Auth: "entra"}},
		{name: "local default dir", args: []string{"--local"}, want: accountConfig{LocalDir: ".cfp"}},
		{name: "local from env", env: map[string]string{"CFP_LOCAL": "/tmp/x"}, want: accountConfig{LocalDir: "/tmp/x"}},
		{name: "connection string", env: map[string]string{"COSMOS_CONNECTION_STRING": "AccountEndpoint=" + ep + ";AccountKey=a2V5;"},
			want: accountConfig{ConnectionString: "AccountEndpoint=" + ep + ";AccountKey=a2V5;", Auth: "key"}},
		{name: "none", wantErr: "no Cosmos DB account configured"},
		{name: "two in env", env: map[string]string{"COSMOS_ENDPOINT": ep, "CFP_LOCAL": "x"}, wantErr: "more than one account configured"},
		{name: "entra with key", env: map[string]string{"COSMOS_ENDPOINT": ep, "COSMOS_KEY": "a2V5"}, args: []string{"--auth", "entra"},
			wantErr: "--auth entra does not use an account key"},
		{name: "key auth without key", env: map[string]string{"COSMOS_ENDPOINT": ep}, args: []string{"--auth", "key"},
			wantErr: "--auth key needs a key"},
		// A connection string holds a key: --auth entra cannot apply to it, as --lease-auth
		// entra cannot to --lease-connection-string (it used to be ignored silently).
		{name: "connection string and entra", env: map[string]string{"COSMOS_CONNECTION_STRING": "AccountEndpoint=" + ep + ";AccountKey=a2V5;"},
			args: []string{"--auth", "entra"}, wantErr: "--auth entra does not use a connection string"},
		{name: "connection string and key auth", env: map[string]string{"COSMOS_CONNECTION_STRING": "AccountEndpoint=" + ep + ";AccountKey=a2V5;"},
			args: []string{"--auth", "key"}, want: accountConfig{ConnectionString: "AccountEndpoint=" + ep + ";AccountKey=a2V5;", Auth: "key"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ios, _, _, _ := render.Test()
			f := &factory{IO: ios, Global: &globalOptions{}, Getenv: func(k string) string { return tt.env[k] }}
			var got accountConfig
			var gotErr error
			root := newRootCmd(f)
			probe := newProbeCmd(func() { got, gotErr = f.accountConfig() })
			root.AddCommand(probe)
			root.SetArgs(append(tt.args, "probe"))
			root.SetOut(io.Discard)
			if err := root.Execute(); err != nil {
				t.Fatal(err)
			}
			if tt.wantErr != "" {
				var u *UsageError
				if gotErr == nil || !strings.Contains(gotErr.Error(), tt.wantErr) || !errors.As(gotErr, &u) {
					t.Fatalf("err = %v, want a usage error containing %q", gotErr, tt.wantErr)
				}
				return
			}
			if gotErr != nil {
				t.Fatal(gotErr)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("config = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestOutputFormat(t *testing.T) {
	t.Parallel()
	tests := []struct {
		output, jq string
		tty        bool
		pipe       render.Format
		want       render.Format
		wantErr    bool
	}{
		{"", "", true, render.FormatJSONL, render.FormatTable, false},
		{"", "", false, render.FormatJSONL, render.FormatJSONL, false},
		{"json", "", true, render.FormatJSONL, render.FormatJSON, false},
		{"", ".x", true, render.FormatJSONL, render.FormatJSONL, false},
		{"", ".x", true, render.FormatTable, render.FormatJSON, false},
		{"table", ".x", false, render.FormatJSON, "", true},
	}
	for _, tt := range tests {
		ios, _, _, _ := render.Test()
		ios.IsStdoutTTY = tt.tty
		f := &factory{IO: ios, Global: &globalOptions{Output: tt.output, JQ: tt.jq}}
		got, err := f.outputFormat(tt.pipe)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("-o %q --jq %q tty=%v pipe=%s: got %q, %v; want %q (error %v)", tt.output, tt.jq, tt.tty, tt.pipe, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestRequireContainer(t *testing.T) {
	t.Parallel()
	f := &factory{Global: &globalOptions{Database: "shop"}}
	err := f.requireContainer()
	var u *UsageError
	if !errors.As(err, &u) || !strings.Contains(err.Error(), "-c/--container (COSMOS_CONTAINER)") || strings.Contains(err.Error(), "--database") {
		t.Errorf("err = %v, want a usage error naming only the container flag and env", err)
	}
	f.Global.Container = "orders"
	if err := f.requireContainer(); err != nil {
		t.Errorf("with both set: %v", err)
	}
}

// newProbeCmd returns a command that only calls fn, to test the root's flag and environment
// handling without a real command.
func newProbeCmd(fn func()) *cobra.Command {
	return &cobra.Command{
		Use:  "probe",
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			fn()
			return nil
		},
	}
}

func TestMainWithIO_LocalWithSpace(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// "--local DIR" with an existing directory is --local=DIR, before the command too.
	code, _, errOut := run(t, nil, "--local", dir, "tail", "-d", "shop", "-c", "orders", "-e")
	if code != 1 || !strings.Contains(errOut, "container shop/orders: not found") {
		t.Fatalf("exit %d, stderr %q; want 1 and the container not found in %s", code, errOut, dir)
	}
	if _, err := os.Stat(filepath.Join(dir, "cfp-emulator.db")); err != nil {
		t.Errorf("--local %s did not open that directory: %v", dir, err)
	}
	// "--local" before a command is the default directory: no --local= hint.
	code, _, errOut = run(t, nil, "--local", "config", "--nope")
	if code != 2 || strings.Contains(errOut, "--local=") {
		t.Errorf("--local config --nope: exit %d, stderr %q; want 2 without a --local= hint", code, errOut)
	}
}

// TestMainWithIO_UnreachableEndpoint: a command against a port nothing listens on fails at
// once (not after about 10 s of retries) with one line that names the endpoint and the cause,
// not the step that first dialled it, and a Try: line.
func TestMainWithIO_UnreachableEndpoint(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ep := "http://" + l.Addr().String() + "/"
	_ = l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start := time.Now()
	code, _, errOut := runEnv(ctx, map[string]string{"COSMOS_ENDPOINT": ep}, "", "tail", "-d", "shop", "-c", "orders", "-e")
	t.Logf("failed after %s", time.Since(start).Round(time.Millisecond))
	if ctx.Err() != nil {
		t.Fatal("returned only at the test's deadline")
	}
	want := "cfp: cannot reach " + ep + " (connection refused)\nTry: check --endpoint"
	if code != 1 || !strings.HasPrefix(errOut, want) || strings.Count(errOut, "\n") != 2 {
		t.Errorf("exit %d, stderr %q; want 1 and %q...", code, errOut, want)
	}
}
