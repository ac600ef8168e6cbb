package cmd

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// enumValue is a string flag restricted to a set of values; a bad value is a flag error (exit 2)
// that lists the allowed ones.
type enumValue struct {
	p       *string
	allowed []string
}

func (e *enumValue) String() string { return *e.p }
func (e *enumValue) Type() string   { return "string" }
func (e *enumValue) Set(s string) error {
	for _, a := range e.allowed {
		if strings.EqualFold(s, a) {
			*e.p = a
			return nil
		}
	}
	return fmt.Errorf("want one of %s", strings.Join(e.allowed, ", "))
}

// enumFlag defines a string flag that accepts only allowed (case-insensitive), lists them in its
// help, and completes them.
func enumFlag(fs *pflag.FlagSet, p *string, name, short, def, usage string, allowed ...string) {
	*p = def
	usage = fmt.Sprintf("%s {%s}", usage, strings.Join(allowed, "|"))
	fs.VarP(&enumValue{p: p, allowed: allowed}, name, short, usage)
}

// completeEnums registers shell completion for every enum flag of c (local and persistent).
func completeEnums(c *cobra.Command) {
	register := func(fl *pflag.Flag) {
		if ev, ok := fl.Value.(*enumValue); ok {
			vals := ev.allowed
			_ = c.RegisterFlagCompletionFunc(fl.Name, func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
				return vals, cobra.ShellCompDirectiveNoFileComp
			})
		}
	}
	c.LocalFlags().VisitAll(register)
	c.PersistentFlags().VisitAll(register)
}

// contextOf returns the command's context (never nil).
func contextOf(c *cobra.Command) context.Context {
	if ctx := c.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}

// positiveDuration is a duration flag that refuses zero and negative values (a flag error, exit
// 2): the engine reads a zero lease timing or shutdown timeout as "the default", so
// --lease-expiration 0s would otherwise silently mean 60s.
type positiveDuration struct{ p *time.Duration }

func (d positiveDuration) String() string { return d.p.String() }
func (d positiveDuration) Type() string   { return "duration" }
func (d positiveDuration) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	if v <= 0 {
		return fmt.Errorf("must be more than 0")
	}
	*d.p = v
	return nil
}

// positiveDurationVar defines a duration flag that must be more than zero.
func positiveDurationVar(fs *pflag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	fs.Var(positiveDuration{p}, name, usage)
}
