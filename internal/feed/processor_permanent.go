package feed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/cfp-dev/cfp/internal/leases"
)

// Permanent read errors: a read that retrying does not fix (the monitored container deleted, a
// continuation the service refuses with 400, credentials refused). The worker keeps retrying
// (the cause may be fixed: a key restored, a container recreated), but the host no longer
// looks healthy: the failure is an error event marked Permanent, a warning, and every acquire
// cycle reports a *ReadsFailingError to OnAcquireCycle (a readiness probe turns red). A deleted
// monitored container stops the host: Run returns a *MonitoredGoneError.

// readFailureKey is the lease property in which the owner of a lease whose reads fail
// permanently writes the failure (one line), for estimators and other hosts to see: .NET and
// Java keep the properties of a lease they rewrite. The owner removes it once reads work.
const readFailureKey = "cfpReadFailure"

// readFailureOwnerKey names the host that wrote readFailureKey: a .NET or Java host that takes
// the lease over keeps both properties, and the mark is not its own.
const readFailureOwnerKey = "cfpReadFailureOwner"

// ReadFailure returns what l's owner reported about the reads of l's range: the permanent
// failure it met ("" when none, or when the host that reported it no longer owns l).
func ReadFailure(l *leases.Lease) string {
	if l == nil {
		return ""
	}
	if by := l.Properties[readFailureOwnerKey]; by != "" && !strings.EqualFold(by, l.Owner) {
		return ""
	}
	return l.Properties[readFailureKey]
}

// IsPermanent reports whether err is a failure that retrying the same request does not fix:
// ErrNotFound (a container or database that does not exist), or an error that says so with a
// Permanent() bool method (internal/cosmos implements it for 400-class answers and refused
// credentials). Throttling, timeouts, 5xx and transport failures are not permanent.
func IsPermanent(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrNotFound) {
		return true
	}
	var p interface{ Permanent() bool }
	return errors.As(err, &p) && p.Permanent()
}

// MonitoredGoneError is what Run returns when the monitored container (or its database) was
// deleted while the host ran: a read answered not found, and so did the partition listing.
type MonitoredGoneError struct {
	Err error
}

func (e *MonitoredGoneError) Error() string {
	return fmt.Sprintf("the monitored container is gone (deleted?): %v", e.Err)
}

func (e *MonitoredGoneError) Unwrap() error { return e.Err }

// ReadsFailingError is what an acquire cycle reports to OnAcquireCycle while the reads of
// leases this host holds fail permanently (see IsPermanent): the host runs but processes none
// of those leases.
type ReadsFailingError struct {
	// Leases are the tokens of the failing leases, sorted; Err is the last failure of the first.
	Leases []string
	Err    error
}

func (e *ReadsFailingError) Error() string {
	return fmt.Sprintf("reads of lease %s fail permanently: %v", strings.Join(e.Leases, ", "), e.Err)
}

func (e *ReadsFailingError) Unwrap() error { return e.Err }

// readFailed handles a failed read (or route) of the worker's lease that is permanent: the
// lease is marked failing, the first failure is logged at Error and every one is an error
// event with Permanent set. It returns a *MonitoredGoneError when the container itself is
// gone, which ends Run.
func (p *Processor) readFailed(ctx context.Context, ol *ownedLease, op string, err error) error {
	token := ol.token
	p.mu.Lock()
	_, again := p.failing[token]
	p.failing[token] = err
	p.mu.Unlock()
	p.notify(Event{Type: EventError, Lease: token, Err: err, Cause: CauseInfra, Permanent: true})
	if !again {
		p.log.Error("reads of the lease fail permanently; retrying will not fix it", "op", op, "lease", token, "err", err)
		p.markReadFailure(ctx, ol, strings.Join(strings.Fields(err.Error()), " "))
	} else {
		p.limit.logAt(ctx, slog.LevelError, limitKey(op, token), "reads of the lease fail permanently", "op", op, "lease", token, "err", err)
	}
	if !errors.Is(err, ErrNotFound) {
		return nil
	}
	// A not-found read: the lease's partition or the whole container? The listing says.
	if _, perr := p.src.Partitions(ctx); errors.Is(perr, ErrNotFound) {
		return &MonitoredGoneError{Err: err}
	}
	return nil
}

// readRecovered clears the failing mark of token after a successful read, or when its worker
// ended.
func (p *Processor) readRecovered(ctx context.Context, ol *ownedLease) {
	token := ol.token
	p.mu.Lock()
	_, was := p.failing[token]
	delete(p.failing, token)
	p.mu.Unlock()
	if was {
		p.log.Info("reads of the lease work again", "lease", token)
	}
	if ReadFailure(ol.current()) != "" {
		p.markReadFailure(ctx, ol, "")
	}
}

// markReadFailure writes msg as the lease's read failure ("" removes it), so that estimators
// show the lease failing (ProgressFailing). A lease found lost is lost; another failure is
// logged: the next failure or recovery writes again.
func (p *Processor) markReadFailure(ctx context.Context, ol *ownedLease, msg string) {
	const maxLen = 300
	if len(msg) > maxLen {
		msg = msg[:maxLen] + "..."
	}
	start := p.opts.Now()
	l, err := p.store.Update(leases.WithCharge(ctx, leases.ChargeRenew, ol.token), ol.current(), func(n *leases.Lease) error {
		if !strings.EqualFold(n.Owner, p.opts.Instance) {
			return &leases.LeaseLostError{Token: n.Token, Owner: n.Owner}
		}
		if msg == "" {
			delete(n.Properties, readFailureKey)
			delete(n.Properties, readFailureOwnerKey)
			return nil
		}
		if n.Properties == nil {
			n.Properties = map[string]string{}
		}
		n.Properties[readFailureKey] = msg
		n.Properties[readFailureOwnerKey] = p.opts.Instance
		return nil
	})
	switch {
	case err == nil:
		ol.update(l, start)
	case errors.Is(err, leases.ErrLeaseLost):
		ol.lose(err)
	case ctx.Err() == nil:
		p.warnLimited(ctx, "mark read failure", ol.token, err)
	}
}

// readsFailing returns the *ReadsFailingError of the leases marked failing, nil when none is.
func (p *Processor) readsFailing() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.failing) == 0 {
		return nil
	}
	tokens := make([]string, 0, len(p.failing))
	for t := range p.failing {
		tokens = append(tokens, t)
	}
	slices.Sort(tokens)
	return &ReadsFailingError{Leases: tokens, Err: p.failing[tokens[0]]}
}
