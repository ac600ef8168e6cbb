package cmd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/cfp-dev/cfp/changefeed"
	"github.com/cfp-dev/cfp/changefeed/prom"
	"github.com/cfp-dev/cfp/internal/render"
)

// Values of --events.
const (
	eventsText  = render.EventsText
	eventsJSONL = render.EventsJSONL
	eventsNone  = render.EventsNone
)

// processOptions are the flags of `cfp process`.
type processOptions struct {
	f *factory

	Instance        string
	defaultInstance string // the default name, drawn once
	AcquireInterval time.Duration
	RenewInterval   time.Duration
	Expiration      time.Duration
	PollInterval    time.Duration
	// CheckpointInterval is --checkpoint-interval (0: a checkpoint after every batch).
	CheckpointInterval time.Duration
	MaxItems           int
	// StartFrom is the --from text ("now" by default); startSet says the user gave it, and
	// start is its value, resolved once by resolve.
	StartFrom string
	startSet  bool
	start     changefeed.StartFrom
	// Mode is the --mode text (latest or all-versions); mode is its parsed value.
	Mode string
	mode changefeed.Mode
	// LeaseFormat is --lease-format (dotnet or java); leaseFormatSet says the user gave it,
	// which makes an existing set in the other format an error.
	LeaseFormat    string
	leaseFormatSet bool

	delegate delegateOptions
	app      appOptions

	Events               string
	EventsFile           string
	CreateLeaseContainer bool
	MetricsAddr          string
	StuckAfter           int
	StuckThreshold       time.Duration
	ShutdownTimeout      time.Duration
	// NoView keeps the terminal's output as off a terminal: no live view (--no-view).
	NoView bool

	// started, when set, is called once the processor bootstrapped, before it runs (tests).
	started func(*changefeed.Processor)
}

