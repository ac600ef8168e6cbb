package cmd

import (
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// oldFlag is a flag spelling that shipped in an earlier cfp and is still accepted: it is hidden
// from help, setting it prints one warning line on stderr that names the spelling to use
// instead, and `cfp help deprecated` lists every one (it finds them by walking the command
// tree, so the list cannot drift from the flags).
type oldFlag struct {
	// name is the old flag's name, arg the name of its value in help ("" for a boolean); use
	// is the spelling to use instead ("--poll-interval DURATION").
	name, arg, use string
	// set applies a value given to the old flag.
	set    func(string) error
	isBool bool
	warn   func(format string, args ...any)
	value  string
}

func (o *oldFlag) String() string { return o.value }
func (o *oldFlag) Type() string {
	if o.isBool {
		return "bool"
	}
	return "string"
}

func (o *oldFlag) Set(v string) error {
	if err := o.set(v); err != nil {
		return err
	}
	o.value = v
	o.warn("--%s is deprecated: use %s (see 'cfp help deprecated')", o.name, o.use)
	return nil
}

// deprecateFlag defines the hidden old spelling --name ARG on c (a boolean flag when arg is ""):
// set turns its value into the new spelling (usually by setting the new flag, so that the new
// flag counts as given), use says what to write instead.
func deprecateFlag(f *factory, c *cobra.Command, name, arg, use string, set func(string) error) {
	o := &oldFlag{name: name, arg: arg, use: use, set: set, isBool: arg == "", warn: f.warnf}
	fl := c.Flags().VarPF(o, name, "", "deprecated: use "+use)
	if o.isBool {
		fl.NoOptDefVal = "true"
	}
	fl.Hidden = true
}

// renameFlag keeps --old as a deprecated spelling of c's flag --new (same values). Both names
// given together are refused, in either order: otherwise the last one would win silently.
func renameFlag(f *factory, c *cobra.Command, old, new string) {
	fl := c.Flags().Lookup(new)
	arg, _ := pflag.UnquoteUsage(fl)
	r := &renamedValue{Value: fl.Value, old: old, new: new}
	fl.Value = r
	deprecateFlag(f, c, old, arg, "--"+new+" "+arg, func(v string) error {
		if r.direct {
			return r.conflict()
		}
		r.viaOld = true
		defer func() { r.viaOld = false }()
		return c.Flags().Set(new, v)
	})
}

// renamedValue is the value of a flag that has an old name too: it notes whether the new name
// was given itself, and refuses it after the old one.
type renamedValue struct {
	pflag.Value
	old, new       string
	direct, viaOld bool // set through the new name; being set through the old name
	usedOld        bool // the old name was given
}

func (r *renamedValue) Set(v string) error {
	switch {
	case r.viaOld:
		r.usedOld = true
	case r.usedOld:
		return r.conflict()
	default:
		r.direct = true
	}
	return r.Value.Set(v)
}

func (r *renamedValue) conflict() error {
	return fmt.Errorf("--%s and --%s both given: give --%s", r.old, r.new, r.new)
}

// deprecatedValues are the old spellings of values (not flags) that cfp still accepts with a
// warning; `cfp help deprecated` lists them after the flags.
var deprecatedValues = []struct{ command, old, use string }{
	{"cfp replay-from", "2h (a duration without a sign)", "-2h (that long ago)"},
}

// helpDeprecated renders `cfp help deprecated` from the old flags found under root.
func helpDeprecated(root *cobra.Command) string {
	type row struct{ command, old, use string }
	var rows []row
	walk(root, func(c *cobra.Command) {
		c.Flags().VisitAll(func(fl *pflag.Flag) {
			if o, ok := fl.Value.(*oldFlag); ok {
				rows = append(rows, row{c.CommandPath(), strings.TrimSpace("--" + o.name + " " + o.arg), o.use})
			}
		})
	})
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].command < rows[j].command })
	for _, v := range deprecatedValues {
		rows = append(rows, row(v))
	}
	var b strings.Builder
	b.WriteString(`Spellings that earlier versions of cfp shipped and that still work. Each use prints one
warning line on stderr ("cfp: warning: --poll is deprecated: use --poll-interval D") and
does the same as the spelling on the right; scripts should move to it. An old spelling
given together with its replacement is refused (exit 2), as are two different --to targets.

Positions and durations have one grammar everywhere (tail --from/--until, process --from,
replay-from, leases reset --to):

  beginning | now | <RFC 3339 time> | -<duration> | @<file>

(--until also takes +<duration>: that long from now). A duration is Go's: 90s, 15m, 2h30m.

`)
	width := 0
	for _, r := range rows {
		width = max(width, len(r.command)+1+len(r.old))
	}
	last := ""
	for _, r := range rows {
		if r.command != last && last != "" {
			b.WriteByte('\n')
		}
		last = r.command
		fmt.Fprintf(&b, "  %-*s  ->  %s\n", width, r.command+" "+r.old, r.use)
	}
	return strings.TrimSuffix(b.String(), "\n")
}
