package leases

import "context"

// ChargeKind classifies the request units (RU) a processor spends, by what the request was for.
// The kinds are the label values of cfp process's RU metrics and the keys of its summary's
// request_units (docs/scripting.md).
type ChargeKind string

// The kinds of request.
const (
	// ChargeChangeFeed is a change-feed page read of the monitored container.
	ChargeChangeFeed ChargeKind = "change_feed"
	// ChargeLeaseRead is a point read of one lease.
	ChargeLeaseRead ChargeKind = "lease_read"
	// ChargeLeaseList is a query listing the leases (and presence records).
	ChargeLeaseList ChargeKind = "lease_list"
	// ChargeRenew is a lease renewal (and the re-read after a 412).
	ChargeRenew ChargeKind = "renew"
	// ChargeCheckpoint is a checkpoint write (and the re-read after a 412).
	ChargeCheckpoint ChargeKind = "checkpoint"
	// ChargeAcquire is taking or stealing a lease.
	ChargeAcquire ChargeKind = "acquire"
	// ChargeRelease is giving a lease up.
	ChargeRelease ChargeKind = "release"
	// ChargePresence is writing or removing this host's presence record.
	ChargePresence ChargeKind = "presence"
	// ChargeOther is everything else: creating, deleting and initializing leases, the
	// bootstrap lock, the container's metadata.
	ChargeOther ChargeKind = "other"
)

// ChargeKinds are all the kinds, in the order reports list them.
var ChargeKinds = []ChargeKind{
	ChargeChangeFeed, ChargeLeaseRead, ChargeLeaseList, ChargeRenew, ChargeCheckpoint,
	ChargeAcquire, ChargeRelease, ChargePresence, ChargeOther,
}

// ChargeRecorder receives the charge of each request: its kind, the lease token it was for
// ("" when none) and the RU. It must be safe for concurrent use.
type ChargeRecorder func(kind ChargeKind, lease string, ru float64)

type chargeKey struct{}

// chargeCtx is what a context carries: the recorder and the operation under way.
type chargeCtx struct {
	rec   ChargeRecorder
	kind  ChargeKind
	lease string
}

// WithChargeRecorder returns ctx carrying rec: every request made with it (or a context
// derived from it) reports its charge to rec. Documents and feed sources call ReportCharge.
func WithChargeRecorder(ctx context.Context, rec ChargeRecorder) context.Context {
	if rec == nil {
		return ctx
	}
	return context.WithValue(ctx, chargeKey{}, chargeCtx{rec: rec})
}

// WithCharge returns ctx classifying its requests as kind for lease, unless ctx already
// carries a kind (the outer operation wins: the re-read inside a renew is the renew's). Without
// a recorder it returns ctx unchanged.
func WithCharge(ctx context.Context, kind ChargeKind, lease string) context.Context {
	c, ok := ctx.Value(chargeKey{}).(chargeCtx)
	if !ok || c.kind != "" {
		return ctx
	}
	c.kind, c.lease = kind, lease
	return context.WithValue(ctx, chargeKey{}, c)
}

// ReportCharge reports the charge of one request made with ctx to its recorder, if any, under
// ctx's kind (ChargeOther when none). A zero charge is reported too.
func ReportCharge(ctx context.Context, ru float64) {
	c, ok := ctx.Value(chargeKey{}).(chargeCtx)
	if !ok {
		return
	}
	kind := c.kind
	if kind == "" {
		kind = ChargeOther
	}
	c.rec(kind, c.lease, ru)
}
