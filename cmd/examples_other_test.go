//go:build !unix

package cmd

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// runExampleScript runs a script with bash; without process groups, only bash itself is
// killed at the timeout.
func runExampleScript(dir string, env []string, script string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c := exec.CommandContext(ctx, "bash", "-c", script)
	c.Dir, c.Env = dir, env
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	c.Stdin = strings.NewReader("")
	c.WaitDelay = 5 * time.Second
	err := c.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("still running after 90s: %w", err)
	}
	return out.Bytes(), err
}
