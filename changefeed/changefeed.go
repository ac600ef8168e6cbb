package changefeed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cfp-dev/cfp/internal/cosmos"
	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/leases"
)

// Container names a container and the client that reaches its account.
type Container struct {
	// Client is your azcosmos client for the container's account. The package never closes it.
	Client *azcosmos.Client
	// Database and Name are the ids of the database and the container.
	Database string
	Name     string
}

// Config configures a Processor or an Estimator. Zero fields take the defaults given.
type Config struct {
	// Monitored is the container whose change feed is read (required).
	Monitored Container
	// Leases is the lease container (Name required). A nil Client means Monitored.Client, an
	// empty Database means Monitored.Database.
	Leases Container
	// Processor is the processor name, .NET's processorName: the start of every lease id.
	// Hosts with the same name share the work; another name is another processor, with leases
	// of its own. Required unless LeasePrefix is set.
	Processor string
	// Instance is this host's name, .NET's WithInstanceName: written as the owner of the leases
	// it holds, so it must differ between the hosts of a processor (add a random suffix, or a
	// container id: containers share hostnames and PIDs). Run refuses a name another live host
	// runs under. Required by NewProcessor.
	Instance string
	// StartFrom is where leases without a continuation start: Now() (the zero value),
	// Beginning() or Time(t). Leases with a continuation always resume from it. Now() means the
	// moment Run started, less a second, as in .NET: a lease that another host owned but never
	// checkpointed still delivers the changes written since. An AllVersionsAndDeletes processor
	// starts from Now() only, when each lease is first read.
	StartFrom StartFrom
	// Mode is the change feed mode (default LatestVersion). A processor refuses a lease set
	// written in the other mode (ErrModeMismatch): give it another Processor name.
	Mode Mode
	// MaxItems bounds the changes in one batch (0: the service's default).
	MaxItems int
	// PollInterval is how long a lease waits after it caught up before it reads again
	// (default 5s).
	PollInterval time.Duration
	// AcquireInterval is how often the host balances leases with the others (default 13s),
	// RenewInterval how often it renews the leases it holds (default 17s), and Expiration how
	// long a lease stays owned without a renewal (default 60s): the .NET defaults. The
	// Estimator uses Expiration to tell owned leases from expired ones.
	AcquireInterval time.Duration
	RenewInterval   time.Duration
	Expiration      time.Duration
	// ShutdownTimeout bounds how long the batches in flight may run once Run's context ended
	// (default 30s); their handler's context is cancelled then.
	ShutdownTimeout time.Duration
	// LeasePrefix, when set, is the whole lease id prefix before "..", in place of the one
	// built from Processor and the monitored container (for leases written through another
	// host name, or a Java processor's name-based prefix).
	LeasePrefix string
	// Logger receives the host's logs, as attributes such as lease, owner and range (default:
	// none). Repeated errors are rate-limited.
	Logger *slog.Logger
	// OnEvent, when set, is called for every lifecycle event: a lease acquired, released or
	// lost, a batch handled, a checkpoint written, a split, an error. It is called
	// synchronously from several goroutines, so it must be quick and safe for concurrent use.
	OnEvent func(Event)
	// Hooks observe the processor: each is called through the hook interfaces it implements
	// (HookEvent, HookBatchStart, HookBatchEnd, HookCycleDone, HookRequestCharge). The
	// package changefeed/prom is one.
	Hooks []Hook
	// LeaseHandler, when set, is told when this host starts and stops delivering each lease's
	// batches.
	LeaseHandler LeaseHandler
	// LeaseFormat is the format of the leases the processor creates (default
	// LeaseFormatDefault: .NET's in a new set, an existing set's own).
	LeaseFormat LeaseFormat
	// CreateLeaseContainer creates the lease container (partitioned on /id, with time to live
	// on, as .NET recommends for its .lock marker) and its database unless they exist.
	CreateLeaseContainer bool
	// StuckThreshold is how long a batch may stay in the Handler before the host records on
	// the lease that it is in flight (so `cfp estimate` and `cfp leases list` show it) and
	// reports an EventError (default 1m).
	StuckThreshold time.Duration
	// Redact, when set, masks secrets in the text the host writes into a lease's failure
	// record (a handler's error).
	Redact func(string) string
	// ReuseItems lets the host reuse the memory of a batch's Items once the Handler returned:
	// set it only when the Handler copies what it keeps of them.
	ReuseItems bool
	// Now is the clock where StartFrom's Now() is anchored (default time.Now).
	Now func() time.Time
	// CheckpointInterval, when set, writes a lease's checkpoint at most this often instead of
	// after every batch: what waits is written when the lease is released or the host stops,
	// and a crash may deliver it again.
	CheckpointInterval time.Duration
}

