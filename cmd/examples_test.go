package cmd

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

// TestExamples runs every shell example of README.md, docs/*.md, each command's Examples and
// the help topics, as written, with bash, on the embedded emulator: each example (a fenced sh
// or console block of the docs, an Examples text of a command) gets its own working directory
// with a copy of a fixture account (shop/orders holding testdata/orders.jsonl, partitioned on
// /customerId; the lease container shop/leases with stopped processors orders-proj and a) and
// CFP_LOCAL pointing at it, so `cfp tail -d shop -c orders` reads local data.
//
// An example passes when every cfp command in it exits 0 (or ends on a closed pipe, as `| head`
// does), and so does the whole script. A cfp command that runs until stopped (tail without an
// end, process, estimate --watch or --metrics-addr, emulator serving, demo without --duration)
// passes when it is still running after exampleWindow; it is then stopped with SIGINT. The
// runner changes the examples only where they would reach outside their directory or clash:
// `go run . CMD` runs cfp, localhost:8081 is an emulator the test serves on a free loopback
// port, a serving `cfp emulator` gets --addr 127.0.0.1:0, :9464 becomes 127.0.0.1:0, /tmp/
// becomes the working directory's tmp/, and demo durations become exampleDemoDuration.
//
// Examples that cannot run here are marked: in markdown by an HTML comment on the line before
// the block, `<!-- example: azure: REASON -->` (needs an Azure account), `<!-- example: skip:
// REASON -->` (needs something else: Docker, Kubernetes, a build), or `<!-- example: continues
// -->` (runs after the block before it, in its directory); in a command's Examples by
// commandExampleMarks. The test logs the examples that need Azure (go test -v -run TestExamples),
// and writes the list to $CFP_EXAMPLES_REPORT when it is set (CI prints it).
func TestExamples(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"bash", "timeout"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s (coreutils)", tool)
		}
	}
	examples := collectExamples(t)
	fixture := exampleFixture(t)

	var azure, skipped []string
	for _, ex := range examples {
		switch {
		case strings.HasPrefix(ex.mark, "azure"):
			azure = append(azure, ex.id+": "+strings.TrimSpace(strings.TrimPrefix(ex.mark, "azure:")))
		case strings.HasPrefix(ex.mark, "skip"):
			skipped = append(skipped, ex.id+": "+strings.TrimSpace(strings.TrimPrefix(ex.mark, "skip:")))
		}
	}
	report := fmt.Sprintf("examples that need Azure (%d):\n  %s\nexamples not run here (%d):\n  %s\n",
		len(azure), strings.Join(azure, "\n  "), len(skipped), strings.Join(skipped, "\n  "))
	t.Log(report)
	// CI prints the list: go test shows no log of a passing test without -v.
	if path := os.Getenv("CFP_EXAMPLES_REPORT"); path != "" {
		if err := os.WriteFile(path, []byte(report), 0o644); err != nil {
			t.Errorf("write the examples report: %v", err)
		}
	}

	var wg sync.WaitGroup
	sem := make(chan struct{}, exampleConcurrency)
	for _, ex := range examples {
		if ex.mark != "" {
			continue
		}
		for _, p := range ex.paras {
			if m := outsideRE.FindString(p.text); m != "" {
				t.Errorf("%s: %q reaches outside the test: mark the example (see TestExamples)", p.where, m)
				continue
			}
		}
		// Most of an example's time is spent waiting for a command that runs until stopped,
		// so more run at once than -parallel (the CPUs) would allow.
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			t.Run(ex.id, func(t *testing.T) { runExample(t, fixture, ex) })
		}()
	}
	wg.Wait()
}

// exampleConcurrency is how many examples run at once.
const exampleConcurrency = 8

// exampleWindow is how long a command that runs until stopped runs before the test stops it.
const exampleWindow = "3"

// exampleDemoDuration replaces the --duration of demo examples.
const exampleDemoDuration = "--duration 3s"

