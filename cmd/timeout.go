package cmd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/cfp-dev/cfp/internal/cosmos"
)

// addTimeoutFlag gives a one-shot command --timeout: the whole command gives up after that
// long, with one line and exit 1, whatever it was waiting for. refuse, when set, returns why
// --timeout does not apply to this run ("" when it does), e.g. a tail that follows.
//
// Some requests do not carry the command's context (azcosmos reads the account on a context of
// its own), so --timeout also caps the request timeout of the accounts the command opens.
func addTimeoutFlag(f *factory, c *cobra.Command, refuse func(*cobra.Command) string) *cobra.Command {
	var d time.Duration
	c.Flags().DurationVar(&d, "timeout", 0, "give up on the whole command after `DURATION` (0: no limit)")
	run := c.RunE
	c.RunE = func(c *cobra.Command, args []string) error {
		if !c.Flags().Changed("timeout") {
			return run(c, args)
		}
		if d <= 0 {
			return briefUsageErrorf("--timeout must be positive, got %s", d)
		}
		if refuse != nil {
			if why := refuse(c); why != "" {
				return briefUsageErrorf("--timeout %s", why)
			}
		}
		f.Global.RequestTimeout = min(f.Global.RequestTimeout, d)
		parent := contextOf(c)
		ctx, cancel := context.WithTimeout(parent, d)
		defer cancel()
		c.SetContext(ctx)
		err := run(c, args)
		var rte *cosmos.RequestTimeoutError
		if err != nil && parent.Err() == nil && (errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.As(err, &rte) && rte.After >= d) {
			return &commandTimeoutError{after: d, cause: err}
		}
		return err
	}
	return c
}

// commandTimeoutError is a command that ran out of its --timeout. It deliberately does not
// unwrap to its cause: a cancelled context is not an interruption here, and the message says
// what happened.
type commandTimeoutError struct {
	after time.Duration
	cause error
}

func (e *commandTimeoutError) Error() string {
	if errors.Is(e.cause, context.Canceled) || errors.Is(e.cause, context.DeadlineExceeded) {
		return fmt.Sprintf("gave up after --timeout %s", e.after)
	}
	return fmt.Sprintf("gave up after --timeout %s: %v", e.after, e.cause)
}

func (e *commandTimeoutError) Hint() string {
	return "check the endpoint and the network (--log-level info shows retries), or raise --timeout"
}
