package cmd

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// flagGroupAnnotation names the heading a flag is listed under: in a command's help for its own
// flags, in 'cfp help flags' for the global ones. Flags without one go under "Flags:".
const flagGroupAnnotation = "cfp_flag_group"

// groupFlags puts the named flags of fs under the heading group.
func groupFlags(fs *pflag.FlagSet, group string, names ...string) {
	for _, n := range names {
		if fs.Lookup(n) == nil {
			panic("groupFlags: no flag --" + n)
		}
		_ = fs.SetAnnotation(n, flagGroupAnnotation, []string{group})
	}
}

// globalFlagGroups are the headings of 'cfp help flags', in order, with their flags.
var globalFlagGroups = []struct {
	title string
	names []string
}{
	{"Account", []string{"context", "endpoint", "key-file", "key", "connection-string", "connection-string-file", "auth", "local", "ca-file"}},
	{"Containers and processor", []string{"database", "container", "lease-container", "lease-database", "processor", "lease-id-prefix"}},
	{"Lease account (when the lease container is in another account)", []string{"lease-endpoint", "lease-key-file", "lease-connection-string", "lease-connection-string-file", "lease-auth"}},
	{"Requests", []string{"request-timeout", "max-retries", "preferred-regions", "priority", "throughput-bucket"}},
	{"Output", []string{"output", "jq", "wide", "no-color"}},
	{"Logging", []string{"log-level", "log-format"}},
}

// groupGlobalFlags annotates the global flags with their headings.
func groupGlobalFlags(fs *pflag.FlagSet) {
	for _, g := range globalFlagGroups {
		groupFlags(fs, g.title, g.names...)
	}
}

// globalFlagsLine ends every command's help: the global flags are listed once, in 'cfp help flags'.
const globalFlagsLine = "Global flags (account, containers, output, logging, ...): 'cfp help flags'"

// usage writes c's usage as cobra's default does, except for the flags: only c's own, under
// their headings and wrapped to width columns; the global flags are one line pointing to
// 'cfp help flags'.
func usage(w io.Writer, c *cobra.Command, width int, brief bool) {
	fmt.Fprint(w, "Usage:")
	if c.Runnable() {
		fmt.Fprintf(w, "\n  %s", c.UseLine())
	}
	if c.HasAvailableSubCommands() {
		fmt.Fprintf(w, "\n  %s [command]", c.CommandPath())
	}
	if len(c.Aliases) > 0 {
		fmt.Fprintf(w, "\n\nAliases:\n  %s", c.NameAndAliases())
	}
	if c.HasExample() {
		ex := c.Example
		if before, _, cut := strings.Cut(ex, detailsMark); cut {
			if brief {
				ex = before
			} else {
				ex = fullExample(c)
			}
		}
		fmt.Fprintf(w, "\n\nExamples:\n%s", ex)
	}
	if c.HasAvailableSubCommands() {
		writeSubcommands(w, c)
	}
	for _, s := range localFlagSections(c, brief) {
		fmt.Fprintf(w, "\n\n%s:\n%s", s.title, formatFlags(s.flags, width, brief))
	}
	if c.HasHelpSubCommands() {
		var topics []string
		for _, sub := range c.Commands() {
			if sub.IsAdditionalHelpTopicCommand() {
				topics = append(topics, sub.Name())
			}
		}
		fmt.Fprintf(w, "\n\nHelp topics ('cfp help TOPIC'): %s", strings.Join(topics, ", "))
	}
	if c.HasAvailableSubCommands() {
		fmt.Fprintf(w, "\n\nUse \"%s [command] --help\" for more information about a command.", c.CommandPath())
	}
	fmt.Fprintf(w, "\n\n%s\n", globalFlagsLine)
}

// writeSubcommands lists c's commands under their groups, as cobra does.
func writeSubcommands(w io.Writer, c *cobra.Command) {
	shown := func(s *cobra.Command) bool { return s.IsAvailableCommand() || s.Name() == "help" }
	list := func(title, group string) {
		fmt.Fprintf(w, "\n\n%s", title)
		for _, s := range c.Commands() {
			if s.GroupID == group && shown(s) {
				fmt.Fprintf(w, "\n  %-*s %s", s.NamePadding(), s.Name(), s.Short)
			}
		}
	}
	if len(c.Groups()) == 0 {
		list("Available Commands:", "")
		return
	}
	for _, g := range c.Groups() {
		list(g.Title, g.ID)
	}
	if !c.AllChildCommandsHaveGroup() {
		list("Additional Commands:", "")
	}
}

type flagSection struct {
	title string
	flags []*pflag.Flag
}