// commandExampleMarks marks the paragraphs of commands' Examples that cannot run here, by the
// command path and the paragraph's first command line.
var commandExampleMarks = map[string]string{
	"cfp: export COSMOS_ENDPOINT=https://myacct.documents.azure.com:443/ COSMOS_KEY=...":                                               "azure: an account endpoint and key",
	`cfp config: COSMOS_CONNECTION_STRING="AccountEndpoint=...;AccountKey=...;" cfp config -d shop -c orders`:                          "azure: an account's connection string",
	"cfp config set-context: cfp config set-context prod --endpoint https://myacct.documents.azure.com:443/ --key-env PROD_COSMOS_KEY": "azure: an account endpoint and key",
	"cfp completion: cfp completion bash > /etc/bash_completion.d/cfp":                                                                 "skip: writes to /etc",
	`cfp completion: cfp completion zsh > "${fpath[1]}/_cfp"`:                                                                          "skip: zsh",
	"cfp completion: cfp completion fish > ~/.config/fish/completions/cfp.fish":                                                        "skip: fish",
	"cfp completion: cfp completion powershell | Out-String | Invoke-Expression":                                                       "skip: PowerShell",
}

// helpTopicsWithoutExamples are the help topics whose "  cfp " lines are not commands to run.
var helpTopicsWithoutExamples = map[string]string{
	"deprecated": "a table of old spellings and their replacements",
}

// docExample is one example: a markdown block or a command's Examples, as paragraphs of shell.
type docExample struct {
	id    string
	paras []exampleParagraph
	// mark is "" (run it), "azure: ..." or "skip: ...".
	mark string
	// serve says the example talks to an emulator on localhost:8081.
	serve bool
}

type exampleParagraph struct {
	where string // file:line or command path
	text  string
}

var (
	// outsideRE finds commands that examples may show but this test must not run.
	outsideRE     = regexp.MustCompile(`(?m)(^|[;&|(]\s*)(docker|kubectl|helm|az|sudo|go (install|build|get)|brew|scoop|apt(-get)?)\s`)
	exampleMarkRE = regexp.MustCompile(`^<!-- example: (azure|skip|continues)(?::\s*(.*?))?\s*-->$`)
	fenceRE       = regexp.MustCompile("^```(sh|bash|shell|console)\\s*$")
)

