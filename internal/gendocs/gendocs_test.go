package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
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

// TestManPages_KeepPlaceholdersAndHelpTopics checks what a reader of the man pages sees:
// "<duration>" and the other placeholders survive (the markdown step took them for HTML tags
// and dropped them), and every help topic has a page.
func TestManPages_KeepPlaceholdersAndHelpTopics(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := generate(dir); err != nil {
		t.Fatal(err)
	}
	page := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, "man", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	replay := page("cfp-replay-from.1")
	for _, want := range []string{"-<duration>        the changes since that long ago", "<RFC 3339 time>", "-<duration> or +<duration>"} {
		if !strings.Contains(replay, want) {
			t.Errorf("cfp-replay-from.1 lacks %q", want)
		}
	}
	for _, topic := range []string{"exit-codes", "environment", "formatting"} {
		if p := page("cfp-help-" + topic + ".1"); !strings.Contains(p, ".SH NAME\ncfp-help-"+topic) {
			t.Errorf("cfp-help-%s.1 has no NAME section:\n%s", topic, p)
		}
	}
	if p := page("cfp-help-exit-codes.1"); !strings.Contains(p, "130  interrupted by SIGINT") {
		t.Errorf("cfp-help-exit-codes.1 lost the exit code table:\n%s", p)
	}
}
