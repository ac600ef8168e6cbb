package feed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/cfp-dev/cfp/internal/leases"
)

// Estimator defaults, applied to zero fields of EstimateOptions.
const (
	DefaultEstimateConcurrency = 16
	DefaultLeaseExpiration     = 60 * time.Second
)

// Why a lease's lag is the sentinel 1 rather than a measured number (LeaseLag.Sentinel).
const (
	SentinelNoContinuation  = "no-continuation"
	SentinelRangeGone       = "range-gone"
	SentinelSpansPartitions = "spans-partitions"
	SentinelMissingLSN      = "missing-lsn"
	// SentinelUnparsableLSN marks the Java formula's -1: an LSN it could not parse.
	SentinelUnparsableLSN = "unparsable-lsn"
)

// Formula selects whose estimator Estimate mimics. The two differ by design and report
// different numbers for the same leases.
type Formula int

const (
	// FormulaDotNet is the .NET estimator's number (docs/protocol-leases.md, "Estimating lag"), which .NET's
	// GetChangeFeedEstimator and KEDA report: latest LSN - first pending LSN + 1, read from the
	// lease's continuation. The default.
	FormulaDotNet Formula = iota
	// FormulaJava is the number Java's EPK processors report from getCurrentState
	// (docs/protocol-leases.md, "Estimating lag"): the LSN of a read from now minus the lease's LSN (JavaLag).
	FormulaJava
)

// String returns the formula's flag value: "dotnet" or "java".
func (f Formula) String() string {
	switch f {
	case FormulaDotNet:
		return "dotnet"
	case FormulaJava:
		return "java"
	}
	return "Formula(" + strconv.Itoa(int(f)) + ")"
}

// ParseFormula reads "dotnet" or "java".
func ParseFormula(s string) (Formula, error) {
	switch s {
	case "dotnet":
		return FormulaDotNet, nil
	case "java":
		return FormulaJava, nil
	}
	return 0, fmt.Errorf("unknown formula %q (want dotnet or java)", s)
}

// EstimateOptions configures Estimate. Zero fields take the documented defaults.
type EstimateOptions struct {
	// Concurrency bounds the reads in flight (default 16).
	Concurrency int
	// Expiration is the lease expiration interval that decides STATE (default 60s).
	Expiration time.Duration
	// ReadFromBeginning reads leases without a continuation from the beginning (older .NET and
	// Java PK-range estimators) instead of reporting the sentinel 1 (.NET >= 3.62.0, default).
	// It applies to FormulaDotNet only.
	ReadFromBeginning bool
	// Formula is whose number to compute (default FormulaDotNet).
	Formula Formula
	// Thresholds are the times of the verdicts (see Judge); zero fields take the defaults.
	Thresholds Thresholds
	// Partitions, when set, is the container's partition list; otherwise Estimate lists them.
	Partitions []Partition
	// Now is the clock (default time.Now); Reader carries throttling backoff and sleep
	// (MaxThrottleRetries defaults to 3 here).
	Now    func() time.Time
	Reader ReaderOptions
	Logger *slog.Logger
}

// WithDefaults returns o with every zero field set to its default.
func (o EstimateOptions) WithDefaults() EstimateOptions {
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultEstimateConcurrency
	}
	if o.Expiration <= 0 {
		o.Expiration = DefaultLeaseExpiration
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Reader.MaxThrottleRetries == 0 {
		o.Reader.MaxThrottleRetries = 3
	}
	if o.Reader.Logger == nil {
		o.Reader.Logger = o.Logger
	}
	return o
}

// Validate checks the options. Defaults need not be applied first.
func (o EstimateOptions) Validate() error {
	if o.Formula != FormulaDotNet && o.Formula != FormulaJava {
		return fmt.Errorf("unknown formula %d", o.Formula)
	}
	return nil
}

