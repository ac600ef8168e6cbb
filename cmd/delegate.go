package cmd

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/sink"
)

// delegateOptions are the flags that say what a command does with each batch of changes, as
// `cfp process` defines them, for commands that run batches through the same delegates (`cfp
// replay-from`): JSON lines on stdout by default, --exec once per batch, or --exec-lines with
// one child per lease, wrapped in the retry and error policy.
type delegateOptions struct {
	Exec       string
	ExecLines  string
	MaxRetries int
	OnError    string
	DeadLetter string
}

// addDelegateFlags defines the delegate flags on c.
func (d *delegateOptions) addDelegateFlags(c *cobra.Command) {
	fs := c.Flags()
	fs.StringVar(&d.Exec, "exec", "", "run `CMD` (sh -c) once per batch, the batch as a JSON array on stdin; exit 0 means processed")
	fs.StringVar(&d.ExecLines, "exec-lines", "", "keep one `CMD` (sh -c) per lease that answers JSON lines on stdin/stdout (see 'cfp process --help')")
	fs.IntVar(&d.MaxRetries, "max-retries", defaultProcessMaxRetries, "retry a failed batch `N` times, with backoff, before --on-error applies")
	enumFlag(fs, &d.OnError, "on-error", "", string(sink.OnErrorStop), "what to do with a batch that still fails", string(sink.OnErrorStop), string(sink.OnErrorSkip), string(sink.OnErrorDeadLetter))
	fs.StringVar(&d.DeadLetter, "dead-letter", "", "append batches that still fail to `FILE`, one JSON line each (implies --on-error dead-letter)")
	c.MarkFlagsMutuallyExclusive("exec", "exec-lines")
}

// validate checks the delegate flags of c together (mistakes are usage errors) and fills
// implied values: --dead-letter alone means --on-error dead-letter.
func (d *delegateOptions) validate(c *cobra.Command) error {
	if d.MaxRetries < 0 {
		return usageErrorf("--max-retries must not be negative, got %d", d.MaxRetries)
	}
	if strings.TrimSpace(d.Exec) == "" && c.Flags().Changed("exec") || strings.TrimSpace(d.ExecLines) == "" && c.Flags().Changed("exec-lines") {
		return usageErrorf("--exec and --exec-lines need a command")
	}
	if d.DeadLetter != "" {
		switch {
		case !c.Flags().Changed("on-error"):
			d.OnError = string(sink.OnErrorDeadLetter)
		case d.OnError != string(sink.OnErrorDeadLetter):
			return usageErrorf("--dead-letter needs --on-error dead-letter, not %s", d.OnError)
		}
	}
	if d.OnError == string(sink.OnErrorDeadLetter) && d.DeadLetter == "" {
		return usageErrorf("--on-error dead-letter needs --dead-letter FILE")
	}
	return nil
}

// describe names the delegate for messages: "stdout", "exec: CMD" or "exec-lines: CMD".
func (d *delegateOptions) describe() string {
	switch {
	case d.Exec != "":
		return "exec: " + d.Exec
	case d.ExecLines != "":
		return "exec-lines: " + d.ExecLines
	}
	return "stdout"
}

// handler builds the delegate exactly as `cfp process` does (processOptions.handler: the
// chosen handler wrapped in sink.Retry), without process's event lines and metrics. The
// returned close function stops --exec-lines children that are still running, flushes stdout
// and closes the dead-letter file; call it once the processor stopped.
func (d *delegateOptions) handler(f *factory) (feed.Handler, func() error, error) {
	p := &processOptions{
		f: f, Exec: d.Exec, ExecLines: d.ExecLines,
		MaxRetries: d.MaxRetries, OnError: d.OnError, DeadLetter: d.DeadLetter,
	}
	return p.handler(newProcessEvents(f.IO.ErrOut, eventsNone, f.redact, f.Now), nil)
}
