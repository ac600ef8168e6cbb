//go:build unix

package cmd

import (
	"os/exec"
	"syscall"
)

// inOwnGroup makes c start bash in a process group of its own and makes cancelling it kill the
// whole group.
func inOwnGroup(c *exec.Cmd) {
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.Cancel = func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGKILL) }
}

// killGroup kills whatever c left running in its group.
func killGroup(c *exec.Cmd) {
	if c.Process != nil {
		_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
	}
}
