package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestOutsideModule builds and tests examples/outside, a module of its own that requires this
// one through a replace, as a Go user's program would: a processor with the Prometheus hook
// (changefeed/prom) on cfp's emulator in process, across a split. CGO_ENABLED=0, as a static
// build; GOFLAGS=-mod=mod lets its go.sum take a checksum this module gained since (from the
// module cache: nothing is fetched that this module does not already use).
func TestOutsideModule(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("the outside module is tested with the go command, which is not on PATH: %v", err)
	}
	if testing.Short() {
		t.Skip("builds and tests another module")
	}
	dir, err := filepath.Abs(filepath.Join("examples", "outside"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(gobin, "test", "-count=1", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=-mod=mod -buildvcs=false")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go test in examples/outside: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}