// localFlagSections returns c's own visible flags (not the global ones), ungrouped first under
// "Flags", then each group in the order of its first flag.
func localFlagSections(c *cobra.Command, brief bool) []flagSection {
	global := c.Root().PersistentFlags()
	plain := flagSection{title: "Flags"}
	var groups []flagSection
	local := c.LocalFlags()
	c.Flags().VisitAll(func(fl *pflag.Flag) {
		if fl.Hidden || local.Lookup(fl.Name) == nil || global.Lookup(fl.Name) == fl || brief && fl.Name == "help" {
			return
		}
		g := fl.Annotations[flagGroupAnnotation]
		if len(g) == 0 {
			plain.flags = append(plain.flags, fl)
			return
		}
		for i := range groups {
			if groups[i].title == g[0] {
				groups[i].flags = append(groups[i].flags, fl)
				return
			}
		}
		groups = append(groups, flagSection{title: g[0], flags: []*pflag.Flag{fl}})
	})
	// -h/--help closes the plain flags, after the command's own.
	for i, fl := range plain.flags {
		if fl.Name == "help" && i < len(plain.flags)-1 {
			plain.flags = append(append(plain.flags[:i:i], plain.flags[i+1:]...), fl)
			break
		}
	}
	var out []flagSection
	if len(plain.flags) > 0 {
		out = append(out, plain)
	}
	for _, g := range groups {
		g.title += " flags"
		out = append(out, g)
	}
	return out
}

// maxFlagColumn is the widest flag spelling that still has its description beside it; longer
// ones put the description on the next line.
const maxFlagColumn = 32

