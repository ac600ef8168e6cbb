package main

import (
	"bytes"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/cfp-dev/cfp"

// importRule says which packages a package (and its subpackages) may not reach, directly or
// through others: the one-way imports docs/architecture.md draws ("Shape").
type importRule struct {
	pkg  string // an import path; its subpackages follow the same rule
	why  string
	deny func(dep string) bool
}

// under reports whether path is pkg or one of its subpackages.
func under(path, pkg string) bool {
	return path == pkg || strings.HasPrefix(path, pkg+"/")
}

func anyUnder(pkgs ...string) func(string) bool {
	return func(dep string) bool {
		for _, p := range pkgs {
			if under(dep, p) {
				return true
			}
		}
		return false
	}
}

var importRules = []importRule{
	{
		pkg: module + "/internal/feed",
		why: "the engine knows no SDK, client, presentation or command line",
		deny: anyUnder(module+"/internal/cosmos", module+"/internal/render", module+"/cmd",
			module+"/emulator", "github.com/spf13/cobra", "github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos",
			"github.com/charmbracelet", "github.com/olekukonko/tablewriter", "github.com/prometheus"),
	},
	{
		pkg: module + "/internal/leases",
		why: "the lease model knows no SDK, client, presentation or command line",
		deny: anyUnder(module+"/internal/cosmos", module+"/internal/render", module+"/cmd",
			module+"/emulator", "github.com/spf13/cobra", "github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"),
	},
	{
		pkg: module + "/emulator",
		why: "the emulator is a program of its own: it shares only the partition-key hashing",
		deny: func(dep string) bool {
			return under(dep, module) && !under(dep, module+"/emulator") && dep != module+"/internal/epk"
		},
	},
	{
		pkg:  module + "/internal/cosmos",
		why:  "the production client imports no emulator",
		deny: anyUnder(module + "/emulator"),
	},
	{
		pkg:  module + "/internal/epk",
		why:  "the hashing both the client and the emulator use depends on neither",
		deny: func(dep string) bool { return under(dep, module) },
	},
}

// TestImportRules checks the one-way imports of docs/architecture.md over the transitive
// dependencies of every package of the module (go list -deps; tests excluded), so a new import
// anywhere below a package that breaks a rule fails here with the path that broke it.
func TestImportRules(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("the import rules are read with go list, and the go command is not on PATH: %v", err)
	}
	cmd := exec.Command(gobin, "list", "-f", `{{.ImportPath}} {{join .Deps " "}}`, "./...")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	deps := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		deps[f[0]] = f[1:]
	}
	for _, r := range importRules {
		seen := false
		for pkg, ds := range deps {
			if !under(pkg, r.pkg) {
				continue
			}
			seen = true
			var bad []string
			for _, d := range ds {
				if r.deny(d) {
					bad = append(bad, d)
				}
			}
			sort.Strings(bad)
			if len(bad) > 0 {
				t.Errorf("%s imports %s: %s", pkg, strings.Join(bad, ", "), r.why)
			}
		}
		if !seen {
			t.Errorf("no package %s in the module: update the rule", r.pkg)
		}
	}
}
