package cmd

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// maxHelpLines is what `cfp X --help` may take on an 80-column terminal: one screen, so a
// command's own flags and examples are not scrolled away by reference text.
const maxHelpLines = 60

// screenLines counts the lines s takes on a terminal of width columns, long lines wrapped.
func screenLines(s string, width int) int {
	n := 0
	for _, l := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		n += max(1, (utf8.RuneCountInString(l)+width-1)/width)
	}
	return n
}

// helpedCommands returns the path (without "cfp") of every command that has a --help page: the
// runnable ones and the command groups, not the help topics.
func helpedCommands() [][]string {
	var paths [][]string
	walk(DocsRoot(), func(c *cobra.Command) {
		if c.Hidden || !c.Runnable() && !c.HasSubCommands() || c.Name() == "help" {
			return
		}
		paths = append(paths, strings.Fields(c.CommandPath())[1:])
	})
	return paths
}

func TestHelp_FitsOneScreen(t *testing.T) {
	t.Parallel()
	paths := helpedCommands()
	if len(paths) < 20 {
		t.Fatalf("found %d commands, want every command of the tree", len(paths))
	}
	for _, p := range paths {
		code, out, errOut := run(t, map[string]string{"COLUMNS": "80"}, append(p, "--help")...)
		name := strings.Join(append([]string{"cfp"}, p...), " ")
		if code != 0 || errOut != "" {
			t.Errorf("%s --help: exit %d, stderr %q", name, code, errOut)
			continue
		}
		if n := screenLines(out, 80); n > maxHelpLines {
			t.Errorf("%s --help takes %d lines at 80 columns, want at most %d", name, n, maxHelpLines)
		}
		if strings.Contains(out, "--connection-string ") || !strings.HasSuffix(out, globalFlagsLine+"\n") {
			t.Errorf("%s --help lists the global flags instead of ending with %q", name, globalFlagsLine)
		}
	}
}

// The examples stay in --help: they are what a reader looks for first.
func TestHelp_KeepsExamples(t *testing.T) {
	t.Parallel()
	root := DocsRoot()
	for _, p := range helpedCommands() {
		c, _, err := root.Find(p)
		if err != nil {
			t.Fatal(err)
		}
		if c.Example == "" {
			continue
		}
		_, out, _ := run(t, nil, append(p, "--help")...)
		first := strings.TrimSpace(strings.SplitN(c.Example, "\n", 2)[0])
		if !strings.Contains(out, "Examples:\n") || !strings.Contains(out, first) {
			t.Errorf("%s --help has no examples", c.CommandPath())
		}
	}
}

// Every global flag is under a heading of 'cfp help flags'.
func TestHelpFlags_ListsEveryGlobalFlag(t *testing.T) {
	t.Parallel()
	_, out, _ := run(t, nil, "help", "flags")
	DocsRoot().PersistentFlags().VisitAll(func(fl *pflag.Flag) {
		if fl.Hidden {
			return
		}
		if !strings.Contains(out, "--"+fl.Name+" ") && !strings.Contains(out, "--"+fl.Name+"[") {
			t.Errorf("'cfp help flags' lacks --%s", fl.Name)
		}
		if len(fl.Annotations[flagGroupAnnotation]) == 0 {
			t.Errorf("--%s has no heading", fl.Name)
		}
	})
}

// --help stops at the details; 'cfp help COMMAND' shows them, with every example and every
// flag's whole description.
func TestHelp_DetailsInHelpCommand(t *testing.T) {
	t.Parallel()
	const detail = "--mode all-versions runs an all-versions-and-deletes processor"
	_, brief, _ := run(t, nil, "process", "--help")
	_, full, _ := run(t, nil, "help", "process")
	if strings.Contains(brief, detail) || !strings.Contains(brief, "Full description: 'cfp help process'") {
		t.Errorf("process --help shows the details or does not say where they are:\n%s", brief)
	}
	for _, want := range []string{detail, "--delegate-retries 5 --on-error dead-letter", "(0: no limit)"} {
		if !strings.Contains(strings.Join(strings.Fields(full), " "), want) {
			t.Errorf("cfp help process lacks %q", want)
		}
	}
	if strings.Contains(full, "[details]") || strings.Contains(full, "Full description:") {
		t.Errorf("cfp help process shows the details mark")
	}
}
