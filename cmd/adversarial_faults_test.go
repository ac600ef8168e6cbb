package cmd

// The adversarial suite for faults, secrets and the terminal: each table is a list of hostile
// situations (fault schedules on a served emulator, endpoints that never answer, credentials
// that fail, connection strings and flags that would leak a key, strings that would drive a
// terminal) and what cfp must do with each. The counts of cases are in docs/scripting.md's
// companion, the issue notes; add a row for every new case.

import (
	"context"
	"encoding/json"
	"maps"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/emulator"
	"github.com/cfp-dev/cfp/emulator/auth"
	"github.com/cfp-dev/cfp/internal/leases"
	"github.com/cfp-dev/cfp/internal/render"
	"github.com/cfp-dev/cfp/internal/testproc"
)

// advPrefix is the lease prefix seedEstimate writes; commands reach it with --lease-id-prefix,
// since the served emulator's host (127.0.0.1) is not the one the leases were written through.
const advPrefix = "advlocalhost_k5lnAA==_k5lnAPDiLsw="

// servedFixture seeds shop/orders (20 orders) and shop/leases (one lease per partition, at
// LSN 0) in a fresh data directory, serves it on a loopback port and returns the emulator and
// the arguments that reach it.
func servedFixture(t *testing.T) (*emulator.Emulator, []string) {
	t.Helper()
	dir := t.TempDir()
	seedEstimate(t, dir, advPrefix)
	emu, err := emulator.Open(emulator.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- emu.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		<-done
		_ = emu.Close()
	})
	return emu, []string{"--endpoint", "http://" + ln.Addr().String() + "/", "-d", "shop", "-c", "orders", "--lease-id-prefix", advPrefix}
}

// faultCase is one command run through a fault schedule on a served emulator.
type faultCase struct {
	name  string
	rules []emulator.FaultRule
	args  []string
	code  int
	// stdout and stderr, when set, must match; notStderr must not.
	stdout, stderr, notStderr string
}

var faultCases = []faultCase{
	{name: "tail -e through four 429s at start",
		rules: []emulator.FaultRule{{Status: 429, Count: 4, IncludeAccount: true}},
		args:  []string{"tail", "-e", "--from", "beginning"}, code: 0, stdout: `(?s)("id":"o\d+".*){20}`},
	{name: "tail -e through 429s on every other request",
		rules: []emulator.FaultRule{{Status: 429, Fraction: 0.5, Count: 12, IncludeAccount: true}},
		args:  []string{"tail", "-e", "--from", "beginning"}, code: 0, stdout: `(?s)("id":"o\d+".*){20}`},
	{name: "estimate through one 503",
		rules: []emulator.FaultRule{{Status: 503, Count: 1, IncludeAccount: true}},
		args:  []string{"estimate", "-o", "json"}, code: 0, stdout: `"lag"`},
	{name: "estimate through 503s on lease reads",
		rules: []emulator.FaultRule{{Status: 0, Latency: time.Millisecond, Count: 2}, {Status: 503, Count: 3}},
		args:  []string{"estimate", "-o", "json"}, code: 0, stdout: `"lag"`},
	{name: "leases list through one 503",
		rules: []emulator.FaultRule{{Status: 503, Count: 1, IncludeAccount: true}},
		args:  []string{"leases", "list", "-o", "json"}, code: 0, stdout: `"lease": "0"`},
	{name: "config --check through one 503",
		rules: []emulator.FaultRule{{Status: 503, Count: 1, IncludeAccount: true}},
		args:  []string{"config", "--check"}, code: 0},
	{name: "config --check through 429s and 503s",
		rules: []emulator.FaultRule{{Status: 429, Count: 2, IncludeAccount: true}, {Status: 503, Count: 2, IncludeAccount: true}},
		args:  []string{"config", "--check"}, code: 0},
	{name: "a lasting 503 is service unavailable, not throttling",
		rules: []emulator.FaultRule{{Status: 503}},
		args:  []string{"--max-retries", "1", "estimate"}, code: 1,
		stderr: `(?m)^cfp: .*service unavailable \(HTTP 503\).*\nTry: the service is unavailable`, notStderr: `429|throttl`},
	{name: "a lasting 429 is throttling",
		rules: []emulator.FaultRule{{Status: 429}},
		args:  []string{"--max-retries", "1", "leases", "list"}, code: 1,
		stderr: `(?m)^cfp: .*throttled \(HTTP 429\).*\nTry: the account is throttling`},
	{name: "retries are logged at info without the key",
		rules: []emulator.FaultRule{{Status: 429, Count: 2, IncludeAccount: true}},
		args:  []string{"--log-level", "info", "leases", "list"}, code: 0,
		stderr: `msg="retrying request".*status=429.*reason=throttled`, notStderr: regexp.QuoteMeta(auth.WellKnownKey)},
	{name: "tail -e through a 410 with substatus 1000",
		rules: []emulator.FaultRule{{Status: 410, Substatus: 1000, Count: 1, ChangeFeedOnly: true}},
		args:  []string{"tail", "-e", "--from", "beginning"}, code: 0, stdout: `(?s)("id":"o\d+".*){20}`},
	{name: "tail -e through a 410/1002 for a live partition",
		rules: []emulator.FaultRule{{Status: 410, Substatus: 1002, Count: 24, ChangeFeedOnly: true}},
		args:  []string{"tail", "-e", "--from", "beginning"}, code: 0, stdout: `(?s)("id":"o\d+".*){20}`},
}