const processLong = `Run a change feed processor host: cfp takes a share of the processor's leases, reads the
changes of each lease's range and hands them to a delegate, checkpointing each batch once
the delegate has processed it (at least once).

[details]

Run several instances with the same -p/--processor and lease container, on one machine or
many: the leases balance across them, and across .NET (v3) hosts that use the same processor
name, endpoint host and lease container. Each instance writes its --instance name (default
<hostname>-<pid>-<random>, different for every process) as the Owner of the leases it holds;
a host refuses to start under the name of another live host, which would process the same
leases. On first start the lease store is
initialized as .NET does (one lease per physical partition, the .info marker); splits of
the monitored container are followed.

Delegates:

  (default)          every changed document as one JSON line on stdout, as the change feed
                     returned it; a batch is checkpointed after its lines were flushed
  --exec CMD         CMD runs once per batch (sh -c) with the batch as a JSON array on stdin
                     and CFP_LEASE_TOKEN, CFP_RANGE, CFP_BATCH_SIZE and CFP_CONTINUATION in
                     its environment; exit status 0 means processed
  --exec-lines CMD   one long-lived CMD per lease, speaking JSON lines on stdin/stdout:
                     initialize, batch, lease-lost, shutdown; it answers checkpoint, done or
                     error (docs/user-guide.md describes the protocol)
  --app-protocol 1   the process that started cfp handles every lease over stdin/stdout
                     (the Node.js and Python libraries; docs/scripting.md, "Application
                     protocol, version 1"); a stop message or the end of stdin stops cfp

The --exec and --exec-lines commands inherit cfp's environment except the account secrets
COSMOS_KEY, COSMOS_CONNECTION_STRING, CFP_LEASE_KEY and CFP_LEASE_CONNECTION_STRING, and the
Entra ID secrets AZURE_CLIENT_SECRET, AZURE_CLIENT_CERTIFICATE_PASSWORD, AZURE_PASSWORD,
IDENTITY_HEADER and MSI_SECRET, so a script that prints or logs its environment cannot leak a
key or a credential.

An --exec command still running after --exec-timeout (default 10m), or an --exec-lines child
that has not answered a message by then, is stopped with its process group and its batch
fails. A failed batch is retried --delegate-retries times with exponential backoff (1s, 2s, 4s,
... up to 30s), then --on-error decides: stop (the host releases its leases and exits 1),
skip (the batch is checkpointed past) or dead-letter (the batch, lease and error go to
--dead-letter FILE as one JSON line, then it is checkpointed past).

--mode all-versions runs an all-versions-and-deletes processor (.NET's
GetChangeFeedProcessorBuilderWithAllVersionsAndDeletes): every create, replace and delete
comes to the delegate, unchanged, as the service's {"current","previous","metadata"} object
(a delete has an empty current and its id in metadata). New leases are written with
"Mode": "Full-Fidelity Feed" (latest: "Incremental Feed"). A lease set of the other mode is
refused, as .NET refuses to switch ChangeFeedMode: give the processor another -p/--processor
name to change its mode. As in .NET, all-versions leases without a continuation start from
now only (--from must be now), that is when each lease is first read.

--lease-format says which SDK's hosts may join a lease set this host creates: .NET hosts read
.NET's leases (the default), Java v4 hosts read only Java's EPK leases (--lease-format java).
No lease document serves both, so a set is one or the other from its creation; cfp reads and
keeps either. An existing set keeps its format, and an explicit --lease-format that its leases
contradict is refused (another -p/--processor name starts a new set).

--from applies only to leases that have no continuation yet; leases that already
have one resume from it (use 'cfp leases reset' to move them). "now" means the moment this
host started (less a second), as in .NET 3.59+: a lease that another host owned but never
checkpointed still delivers the changes written since then when this host takes it over.

Lifecycle notifications go to stderr (--events), or to --events-file FILE apart from the
logs and the delegates' stderr: acquired, released, lost, split, merge and error (with cause
user for the delegate, infra for the service; each failed attempt once), as text or as JSON
lines that also include batch and checkpoint events and a final summary.

--metrics-addr serves Prometheus metrics at /metrics, and /healthz (the balancing loop
runs) and /readyz (the first acquire cycle finished and the lease container answers) for
probes; a held lease whose batch has not finished for --stuck-after acquire intervals is
reported stuck (docs/scripting.md lists the metrics).

On a terminal, cfp process shows a live view of the processor's leases instead: each lease's
owner, lag, time lag and verdict (read as cfp estimate reads them, every poll interval,
between 1s and 5s), the hosts, and this host's leases and the changes it processed. With
stdout the terminal, what the delegate writes to stdout (the default delegate's documents, an
--exec command's output) is counted, not printed; with stdout redirected and stderr the
terminal, the view is drawn on stderr and the documents go to stdout as always. Events, logs
and delegates' stderr are held meanwhile and written out after. Keys: ? lists them, / filters
(by lease, owner or verdict), up/down select, enter opens a lease whole (as cfp leases show),
Esc goes back, q shuts the host down as SIGINT does. --no-view, a stdin that is not a
terminal, or no terminal: the output described above.

SIGINT or SIGTERM stops the host gracefully: the batches in flight finish (up to
--shutdown-timeout), are checkpointed, every lease is released so other hosts take over
at once, and cfp exits 0. A second signal, a second or more after the first, ends cfp at once.`

const processExample = `  # Every change of shop/orders as JSON lines, shared with other instances
  cfp process -d shop -c orders -p orders-proj --create-lease-container

[details]

  # Run a script per batch; give up on a batch after 5 attempts and set it aside
  cfp process -d shop -c orders -p orders-proj --exec './load.sh' \
    --delegate-retries 5 --on-error dead-letter --dead-letter failed.jsonl

  # Machine-readable lifecycle events, Prometheus metrics on :9464
  cfp process -d shop -c orders -p orders-proj --events-file events.jsonl --metrics-addr :9464

  # Every create, replace and delete, deletes by id: all-versions mode
  cfp process -d shop -c orders -p orders-audit --mode all-versions \
    | jq -c 'select(.metadata.operationType == "delete") | .metadata.id'

  # A quick local setup: short lease timings, from the beginning
  cfp --local process -d shop -c orders -p demo --create-lease-container --from beginning \
    --lease-acquire-interval 2s --lease-renew-interval 3s --lease-expiration 10s --poll-interval 500ms`

