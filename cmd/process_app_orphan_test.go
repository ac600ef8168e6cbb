//go:build unix

package cmd

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A cfp process --app-protocol whose parent is killed (kill -9 of the Node.js or Python
// application) stops by itself even when the channel's pipes stay open: a Python application
// that forked workers (multiprocessing's fork start method) leaves them holding cfp's stdin and
// stdout, so cfp never reads the end of its input. Found by the round's adversarial review:
// before, such a cfp kept its leases and renewed them with nobody to process them.
func TestAppProtocol_StopsWhenItsParentDiesWithThePipesStillOpen(t *testing.T) {
	if testing.Short() {
		t.Skip("runs cfp and a shell as processes")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(os.Args[0], filepath.Join(bin, "cfp")); err != nil {
		t.Fatal(err)
	}
	cfp := filepath.Join(bin, "cfp")
	env := append(os.Environ(), "CFP_LOCAL="+filepath.Join(dir, "data"), "NO_COLOR=1")
	orders := filepath.Join(dir, "orders.jsonl")
	if err := os.WriteFile(orders, []byte("{\"id\":\"o1\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	imp := exec.Command(cfp, "import", "-d", "shop", "-c", "orders", "--create", orders)
	imp.Env = env
	if out, err := imp.CombinedOutput(); err != nil {
		t.Fatalf("import: %v\n%s", err, out)
	}

	// The test keeps its ends of both pipes open for the whole run, as a forked worker would.
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer inW.Close()
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer outR.Close()
	// The parent: a shell that starts cfp on the pipes, says its pid, and waits.
	parent := exec.Command("sh", "-c", `exec 3<&0; "$0" process -d shop -c orders -p app --create-lease-container --from beginning --app-protocol 1 --events none <&3 3<&- 2>"$1" & echo "$!" >&2; wait`, cfp, filepath.Join(dir, "cfp.stderr"))
	parent.Env = env
	parent.Stdin, parent.Stdout = inR, outW
	pidOut, err := parent.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	inR.Close()
	outW.Close()
	var cfpPID int
	if line, err := bufio.NewReader(pidOut).ReadString('\n'); err != nil {
		t.Fatalf("the parent shell gave no pid: %v", err)
	} else if _, err := fmt.Sscan(strings.TrimSpace(line), &cfpPID); err != nil {
		t.Fatalf("pid %q: %v", line, err)
	}
	t.Cleanup(func() { _ = syscall.Kill(cfpPID, syscall.SIGKILL) })

	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(outR)
		sc.Buffer(make([]byte, 1<<20), 4<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	// The host is up once it asks the application to open its lease.
	for l := range lines {
		t.Logf("cfp: %s", l)
		if strings.HasPrefix(l, `{"id":`) && strings.Contains(l, `"type":"acquired"`) {
			break
		}
	}
	// Answer nothing, and kill the parent.
	if err := parent.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = parent.Wait()

	// cfp stops and closes stdout, saying why on stderr. (The bound only keeps a failing test
	// from hanging until go test's own timeout.)
	deadline := time.After(2 * time.Minute)
	for {
		select {
		case l, ok := <-lines:
			if ok {
				t.Logf("cfp: %s", l)
				continue
			}
		case <-deadline:
			b, _ := os.ReadFile(filepath.Join(dir, "cfp.stderr"))
			t.Fatalf("cfp (pid %d) still runs 2 minutes after its parent was killed, holding its lease; its stderr:\n%s", cfpPID, b)
		}
		break
	}
	b, _ := os.ReadFile(filepath.Join(dir, "cfp.stderr"))
	if !strings.Contains(string(b), "the application that started cfp") {
		t.Errorf("cfp's stderr does not say its parent is gone:\n%s", b)
	}
}