func TestAdversarial_FaultSchedules(t *testing.T) {
	t.Parallel()
	for _, tc := range faultCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			emu, base := servedFixture(t)
			for _, r := range tc.rules {
				if err := emu.InjectFaults(r); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			code, stdout, stderr := runCLI(t, ctx, "", append(append([]string{}, base...), tc.args...)...)
			checkRun(t, code, stdout, stderr, tc.code, tc.stdout, tc.stderr, tc.notStderr)
		})
	}
}

// hangCase is one command against an endpoint that accepts connections and never answers.
type hangCase struct {
	name   string
	args   []string
	code   int
	stderr string
}

var hangCases = []hangCase{
	{name: "tail -e with a short request timeout",
		args: []string{"--request-timeout", "200ms", "tail", "-e"}, code: 1,
		stderr: `(?m)^cfp: .*no answer within 200ms\nTry: the endpoint accepted the request but did not answer`},
	{name: "estimate with a short request timeout",
		args: []string{"--request-timeout", "200ms", "estimate"}, code: 1, stderr: `no answer within 200ms`},
	{name: "tail -e --timeout",
		args: []string{"--request-timeout", "1m", "tail", "-e", "--timeout", "300ms"}, code: 1, stderr: `(?m)^cfp: gave up after --timeout 300ms`},
	{name: "estimate --timeout",
		args: []string{"--request-timeout", "1m", "estimate", "--timeout", "300ms"}, code: 1, stderr: `(?m)^cfp: gave up after --timeout 300ms`},
	{name: "leases list --timeout",
		args: []string{"--request-timeout", "1m", "leases", "list", "--timeout", "300ms"}, code: 1, stderr: `(?m)^cfp: gave up after --timeout 300ms`},
	{name: "config --check --timeout",
		args: []string{"--request-timeout", "1m", "config", "--check", "--timeout", "300ms"}, code: 1, stderr: `gave up after --timeout 300ms`},
	{name: "estimate --watch: an error line for every failed interval, and it goes on",
		args: []string{"--request-timeout", "100ms", "estimate", "--watch", "10ms", "--count", "3"}, code: 1,
		stderr: `(?s)(cfp: warning: estimate \d{4}-\d\d-\d\dT[^ ]+Z: .*no answer within 100ms.*\n){3}cfp: the last estimate of --count 3 failed`},
	{name: "estimate --watch with --timeout is refused",
		args: []string{"estimate", "--watch", "1s", "--timeout", "1s"}, code: 2, stderr: `^cfp: --timeout applies to one estimate`},
	{name: "tail without -e with --timeout is refused",
		args: []string{"tail", "--timeout", "1s"}, code: 2, stderr: `^cfp: --timeout needs -e/--exit-at-end`},
	{name: "CFP_REQUEST_TIMEOUT",
		args: []string{"leases", "export"}, code: 1, stderr: `no answer within 250ms`},
}

