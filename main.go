// Command cfp inspects and drives Azure Cosmos DB change feeds: tail, process, estimate,
// leases, replay-from and an embedded emulator. See README.md.
package main

import (
	"os"

	"github.com/cfp-dev/cfp/cmd"
)

func main() {
	os.Exit(cmd.Main(os.Args[1:]))
}
