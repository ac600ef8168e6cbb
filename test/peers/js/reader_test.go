//go:build unix

package js

import (
	"os"
	"os/exec"
	"testing"

	"github.com/cfp-dev/cfp/test/peers/readertest"
)

// TestReaderAcrossASplit: reader.mjs reads every change once, in _lsn order per partition
// key, from the beginning and then from its saved continuations across a split.
func TestReaderAcrossASplit(t *testing.T) {
	t.Parallel()
	node, err := exec.LookPath("node")
	if err != nil {
		readertest.Missing(t, "node is missing (%v): the JavaScript reader needs Node.js 18 or later", err)
	}
	if _, err := os.Stat("node_modules/@azure/cosmos/package.json"); err != nil {
		readertest.Missing(t, "@azure/cosmos is not installed (%v): run test/peers/js/install.sh", err)
	}
	w := readertest.NewWorld(t)
	readertest.Check(t, w, func(state string) *exec.Cmd {
		cmd := exec.Command(node, "reader.mjs", "--endpoint", w.Endpoint,
			"--database", readertest.Database, "--container", readertest.Container, "--state", state)
		cmd.Env = w.Env("NODE_EXTRA_CA_CERTS=" + w.PEM)
		return cmd
	})
}