// Mode is a change feed mode: the engine's own type, so a Batch carries it as is.
type Mode = feed.FeedMode

const (
	// LatestVersion delivers the latest version of each changed item (deletes are not seen):
	// .NET's GetChangeFeedProcessorBuilder. Its String is "latest", as `cfp process --mode`
	// spells it.
	LatestVersion = feed.LatestVersion
	// AllVersionsAndDeletes delivers every create, replace and delete as the service's
	// {"current", "previous", "metadata"} object: .NET's
	// GetChangeFeedProcessorBuilderWithAllVersionsAndDeletes. Its leases start from now. Its
	// String is "all-versions".
	AllVersionsAndDeletes = feed.AllVersionsAndDeletes
)

// StartFrom is where leases without a continuation start reading. The zero value is Now().
type StartFrom struct {
	s feed.StartFrom
}

// Now starts at the moment the processor started.
func Now() StartFrom { return StartFrom{feed.StartFrom{Kind: feed.StartNow}} }

// Beginning starts at the container's first change still in the change feed.
func Beginning() StartFrom { return StartFrom{feed.StartFrom{Kind: feed.StartBeginning}} }

// Time starts at the changes made at or after t.
func Time(t time.Time) StartFrom { return StartFrom{feed.StartFrom{Kind: feed.StartTime, Time: t}} }

// String returns "now", "beginning" or the time in RFC 3339.
func (s StartFrom) String() string { return feed.FormatStart(s.s) }

// Range is a range of effective partition keys, [Min, Max), as hexadecimal strings: "" is the
// start of the key space and "FF" its end. It is the engine's type (String gives "Min-Max", the
// form of a .NET lease token).
type Range = feed.Range

// Batch is one page of changes of one lease, as the engine delivers it: LeaseToken (a
// partition id for leases made per partition, "0", or the range of an EPK lease,
// "05C1C9CD673398-05C1D9CD673398"), Range, Owner (this host's Instance), Items (the changes
// exactly as the change feed returned them, in order: in LatestVersion mode each changed item,
// in AllVersionsAndDeletes mode one {"current", "previous", "metadata"} object per create,
// replace or delete), Continuation (the position after this batch: what the lease stores once
// the handler returned nil), Checkpoint (the lease's continuation when the batch was delivered,
// "" when it has none: where the changes come again from if the handler fails), Attempt (1 the
// first time, 2 after one failed attempt, ...), LatestLSN (the partition's latest logical
// sequence number when the page was read, 0 when unknown) and Mode.
type Batch = feed.Batch

// Handler processes a batch. It is called from one goroutine per lease, so a handler shared by
// leases must be safe for concurrent use. Return nil once every change of the batch was
// processed: the host checkpoints it. Any other error means not processed: the same changes
// come again from the last checkpoint, after a backoff (1s, doubling up to 30s). Return an
// error made with Stop to stop the whole processor. A panic in the handler is recovered and
// counts as the batch's error (a *PanicError, whose stack goes to Config.Logger): the changes
// come again, and the program and its other leases go on.
//
// ctx ends when the lease is lost or handed to another host, and ShutdownTimeout after the
// processor's context ended.
type Handler func(ctx context.Context, b Batch) error

// Errors. The variables are the engine's own values, so errors.Is matches them in every error
// this package returns or reports in an Event.
var (
	// ErrLeaseLost: another host took the lease, it was released, or it was deleted. The error
	// is a *LeaseLostError.
	ErrLeaseLost = leases.ErrLeaseLost
	// ErrModeMismatch: the lease set was written in the other change feed mode. The error is a
	// *ModeMismatchError.
	ErrModeMismatch = feed.ErrModeMismatch
	// ErrNotFound: the database, the monitored container or the lease container does not
	// exist.
	ErrNotFound = leases.ErrNotFound
	// ErrThrottled: the service kept answering 429 (or 503) after the SDK's retries. The error
	// is a *ThrottledError; the host backs off and retries.
	ErrThrottled = feed.ErrThrottled
	// ErrClientOptions: a read needs the pipeline policies of ClientOptions and the monitored
	// container's client was built without them. Nothing was delivered from that read.
	ErrClientOptions = cosmos.ErrClientPolicies
)

