//go:build unix

package python

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/cfp-dev/cfp/test/peers/readertest"
)

// TestReaderAcrossASplit: reader.py reads every change once, in _lsn order per partition
// key, from the beginning and then from its saved continuations across a split.
func TestReaderAcrossASplit(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("python3"); err != nil {
		readertest.Missing(t, "python3 is missing (%v): the Python reader needs Python 3", err)
	}
	py, err := filepath.Abs(filepath.Join(".venv", "bin", "python"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(py); err != nil {
		readertest.Missing(t, "azure-cosmos is not installed (%v): run test/peers/python/install.sh", err)
	}
	w := readertest.NewWorld(t)
	readertest.Check(t, w, func(state string) *exec.Cmd {
		cmd := exec.Command(py, "reader.py", "--endpoint", w.Endpoint,
			"--database", readertest.Database, "--container", readertest.Container, "--state", state)
		cmd.Env = w.Env("REQUESTS_CA_BUNDLE=" + w.PEM)
		return cmd
	})
}
