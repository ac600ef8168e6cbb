package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestReferenceIsFresh fails when docs/cli differs from what the commands generate today.
func TestReferenceIsFresh(t *testing.T) {
	t.Parallel()
	fresh := t.TempDir()
	if err := generate(fresh); err != nil {
		t.Fatal(err)
	}
	committed := filepath.Join("..", "..", "docs", "cli")
	want := files(t, fresh)
	got := files(t, committed)
	if len(want) == 0 {
		t.Fatal("generator wrote no pages")
	}
	for name, content := range want {
		old, ok := got[name]
		switch {
		case !ok:
			t.Errorf("docs/cli/%s is missing", name)
		case !bytes.Equal(old, content):
			t.Errorf("docs/cli/%s is stale", name)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("docs/cli/%s documents something that no longer exists", name)
		}
	}
	if t.Failed() {
		t.Log("regenerate the reference with: go run ./internal/gendocs")
	}
}

func files(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, pattern := range []string{"*.md", filepath.Join("man", "*.1")} {
		names, err := filepath.Glob(filepath.Join(dir, pattern))
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			b, err := os.ReadFile(n)
			if err != nil {
				t.Fatal(err)
			}
			rel, _ := filepath.Rel(dir, n)
			out[filepath.ToSlash(rel)] = b
		}
	}
	return out
}