// collectExamples reads the examples of README.md, docs/*.md, the commands and the help topics.
func collectExamples(t *testing.T) []docExample {
	t.Helper()
	files := []string{filepath.Join("..", "README.md")}
	docs, err := filepath.Glob(filepath.Join("..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, docs...)
	var out []docExample
	for _, f := range files {
		out = append(out, markdownExamples(t, f)...)
	}
	root := DocsRoot()
	marked := map[string]bool{}
	walk(root, func(c *cobra.Command) {
		text := c.Example
		if reason, ok := helpTopicsWithoutExamples[c.Name()]; ok && c.IsAdditionalHelpTopicCommand() {
			out = append(out, docExample{id: "cfp help " + c.Name(), mark: "skip: " + reason})
			return
		}
		if c.IsAdditionalHelpTopicCommand() {
			// A help topic's examples are its lines that start with "  cfp ".
			var lines []string
			for _, l := range strings.Split(c.Long, "\n") {
				if strings.HasPrefix(l, "  cfp ") {
					lines = append(lines, l, "")
				}
			}
			text = strings.Join(lines, "\n")
		}
		if strings.TrimSpace(text) == "" {
			return
		}
		path := c.CommandPath()
		if c.IsAdditionalHelpTopicCommand() {
			path = "cfp help " + c.Name()
		}
		var paras []exampleParagraph
		for _, p := range splitParagraphs(text) {
			key := path + ": " + firstCommand(p)
			if mark, ok := commandExampleMarks[key]; ok {
				marked[key] = true
				out = append(out, docExample{id: key, mark: mark})
				continue
			}
			paras = append(paras, exampleParagraph{where: path, text: p})
		}
		if len(paras) > 0 {
			out = append(out, docExample{id: path, paras: paras})
		}
	})
	for key := range commandExampleMarks {
		if !marked[key] {
			t.Errorf("commandExampleMarks: %q matches no example paragraph any more; remove it", key)
		}
	}
	for i := range out {
		for _, p := range out[i].paras {
			if strings.Contains(p.text, "http://localhost:8081") || strings.Contains(p.text, "https://localhost:8081") {
				out[i].serve = true
			}
		}
	}
	return out
}

// markdownExamples returns the shell blocks of a markdown file.
func markdownExamples(t *testing.T, file string) []docExample {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.TrimPrefix(filepath.ToSlash(file), "../")
	lines := strings.Split(string(b), "\n")
	var out []docExample
	for i := 0; i < len(lines); i++ {
		m := fenceRE.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		start := i + 1
		var body []string
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			body = append(body, lines[i])
		}
		if m[1] == "console" {
			// Only "$ " lines are commands; the rest is their output.
			var cmds []string
			for _, l := range body {
				if c, ok := strings.CutPrefix(l, "$ "); ok {
					cmds = append(cmds, c)
				}
			}
			body = cmds
		}
		if len(body) == 0 {
			continue
		}
		where := fmt.Sprintf("%s:%d", name, start)
		ex := docExample{id: where}
		for _, p := range splitParagraphs(strings.Join(body, "\n")) {
			ex.paras = append(ex.paras, exampleParagraph{where: where, text: p})
		}
		mark := ""
		if start >= 2 {
			if mm := exampleMarkRE.FindStringSubmatch(strings.TrimSpace(lines[start-2])); mm != nil {
				mark = mm[1]
				if mm[2] != "" {
					mark += ": " + mm[2]
				}
			}
		}
		switch {
		case mark == "continues":
			if len(out) == 0 {
				t.Fatalf("%s: a continuing example follows no example", where)
			}
			out[len(out)-1].paras = append(out[len(out)-1].paras, ex.paras...)
			continue
		case mark != "":
			ex.mark, ex.paras = mark, nil
		}
		out = append(out, ex)
	}
	return out
}

// splitParagraphs splits shell text at blank lines and where a comment follows a command, and
// drops the common indentation.
func splitParagraphs(text string) []string {
	var out []string
	var chunks []string
	for _, p := range regexp.MustCompile(`\n\s*\n`).Split(text, -1) {
		lines := strings.Split(p, "\n")
		from := 0
		for i := 1; i < len(lines); i++ {
			prev := strings.TrimSpace(lines[i-1])
			if strings.HasPrefix(strings.TrimSpace(lines[i]), "#") && !strings.HasPrefix(prev, "#") && !strings.HasSuffix(prev, "\\") {
				chunks = append(chunks, strings.Join(lines[from:i], "\n"))
				from = i
			}
		}
		chunks = append(chunks, strings.Join(lines[from:], "\n"))
	}
	for _, p := range chunks {
		lines := strings.Split(p, "\n")
		indent := -1
		for _, l := range lines {
			if strings.TrimSpace(l) == "" {
				continue
			}
			n := len(l) - len(strings.TrimLeft(l, " \t"))
			if indent < 0 || n < indent {
				indent = n
			}
		}
		for i, l := range lines {
			if len(l) >= indent && indent > 0 {
				lines[i] = l[indent:]
			}
		}
		p = strings.TrimSpace(strings.Join(lines, "\n"))
		if p != "" {
			out = append(out, p)
		}
	}
	return out
}

// firstCommand returns the first line of a paragraph that is not a comment.
func firstCommand(p string) string {
	for _, l := range strings.Split(p, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			return l
		}
	}
	return ""
}

