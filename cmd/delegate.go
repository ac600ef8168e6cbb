package cmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cfp-dev/cfp/changefeed"
	"github.com/cfp-dev/cfp/internal/sink"
)

// Defaults of the delegate flags that the sink does not define.
const defaultDelegateMaxRetries = 3

// delegateOptions are the flags that say what a command does with each batch of changes, shared
// by `cfp process` and `cfp replay-from`: JSON lines on stdout by default, --exec once per
// batch, or --exec-lines with one child per lease, wrapped in the retry and error policy.
type delegateOptions struct {
	Exec       string
	ExecLines  string
	MaxRetries int
	OnError    string
	DeadLetter string
	Timeout    time.Duration

	// attemptsReported says the command reports each failed attempt as an event, so the
	// retry policy does not log it too (cfp process with --events text or jsonl).
	attemptsReported bool
	// app says --app-protocol replaces the delegate flags; appHandler is its delegate, once
	// the channel is open.
	app        bool
	appHandler batchHandler
}

// delegateUsage is the help of the delegate flags on one command. The flags mean the same on
// every command; the wording differs with what the command's long help already explains.
type delegateUsage struct {
	exec, execLines, execTimeout, maxRetries, onError, deadLetter string
}

var (
	// processDelegateUsage is terse: `cfp process --help` describes the delegates.
	processDelegateUsage = delegateUsage{
		exec:        "run `CMD` once per batch, the batch on its stdin; the batch is a JSON array, and its environment lacks the account keys",
		execLines:   "keep one `CMD` per lease speaking the JSON lines protocol",
		execTimeout: "stop an --exec command still running, or an --exec-lines child not answering, after `D`; the batch fails (0: no limit)",
		maxRetries:  "retry a failed batch `N` times before --on-error applies",
		onError:     "what to do with a batch that still fails after its retries",
		deadLetter:  "append failed batches to `FILE` as JSON lines (implies --on-error dead-letter)",
	}
	// replayDelegateUsage stands on its own: `cfp replay-from --help` refers to process.
	replayDelegateUsage = delegateUsage{
		exec:        "run `CMD` (sh -c) once per batch, the batch as a JSON array on stdin; exit 0 means processed; its environment lacks the account keys",
		execLines:   "keep one `CMD` (sh -c) per lease that answers JSON lines on stdin/stdout (see 'cfp process --help')",
		execTimeout: "stop an --exec command still running for a batch, or an --exec-lines child that has not answered a message, after `D` (its process group: SIGTERM, then SIGKILL); the batch counts as failed (0: no limit)",
		maxRetries:  "retry a failed batch `N` times, with backoff, before --on-error applies",
		onError:     "what to do with a batch that still fails",
		deadLetter:  "append batches that still fail to `FILE`, one JSON line each (implies --on-error dead-letter)",
	}
)

// addFlags defines the delegate flags on c, with the help texts of u.
func (d *delegateOptions) addFlags(c *cobra.Command, u delegateUsage) {
	fs := c.Flags()
	fs.StringVar(&d.Exec, "exec", "", u.exec)
	fs.StringVar(&d.ExecLines, "exec-lines", "", u.execLines)
	fs.DurationVar(&d.Timeout, "exec-timeout", sink.DefaultExecTimeout, u.execTimeout)
	fs.IntVar(&d.MaxRetries, "delegate-retries", defaultDelegateMaxRetries, u.maxRetries)
	enumFlag(fs, &d.OnError, "on-error", "", string(sink.OnErrorStop), u.onError, string(sink.OnErrorStop), string(sink.OnErrorSkip), string(sink.OnErrorDeadLetter))
	fs.StringVar(&d.DeadLetter, "dead-letter", "", u.deadLetter)
	c.MarkFlagsMutuallyExclusive("exec", "exec-lines")
}

// validate checks the delegate flags of c together (mistakes are usage errors) and fills
// implied values: --dead-letter alone means --on-error dead-letter.
func (d *delegateOptions) validate(c *cobra.Command) error {
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
	if d.MaxRetries < 0 {
		return usageErrorf("--delegate-retries must not be negative, got %d", d.MaxRetries)
	}
	if d.Timeout < 0 {
		return usageErrorf("--exec-timeout must not be negative, got %s", d.Timeout)
	}
	if c.Flags().Changed("exec-timeout") && d.Exec == "" && d.ExecLines == "" && !d.app {
		return usageErrorf("--exec-timeout needs --exec or --exec-lines")
	}
	if strings.TrimSpace(d.Exec) == "" && c.Flags().Changed("exec") || strings.TrimSpace(d.ExecLines) == "" && c.Flags().Changed("exec-lines") {
		return usageErrorf("--exec and --exec-lines need a command")
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

// batchHandler is a delegate: what the processor and the replay hand batches to (the engine's
// Handler, named here by its method, so that cfp process reaches the engine only through the
// changefeed package).
type batchHandler interface {
	Handle(ctx context.Context, b changefeed.Batch) error
}

// handler builds the chosen delegate wrapped in its error policy (sink.Retry). observe, when
// not nil, wraps the delegate inside the policy, so it sees every attempt. The returned
// function stops --exec-lines children that are still running, flushes stdout and closes the
// dead-letter file; call it once the processor stopped.
func (d *delegateOptions) handler(f *factory, observe func(batchHandler) batchHandler) (batchHandler, func() error, error) {
	var (
		inner   batchHandler
		closers []func() error
	)
	switch {
	case d.appHandler != nil:
		inner = d.appHandler
	case d.Exec != "":
		inner = &sink.Exec{Command: d.Exec, Stdout: f.IO.Out, Stderr: f.IO.ErrOut, Logger: f.Log, Timeout: d.Timeout}
	case d.ExecLines != "":
		x := &sink.ExecLines{Command: d.ExecLines, Stderr: f.IO.ErrOut, AnswerTimeout: d.Timeout}
		inner = x
		closers = append(closers, x.Close)
	default:
		// Unbuffered: each batch is one Write, and a failed one is cut back to a line boundary.
		inner = sink.NewStdout(f.IO.Out)
	}
	if observe != nil {
		inner = observe(inner)
	}
	retry := &sink.Retry{
		Handler:    inner,
		MaxRetries: d.MaxRetries,
		OnError:    sink.OnError(d.OnError),
		Logger:     f.Log,

		AttemptsReported: d.attemptsReported,
	}
	if d.DeadLetter != "" {
		file, err := os.OpenFile(d.DeadLetter, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, nil, fmt.Errorf("open dead-letter file: %w", err)
		}
		retry.DeadLetter = file
		closers = append(closers, file.Close)
	}
	if err := retry.Validate(); err != nil {
		return nil, nil, usageErrorf("%w", err)
	}
	closeAll := func() error {
		var errs []error
		for _, c := range closers {
			errs = append(errs, c())
		}
		return errors.Join(errs...)
	}
	return retry, closeAll, nil
}
