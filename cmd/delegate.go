package cmd

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/sink"
)

// delegateOptions are the flags that say what a command does with each batch of changes. `cfp
// process` and `cfp replay-from` share them, so a replay goes through exactly the handlers of
// the live processor: JSON lines on stdout by default, --exec once per batch, or --exec-lines
// with one child per lease, wrapped in the retry and error policy.
type delegateOptions struct {
	Exec       string
	ExecLines  string
	MaxRetries int
	OnError    string
	DeadLetter string
}

// Default number of in-place retries of a failed batch.
const defaultMaxRetries = 3

// addDelegateFlags defines the delegate flags on c.
func (d *delegateOptions) addDelegateFlags(c *cobra.Command) {
	fs := c.Flags()
	fs.StringVar(&d.Exec, "exec", "", "run `CMD` (sh -c) once per batch, the batch as a JSON array on stdin; exit 0 means processed")
	fs.StringVar(&d.ExecLines, "exec-lines", "", "keep one `CMD` (sh -c) per lease that answers JSON lines on stdin/stdout (see 'cfp process --help')")
	fs.IntVar(&d.MaxRetries, "max-retries", defaultMaxRetries, "retry a failed batch `N` times, with backoff, before --on-error applies")
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

// handler builds the delegate: the chosen handler wrapped in sink.Retry. The returned close
// function stops --exec-lines children that are still running, flushes stdout and closes the
// dead-letter file; call it once the processor stopped.
func (d *delegateOptions) handler(f *factory) (feed.Handler, func() error, error) {
	var (
		inner   feed.Handler
		closers []func() error
	)
	switch {
	case d.Exec != "":
		inner = &sink.Exec{Command: d.Exec, Stdout: f.IO.Out, Stderr: f.IO.ErrOut}
	case d.ExecLines != "":
		x := &sink.ExecLines{Command: d.ExecLines, Stderr: f.IO.ErrOut}
		inner = x
		closers = append(closers, x.Close)
	default:
		w := bufio.NewWriterSize(f.IO.Out, 64<<10)
		inner = sink.NewStdout(w)
		closers = append(closers, w.Flush)
	}
	r := &sink.Retry{
		Handler: inner, MaxRetries: d.MaxRetries, OnError: sink.OnError(d.OnError),
		Logger: f.Log, Now: f.Now,
	}
	if d.DeadLetter != "" {
		file, err := os.OpenFile(d.DeadLetter, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, nil, fmt.Errorf("open dead-letter file: %w", err)
		}
		r.DeadLetter = file
		closers = append(closers, file.Close)
	}
	if err := r.Validate(); err != nil {
		for _, c := range closers {
			_ = c()
		}
		return nil, nil, err
	}
	closeAll := func() error {
		var errs []error
		for _, c := range closers {
			errs = append(errs, c())
		}
		return errors.Join(errs...)
	}
	return r, closeAll, nil
}
