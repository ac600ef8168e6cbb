package cmd

import (
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// TestCorruptDataFile_OneLineExit1 damages the data file of a directory that holds data, the
// ways a crash, a full disk or a stray write would, and checks that both `cfp emulator` and
// --local answer one line naming the directory and exit 1: never a panic or a fault.
func TestCorruptDataFile_OneLineExit1(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	src := filepath.Join(base, "good")
	if code, _, stderr := runCLI(t, context.Background(), `{"id":"a","pk":"x"}`+"\n"+`{"id":"b","pk":"y"}`+"\n",
		"--local="+src, "import", "-d", "db", "-c", "c", "--create"); code != 0 {
		t.Fatalf("import: exit %d\n%s", code, stderr)
	}
	good, err := os.ReadFile(filepath.Join(src, "cfp-emulator.db"))
	if err != nil {
		t.Fatal(err)
	}
	garbage := make([]byte, len(good))
	_, _ = rand.Read(garbage)
	damaged := map[string][]byte{
		"truncated to 100 bytes":   good[:100],
		"truncated to one page":    good[:4096],
		"truncated to three pages": good[:3*4096],
		"zeroed":                   make([]byte, len(good)),
		"random garbage":           garbage,
		// The meta pages intact, every other page overwritten: bbolt maps it and panics later.
		"pages after the meta pages overwritten": append(append([]byte{}, good[:2*4096]...), garbage[2*4096:]...),
	}
	for name, content := range damaged {
		dir := filepath.Join(base, regexp.MustCompile(`\W+`).ReplaceAllString(name, "-"))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "cfp-emulator.db"), content, 0o600); err != nil {
			t.Fatal(err)
		}
		want := regexp.MustCompile(`^cfp: data directory ` + regexp.QuoteMeta(dir) + ` is corrupt: [^\n]+\n$`)
		for _, args := range [][]string{
			{"emulator", "--data", dir, "--addr", "127.0.0.1:0"},
			{"--local=" + dir, "tail", "-d", "db", "-c", "c", "--from", "beginning", "--max-items", "1"},
		} {
			code, _, stderr := runCLI(t, context.Background(), "", args...)
			if code != 1 || !want.MatchString(stderr) {
				t.Errorf("%s: cfp %v: exit %d, stderr:\n%s\nwant exit 1 and one line 'cfp: data directory %s is corrupt: ...'", name, args, code, stderr, dir)
			}
		}
	}
}