func TestAdversarial_SilentEndpoint(t *testing.T) {
	t.Parallel()
	for _, tc := range hangCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			endpoint := "http://" + testproc.SilentListener(t) + "/"
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			env := map[string]string{"NO_COLOR": "1", "COSMOS_KEY": auth.WellKnownKey, "CFP_REQUEST_TIMEOUT": "250ms"}
			args := append([]string{"--endpoint", endpoint, "-d", "shop", "-c", "orders", "-p", "proj"}, tc.args...)
			code, stdout, stderr := runEnv(ctx, env, "", args...)
			if ctx.Err() != nil {
				t.Fatalf("cfp %s still ran at the test deadline", strings.Join(args, " "))
			}
			checkRun(t, code, stdout, stderr, tc.code, "", tc.stderr, "")
		})
	}
}

// runEnv runs cfp in process with env as its whole environment.
func runEnv(ctx context.Context, env map[string]string, stdin string, args ...string) (code int, stdout, stderr string) {
	ios, in, out, errOut := render.Test()
	in.WriteString(stdin)
	code = MainWithIO(ctx, args, ios, func(k string) string { return env[k] })
	return code, out.String(), errOut.String()
}

// checkRun compares a run's exit code and output with what a case wants.
func checkRun(t *testing.T, code int, stdout, stderr string, wantCode int, wantStdout, wantStderr, notStderr string) {
	t.Helper()
	if code != wantCode {
		t.Errorf("exit %d, want %d", code, wantCode)
	}
	if wantStdout != "" && !regexp.MustCompile(wantStdout).MatchString(stdout) {
		t.Errorf("stdout does not match %q", wantStdout)
	}
	if wantStderr != "" && !regexp.MustCompile(wantStderr).MatchString(stderr) {
		t.Errorf("stderr does not match %q", wantStderr)
	}
	if notStderr != "" && regexp.MustCompile(notStderr).MatchString(stderr) {
		t.Errorf("stderr matches %q", notStderr)
	}
	if t.Failed() {
		t.Logf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
	}
}

// secretCase is one way of passing a credential that must never show in cfp's output.
type secretCase struct {
	name  string
	env   map[string]string
	args  []string
	files map[string]string // name -> content, written to the case's directory; "@name" in args is its path
	code  int
	// stdout and stderr, when set, must match.
	stdout, stderr string
}

const (
	advSecret = "c2VjcmV0LWtleS1uZXZlci1wcmludGVk" // must never be printed
	advCS     = "AccountEndpoint=https://acct.documents.azure.com:443/;AccountKey=" + advSecret + ";"
	advLease  = "AccountEndpoint=https://leases.documents.azure.com:443/;AccountKey=" + advSecret + ";"
)