// exampleCfp is the shell function `cfp` of every example: it runs the cfp on PATH (this test
// binary), stops a command that runs until stopped after the window, and records every
// failing cfp command, also in a pipeline, in $CFP_EXAMPLE_FAILURES.
const exampleCfp = `
cfp() {
    local sub="" next="" a long=0 i=0
    local -a args=("$@")
    for ((i = 0; i < ${#args[@]}; i++)); do
        case ${args[i]} in
        tail|process|estimate|emulator|demo|replay-from|leases|import|config|version|completion|help)
            sub=${args[i]}; next=${args[i+1]-}; break ;;
        esac
    done
    local all=" $* "
    case $sub in
    tail) [[ $all =~ \ (-e|--exit-at-end|-n|--max-items|--until)[\ =] ]] || long=1 ;;
    process) long=1 ;;
    estimate) [[ $all =~ \ (--watch|--metrics-addr)[\ =] ]] && long=1 ;;
    emulator)
        case $next in
        cert|split|merge|faults) ;;
        *) long=1; [[ $all =~ \ --addr[\ =] ]] || set -- "$@" --addr 127.0.0.1:0 ;;
        esac ;;
    demo) [[ $all =~ \ --duration[\ =] ]] || long=1 ;;
    esac
    local rc=0
    if ((long)); then
        # --foreground: one SIGINT to cfp, as Ctrl-C sends (timeout otherwise signals its group
        # too, and a second signal ends cfp at once).
        timeout --foreground -s INT -k 10 "$CFP_EXAMPLE_WINDOW" cfp "$@" || rc=$?
        ((rc == 124)) && rc=0
    else
        command cfp "$@" || rc=$?
    fi
    if ((rc != 0 && rc != 141)); then
        printf 'exit %d: cfp %s\n' "$rc" "$*" >> "$CFP_EXAMPLE_FAILURES"
    fi
    return $rc
}
`

// rewriteExample applies the runner's few changes to an example's text (see TestExamples).
func rewriteExample(text, served string) string {
	text = regexp.MustCompile(`(?m)(^|[;&|(]\s*)go run \. `).ReplaceAllString(text, "${1}cfp ")
	if served != "" {
		text = strings.ReplaceAll(text, "localhost:8081", served)
	}
	text = strings.ReplaceAll(text, "--metrics-addr :9464", "--metrics-addr 127.0.0.1:0")
	text = strings.ReplaceAll(text, " /tmp/", " tmp/")
	if strings.Contains(text, "demo") {
		text = regexp.MustCompile(`--duration \d+s`).ReplaceAllString(text, exampleDemoDuration)
	}
	return text
}

func runExample(t *testing.T, fixture string, ex docExample) {
	work := t.TempDir()
	copyTree(t, fixture, work)
	env := append(os.Environ(),
		"HOME="+filepath.Join(work, "home"),
		"CFP_LOCAL="+filepath.Join(work, ".cfp"),
		"CFP_EXAMPLE_WINDOW="+exampleWindow,
		"CFP_EXAMPLE_FAILURES="+filepath.Join(work, ".failures"),
		"NO_COLOR=1", "COLUMNS=100", "LANG=C", "TZ=UTC",
	)
	env = withoutEnv(env, "COSMOS_ENDPOINT", "COSMOS_KEY", "COSMOS_CONNECTION_STRING", "COSMOS_DATABASE",
		"COSMOS_CONTAINER", "CFP_PROCESSOR", "CFP_LEASE_ENDPOINT", "CFP_LEASE_KEY", "CFP_LEASE_CONNECTION_STRING",
		"CFP_CONTEXT", "XDG_CONFIG_HOME")
	served := ""
	if ex.serve {
		// An endpoint and CFP_LOCAL together are two accounts: these examples name theirs.
		env = withoutEnv(env, "CFP_LOCAL")
		served = serveExampleEmulator(t, work, env)
	}
	for _, p := range ex.paras {
		script := "set -e\n" + exampleCfp + "\n" + rewriteExample(p.text, served) + "\n"
		out, err := runExampleScript(work, env, script)
		failures, _ := os.ReadFile(filepath.Join(work, ".failures"))
		os.Remove(filepath.Join(work, ".failures"))
		if err != nil || len(failures) > 0 {
			t.Errorf("%s: the example fails as written:\n%s\n--- failed: %v\n%s--- output:\n%s", p.where, indent(p.text), err, failures, lastLines(out, 30))
			return
		}
		// An example teaches the current spellings: a deprecated one works, with a warning.
		if bytes.Contains(out, []byte(" is deprecated: use ")) {
			t.Errorf("%s: the example uses a deprecated spelling:\n%s\n--- output:\n%s", p.where, indent(p.text), lastLines(out, 30))
		}
	}
}