func newProcessCmd(f *factory) *cobra.Command {
	opts := &processOptions{f: f}
	c := &cobra.Command{
		Use:     "process [flags]",
		Short:   "Run a change feed processor host",
		Long:    processLong,
		Example: processExample,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			opts.startSet = c.Flags().Changed("from")
			opts.leaseFormatSet = c.Flags().Changed("lease-format")
			if err := opts.validate(c); err != nil {
				return err
			}
			if opts.EventsFile != "" && !c.Flags().Changed("events") {
				opts.Events = eventsJSONL
			}
			if opts.EventsFile != "" && opts.Events == eventsNone {
				return usageErrorf("--events-file needs --events text or jsonl, not none")
			}
			if opts.Events == eventsJSONL && opts.EventsFile == "" && opts.f.Global.source("log-format") == "default" {
				// Every stderr line a JSON object, so `2> >(jq ...)` needs no filtering.
				opts.f.Global.LogFormat = "json"
				opts.f.Log = opts.f.newLogger()
			}
			return runProcess(contextOf(c), opts)
		},
	}
	fs := c.Flags()
	fs.StringVar(&opts.Instance, "instance", "", "this host's `NAME`, written as the owner of its leases; unique per host (default <hostname>-<pid>-<random>)")
	positiveDurationVar(fs, &opts.AcquireInterval, "lease-acquire-interval", changefeed.DefaultAcquireInterval, "how often to balance leases with the other hosts")
	positiveDurationVar(fs, &opts.RenewInterval, "lease-renew-interval", changefeed.DefaultRenewInterval, "how often to renew held leases")
	positiveDurationVar(fs, &opts.Expiration, "lease-expiration", changefeed.DefaultExpiration, "how long a lease stays owned without a renewal")
	fs.DurationVar(&opts.PollInterval, "poll-interval", changefeed.DefaultPollInterval, "wait after a lease's range is caught up")
	fs.DurationVar(&opts.CheckpointInterval, "checkpoint-interval", 0, "write a lease's checkpoint at most this often (0: after every batch); what waits is written on release and shutdown, a crash may deliver it again")
	fs.IntVar(&opts.MaxItems, "batch-size", 0, "at most `N` changes per batch (0: the service default)")
	fs.StringVar(&opts.StartFrom, "from", "now", "where leases without a continuation start: now, beginning, an RFC 3339 `TIME` or -<duration> (all-versions: now only)")
	enumFlag(fs, &opts.Mode, "mode", "", "latest", "change feed mode: each changed item's latest version, or every create, replace and delete", "latest", "all-versions")
	enumFlag(fs, &opts.LeaseFormat, "lease-format", "", "dotnet", "new set's format", "dotnet", "java")
	opts.delegate.addFlags(c, processDelegateUsage)
	opts.app.addFlags(c)
	enumFlag(fs, &opts.Events, "events", "", eventsText, "lifecycle notifications on stderr or --events-file (jsonl on stderr also makes logs JSON unless --log-format is given)", eventsText, eventsJSONL, eventsNone)
	fs.StringVar(&opts.EventsFile, "events-file", "", "append the notifications to `FILE` instead of stderr, apart from logs and the delegate's stderr (implies --events jsonl)")
	fs.BoolVar(&opts.CreateLeaseContainer, "create-lease-container", false, "create the lease container (on /id) if missing")
	fs.StringVar(&opts.MetricsAddr, "metrics-addr", "", "serve Prometheus metrics and the /healthz and /readyz probes on `HOST:PORT` (e.g. :9464)")
	fs.IntVar(&opts.StuckAfter, "stuck-after", prom.DefaultStuckAfter, "with --metrics-addr, a held lease whose batch has not finished for `N` acquire intervals is stuck")
	positiveDurationVar(fs, &opts.StuckThreshold, "stuck-threshold", changefeed.DefaultStuckThreshold, "record on the lease, and report as an error event, a batch still in the delegate after this long (and rewrite a lease's failure record at most this often)")
	positiveDurationVar(fs, &opts.ShutdownTimeout, "shutdown-timeout", changefeed.DefaultShutdownTimeout, "how long batches in flight may run after SIGINT/SIGTERM")
	fs.BoolVar(&opts.NoView, "no-view", false, "print the changes, not the live view, on a terminal")
	renameFlag(f, c, "start-from", "from")
	renameFlag(f, c, "max-items", "batch-size")
	// --max-retries is also the global retry count of 429/503 requests: one meaning per name.
	renameFlag(f, c, "max-retries", "delegate-retries")
	groupFlags(c.Flags(), "Delegate", "exec", "exec-lines", "exec-timeout", "delegate-retries", "on-error", "dead-letter")
	groupFlags(c.Flags(), "Lease", "instance", "create-lease-container", "lease-acquire-interval", "lease-renew-interval", "lease-expiration", "checkpoint-interval", "lease-format")
	groupFlags(c.Flags(), "Events and metrics", "events", "events-file", "metrics-addr", "stuck-after", "stuck-threshold")
	return c
}

