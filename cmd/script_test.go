package cmd

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// The end-to-end scripts in testdata/script/*.txtar run under testscript
// (github.com/rogpeppe/go-internal/testscript). `exec cfp ...` re-executes this test binary,
// which runs Main in a fresh process whose working directory is the script's $WORK. Besides
// testscript's built-in commands, scripts may use:
//
//	exitcode N prog args...   run prog and require exit code N (its output becomes stdout/stderr)
//	lines stdout|stderr|FILE N   require exactly N lines
//
// A background command expected to fail (an interrupted cfp exits 130) is started with
// `! exec cfp ... &name&`; `wait name` then checks that it failed and makes its output current.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"cfp": func() { os.Exit(Main(os.Args[1:])) },
	})
}

func TestScripts(t *testing.T) {
	t.Parallel()
	testscript.Run(t, testscript.Params{
		Dir: filepath.Join("testdata", "script"),
		Setup: func(env *testscript.Env) error {
			env.Vars = append(env.Vars, "NO_COLOR=1", "COLUMNS=100", "LANG=C", "TZ=UTC")
			for _, k := range []string{"GOCOVERDIR", "GORACE"} {
				if v := os.Getenv(k); v != "" {
					env.Vars = append(env.Vars, k+"="+v)
				}
			}
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exitcode": cmdExitCode,
			"lines":    cmdLines,
			"agestamp": cmdAgeStamp,
		},
		RequireExplicitExec: true,
	})
}

// cmdExitCode runs a program and requires its exit code: `exitcode N prog args...`.
func cmdExitCode(ts *testscript.TestScript, neg bool, args []string) {
	if neg {
		ts.Fatalf("usage: exitcode N prog args... (no !)")
	}
	if len(args) < 2 {
		ts.Fatalf("usage: exitcode N prog args...")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("exitcode: bad code %q", args[0])
	}
	got := exitCodeOf(ts.Exec(args[1], args[2:]...))
	if got != want {
		ts.Fatalf("exit code %d, want %d", got, want)
	}
}

func exitCodeOf(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return -1
}

// cmdLines requires a number of lines: `lines stdout|stderr|FILE N`.
func cmdLines(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: lines stdout|stderr|FILE N")
	}
	want, err := strconv.Atoi(args[1])
	if err != nil {
		ts.Fatalf("lines: bad count %q", args[1])
	}
	got := strings.Count(ts.ReadFile(args[0]), "\n")
	if (got == want) == neg {
		ts.Fatalf("%s has %d lines, want %d (negated: %v)", args[0], got, want, neg)
	}
}

// cmdAgeStamp replaces each {{age DURATION}} in FILE with the UTC time DURATION before now in
// .NET's lease timestamp format: `agestamp FILE`. Lease states depend on the reading clock.
func cmdAgeStamp(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: agestamp FILE")
	}
	now := time.Now().UTC()
	re := regexp.MustCompile(`\{\{age ([^}]+)\}\}`)
	var bad error
	out := re.ReplaceAllStringFunc(ts.ReadFile(args[0]), func(m string) string {
		d, err := time.ParseDuration(re.FindStringSubmatch(m)[1])
		if err != nil {
			bad = err
			return m
		}
		return now.Add(-d).Format("2006-01-02T15:04:05.0000000Z")
	})
	ts.Check(bad)
	ts.Check(os.WriteFile(ts.MkAbs(args[0]), []byte(out), 0o644))
}