// Error types, for errors.As. They are the engine's types.
type (
	// LeaseLostError says which lease was lost (Token) and to whom (Owner, "" when it was
	// released; Gone when it was deleted).
	LeaseLostError = leases.LeaseLostError
	// ModeMismatchError names the first lease in the other mode (Lease) and the two modes
	// (LeaseMode, ProcessorMode), as .NET names them: "Incremental Feed" or
	// "Full-Fidelity Feed".
	ModeMismatchError = feed.ModeMismatchError
	// ThrottledError holds the HTTP status (429 or 503) and the service's RetryAfter.
	ThrottledError = feed.ThrottledError
	// StopError is what Run returns when a handler returned Stop(err); it unwraps to err.
	StopError = feed.StopError
)

// Stop wraps err so that a Handler returning it stops the processor: Run finishes the batches in
// flight, checkpoints them, releases its leases and returns a *StopError that unwraps to err.
// The batch that returned it is not checkpointed.
func Stop(err error) error { return feed.Stop(err) }

// ClientOptions returns a copy of o (or new options, when o is nil) with the pipeline policies
// that the change feed reads rely on appended to PerCallPolicies: the x-ms-start-epk and
// x-ms-end-epk headers of a read of part of a partition (azcosmos never sends them; a lease
// covers part of a partition after a merge), the headers of the all-versions-and-deletes mode
// (azcosmos has no mode option), and a split of the page body that hands the items on without
// decoding them. They act only on this package's change feed reads: every other call of the
// client is unchanged.
func ClientOptions(o *azcosmos.ClientOptions) *azcosmos.ClientOptions {
	var c azcosmos.ClientOptions
	if o != nil {
		c = *o
	}
	c.PerCallPolicies = append(slices.Clone(c.PerCallPolicies), cosmos.PerCallPolicies()...)
	return &c
}

// engine is what a Processor and an Estimator open from a Config: the accounts over the
// caller's clients and the monitored container. Opening it does no I/O.
type engine struct {
	cfg       Config
	monAcct   *cosmos.Account
	monitored *cosmos.Container
	leaseAcct *cosmos.Account
	leaseDB   string
	log       *slog.Logger
}

func newEngine(cfg Config) (*engine, error) {
	var errs []error
	if cfg.Monitored.Client == nil {
		errs = append(errs, errors.New("Monitored.Client is required"))
	}
	if cfg.Monitored.Database == "" || cfg.Monitored.Name == "" {
		errs = append(errs, errors.New("Monitored.Database and Monitored.Name are required"))
	}
	if cfg.Leases.Name == "" {
		errs = append(errs, errors.New("Leases.Name is required"))
	}
	if strings.TrimSpace(cfg.Processor) == "" && cfg.LeasePrefix == "" {
		errs = append(errs, errors.New("a Processor name (or a LeasePrefix) is required"))
	}
	if cfg.Mode != LatestVersion && cfg.Mode != AllVersionsAndDeletes {
		errs = append(errs, fmt.Errorf("unknown Mode %d", cfg.Mode))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("changefeed: %w", errors.Join(errs...))
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	mon, err := cosmos.FromClient(cfg.Monitored.Client, cosmos.ClientConfig{Logger: log})
	if err != nil {
		return nil, fmt.Errorf("changefeed: %w", err)
	}
	leaseAcct := mon
	if cfg.Leases.Client != nil && cfg.Leases.Client != cfg.Monitored.Client {
		if leaseAcct, err = cosmos.FromClient(cfg.Leases.Client, cosmos.ClientConfig{Logger: log, LeasesOnly: true}); err != nil {
			return nil, fmt.Errorf("changefeed: lease container: %w", err)
		}
	}
	db := cfg.Leases.Database
	if db == "" {
		db = cfg.Monitored.Database
	}
	return &engine{
		cfg: cfg, monAcct: mon, monitored: mon.Container(cfg.Monitored.Database, cfg.Monitored.Name),
		leaseAcct: leaseAcct, leaseDB: db, log: log,
	}, nil
}

// store opens the lease store: it reads the monitored container (for the resource ids in the
// lease prefix) and checks that the lease container exists.
func (e *engine) store(ctx context.Context) (*leases.Store, error) {
	info, err := e.monitored.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("open monitored container: %w", err)
	}
	store, err := cosmos.OpenLeaseSet(ctx, cosmos.LeaseSet{
		Monitored: e.monAcct, Info: info, Leases: e.leaseAcct, Database: e.leaseDB, Container: e.cfg.Leases.Name,
		Processor: e.cfg.Processor, Explicit: e.cfg.LeasePrefix, Create: e.cfg.CreateLeaseContainer,
		Store: leases.StoreOptions{Mode: e.cfg.Mode.LeaseMode(), OnSkip: func(id string, err error) {
			e.log.Warn("not a lease document, ignored", "id", id, "err", err)
		}},
	})
	if err != nil {
		return nil, err
	}
	return store, nil
}