// validate checks the flags (usage errors) and fills implied values.
func (o *processOptions) validate(c *cobra.Command) error {
	if err := o.f.requireContainer(); err != nil {
		return err
	}
	if err := o.f.requireProcessor(); err != nil {
		return err
	}
	if err := o.app.validate(c, &o.delegate); err != nil {
		return err
	}
	if err := o.delegate.validate(c); err != nil {
		return err
	}
	if o.MaxItems < 0 {
		return usageErrorf("--batch-size must not be negative, got %d", o.MaxItems)
	}
	if o.StuckAfter < 1 {
		return usageErrorf("--stuck-after must be at least 1, got %d", o.StuckAfter)
	}
	if err := o.resolve(); err != nil {
		return err
	}
	if o.mode == changefeed.AllVersionsAndDeletes && !o.start.IsNow() {
		// .NET throws too: the all-versions feed starts from now or a continuation only.
		return usageErrorf("--from %s: an all-versions processor starts its leases from now only (leases with a continuation resume from it)", o.StartFrom)
	}
	if err := o.config(changefeed.Now()).ValidateHost(); err != nil {
		return usageErrorf("%w", err)
	}
	return nil
}

// resolve parses --from and --mode into start and mode, once: validate calls it, and runProcess
// uses what it resolved ("now" is anchored at the host's start there).
func (o *processOptions) resolve() error {
	start, err := changefeed.ParseStartFrom(o.StartFrom, o.f.Now())
	if err != nil {
		return usageErrorf("--from: %w", err)
	}
	mode, err := changefeed.ParseMode(o.Mode)
	if err != nil {
		return usageErrorf("--mode: %w", err)
	}
	o.start, o.mode = start, mode
	return nil
}

// duplicateInstanceHint is the Try: line of a host that refused a name another live host runs
// under.
const duplicateInstanceHint = "give each host its own name with --instance NAME, or leave --instance out: the default <hostname>-<pid>-<random> differs for every process"

// instance returns --instance or the default <hostname>-<pid>-<random>: containers that share a
// hostname and run cfp as PID 1 would otherwise share a name, and two hosts under one name both
// process every lease (the host refuses to start under a name a live host runs under).
func (o *processOptions) instance() string {
	if o.Instance != "" {
		return o.Instance
	}
	if o.defaultInstance == "" {
		host, err := os.Hostname()
		if err != nil || host == "" {
			host = "cfp"
		}
		var b [3]byte
		_, _ = rand.Read(b[:])
		o.defaultInstance = host + "-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b[:])
	}
	return o.defaultInstance
}

