package changefeed_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/internal/testproc"
)

// TestExternalModule is the package's done condition, run as a user would: a throwaway module
// (example.com/x) that requires github.com/cfp-dev/cfp, replaced by this checkout, builds
// testdata/external with only the public package and azcosmos, and runs it against a served
// `cfp emulator`. The program runs two processors on one lease container until every change
// arrived and stops them; the test checks that Run returned nil, that no lease is left owned,
// that every change arrived with the bytes `cfp process` delivers for it, and that the
// estimated total lag is the number of changes written while the processors were stopped.
func TestExternalModule(t *testing.T) {
	t.Parallel()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("the external module test builds a module with the go command, which is not on PATH: %v", err)
	}
	const first, later = 200, 37
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin, err := testproc.Build(dir)
	if err != nil {
		t.Fatal(err)
	}
	emu, err := testproc.StartEmulator(bin, testproc.EmulatorOptions{
		Data: filepath.Join(dir, "data"), Args: []string{"--partitions", "4"}, Log: filepath.Join(dir, "emulator.log"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := emu.Stop(); err != nil {
			t.Error(err)
		}
	})

	// The throwaway module: its go.sum is this module's, so nothing is fetched.
	mod := filepath.Join(dir, "x")
	src, err := os.ReadFile(filepath.Join("testdata", "external", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	gomod := "module example.com/x\n\ngo 1.26.0\n\n" +
		"require (\n\tgithub.com/Azure/azure-sdk-for-go/sdk/data/azcosmos v1.5.0\n\tgithub.com/cfp-dev/cfp v0.0.0-00010101000000-000000000000\n)\n\n" +
		"replace github.com/cfp-dev/cfp => " + root + "\n"
	for name, body := range map[string][]byte{"go.mod": []byte(gomod), "go.sum": sum, "main.go": src} {
		if err := os.MkdirAll(mod, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(mod, name), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := append(testproc.CleanEnv(), "GOWORK=off", "GOFLAGS=-mod=mod -buildvcs=false", "CGO_ENABLED=0")
	prog := filepath.Join(dir, "external")
	build := exec.Command(gobin, "build", "-o", prog, ".")
	build.Dir, build.Env = mod, env
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build in the external module: %v\n%s", err, out)
	}

	run := exec.Command(prog)
	run.Env = append(testproc.CleanEnv(), "X_ENDPOINT="+emu.Endpoint, "X_KEY="+emu.Key,
		"X_FIRST="+strconv.Itoa(first), "X_LATER="+strconv.Itoa(later))
	var stderr bytes.Buffer
	run.Stderr = &stderr
	out, err := run.Output()
	if err != nil {
		t.Fatalf("the external program: %v\n%s", err, stderr.Bytes())
	}
	var got struct {
		Items    []json.RawMessage `json:"items"`
		RunErrs  []string          `json:"run_errors"`
		TotalLag int64             `json:"total_lag"`
		Leases   int               `json:"leases"`
		Owned    int               `json:"owned_after_stop"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the external program printed %q: %v", out, err)
	}
	if len(got.RunErrs) > 0 {
		t.Errorf("Run() errors after the context ended: %v, want none", got.RunErrs)
	}
	if got.Owned != 0 {
		t.Errorf("%d leases still owned after both processors stopped, want 0", got.Owned)
	}
	if got.Leases != 4 || got.TotalLag != later {
		t.Errorf("estimate: %d leases, total lag %d; want 4 leases and %d (the changes written while stopped)", got.Leases, got.TotalLag, later)
	}

	// What `cfp process` delivers for the same container, from the beginning, with a lease set
	// of its own.
	want := cfpProcess(t, bin, emu, first+later)
	delivered := map[string]int{}
	for _, it := range got.Items {
		id := idOf(t, it)
		delivered[id]++
		if w, ok := want[id]; !ok || !bytes.Equal(w, it) {
			t.Errorf("change %s arrived as %s, cfp process delivers %s", id, it, w)
		}
	}
	for i := 0; i < first; i++ {
		if delivered["o"+strconv.Itoa(i)] == 0 {
			t.Errorf("change o%d never arrived", i)
		}
	}
	if len(got.Items) != first {
		t.Logf("%d deliveries of %d changes (at least once)", len(got.Items), first)
	}
}

// cfpProcess runs `cfp process` from the beginning on a processor name of its own until it
// printed n distinct changes, stops it with SIGINT, and returns the changes by id.
func cfpProcess(t *testing.T, bin string, emu *testproc.Emulator, n int) map[string]json.RawMessage {
	t.Helper()
	cmd := exec.Command(bin, "process", "--endpoint", emu.Endpoint, "-d", "shop", "-c", "orders",
		"--lease-container", "leases", "-p", "reference", "--start-from", "beginning", "--events", "none",
		"--poll-interval", "50ms", "--lease-acquire-interval", "250ms")
	cmd.Env = append(testproc.CleanEnv(), "COSMOS_KEY="+emu.Key)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan []byte)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
		for sc.Scan() {
			lines <- append([]byte(nil), sc.Bytes()...)
		}
	}()
	out := map[string]json.RawMessage{}
	timeout := time.After(45 * time.Second)
	for len(out) < n {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("cfp process ended after %d of %d changes: %v\n%s", len(out), n, cmd.Wait(), stderr.Bytes())
			}
			out[idOf(t, line)] = line
		case <-timeout:
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("cfp process printed %d of %d changes within 45s\n%s", len(out), n, stderr.Bytes())
		}
	}
	_ = cmd.Process.Signal(os.Interrupt)
	go func() {
		for range lines { // drain until cfp closes stdout
		}
	}()
	if err := cmd.Wait(); err != nil {
		t.Errorf("cfp process on SIGINT: %v, want a clean exit\n%s", err, stderr.Bytes())
	}
	return out
}

func idOf(t *testing.T, item []byte) string {
	t.Helper()
	var doc struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(item, &doc); err != nil || doc.ID == "" {
		t.Fatalf("change %s has no id: %v", item, err)
	}
	return doc.ID
}
