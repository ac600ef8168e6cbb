// Package cmd is cfp's command layer: cobra adapters that turn flags into options and call the
// engine. Main is the whole program; main.go only exits with its result.
package cmd

import (
	"fmt"
	"os"
)

// Main runs cfp with args and returns the process exit code.
func Main(args []string) int {
	fmt.Fprintln(os.Stderr, "cfp: not built yet")
	return 1
}