// config maps the flags to the processor's configuration (the containers, hooks and Logger
// are added by runProcess).
func (o *processOptions) config(start changefeed.StartFrom) changefeed.Config {
	return changefeed.Config{
		Processor:          o.f.Global.Processor,
		LeasePrefix:        o.f.Global.LeaseIDPrefix,
		Instance:           o.instance(),
		AcquireInterval:    o.AcquireInterval,
		RenewInterval:      o.RenewInterval,
		Expiration:         o.Expiration,
		PollInterval:       o.PollInterval,
		CheckpointInterval: o.CheckpointInterval,
		MaxItems:           o.MaxItems,
		StartFrom:          start,
		Mode:               o.mode,
		LeaseFormat:        o.leaseFormat(),
		ShutdownTimeout:    o.ShutdownTimeout,
		StuckThreshold:     o.StuckThreshold,
		Redact:             o.f.redact,
		// Every delegate copies a batch's items before Handle returns (stdout into its buffer,
		// --exec into the array on stdin, --exec-lines into the message, the dead-letter file
		// into its record): the pages' memory is reused.
		ReuseItems:           true,
		CreateLeaseContainer: o.CreateLeaseContainer,
	}
}

// runProcess runs the processor host until ctx ends (exit 0 after a clean shutdown) or the
// error policy stops it. o holds what validate resolved.
func runProcess(ctx context.Context, o *processOptions) (err error) {
	f := o.f
	defer tuneProcessGC(f.Getenv)()
	ctx, closeApp := o.app.start(ctx, f)
	defer closeApp()
	cfg := o.config(o.start)
	// "now" is this host's start, as in .NET (see Config.Now).
	cfg.Now, cfg.Logger = f.Now, f.Log
	// On a terminal, the live view (process_view.go); nil otherwise.
	view := newProcessView(o)
	defer view.end()
	var metrics *prom.Metrics
	if o.MetricsAddr != "" {
		// Served from the start, so /readyz answers 503 until the first acquire cycle ended.
		acquire := cfg.AcquireInterval
		if acquire == 0 {
			acquire = changefeed.DefaultAcquireInterval
		}
		metrics = prom.NewMetrics(prom.Options{
			Processor: f.Global.Processor, Database: f.Global.Database, Container: f.Global.Container,
			Instance: cfg.Instance, StuckAfter: o.StuckAfter, StallAfter: prom.StallAfter(acquire), Now: f.Now,
		})
		_, stop, err := serveMetrics(ctx, o.MetricsAddr, metrics.Registry(), metrics.Health(), f.Log)
		if err != nil {
			return err
		}
		defer stop()
		cfg.Hooks = append(cfg.Hooks, cycleDone(func(err error) {
			rf, _ := errors.AsType[*changefeed.ReadsFailingError](err)
			switch {
			case rf != nil:
				// Not the account: the reads of some leases fail, whatever the retries.
				err = &changefeed.ReadsFailingError{Leases: rf.Leases, Err: errors.New(f.redact(rf.Err.Error()))}
			case err != nil:
				err = errors.New(f.redact(err.Error()))
			}
			metrics.OnCycleDone(err)
		}))
	}
	// Every request the host makes reports its charge to ru, by kind (the summary's RU).
	ru := newRequestUnits(metrics)
	cfg.Hooks = append(cfg.Hooks, ru)
	acct, err := f.Account(ctx)
	if err != nil {
		return err
	}
	leaseAcct, err := f.leaseAccount(ctx)
	if err != nil {
		return err
	}
	cfg.Monitored = changefeed.Container{Client: acct.Client(), Database: f.Global.Database, Name: f.Global.Container}
	cfg.Leases = changefeed.Container{Client: leaseAcct.Client(), Database: f.leaseDatabase(), Name: f.Global.LeaseContainer}

	eventsOut := f.IO.ErrOut
	if o.EventsFile != "" {
		file, err := os.OpenFile(o.EventsFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("open --events-file: %w", err)
		}
		defer file.Close()
		eventsOut = file
	}
	events := newProcessEvents(eventsOut, o.Events, f.redact, f.Now)
	events.also = o.app.event
	cfg.OnEvent = func(e changefeed.Event) {
		events.notify(e)
		metrics.OnEvent(e)
	}

	o.delegate.attemptsReported = o.Events != eventsNone
	o.delegate.appHandler = o.app.handler(o.delegate.Timeout)
	restore := view.discardStdout(f)
	h, closeHandler, err := o.delegate.handler(f, func(inner batchHandler) batchHandler {
		return view.count(&observedHandler{h: inner, events: events, metrics: metrics, attempts: map[string]failures{}})
	})
	restore()
	if err != nil {
		return err
	}
	defer func() {
		// A failure to flush stdout or close the dead-letter file outranks a clean exit.
		var exit *ExitError
		if cerr := closeHandler(); cerr != nil && (err == nil || errors.As(err, &exit) && exit.Code == exitOK) {
			err = fmt.Errorf("close delegate: %w", cerr)
		}
	}()

	if lh, ok := h.(changefeed.LeaseHandler); ok {
		cfg.LeaseHandler = lh
	}
	proc, err := changefeed.NewProcessor(cfg, h.Handle)
	if err != nil {
		return usageErrorf("%w", err)
	}
	boot, err := proc.Bootstrap(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return &ExitError{Code: exitOK}
		}
		if mm, ok := errors.AsType[*changefeed.ModeMismatchError](err); ok {
			return o.modeMismatch(mm)
		}
		if lf, ok := errors.AsType[*changefeed.LeaseFormatError](err); ok {
			return o.leaseFormatMismatch(lf)
		}
		if _, ok := errors.AsType[*changefeed.DuplicateInstanceError](err); ok {
			return withHint(err, duplicateInstanceHint)
		}
		if errors.Is(err, changefeed.ErrNotFound) {
			return o.openError(err)
		}
		return fmt.Errorf("initialize lease store: %w", err)
	}
	if boot.Existed && o.startSet {
		o.noteExistingLeases(ctx, proc)
	}
	if boot.Existed {
		warnUncovered(ctx, f, proc)
	}
	if err := o.app.hello(ctx, cfg.Instance, f.Global.Processor, proc.Prefix()); err != nil {
		if ctx.Err() != nil {
			return &ExitError{Code: exitOK}
		}
		return fmt.Errorf("application channel: %w", err)
	}
	events.started(cfg.Instance, f.Global.Processor, proc.Prefix(), boot)
	if o.started != nil {
		o.started(proc)
	}

	// q in the live view shuts the host down as SIGINT does.
	ctx, err = view.start(ctx, acct, proc.Prefix())
	if err != nil {
		return err
	}
	runErr := proc.Run(ctx)
	metrics.Stop()
	events.summary(cfg.Instance, runErr, ru)
	o.app.stopped()
	if runErr != nil {
		var stop *changefeed.StopError
		if errors.As(runErr, &stop) {
			return fmt.Errorf("processor stopped: %w", stop.Err)
		}
		if _, ok := errors.AsType[*changefeed.DuplicateInstanceError](runErr); ok {
			return withHint(runErr, duplicateInstanceHint)
		}
		if _, ok := errors.AsType[*changefeed.LeaseSetDeletedError](runErr); ok {
			return &ExitError{Code: exitGone, Err: withHint(fmt.Errorf("processor stopped: %w", runErr),
				"start the host again to bootstrap a new lease set from its start options (--from), or leave it stopped if the processor is retired")}
		}
		if _, ok := errors.AsType[*changefeed.MonitoredGoneError](runErr); ok {
			return &ExitError{Code: exitGone, Err: withHint(fmt.Errorf("processor stopped: %w", runErr),
				"recreate the container and start the host again, or retire the processor with cfp leases delete")}
		}
		return fmt.Errorf("processor: %w", runErr)
	}
	if ctx.Err() != nil {
		// A graceful shutdown on SIGINT/SIGTERM is success: batches finished, leases released.
		return &ExitError{Code: exitOK}
	}
	return nil
}

// cycleDone is a changefeed.HookCycleDone of a function.
type cycleDone func(err error)

func (f cycleDone) OnCycleDone(err error) { f(err) }

var _ changefeed.HookCycleDone = cycleDone(nil)
