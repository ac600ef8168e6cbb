//go:build unix

package sink

import (
	"os/exec"
	"syscall"
	"time"
)

// ownGroup runs cmd in a process group of its own, so that stopping it reaches every process
// the command started (a pipeline, a script's children) and a Ctrl-C in the terminal reaches
// only cfp, which then lets the batch in flight finish.
func ownGroup(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
}

// terminate asks the command's process group to stop (SIGTERM) and kills what is left of it
// killDelay later (exec.Cmd's WaitDelay kills only the shell itself).
func terminate(cmd *exec.Cmd, killDelay time.Duration) error {
	pgid := cmd.Process.Pid
	if err := syscall.Kill(-pgid, syscall.SIGTERM); err != nil {
		return cmd.Process.Kill()
	}
	time.AfterFunc(killDelay, func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
	return nil
}