// LeaseLag is the estimate for one lease.
type LeaseLag struct {
	// Lease is the lease estimated.
	Lease *leases.Lease
	// Token, Range, Owner and State describe the lease; Range is the partition's range for a
	// PK-range lease without FeedRange, when the partition is live.
	Token string
	Range Range
	Owner string
	State string
	// PartitionID is the partition read ("" when nothing was read).
	PartitionID string
	// Checkpoint is the lease's LSN; HasCheckpoint is false without a continuation.
	Checkpoint    int64
	HasCheckpoint bool
	// Latest is the partition's LSN from the session token (0 when nothing was read).
	Latest int64
	// Lag is the estimator's number (the .NET one unless EstimateOptions.Formula says Java), in
	// LSNs.
	Lag int64
	// Sentinel says why Lag is a sentinel, 1 or the Java formula's -1 ("" when it was measured).
	Sentinel string
	// OldestPending is the _ts of the oldest change not yet processed (zero when none or
	// unknown); TimeLag is its age at Now.
	OldestPending time.Time
	TimeLag       time.Duration
	// FirstPending is the oldest pending change as read (nil when none or not read: the
	// Java formula reads nothing pending).
	FirstPending json.RawMessage
	// Age is how long ago the lease was last written (0 when its timestamp is unknown).
	Age time.Duration
	// RequestCharge is the RU cost of the read.
	RequestCharge float64
	// Verdict is the lease's verdict (VerdictOK, VerdictStuck, ..., see Judge), Since since
	// when it holds (zero when unknown) and SinceBasis where that time comes from
	// (SinceProgress, ...). Failure is the owner's current failure record (nil when none).
	Verdict    string
	Since      time.Time
	SinceBasis string
	Failure    *leases.Failure
	// Progress is the older, coarser form of Verdict (ProgressIdle, ProgressActive,
	// ProgressStuck, ProgressWaiting, ProgressFailing), kept for scripts that read it; StuckFor
	// is how long a stuck lease's continuation has not moved.
	Progress string
	StuckFor time.Duration
}

// judge sets the verdict of l, estimated at now, and the progress that follows from it.
func (l *LeaseLag) judge(now time.Time, th Thresholds) {
	j := Judge(LeaseFacts{Lease: l.Lease, State: l.State, Lag: l.Lag, Measured: l.Sentinel == "", OldestPending: l.OldestPending, Now: now}, th)
	l.Verdict, l.Since, l.SinceBasis, l.Failure = j.Verdict, j.Since, j.Basis, j.Failure
	l.settle(now)
}

// settle sets Progress and StuckFor from the verdict.
func (l *LeaseLag) settle(now time.Time) {
	l.Progress, l.StuckFor = progressOf(l.Verdict), 0
	if l.Verdict == VerdictStuck && !l.Since.IsZero() {
		l.StuckFor = max(0, now.Sub(l.Since))
	}
}

// EstimateSummary totals an estimate.
type EstimateSummary struct {
	// TotalLag is the sum of the leases' lags, or 1 when there are no leases (the .NET push
	// estimator's rule). The Java formula's -1 (SentinelUnparsableLSN) is not counted.
	TotalLag int64
	// Leases is the number of leases, Owned how many have a live owner, LiveOwners how many
	// distinct instances own them.
	Leases, Owned, LiveOwners int
	// MaxTimeLag is the largest TimeLag.
	MaxTimeLag time.Duration
	// Stuck counts the leases whose Progress is ProgressStuck, MaxStuckFor is the largest
	// StuckFor (Summarize recounts both after a ProgressTracker observed the leases).
	Stuck       int
	MaxStuckFor time.Duration
	// RequestCharge is the RU cost of every read.
	RequestCharge float64
	// Verdicts counts the leases of each verdict (only the verdicts some lease has).
	Verdicts map[string]int
}