// serveExampleEmulator serves a copy of the fixture's data on a free loopback port for the
// examples that talk to localhost:8081, and returns its host:port.
func serveExampleEmulator(t *testing.T, work string, env []string) string {
	t.Helper()
	copyTree(t, filepath.Join(work, ".cfp"), filepath.Join(work, ".served"))
	c := exec.Command("cfp", "emulator", "--addr", "127.0.0.1:0", "--data", filepath.Join(work, ".served"), "-o", "json")
	c.Dir, c.Env = work, withoutEnv(env, "CFP_LOCAL")
	stdout, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c.Stderr = io.Discard
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Process.Signal(os.Interrupt)
		_ = c.Wait()
	})
	var info struct {
		Endpoint string `json:"endpoint"`
	}
	if err := json.NewDecoder(bufio.NewReader(stdout)).Decode(&info); err != nil {
		t.Fatalf("serve the example's emulator: %v", err)
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	host := strings.TrimSuffix(strings.TrimPrefix(info.Endpoint, "http://"), "/")
	return host
}

// exampleFixture builds the directory every example starts from; it is removed when t ends.
func exampleFixture(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := buildExampleFixture(dir); err != nil {
		t.Fatalf("example fixture: %v", err)
	}
	return dir
}

func buildExampleFixture(dir string) error {
	orders, err := os.ReadFile(filepath.Join("..", "testdata", "orders.jsonl"))
	if err != nil {
		return err
	}
	lines := strings.SplitAfter(strings.TrimSpace(string(orders)), "\n")
	files := map[string]string{
		"orders.jsonl":          string(orders),
		"testdata/orders.jsonl": string(orders),
		"jan.jsonl":             strings.Join(lines[:100], ""),
		"feb.jsonl":             strings.Join(lines[100:], "") + "\n",
		"load.sh":               "#!/bin/sh\n# the projection's loader of the examples: reads a batch, loads nothing\ncat > /dev/null\n",
		"emu.key":               "ZXhhbXBsZS1rZXktb2YtdGhlLWVtdWxhdG9yLW9mLXRoZS1leGFtcGxlcy10ZXN0LDY0LWJ5dGVzLWF0LWxlYXN0LS0tLS0tLS0tLS0=\n",
		"home/.keep":            "",
		"tmp/.keep":             "",
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
			return err
		}
	}
	env := append(withoutEnv(os.Environ(), "COSMOS_ENDPOINT", "COSMOS_KEY", "COSMOS_CONNECTION_STRING"),
		"CFP_LOCAL="+filepath.Join(dir, ".cfp"), "HOME="+filepath.Join(dir, "home"))
	// The processors stop after their first batch: the leases exist, released, some with a
	// continuation.
	script := `set -e
cfp import -d shop -c orders --create --throughput 40000 --partition-key-path /customerId orders.jsonl
for p in orders-proj a billing; do
    cfp process -d shop -c orders -p $p --create-lease-container --start-from beginning \
        --lease-acquire-interval 200ms --exec 'cat > /dev/null; if mkdir stop-'$p' 2> /dev/null; then kill -INT $PPID; fi' > /dev/null 2>&1
done
rmdir stop-*
cfp leases export -d shop -c orders -p orders-proj --file leases-backup.json
`
	out, err := runExampleScript(dir, env, script)
	if err != nil {
		return fmt.Errorf("%v\n%s", err, out)
	}
	return nil
}

func copyTree(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		info, _ := d.Info()
		return os.WriteFile(dst, b, info.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
}

func withoutEnv(env []string, names ...string) []string {
	out := env[:0:0]
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		drop := false
		for _, n := range names {
			drop = drop || k == n
		}
		if !drop {
			out = append(out, kv)
		}
	}
	return out
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n") + "\n"
}

// runExampleScript runs a script with bash in its own process group (where there are process
// groups); whatever it left running in the group is killed when it ends.
func runExampleScript(dir string, env []string, script string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c := exec.CommandContext(ctx, "bash", "-c", script)
	c.Dir, c.Env = dir, env
	inOwnGroup(c)
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	c.Stdin = strings.NewReader("")
	c.WaitDelay = 5 * time.Second
	err := c.Run()
	killGroup(c)
	if ctx.Err() != nil {
		err = fmt.Errorf("still running after 90s: %w", err)
	}
	return out.Bytes(), err
}
