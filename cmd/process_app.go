package cmd

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/cfp-dev/cfp/changefeed"
	"github.com/cfp-dev/cfp/internal/buildinfo"
	"github.com/cfp-dev/cfp/internal/render"
	"github.com/cfp-dev/cfp/internal/sink"
)

// appOptions is `cfp process --app-protocol N`: the host speaks the application protocol
// (docs/scripting.md, "Application protocol, version 1") with the process that started it, over
// stdin and stdout, for every lease it holds. The Node.js and Python libraries run cfp this way.
type appOptions struct {
	Protocol int

	app       *sink.App
	summary   render.EventView // the run's summary event, for stopped
	helloDone chan struct{}    // closed once hello is written
}

func (a *appOptions) addFlags(c *cobra.Command) {
	c.Flags().IntVar(&a.Protocol, "app-protocol", 0, "serve the parent process over stdin/stdout, protocol `N` (1); for the Node.js and Python libraries (docs/scripting.md, \"Application protocol\")")
	groupFlags(c.Flags(), "Delegate", "app-protocol")
}

// validate refuses a version cfp does not speak and the delegates the channel replaces.
func (a *appOptions) validate(c *cobra.Command, d *delegateOptions) error {
	if !c.Flags().Changed("app-protocol") {
		return nil
	}
	if a.Protocol != sink.AppProtocolVersion {
		return usageErrorf("--app-protocol %d: this cfp speaks version %d", a.Protocol, sink.AppProtocolVersion)
	}
	for _, name := range []string{"exec", "exec-lines"} {
		if c.Flags().Changed(name) {
			return usageErrorf("--app-protocol and --%s exclude each other: with --app-protocol the batches go to the application on stdout", name)
		}
	}
	d.app = true
	return nil
}

// appStopGrace bounds the write of the last line ("stopped") to a parent that no longer reads.
const appStopGrace = 5 * time.Second

// start opens the channel: it reads the parent's lines from stdin, and returns a context that
// ends when the parent asks to stop, closes stdin or stops reading stdout, as a signal would.
// A write to a closed stdout fails (EPIPE) instead of killing cfp with SIGPIPE, so the leases
// are still released. The returned function ends the channel; call it after stopped.
func (a *appOptions) start(ctx context.Context, f *factory) (context.Context, func()) {
	if a.Protocol == 0 {
		return ctx, func() {}
	}
	stopPipe := notifyClosedPipe()
	growPipe(f.IO.Out)
	a.app = sink.NewApp(f.IO.Out, f.IO.ErrOut)
	go a.app.Serve(f.IO.In)
	ctx, cancel := context.WithCancel(ctx)
	a.helloDone = make(chan struct{})
	go watchParent(ctx, a.app)
	go func() {
		select {
		case <-a.app.Stopping():
		case <-ctx.Done():
			return
		}
		// A stop that comes before hello (the parent gave up at once) takes effect after
		// it: the parent always reads hello ... stopped.
		select {
		case <-a.helloDone:
		case <-ctx.Done():
			return
		}
		f.Log.Info("the application asked to stop, or closed its channel: stopping")
		cancel()
	}()
	return ctx, func() {
		cancel()
		_ = a.app.Close()
		stopPipe()
	}
}

// parentPollInterval is how often cfp looks whether the application that started it is still
// its parent.
const parentPollInterval = time.Second

// watchParent ends the channel when the application that started cfp exits while the pipes
// stay open, which is the end of stdin does not tell: a Python application that forked workers
// (multiprocessing's fork start method) and was killed leaves them holding cfp's stdin and
// stdout, and cfp would keep its leases with nobody to process them. The application is gone
// when cfp's parent process changes (cfp was reparented). A cfp whose parent is already init
// has nothing to watch.
func watchParent(ctx context.Context, app *sink.App) {
	ppid := os.Getppid()
	if ppid <= 1 {
		return
	}
	t := time.NewTicker(parentPollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if os.Getppid() != ppid {
				app.ParentGone(fmt.Sprintf("the application that started cfp (pid %d) exited", ppid))
				fmt.Fprintf(app.Stderr, "cfp: the application that started cfp (pid %d) exited; stopping\n", ppid)
				return
			}
		}
	}
}

// handler is the delegate: nil without --app-protocol.
func (a *appOptions) handler(timeout time.Duration) batchHandler {
	if a.app == nil {
		return nil
	}
	a.app.AnswerTimeout = timeout
	return a.app
}

// event forwards an event to the parent; the summary is kept for stopped. Batch and checkpoint
// events are not sent: the parent sees the batches and its own answers.
func (a *appOptions) event(v render.EventView) {
	if a.app == nil {
		return
	}
	switch v.Type {
	case string(changefeed.EventBatch), string(changefeed.EventCheckpoint):
		return
	case eventSummary:
		a.summary = v
		return
	}
	a.app.Event(v)
}

// hello writes the first line, once the lease store is initialised.
func (a *appOptions) hello(ctx context.Context, owner, processor, prefix string) error {
	if a.app == nil {
		return nil
	}
	defer close(a.helloDone)
	version, _, _ := buildinfo.Info()
	return a.app.Hello(ctx, sink.AppHello{Version: version, Owner: owner, Processor: processor, Prefix: prefix})
}

// stopped writes the last line with the run's summary.
func (a *appOptions) stopped() {
	if a.app == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), appStopGrace)
	defer cancel()
	_ = a.app.Stopped(ctx, a.summary)
}