// Estimate computes each lease's lag the way the .NET pull estimator does
// (docs/protocol-leases.md, "Estimating lag"): one read of at most one item from the lease's continuation, in parallel up to
// Concurrency. A lease without a continuation, a gone partition, and an EPK range spanning
// several partitions give the sentinel 1 without failing. Any other read error fails the
// estimate, as in .NET. The results keep the order of ls.
//
// With FormulaJava every lease is read from now instead (one read of at most one item, which
// finds none) and its lag is JavaLag of the page's continuation and the lease's; an LSN that
// does not parse gives -1 with SentinelUnparsableLSN. A gone partition and a range spanning
// several partitions still give the sentinel 1. TimeLag stays zero: nothing pending is read.
func Estimate(ctx context.Context, src Source, ls []*leases.Lease, opts EstimateOptions) ([]LeaseLag, EstimateSummary, error) {
	opts = opts.WithDefaults()
	if err := opts.Validate(); err != nil {
		return nil, EstimateSummary{}, fmt.Errorf("estimate: %w", err)
	}
	parts := opts.Partitions
	if parts == nil && len(ls) > 0 {
		var err error
		if parts, err = src.Partitions(ctx); err != nil {
			return nil, EstimateSummary{}, fmt.Errorf("estimate: list partitions: %w", err)
		}
	}
	now := opts.Now()
	out := make([]LeaseLag, len(ls))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(opts.Concurrency)
	for i, l := range ls {
		g.Go(func() error {
			ll, err := estimateLease(gctx, src, l, parts, now, opts)
			if err != nil {
				return fmt.Errorf("estimate lease %s: %w", l.Token, err)
			}
			out[i] = ll
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, EstimateSummary{}, err
	}
	for i := range out {
		out[i].judge(now, opts.Thresholds)
	}
	return out, Summarize(out), nil
}

// Summarize totals the leases of an estimate.
func Summarize(lags []LeaseLag) EstimateSummary {
	s := EstimateSummary{Leases: len(lags), Verdicts: map[string]int{}}
	owners := map[string]bool{}
	for _, l := range lags {
		if l.Verdict != "" {
			s.Verdicts[l.Verdict]++
		}
		if l.Sentinel != SentinelUnparsableLSN {
			s.TotalLag += l.Lag
		}
		s.RequestCharge += l.RequestCharge
		s.MaxTimeLag = max(s.MaxTimeLag, l.TimeLag)
		if l.Progress == ProgressStuck {
			s.Stuck++
			s.MaxStuckFor = max(s.MaxStuckFor, l.StuckFor)
		}
		if l.State == leases.StateOwned {
			s.Owned++
			owners[l.Owner] = true
		}
	}
	s.LiveOwners = len(owners)
	if len(lags) == 0 {
		s.TotalLag = 1
	}
	return s
}

// estimateLease reads one lease.
func estimateLease(ctx context.Context, src Source, l *leases.Lease, parts []Partition, now time.Time, opts EstimateOptions) (LeaseLag, error) {
	ll := LeaseLag{Lease: l, Token: l.Token, Range: l.Range, Owner: l.Owner, State: l.State(now, opts.Expiration)}
	if !l.Timestamp.IsZero() {
		ll.Age = max(0, now.Sub(l.Timestamp))
	}
	ll.Checkpoint, ll.HasCheckpoint = l.LSN()

	rt, err := Route(l, parts)
	var rerr *RouteError
	switch {
	case errors.As(err, &rerr) && rerr.Gone:
		// The partition list may be older than the lease (opts.Partitions): the read says.
		rt = Routing{Partition: Partition{ID: l.Token, Range: l.Range}}
	case errors.As(err, &rerr) && len(rerr.Over) > 1:
		return sentinel(ll, SentinelSpansPartitions), nil
	case err != nil:
		return sentinel(ll, SentinelRangeGone), nil
	}
	if !l.HasRange() {
		ll.Range = rt.Partition.Range
	}
	req := rt.Request()
	req.MaxItems = 1

	if opts.Formula == FormulaJava {
		return estimateJava(ctx, src, req, ll, opts)
	}
	switch {
	case l.Continuation != "":
		req.Start = StartFrom{Kind: StartContinuation, Continuation: l.Continuation}
	case opts.ReadFromBeginning:
		req.Start = StartFrom{Kind: StartBeginning}
	default:
		return sentinel(ll, SentinelNoContinuation), nil
	}

	page, err := NewReader(src, req, opts.Reader).readOnce(ctx)
	if estimatesGone(err) {
		return sentinel(ll, SentinelRangeGone), nil
	}
	if err != nil {
		return LeaseLag{}, err
	}
	ll.PartitionID = req.PartitionID
	ll.Latest = page.LatestLSN
	ll.RequestCharge = page.RequestCharge
	var first int64
	if len(page.Items) > 0 {
		var ts time.Time
		first, ts = changeMeta(page.Items[0])
		ll.FirstPending = slices.Clone(page.Items[0])
		if !ts.IsZero() {
			ll.OldestPending = ts
			ll.TimeLag = max(0, now.Sub(ts))
		}
	}
	ll.Lag = EstimateLag(page.LatestLSN, first, len(page.Items) > 0)
	if len(page.Items) > 0 && first <= 0 {
		ll.Sentinel = SentinelMissingLSN
	}
	return ll, nil
}

// estimatesGone reports whether a read's err gives the range-gone sentinel (lag 1), as .NET's
// estimator does for 410/1002 only (Microsoft.Azure.Cosmos/src/ChangeFeedProcessor/
// ChangeFeedEstimatorIterator.cs, lines 322-325), and for a range cfp found gone by itself
// (Substatus 0, which .NET's routing answers as 410/1002 too). A 410/1007 (completing a split)
// fails the estimate there (EnsureSuccessStatusCode, line 329), and so it does here.
func estimatesGone(err error) bool {
	var g *RangeGoneError
	return errors.As(err, &g) && g.Substatus != 1007
}

// estimateJava reads the lease's range from now and applies JavaLag.
func estimateJava(ctx context.Context, src Source, req ReadRequest, ll LeaseLag, opts EstimateOptions) (LeaseLag, error) {
	req.Start = StartFrom{Kind: StartNow}
	page, err := NewReader(src, req, opts.Reader).readOnce(ctx)
	if estimatesGone(err) {
		return sentinel(ll, SentinelRangeGone), nil
	}
	if err != nil {
		return LeaseLag{}, err
	}
	ll.PartitionID = req.PartitionID
	ll.RequestCharge = page.RequestCharge
	if n, ok := parseJavaLSN(page.Continuation); ok {
		ll.Latest = n
	}
	lag, ok := JavaLag(page.Continuation, ll.Lease.Continuation)
	if !ok {
		ll.Lag, ll.Sentinel = -1, SentinelUnparsableLSN
		return ll, nil
	}
	ll.Lag = lag
	return ll, nil
}

// JavaLag is the number Java's EPK processors report per lease from getCurrentState
// (docs/protocol-leases.md, "Estimating lag"), in LSNs. latest is the continuation of a one-item read of the lease's
// range from now, lease the lease's continuation token; both are ETags such as `"42"` whose
// quotes are removed before parsing.
//
//   - a blank lease continuation gives latest - 1;
//   - otherwise the lag is latest - lease, which Java does not clamp;
//   - when either does not parse, ok is false and the lag is Java's -1.
func JavaLag(latest, lease string) (lag int64, ok bool) {
	l, ok := parseJavaLSN(latest)
	if !ok {
		return -1, false
	}
	if strings.TrimSpace(lease) == "" {
		return l - 1, true
	}
	c, ok := parseJavaLSN(lease)
	if !ok {
		return -1, false
	}
	return l - c, true
}

// parseJavaLSN is Java's Long.parseLong(token.replace("\"", "")).
func parseJavaLSN(etag string) (int64, bool) {
	n, err := strconv.ParseInt(strings.ReplaceAll(etag, `"`, ""), 10, 64)
	return n, err == nil
}

func sentinel(ll LeaseLag, why string) LeaseLag {
	ll.Lag, ll.Sentinel = 1, why
	return ll
}
