package cmd

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The end-to-end scripts in testdata/script/*.txtar use the testscript language
// (github.com/rogpeppe/go-internal/testscript) for the commands listed at runScript. The
// module graph lacks golang.org/x/tools, which testscript's txtar needs, so this file runs
// them itself; the scripts are meant to move to testscript unchanged once it builds.
//
// As with testscript, `exec cfp ...` re-executes this test binary, which then runs Main in
// a fresh process whose working directory is the script's $WORK.

const scriptMainEnv = "CFP_SCRIPT_MAIN"

var scriptFilter = flag.String("script", "", "run only the scripts whose name contains this")

func TestMain(m *testing.M) {
	if os.Getenv(scriptMainEnv) == "1" {
		os.Exit(Main(os.Args[1:]))
	}
	os.Exit(m.Run())
}

func TestScripts(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("testdata", "script", "*.txtar"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no scripts in testdata/script")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".txtar")
		if !strings.Contains(name, *scriptFilter) {
			continue
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			runScript(t, self, string(data))
		})
	}
}

// script is the state of one running script.
type script struct {
	t       *testing.T
	self    string
	work    string
	env     map[string]string
	stdout  string
	stderr  string
	bg      map[string]*bgCmd
	line    int
	logBuf  strings.Builder
	stopped bool
}

type bgCmd struct {
	cmd            *exec.Cmd
	stdout, stderr *bytes.Buffer
	done           chan error
}

// runScript runs a txtar script: the comment part holds commands, one a line, and the files
// are written to $WORK first. Commands (a leading ! negates, a trailing &name& runs in the
// background):
//
//	exec prog args...        run prog (cfp is this binary's Main); fail on a non-zero exit
//	exitcode N prog args...  run prog and require exit code N
//	stdout|stderr REGEXP     require a match in the last command's output (multi-line mode)
//	lines stdout|stderr N    require N lines
//	cmp stdout|stderr|FILE FILE   require equal contents
//	exists FILE              require the file to exist
//	env KEY=VALUE            set a variable for later commands ($KEY expands in arguments)
//	kill [-INT|-TERM|-KILL] name   signal a background command
//	wait name                wait for a background command; its output becomes the last output
//	skip MESSAGE             skip the rest of the script
//	stop                     end the script successfully
func runScript(t *testing.T, self, text string) {
	s := &script{
		t:    t,
		self: self,
		work: t.TempDir(),
		bg:   map[string]*bgCmd{},
	}
	s.env = map[string]string{
		"WORK":        s.work,
		"HOME":        filepath.Join(s.work, ".home"),
		"TMPDIR":      filepath.Join(s.work, ".tmp"),
		"PATH":        os.Getenv("PATH"),
		"NO_COLOR":    "1",
		"COLUMNS":     "100",
		"GOCOVERDIR":  os.Getenv("GOCOVERDIR"),
		scriptMainEnv: "1",
		"LANG":        "C",
		"GORACE":      os.Getenv("GORACE"),
		"TZ":          "UTC",
	}
	for _, d := range []string{s.env["HOME"], s.env["TMPDIR"]} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	comment, files := parseTxtar(text)
	for name, content := range files {
		p := filepath.Join(s.work, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		for name, b := range s.bg {
			_ = b.cmd.Process.Kill()
			<-b.done
			s.logf("killed background %s at end of script", name)
		}
		if t.Failed() {
			t.Log(s.logBuf.String())
		}
	}()
	for i, raw := range strings.Split(comment, "\n") {
		s.line = i + 1
		line := strings.TrimSpace(raw)
		if line == "" || strings.HasPrefix(line, "#") {
			if line != "" {
				s.logf("%s", line)
			}
			continue
		}
		s.logf("> %s", line)
		s.run(line)
		if s.stopped || t.Failed() || t.Skipped() {
			return
		}
	}
}

func (s *script) logf(format string, args ...any) {
	fmt.Fprintf(&s.logBuf, format+"\n", args...)
}

func (s *script) fatalf(format string, args ...any) {
	s.t.Helper()
	s.t.Log(s.logBuf.String())
	s.logBuf.Reset()
	s.t.Fatalf("line %d: %s", s.line, fmt.Sprintf(format, args...))
}

func (s *script) run(line string) {
	args := s.fields(line)
	neg := false
	if args[0] == "!" {
		neg, args = true, args[1:]
	}
	bgName := ""
	if last := args[len(args)-1]; len(last) > 2 && strings.HasPrefix(last, "&") && strings.HasSuffix(last, "&") {
		bgName, args = last[1:len(last)-1], args[:len(args)-1]
	}
	cmd, args := args[0], args[1:]
	switch cmd {
	case "exec":
		s.needArgs(args, 1)
		if bgName != "" {
			s.startBackground(bgName, args)
			return
		}
		code := s.exec(args)
		if neg && code == 0 {
			s.fatalf("unexpected success")
		}
		if !neg && code != 0 {
			s.fatalf("exit code %d\nstderr:\n%s", code, s.stderr)
		}
	case "exitcode":
		s.needArgs(args, 2)
		want, err := strconv.Atoi(args[0])
		if err != nil {
			s.fatalf("exitcode: bad code %q", args[0])
		}
		if got := s.exec(args[1:]); got != want {
			s.fatalf("exit code %d, want %d\nstderr:\n%s", got, want, s.stderr)
		}
	case "stdout", "stderr":
		s.needArgs(args, 1)
		re, err := regexp.Compile("(?m)" + args[0])
		if err != nil {
			s.fatalf("%s: %v", cmd, err)
		}
		text := s.stdout
		if cmd == "stderr" {
			text = s.stderr
		}
		if re.MatchString(text) == neg {
			if neg {
				s.fatalf("unexpected match for %q in %s:\n%s", args[0], cmd, text)
			}
			s.fatalf("no match for %q in %s:\n%s", args[0], cmd, text)
		}
	case "lines":
		s.needArgs(args, 2)
		want, err := strconv.Atoi(args[1])
		if err != nil {
			s.fatalf("lines: bad count %q", args[1])
		}
		if got := strings.Count(s.read(args[0]), "\n"); (got == want) == neg {
			s.fatalf("%s has %d lines, want %d (negated: %v)", args[0], got, want, neg)
		}
	case "cmp":
		s.needArgs(args, 2)
		a, b := s.read(args[0]), s.read(args[1])
		if (a == b) == neg {
			s.fatalf("%s and %s: equal=%v, want %v\n--- %s\n%s--- %s\n%s", args[0], args[1], a == b, !neg, args[0], a, args[1], b)
		}
	case "exists":
		s.needArgs(args, 1)
		_, err := os.Stat(s.path(args[0]))
		if (err == nil) == neg {
			s.fatalf("%s exists=%v, want %v", args[0], err == nil, !neg)
		}
	case "env":
		s.needArgs(args, 1)
		for _, kv := range args {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				s.logf("%s=%s", kv, s.env[kv])
				continue
			}
			s.env[k] = v
		}
	case "kill":
		sig, name := syscall.Signal(syscall.SIGKILL), ""
		switch len(args) {
		case 1:
			name = args[0]
		case 2:
			name = args[1]
			switch args[0] {
			case "-INT":
				sig = syscall.SIGINT
			case "-TERM":
				sig = syscall.SIGTERM
			case "-KILL":
			default:
				s.fatalf("kill: unknown signal %s", args[0])
			}
		default:
			s.fatalf("usage: kill [-INT|-TERM|-KILL] name")
		}
		b := s.bg[name]
		if b == nil {
			s.fatalf("kill: no background command %q", name)
		}
		if err := b.cmd.Process.Signal(sig); err != nil {
			s.fatalf("kill %s: %v", name, err)
		}
	case "wait":
		s.needArgs(args, 1)
		b := s.bg[args[0]]
		if b == nil {
			s.fatalf("wait: no background command %q", args[0])
		}
		delete(s.bg, args[0])
		var err error
		select {
		case err = <-b.done:
		case <-time.After(2 * time.Minute):
			_ = b.cmd.Process.Kill()
			err = <-b.done
			s.fatalf("wait %s: still running after 2m; killed", args[0])
		}
		s.stdout, s.stderr = b.stdout.String(), b.stderr.String()
		code := exitCodeOf(err)
		s.logf("[exit %d]\n[stdout]\n%s[stderr]\n%s", code, s.stdout, s.stderr)
		if (code == 0) == neg {
			s.fatalf("%s exited %d (negated: %v)\nstderr:\n%s", args[0], code, neg, s.stderr)
		}
	case "skip":
		s.t.Skip(strings.Join(args, " "))
	case "stop":
		s.stopped = true
	default:
		s.fatalf("unknown command %q", cmd)
	}
}

func (s *script) needArgs(args []string, n int) {
	if len(args) < n {
		s.fatalf("want at least %d arguments", n)
	}
}

func (s *script) command(args []string) *exec.Cmd {
	prog := args[0]
	if prog == "cfp" {
		prog = s.self
	}
	c := exec.Command(prog, args[1:]...)
	c.Dir = s.work
	for k, v := range s.env {
		c.Env = append(c.Env, k+"="+v)
	}
	return c
}

func (s *script) exec(args []string) int {
	c := s.command(args)
	var out, errOut bytes.Buffer
	c.Stdout, c.Stderr = &out, &errOut
	err := c.Run()
	s.stdout, s.stderr = out.String(), errOut.String()
	code := exitCodeOf(err)
	if code < 0 {
		s.fatalf("%s: %v", args[0], err)
	}
	s.logf("[exit %d]\n[stdout]\n%s[stderr]\n%s", code, s.stdout, s.stderr)
	return code
}

func (s *script) startBackground(name string, args []string) {
	if s.bg[name] != nil {
		s.fatalf("background command %q already running", name)
	}
	c := s.command(args)
	b := &bgCmd{cmd: c, stdout: new(bytes.Buffer), stderr: new(bytes.Buffer), done: make(chan error, 1)}
	c.Stdout, c.Stderr = b.stdout, b.stderr
	if err := c.Start(); err != nil {
		s.fatalf("start %s: %v", name, err)
	}
	go func() { b.done <- c.Wait() }()
	s.bg[name] = b
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

func (s *script) read(name string) string {
	switch name {
	case "stdout":
		return s.stdout
	case "stderr":
		return s.stderr
	}
	b, err := os.ReadFile(s.path(name))
	if err != nil {
		s.fatalf("%v", err)
	}
	return string(b)
}

func (s *script) path(name string) string {
	if filepath.IsAbs(name) {
		return name
	}
	return filepath.Join(s.work, name)
}

// fields splits a command line like testscript: spaces separate words, single quotes quote
// (” is a literal quote inside them), and $VAR or ${VAR} expand outside single quotes.
func (s *script) fields(line string) []string {
	var (
		out    []string
		cur    strings.Builder
		inWord bool
		quoted bool
	)
	expand := func(str string) string {
		return os.Expand(str, func(k string) string { return s.env[k] })
	}
	var plain strings.Builder
	flushPlain := func() {
		cur.WriteString(expand(plain.String()))
		plain.Reset()
	}
	for i := 0; i < len(line); i++ {
		ch := line[i]
		switch {
		case quoted:
			if ch == '\'' {
				if i+1 < len(line) && line[i+1] == '\'' {
					cur.WriteByte('\'')
					i++
					continue
				}
				quoted = false
				continue
			}
			cur.WriteByte(ch)
		case ch == '\'':
			flushPlain()
			quoted, inWord = true, true
		case ch == ' ' || ch == '\t':
			if inWord {
				flushPlain()
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			plain.WriteByte(ch)
			inWord = true
		}
	}
	if quoted {
		s.fatalf("unterminated quote")
	}
	if inWord {
		flushPlain()
		out = append(out, cur.String())
	}
	return out
}

// parseTxtar splits a txtar archive into its comment and its files ("-- name --" lines).
func parseTxtar(text string) (comment string, files map[string]string) {
	files = map[string]string{}
	var name string
	var buf strings.Builder
	inFile := false
	for line := range strings.Lines(text) {
		trimmed := strings.TrimRight(line, "\r\n")
		if strings.HasPrefix(trimmed, "-- ") && strings.HasSuffix(trimmed, " --") && len(trimmed) > 6 {
			if inFile {
				files[name] = buf.String()
			} else {
				comment = buf.String()
			}
			buf.Reset()
			name = strings.TrimSpace(trimmed[3 : len(trimmed)-3])
			inFile = true
			continue
		}
		buf.WriteString(line)
	}
	if inFile {
		files[name] = buf.String()
	} else {
		comment = buf.String()
	}
	return comment, files
}
