package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Cycles to balance in virtual time. On the wall clock the figure measures the CPU as much as
// the protocol: a busy machine delays the hosts' goroutines, and balancing took 5 / 8 / 2 cycles
// where a quiet one gave 2 / 3-5 / 2 (issue 22). The simulation (internal/feed/sim,
// BalanceAtScale) runs the same three events (all start together, half as many join, a tenth
// killed) with the real cfp processor and the .NET model on a synctest bubble's clock, where
// a cycle is a cycle whatever the load. A bubble exists only in a test, so the bench runs
// that test (TestBalanceAtScale) through `go test` and reads the figures it writes
// (-scale-json). The simulation's lease timings are .NET's defaults divided by ten; cycles
// are counted in acquire intervals, which the scale does not change.

// simCycles is one engine's figures as TestBalanceAtScale writes them.
type simCycles struct {
	Start, Join, Kill int
	KillRaw           int `json:"kill_from_kill"`
}

// virtualCycles runs TestBalanceAtScale for cfg's leases, hosts and engines, its output to log.
func virtualCycles(ctx context.Context, cfg config, log io.Writer) (map[string]simCycles, error) {
	root, err := moduleRoot(ctx)
	if err != nil {
		return nil, err
	}
	f, err := os.CreateTemp("", "scalebench-cycles-*.json")
	if err != nil {
		return nil, err
	}
	out := f.Name()
	_ = f.Close()
	defer os.Remove(out)
	var kinds []string
	for _, e := range cfg.engines {
		kinds = append(kinds, e.name)
	}
	cmd := exec.CommandContext(ctx, "go", "test", "./internal/feed/sim", "-run", "^TestBalanceAtScale$", "-count=1", "-v", "-timeout", "2h",
		"-args", fmt.Sprintf("-scale-leases=%d", cfg.leases), fmt.Sprintf("-scale-hosts=%d", cfg.hosts),
		"-scale-kinds="+strings.Join(kinds, ","), "-scale-json="+out)
	cmd.Dir, cmd.Stdout, cmd.Stderr = root, log, log
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("cycles in virtual time (go test ./internal/feed/sim -run TestBalanceAtScale): %w", err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		return nil, err
	}
	var m map[string]simCycles
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("cycles in virtual time: %w", err)
	}
	return m, nil
}

// moduleRoot is the directory of cfp's go.mod (the bench runs from the repository).
func moduleRoot(ctx context.Context) (string, error) {
	b, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	gomod := strings.TrimSpace(string(b))
	if err != nil || gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("cycles in virtual time need the repository: run scalebench from it (go run ./bench/scalebench), or give -cycles wall")
	}
	return filepath.Dir(gomod), nil
}
