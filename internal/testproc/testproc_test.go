package testproc

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// fakeEnv names the behaviour of the test binary when it runs as a fake `cfp emulator`.
const fakeEnv = "TESTPROC_FAKE_EMULATOR"

const fakeKey = "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw=="

// TestMain runs the test binary as a fake `cfp emulator` when fakeEnv is set: serve prints a
// serving line and exits 0 on an interrupt, silent prints nothing, crash exits 3 at once,
// table prints a line that is not JSON.
func TestMain(m *testing.M) {
	mode := os.Getenv(fakeEnv)
	if mode == "" {
		os.Exit(m.Run())
	}
	args := os.Args[1:]
	if len(args) < 3 || args[0] != "emulator" || !slices.Contains(args, "127.0.0.1:0") {
		fmt.Fprintf(os.Stderr, "fake emulator: unexpected arguments %q\n", args)
		os.Exit(2)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt)
	fmt.Fprintln(os.Stderr, "fake emulator starting")
	switch mode {
	case "serve":
		endpoint := "http://127.0.0.1:40001/"
		fmt.Printf(`{"type":"serving","endpoint":%q,"key":%q,"connection_string":%q}`+"\n",
			endpoint, fakeKey, "AccountEndpoint="+endpoint+";AccountKey="+fakeKey+";")
		fmt.Println(`{"type":"more"}`)
	case "table":
		fmt.Println("ENDPOINT  http://127.0.0.1:40001/  KEY " + fakeKey)
	case "crash":
		os.Exit(3)
	}
	<-sig
	fmt.Fprintln(os.Stderr, "fake emulator stopped")
	os.Exit(0)
}

func fakeOptions(t *testing.T, mode string) EmulatorOptions {
	return EmulatorOptions{
		Data:         t.TempDir(),
		Env:          append(CleanEnv(), fakeEnv+"="+mode),
		StartTimeout: 2 * time.Second,
	}
}

func TestStartEmulator_ReadsServingLine(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(t.TempDir(), "emulator.log")
	opts := fakeOptions(t, "serve")
	opts.Log = log
	e, err := StartEmulator(exe, opts)
	if err != nil {
		t.Fatal(err)
	}
	if e.Endpoint != "http://127.0.0.1:40001/" || e.Key != fakeKey ||
		e.ConnectionString != "AccountEndpoint=http://127.0.0.1:40001/;AccountKey="+fakeKey+";" {
		t.Errorf("got endpoint %q, key %q, connection string %q", e.Endpoint, e.Key, e.ConnectionString)
	}
	if e.Exited() {
		t.Error("the emulator exited while serving")
	}
	if err := e.Stop(); err != nil {
		t.Errorf("Stop: %v", err)
	}
	if !e.Exited() {
		t.Error("the emulator still runs after Stop")
	}
	if err := e.Stop(); err != nil {
		t.Errorf("second Stop: %v, want nil", err)
	}
	if got := Tail(log, 1); got != "fake emulator stopped" {
		t.Errorf("last log line %q, want the fake's goodbye (stderr goes to Log)", got)
	}
}

func TestStartEmulator_Fails(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ mode, want string }{
		{"crash", "exited before it served: exit status 3"},
		{"silent", "did not serve within 2s"},
		{"table", `printed a line of type ""`},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			opts := fakeOptions(t, tc.mode)
			opts.Log = filepath.Join(t.TempDir(), "emulator.log")
			e, err := StartEmulator(exe, opts)
			if err == nil {
				e.Stop()
				t.Fatal("StartEmulator succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want it to say %q", err, tc.want)
			}
			if !strings.Contains(err.Error(), "\nfake emulator starting") {
				t.Errorf("error %q does not hold the end of the emulator's log", err)
			}
			if strings.Contains(err.Error(), fakeKey) {
				t.Errorf("error %q holds the key", err)
			}
		})
	}
}

func TestCleanEnv(t *testing.T) {
	t.Setenv("COSMOS_KEY", "secret")
	t.Setenv("CFP_PROFILE", "prod")
	t.Setenv("NO_COLOR", "")
	t.Setenv("TESTPROC_KEEP", "yes")
	env := CleanEnv()
	for _, kv := range env {
		if strings.HasPrefix(kv, "COSMOS_") || strings.HasPrefix(kv, "CFP_") {
			t.Errorf("CleanEnv kept %s", kv)
		}
	}
	if !slices.Contains(env, "TESTPROC_KEEP=yes") || !slices.Contains(env, "NO_COLOR=1") || slices.Contains(env, "NO_COLOR=") {
		t.Errorf("CleanEnv = %q, want TESTPROC_KEEP=yes and NO_COLOR=1 only", env)
	}
}

func TestTail(t *testing.T) {
	t.Parallel()
	name := filepath.Join(t.TempDir(), "log")
	if err := os.WriteFile(name, []byte("a\nb\nc\nd\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for n, want := range map[int]string{2: "c\nd", 4: "a\nb\nc\nd", 9: "a\nb\nc\nd"} {
		if got := Tail(name, n); got != want {
			t.Errorf("Tail(%d) = %q, want %q", n, got, want)
		}
	}
	if got := Tail(filepath.Join(t.TempDir(), "missing"), 3); !strings.Contains(got, "no such file") {
		t.Errorf("Tail of a missing file = %q, want the error", got)
	}
}