var secretCases = []secretCase{
	{name: "a connection string without ';' keeps its key out of endpoint",
		args: []string{"--connection-string", "AccountEndpoint=https://acct.documents.azure.com:443/AccountKey=" + advSecret, "config", "-o", "json"},
		code: 2, stderr: `(?m)^cfp: --connection-string: parse connection string: AccountKey is missing$`},
	{name: "the same from the environment",
		env:  map[string]string{"COSMOS_CONNECTION_STRING": "AccountEndpoint=https://acct.documents.azure.com:443/AccountKey=" + advSecret},
		args: []string{"config"}, code: 2, stderr: `^cfp: COSMOS_CONNECTION_STRING: parse connection string: AccountKey is missing\n$`},
	{name: "a bad endpoint scheme quoting a key",
		args: []string{"--connection-string", "AccountEndpoint=ftp://acct/AccountKey=" + advSecret + ";AccountKey=" + advSecret, "config"},
		code: 2, stderr: `must start with https:// or http://`},
	{name: "an endpoint that is not a URL",
		args: []string{"--endpoint", "acct.documents.azure.com", "config"},
		code: 2, stderr: `^cfp: --endpoint: endpoint "acct.documents.azure.com" must start with https:// or http://\n$`},
	{name: "a lease endpoint that is not a URL",
		env:  map[string]string{"COSMOS_ENDPOINT": "https://acct.documents.azure.com:443/", "COSMOS_KEY": advSecret},
		args: []string{"--lease-endpoint", "leases:443", "config"}, code: 2, stderr: `^cfp: --lease-endpoint: endpoint "leases:443"`},
	{name: "a lease connection string without ';'",
		env:  map[string]string{"COSMOS_ENDPOINT": "https://acct.documents.azure.com:443/", "COSMOS_KEY": advSecret},
		args: []string{"--lease-connection-string", "AccountEndpoint=https://l/AccountKey=" + advSecret, "config"}, code: 2,
		stderr: `AccountKey is missing`},
	{name: "--connection-string warns like --key",
		args: []string{"--connection-string", advCS, "config", "-o", "json"}, code: 0,
		stderr: `^cfp: warning: --connection-string puts the account key in shell history and the process list; use --connection-string-file or COSMOS_CONNECTION_STRING\n$`,
		stdout: `"endpoint": "https://acct.documents.azure.com:443/"`},
	{name: "--lease-connection-string warns",
		env:  map[string]string{"COSMOS_CONNECTION_STRING": advCS},
		args: []string{"--lease-connection-string", advLease, "config", "-o", "json"}, code: 0,
		stderr: `^cfp: warning: --lease-connection-string puts the account key in shell history and the process list; use --lease-connection-string-file or CFP_LEASE_CONNECTION_STRING\n$`},
	{name: "COSMOS_CONNECTION_STRING does not warn",
		env: map[string]string{"COSMOS_CONNECTION_STRING": advCS}, args: []string{"config", "-o", "json"}, code: 0, stderr: `^$`},
	{name: "--connection-string-file",
		files: map[string]string{"cs": advCS + "\n"},
		args:  []string{"--connection-string-file", "@cs", "config", "-o", "table"}, code: 0, stderr: `^$`,
		stdout: `(?m)^endpoint\thttps://acct.documents.azure.com:443/\t--connection-string-file .*cs$`},
	{name: "--connection-string-file wins over COSMOS_CONNECTION_STRING",
		env:   map[string]string{"COSMOS_CONNECTION_STRING": "AccountEndpoint=https://other/;AccountKey=b3RoZXI=;"},
		files: map[string]string{"cs": advCS},
		args:  []string{"--connection-string-file", "@cs", "config", "-o", "json"}, code: 0, stdout: `"endpoint": "https://acct.documents.azure.com:443/"`},
	{name: "--lease-connection-string-file",
		env:   map[string]string{"COSMOS_CONNECTION_STRING": advCS},
		files: map[string]string{"lcs": advLease},
		args:  []string{"--lease-connection-string-file", "@lcs", "config", "-o", "json"}, code: 0, stderr: `^$`,
		stdout: `"endpoint": "https://leases.documents.azure.com:443/"`},
	{name: "a missing connection string file",
		args: []string{"--connection-string-file", "missing.cs", "config"}, code: 1,
		stderr: `(?m)^cfp: read --connection-string-file: open missing.cs: no such file or directory\nTry: pass a file that holds only the connection string$`},
	{name: "an empty connection string file", files: map[string]string{"cs": "\n"},
		args: []string{"--connection-string-file", "@cs", "config"}, code: 2, stderr: `is empty`},
	{name: "--connection-string-file with --connection-string",
		files: map[string]string{"cs": advCS},
		args:  []string{"--connection-string-file", "@cs", "--connection-string", advCS, "config"}, code: 2},
}

