package changefeed_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadme_GoExampleBuilds builds the Go program of README.md ("Use it from Go") as written,
// in this module through a go build overlay (nothing is written to the tree): a reader who
// copies it gets a program that compiles.
func TestReadme_GoExampleBuilds(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go build")
	}
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	rest := string(b)
	for {
		_, after, ok := strings.Cut(rest, "\n```go\n")
		if !ok {
			break
		}
		code, tail, ok := strings.Cut(after, "\n```\n")
		if !ok {
			t.Fatal("README.md: a ```go block is not closed")
		}
		blocks, rest = append(blocks, code+"\n"), tail
	}
	if len(blocks) != 1 {
		t.Fatalf("README.md has %d Go blocks, want the one program", len(blocks))
	}
	if !strings.HasPrefix(blocks[0], "package main\n") {
		t.Fatalf("README.md's Go block is not a whole program (package main):\n%s", blocks[0])
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	src := filepath.Join(tmp, "main.go")
	if err := os.WriteFile(src, []byte(blocks[0]), 0o644); err != nil {
		t.Fatal(err)
	}
	overlay, _ := json.Marshal(map[string]map[string]string{
		"Replace": {filepath.Join(root, "internal", "readmeexample", "main.go"): src},
	})
	ov := filepath.Join(tmp, "overlay.json")
	if err := os.WriteFile(ov, overlay, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-overlay", ov, "-o", filepath.Join(tmp, "example"), "./internal/readmeexample")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("README.md's Go program does not build: %v\n%s", err, out)
	}
}