// formatFlags lists flags as pflag does ("  -c, --container CONTAINER   monitored ..."), with
// their descriptions wrapped to width columns.
func formatFlags(flags []*pflag.Flag, width int, brief bool) string {
	type entry struct{ left, desc string }
	entries := make([]entry, 0, len(flags))
	col := 0
	shorthand := false
	for _, fl := range flags {
		shorthand = shorthand || fl.Shorthand != ""
	}
	for _, fl := range flags {
		left, desc := flagLine(fl)
		if !shorthand {
			left = "  " + strings.TrimLeft(left, " ")
		}
		if brief {
			desc = briefUsage(desc)
			left = strings.TrimSuffix(strings.TrimSuffix(left, "[=true|false]"), " duration") + map[bool]string{true: " D"}[strings.HasSuffix(left, " duration")]
		}
		entries = append(entries, entry{left, desc})
		if len(left) <= maxFlagColumn {
			col = max(col, len(left))
		}
	}
	col += 2
	descWidth := max(width-col-1, 30)
	var b strings.Builder
	for i, e := range entries {
		lines := wrapWords(e.desc, descWidth)
		if brief {
			lines = atMostTwoLines(e.desc, descWidth)
		}
		if len(e.left) > col-2 {
			b.WriteString(e.left)
			b.WriteByte('\n')
			b.WriteString(strings.Repeat(" ", col))
		} else {
			fmt.Fprintf(&b, "%-*s", col, e.left)
		}
		b.WriteString(strings.Join(lines, "\n"+strings.Repeat(" ", col)))
		if i < len(entries)-1 {
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// flagLine returns pflag's own rendering of one flag, split into its spelling and its
// description (with the default value and enum values pflag and enumFlag add).
func flagLine(fl *pflag.Flag) (left, desc string) {
	fs := pflag.NewFlagSet("", pflag.ContinueOnError)
	fs.AddFlag(fl)
	line := strings.TrimRight(fs.FlagUsagesWrapped(0), "\n")
	start := strings.Index(line, "--")
	i := strings.Index(line[start:], "  ")
	if i < 0 {
		return line, ""
	}
	return line[:start+i], strings.TrimSpace(line[start+i:])
}

// wrapWords breaks s into lines of at most width columns at spaces (a longer word stays whole).
func wrapWords(s string, width int) []string {
	var lines []string
	for _, para := range strings.Split(s, "\n") {
		line := ""
		for _, w := range strings.Fields(para) {
			switch {
			case line == "":
				line = w
			case utf8.RuneCountInString(line)+1+utf8.RuneCountInString(w) <= width:
				line += " " + w
			default:
				lines = append(lines, line)
				line = w
			}
		}
		lines = append(lines, line)
	}
	return lines
}

// helpFlags renders 'cfp help flags' from the global flags of root, under their headings.
func helpFlags(root *cobra.Command, width int) string {
	var b strings.Builder
	b.WriteString(`Global flags work with every command, before or after its name. Most can come from the
environment instead ('cfp help environment'); a flag on the command line wins.`)
	fs := root.PersistentFlags()
	for _, g := range globalFlagGroups {
		var flags []*pflag.Flag
		for _, n := range g.names {
			if fl := fs.Lookup(n); fl != nil && !fl.Hidden {
				flags = append(flags, fl)
			}
		}
		fmt.Fprintf(&b, "\n\n%s:\n%s", g.title, formatFlags(flags, width, false))
	}
	return b.String()
}

// detailsMark, a paragraph of its own in a command's Long, ends what --help shows: the
// paragraphs after it are details, shown by 'cfp help COMMAND' and in the reference (docs/cli,
// man pages), so that --help fits one screen.
const detailsMark = "\n\n[details]\n\n"

// fullLong is c's whole long description, details included.
func fullLong(c *cobra.Command) string {
	return strings.Replace(c.Long, detailsMark, "\n\n", 1)
}

// fullExample is c's whole example text: after detailsMark come the examples only
// 'cfp help COMMAND' shows.
func fullExample(c *cobra.Command) string {
	return strings.Replace(c.Example, detailsMark, "\n\n", 1)
}

// help writes c's help: its long description (up to detailsMark unless full), paragraphs
// reflowed to width columns (indented blocks such as tables kept as written), then its usage.
func help(w io.Writer, c *cobra.Command, width int, full bool) {
	text := c.Long
	if text == "" {
		text = c.Short
	}
	more := ""
	if before, _, cut := strings.Cut(text, detailsMark); cut {
		if full {
			text = fullLong(c)
		} else {
			text = before
			more = "\nFull description: '" + strings.Join(append([]string{"cfp", "help"}, strings.Fields(c.CommandPath())[1:]...), " ") + "'"
		}
	}
	if text != "" {
		fmt.Fprintf(w, "%s%s\n\n", reflow(strings.TrimRight(text, " \n"), width), more)
	}
	if c.Runnable() || c.HasSubCommands() {
		usage(w, c, width, !full)
	}
}

// reflow rewraps the paragraphs of s (blocks between blank lines whose lines are not indented)
// to width columns.
func reflow(s string, width int) string {
	blocks := strings.Split(s, "\n\n")
	for i, b := range blocks {
		indented := false
		for _, l := range strings.Split(b, "\n") {
			if strings.HasPrefix(l, " ") || strings.HasPrefix(l, "\t") {
				indented = true
			}
		}
		if !indented {
			blocks[i] = strings.Join(wrapWords(strings.ReplaceAll(b, "\n", " "), width), "\n")
		}
	}
	return strings.Join(blocks, "\n\n")
}

// briefUsage shortens a flag's description for --help to its first clause (up to "; " or
// " (" past its first words), keeping the allowed values and the default; 'cfp help COMMAND'
// shows it whole.
func briefUsage(desc string) string {
	body, suffix := splitSuffix(desc)
	cut := len(body)
	for _, sep := range []string{"; ", " ("} {
		i := strings.Index(body, sep)
		if i < 20 || i >= cut {
			continue
		}
		// A parenthesis inside a clause stays: cutting there would leave it unfinished.
		if j := strings.Index(body[i:], ")"); sep == " (" && j > 0 {
			if rest := body[i+j+1:]; rest != "" && !strings.HasPrefix(rest, ";") && !strings.HasPrefix(rest, ",") {
				continue
			}
		}
		cut = i
	}
	return body[:cut] + suffix
}

// splitSuffix splits a flag's description into its text and what pflag and enumFlag append:
// " {allowed|values}" and " (default X)".
func splitSuffix(desc string) (body, suffix string) {
	if i := strings.LastIndex(desc, " (default "); i >= 0 && strings.HasSuffix(desc, ")") {
		desc, suffix = desc[:i], desc[i:]
	}
	if i := strings.LastIndex(desc, " {"); i >= 0 && strings.HasSuffix(desc, "}") {
		desc, suffix = desc[:i], desc[i:]+suffix
	}
	return desc, suffix
}

// atMostTwoLines wraps desc to width columns in at most two lines, dropping words from the end
// of its text (marked "…") but keeping its allowed values and default.
func atMostTwoLines(desc string, width int) []string {
	lines := wrapWords(desc, width)
	body, suffix := splitSuffix(desc)
	words := strings.Fields(body)
	for len(lines) > 2 && len(words) > 3 {
		words = words[:len(words)-1]
		lines = wrapWords(strings.TrimRight(strings.Join(words, " "), ",;:")+"…"+suffix, width)
	}
	return lines
}