func TestAdversarial_Secrets(t *testing.T) {
	t.Parallel()
	for _, tc := range secretCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			args := append([]string{}, tc.args...)
			for name, content := range tc.files {
				path := filepath.Join(dir, name)
				if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
					t.Fatal(err)
				}
				for i, a := range args {
					if a == "@"+name {
						args[i] = path
					}
				}
			}
			env := map[string]string{"NO_COLOR": "1"}
			maps.Copy(env, tc.env)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			code, stdout, stderr := runEnv(ctx, env, "", args...)
			checkRun(t, code, stdout, stderr, tc.code, tc.stdout, tc.stderr, "")
			if strings.Contains(stdout+stderr, advSecret) {
				t.Errorf("the key was printed:\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
			}
			if strings.Count(stderr, "cfp: ")-strings.Count(stderr, "cfp: warning: ") > 1 {
				t.Errorf("more than one error line:\n%s", stderr)
			}
		})
	}
}

// hostileStrings are ids and owners that would drive a terminal if printed raw.
var hostileStrings = []string{
	"title\x1b]0;pwned\x07",
	"clear\x1b[2J\x1b[H",
	"row\nfake-lease\tfake-owner",
	"c1\u009b2J",
	"bidi\u202eevil",
}

// TestAdversarial_HostileStringsReachNoTerminal writes documents and a lease owner made of
// hostileStrings and shows them the ways a person sees them (tail's terminal line, the lease
// table on a terminal and in a pipe): no control character reaches stdout raw; JSON output
// escapes them (encoding/json) or, for C1 and bidi controls, keeps them for the program that
// reads it.
func TestAdversarial_HostileStringsReachNoTerminal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	acct := openLocal(t, dir, 1)
	ctx := context.Background()
	c := createContainer(t, acct, "shop", "orders", "/id")
	createContainer(t, acct, "shop", "leases", "/id")
	for _, s := range hostileStrings {
		body, _ := json.Marshal(map[string]string{"id": s, "note": s})
		if err := c.UpsertItem(ctx, s, body); err != nil {
			t.Fatal(err)
		}
	}
	parts, err := c.Partitions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	store := leases.NewStore(acct.LeaseDocuments("shop", "leases"), advPrefix, leases.StoreOptions{})
	l := leases.NewDotNetV0(advPrefix, parts[0].ID, parts[0].Range, "")
	l.Owner, l.Timestamp = strings.Join(hostileStrings, "|"), time.Now()
	if _, err := store.Create(ctx, l); err != nil {
		t.Fatal(err)
	}
	_ = acct.Close()

	raw := regexp.MustCompile("[\x00-\x08\x0b-\x1f\x7f]|\u009b|\u202e|\x1b\\]|\x1b\\[[0-9;]*[A-HJKST]")
	for _, tc := range []struct {
		name string
		tty  bool
		args []string
		rows int // lines on stdout, when known
	}{
		{"tail on a terminal", true, []string{"tail", "-e", "--from", "beginning", "-o", "table"}, len(hostileStrings)},
		{"leases list on a terminal", true, []string{"leases", "list", "-o", "table"}, 0},
		{"leases list in a pipe", false, []string{"leases", "list", "-o", "table"}, 0},
	} {
		ios, _, out, errOut := render.Test()
		ios.IsStdoutTTY, ios.Width = tc.tty, 200
		args := append([]string{"--local=" + dir, "-d", "shop", "-c", "orders", "--lease-id-prefix", advPrefix}, tc.args...)
		code := MainWithIO(ctx, args, ios, func(k string) string { return map[string]string{"NO_COLOR": "1"}[k] })
		if code != 0 {
			t.Errorf("%s: exit %d, stderr %q", tc.name, code, errOut)
			continue
		}
		if m := raw.FindString(out.String()); m != "" {
			t.Errorf("%s: stdout holds %q raw:\n%q", tc.name, m, out.String())
		}
		if regexp.MustCompile(`(?m)^fake-lease`).MatchString(out.String()) {
			t.Errorf("%s: a newline in an owner made a row:\n%s", tc.name, out)
		}
		if tc.rows > 0 && strings.Count(out.String(), "\n") != tc.rows {
			t.Errorf("%s: %d lines, want %d:\n%q", tc.name, strings.Count(out.String(), "\n"), tc.rows, out)
		}
	}
}
