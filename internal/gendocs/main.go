// Command gendocs writes cfp's CLI reference: markdown pages to docs/cli and man pages to
// docs/cli/man, from the cobra command tree, with a fixed date so the output is reproducible.
// Run it from the repository root after changing a command's help or flags:
//
//	go run ./internal/gendocs
//
// A test in this package fails when the committed reference is stale.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cpuguy83/go-md2man/v2/md2man"
	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
	"github.com/spf13/pflag"

	"github.com/cfp-dev/cfp/cmd"
)

// docDate is the date printed in the man pages. It is fixed so the reference changes only
// when the commands do.
var docDate = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)

func main() {
	dir := "docs/cli"
	if len(os.Args) > 1 {
		dir = os.Args[1]
	}
	if err := generate(dir); err != nil {
		fmt.Fprintf(os.Stderr, "gendocs: %v\n", err)
		os.Exit(1)
	}
}

// generate replaces dir's markdown and man pages with freshly generated ones.
func generate(dir string) error {
	manDir := filepath.Join(dir, "man")
	for _, pattern := range []string{filepath.Join(dir, "*.md"), filepath.Join(manDir, "*.1")} {
		old, err := filepath.Glob(pattern)
		if err != nil {
			return err
		}
		for _, f := range old {
			if err := os.Remove(f); err != nil {
				return fmt.Errorf("remove stale page: %w", err)
			}
		}
	}
	if err := os.MkdirAll(manDir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", manDir, err)
	}
	root := cmd.DocsRoot()
	mdRoot := cmd.DocsRoot()
	walk(mdRoot, func(c *cobra.Command) { c.Long = manText(c.Long) })
	if err := doc.GenMarkdownTree(mdRoot, dir); err != nil {
		return fmt.Errorf("generate markdown: %w", err)
	}
	header := &doc.GenManHeader{Title: "CFP", Section: "1", Date: &docDate, Source: "cfp", Manual: "cfp manual"}
	manRoot := cmd.DocsRoot()
	walk(manRoot, func(c *cobra.Command) {
		c.Long = manText(c.Long)
		c.Flags().VisitAll(func(fl *pflag.Flag) { fl.Usage = escapeAngles(fl.Usage) })
		c.PersistentFlags().VisitAll(func(fl *pflag.Flag) { fl.Usage = escapeAngles(fl.Usage) })
	})
	if err := doc.GenManTree(manRoot, header, manDir); err != nil {
		return fmt.Errorf("generate man pages: %w", err)
	}
	if err := writeHelpTopicMan(manRoot, manDir); err != nil {
		return err
	}
	return writeHelpTopics(root, dir)
}

func walk(c *cobra.Command, fn func(*cobra.Command)) {
	fn(c)
	for _, sub := range c.Commands() {
		walk(sub, fn)
	}
}

// manText prepares a command's long help for cobra's markdown and man page generators, which
// read it as markdown: runs of indented lines (tables of values, example commands) become code blocks,
// so they keep their layout, and "<" elsewhere is escaped, so "-<duration>" is not taken
// for an HTML tag and dropped.
func manText(long string) string {
	var b strings.Builder
	inCode := false
	for _, line := range strings.Split(long, "\n") {
		indented := strings.HasPrefix(line, "  ") && strings.TrimSpace(line) != ""
		switch {
		case indented && !inCode:
			b.WriteString("\n```\n")
			inCode = true
		case !indented && inCode && strings.TrimSpace(line) != "":
			b.WriteString("```\n\n")
			inCode = false
		}
		if inCode {
			b.WriteString(line + "\n")
			continue
		}
		b.WriteString(escapeAngles(line) + "\n")
	}
	if inCode {
		b.WriteString("```\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

// escapeAngles escapes "<" outside `code spans` for markdown.
func escapeAngles(s string) string {
	var b strings.Builder
	code := false
	for _, r := range s {
		switch {
		case r == '`':
			code = !code
		case r == '<' && !code:
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// writeHelpTopicMan writes a man page per help topic (cfp help exit-codes, ...), which cobra's
// generator skips, as cfp-help-<topic>.1.
func writeHelpTopicMan(root *cobra.Command, dir string) error {
	for _, c := range root.Commands() {
		if !c.IsAdditionalHelpTopicCommand() {
			continue
		}
		var b strings.Builder
		fmt.Fprintf(&b, "%% \"CFP\" \"1\" \"%s\" \"cfp\" \"cfp manual\"\n# NAME\ncfp-help-%s \\- %s\n\n",
			docDate.Format("Jan 2006"), c.Name(), c.Short)
		fmt.Fprintf(&b, "# SYNOPSIS\n**cfp help %s**\n\n# DESCRIPTION\n%s\n\n# SEE ALSO\n**cfp(1)**\n", c.Name(), c.Long)
		name := filepath.Join(dir, "cfp-help-"+c.Name()+".1")
		if err := os.WriteFile(name, md2man.Render([]byte(b.String())), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	return nil
}

// writeHelpTopics writes the additional help topics (cfp help exit-codes, ...), which cobra's
// generator skips, as cfp_help_<topic>.md.
func writeHelpTopics(root *cobra.Command, dir string) error {
	for _, c := range root.Commands() {
		if !c.IsAdditionalHelpTopicCommand() {
			continue
		}
		var b strings.Builder
		fmt.Fprintf(&b, "## cfp help %s\n\n%s\n\n```\n%s\n```\n\n### SEE ALSO\n\n* [cfp](cfp.md)\t - %s\n",
			c.Name(), c.Short, c.Long, root.Short)
		name := filepath.Join(dir, "cfp_help_"+strings.ReplaceAll(c.Name(), "-", "_")+".md")
		if err := os.WriteFile(name, []byte(b.String()), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	return nil
}
