//go:build !unix

package sink

import (
	"os/exec"
	"time"
)

// ownGroup leaves cmd in cfp's process group: there are no process groups to signal here.
func ownGroup(*exec.Cmd) {}

// terminate kills the command (there is no SIGTERM to ask it first).
func terminate(cmd *exec.Cmd, _ time.Duration) error { return cmd.Process.Kill() }
