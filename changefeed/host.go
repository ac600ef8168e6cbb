package changefeed

import (
	"context"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/leases"
)

// The defaults of Config's timings: .NET's, but for StuckThreshold.
const (
	DefaultAcquireInterval = feed.DefaultAcquireInterval // 13s
	DefaultRenewInterval   = feed.DefaultRenewInterval   // 17s
	DefaultExpiration      = feed.DefaultExpiration      // 60s
	DefaultPollInterval    = feed.DefaultPollInterval    // 5s
	DefaultShutdownTimeout = feed.DefaultShutdownTimeout // 30s
	DefaultStuckThreshold  = feed.DefaultStuckThreshold  // 1m
)

// LeaseHandler is told when this host starts and stops delivering a lease's batches
// (Config.LeaseHandler), for a handler that keeps state per lease. OpenLease is called before the
// lease's first batch; an error gives the lease up for now (it is released and taken again
// later). CloseLease is called once the lease's last batch returned, with why: CloseShutdown,
// CloseRebalance and CloseSplit come before the lease is checkpointed and released,
// CloseLeaseLost after another host took it (nothing can be checkpointed). Both are called from
// the lease's goroutine.
type LeaseHandler interface {
	OpenLease(ctx context.Context, l LeaseInfo) error
	CloseLease(ctx context.Context, l LeaseInfo, reason CloseReason) error
}

// LeaseInfo describes a lease to a LeaseHandler: its Token, Range, Owner (this host) and
// Continuation.
type LeaseInfo = feed.LeaseInfo

// CloseReason says why the host stopped delivering a lease's batches.
type CloseReason = feed.CloseReason

// Close reasons.
const (
	CloseShutdown  = feed.CloseShutdown  // the processor is stopping; the lease is released
	CloseLeaseLost = feed.CloseLeaseLost // another host took the lease, or it expired
	CloseRebalance = feed.CloseRebalance // another host asked for the lease; it is released
	CloseSplit     = feed.CloseSplit     // the lease's range split or merged; children continue
)

// BootstrapResult is what Bootstrap found: Existed is true when the lease set was already
// initialized (StartFrom then applies only to leases without a continuation), Created is how
// many leases this host created.
type BootstrapResult = feed.BootstrapResult

// Lease is a lease document of the processor's lease set, in any of the SDKs' formats.
type Lease = leases.Lease

// More error types of Run and Bootstrap, for errors.As. They are the engine's types.
type (
	// DuplicateInstanceError: another live host runs under Config.Instance.
	DuplicateInstanceError = feed.DuplicateInstanceError
	// LeaseSetDeletedError: the lease set was deleted while Run ran (Prefix, and the held
	// Leases found deleted).
	LeaseSetDeletedError = feed.LeaseSetDeletedError
	// MonitoredGoneError: the monitored container was deleted while Run ran.
	MonitoredGoneError = feed.MonitoredGoneError
)

// ParseStartFrom reads a start position as `cfp process --from` takes it: "now", "beginning",
// an RFC 3339 time or -<duration> before now.
func ParseStartFrom(s string, now time.Time) (StartFrom, error) {
	st, err := feed.ParseStart(s, now)
	if err != nil {
		return StartFrom{}, err
	}
	return StartFrom{st}, nil
}

// ParseMode reads a mode as `cfp process --mode` takes it: "latest" (or "") or "all-versions".
func ParseMode(s string) (Mode, error) { return feed.ParseFeedMode(s) }

// IsNow reports whether s is Now().
func (s StartFrom) IsNow() bool { return s.s.Kind == feed.StartNow }

// leaseHandler is the engine's handler of a Processor with a Config.LeaseHandler.
type leaseHandler struct {
	feed.HandlerFunc
	lh LeaseHandler
}

func (h leaseHandler) OpenLease(ctx context.Context, l LeaseInfo) error {
	return h.lh.OpenLease(ctx, l)
}

func (h leaseHandler) CloseLease(ctx context.Context, l LeaseInfo, reason CloseReason) error {
	return h.lh.CloseLease(ctx, l, reason)
}

// LeaseFormat is the format of the leases a processor creates (Config.LeaseFormat).
type LeaseFormat = feed.LeaseFormat

// Lease formats.
const (
	// LeaseFormatDefault creates .NET leases in a new lease set and keeps an existing set's.
	LeaseFormatDefault = feed.LeaseFormatDefault
	// LeaseFormatDotNet creates .NET v0 (PK-range) leases and refuses a set holding Java leases.
	LeaseFormatDotNet = feed.LeaseFormatDotNet
	// LeaseFormatJava creates Java v4 EPK leases, a set a Java host can join, and refuses a
	// set holding .NET leases.
	LeaseFormatJava = feed.LeaseFormatJava
)

// LeaseFormatError is what Bootstrap and Run return when Config.LeaseFormat contradicts the
// existing lease set: Lease is the first lease in the other format, Family its family.
type LeaseFormatError = feed.LeaseFormatError
