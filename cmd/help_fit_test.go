package cmd

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

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
