package changefeed_test

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/api.golden from `go doc -all`")

// TestAPI keeps the public surface deliberate: testdata/api.golden is `go doc -all` of this
// package, so any change to an exported name, signature or doc comment shows in review. Run
// `go test ./changefeed -run TestAPI -update` after a change you mean.
func TestAPI(t *testing.T) {
	t.Parallel()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("the API check runs go doc, and the go command is not on PATH: %v", err)
	}
	cmd := exec.Command(gobin, "doc", "-all", ".")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	got, err := cmd.Output()
	if err != nil {
		t.Fatalf("go doc -all: %v\n%s", err, stderr.Bytes())
	}
	golden := filepath.Join("testdata", "api.golden")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (create it with -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("the public API changed: `go doc -all` differs from %s. If the change is meant, run "+
			"go test ./changefeed -run TestAPI -update and commit the golden file.\n%s", golden, lineDiff(string(want), string(got)))
	}
}

// lineDiff lists the lines only in want (-) and only in got (+), in order.
func lineDiff(want, got string) string {
	w, g := bytes.Split([]byte(want), []byte("\n")), bytes.Split([]byte(got), []byte("\n"))
	inW, inG := map[string]bool{}, map[string]bool{}
	for _, l := range w {
		inW[string(l)] = true
	}
	for _, l := range g {
		inG[string(l)] = true
	}
	var b bytes.Buffer
	for _, l := range w {
		if !inG[string(l)] {
			b.WriteString("- " + string(l) + "\n")
		}
	}
	for _, l := range g {
		if !inW[string(l)] {
			b.WriteString("+ " + string(l) + "\n")
		}
	}
	return b.String()
}

// TestDependencies: the package needs nothing beyond azcosmos's own dependencies and the
// engine's (cfp's engine packages and errgroup): no Microsoft Entra ID library, no embedded
// emulator, no bbolt. A user who imports it gets azcosmos's dependency tree and no more.
func TestDependencies(t *testing.T) {
	t.Parallel()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("the dependency check runs go list, and the go command is not on PATH: %v", err)
	}
	list := func(pkg string) map[string]bool {
		cmd := exec.Command(gobin, "list", "-deps", pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, stderr.Bytes())
		}
		set := map[string]bool{}
		for _, l := range strings.Fields(string(out)) {
			set[l] = true
		}
		return set
	}
	allowed := list("github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos")
	engine := []string{
		"github.com/cfp-dev/cfp/changefeed", "github.com/cfp-dev/cfp/internal/buildinfo",
		"github.com/cfp-dev/cfp/internal/cosmos", "github.com/cfp-dev/cfp/internal/feed",
		"github.com/cfp-dev/cfp/internal/leases", "github.com/cfp-dev/cfp/internal/lineio",
		"github.com/cfp-dev/cfp/internal/epk", // the partition key hash, pure Go
		"golang.org/x/sync/errgroup",
	}
	for _, p := range engine {
		allowed[p] = true
	}
	var extra []string
	for p := range list(".") {
		if strings.Contains(p, ".") && !allowed[p] { // standard library paths have no dot
			extra = append(extra, p)
		}
	}
	sort.Strings(extra)
	if len(extra) > 0 {
		t.Errorf("changefeed depends on packages beyond azcosmos's and the engine's:\n%s", strings.Join(extra, "\n"))
	}
}
