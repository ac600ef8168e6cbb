package feed

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cfp-dev/cfp/internal/leases"
)

// Instance names: two processes that run under one instance name hold the same leases (a lease
// names its owner, not the process), so both process every lease they hold and every change is
// delivered twice, with no conflict on any write. Each process therefore writes a random
// incarnation and its start time in its presence record (leases.Host), and:
//
//   - at start (Bootstrap), a live record of the name written by another incarnation is
//     either another live host or this host's previous process, killed before it could
//     delete its record (a restart with the same --instance). The host watches it: refreshed,
//     the other host is alive and this one refuses to start (*DuplicateInstanceError); left to
//     expire, it was a dead process and the host starts, taking back the leases in its name.
//   - while it runs, every acquire cycle reads the records: a record of its name written by
//     another incarnation means two processes started together. The one that started first
//     keeps running and writes its record again at once; the other stops with a
//     *DuplicateInstanceError.

// DuplicateInstanceError reports that another live process runs under this host's instance
// name: its presence record (leases.Host) was written by another incarnation and kept fresh.
type DuplicateInstanceError struct {
	Instance string
	// Since is when the other process started (zero when its record does not say: an older
	// cfp); Refreshed is its record's last write.
	Since, Refreshed time.Time
}

func (e *DuplicateInstanceError) Error() string {
	since := ""
	if !e.Since.IsZero() {
		since = ", running since " + e.Since.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("another live host runs as instance %q (its presence record was refreshed at %s%s): two hosts with one name would both process every lease",
		e.Instance, e.Refreshed.UTC().Format(time.RFC3339), since)
}

// newIncarnation returns a random id for this process's presence record.
func newIncarnation() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// record is this host's presence record as it writes it.
func (p *Processor) record() leases.Host {
	return leases.Host{Instance: p.opts.Instance, Incarnation: p.incarnation, Since: p.since, Leases: p.holding(), Expiration: p.opts.Expiration}
}

// foreign reports whether h is a live record of this host's name that another incarnation wrote.
func (p *Processor) foreign(h leases.Host, now time.Time) bool {
	return strings.EqualFold(h.Instance, p.opts.Instance) && h.Incarnation != p.incarnation && !h.Expired(now, p.opts.Expiration)
}

// claimName runs before this host first writes its presence record: when a live record of its
// name from another incarnation is there, it waits until the record is refreshed (another live
// host: a *DuplicateInstanceError) or expires (a dead process of this name: the host starts).
// A record that cannot be read does not stop the host (the cycles look again).
func (p *Processor) claimName(ctx context.Context) error {
	h, ok := p.namesake(ctx)
	if !ok {
		return nil
	}
	p.log.Warn("a live presence record names this instance: waiting to see whether another host runs under this name or a previous process of this host died",
		"instance", p.opts.Instance, "record", h.Instance, "refreshed", h.Timestamp.UTC().Format(time.RFC3339), "expires", h.Timestamp.Add(p.opts.Expiration).UTC().Format(time.RFC3339))
	first := h
	for {
		wait := min(p.opts.AcquireInterval, max(time.Second, h.Timestamp.Add(p.opts.Expiration).Sub(p.opts.Now())))
		if err := sleepCtx(ctx, wait); err != nil {
			return err
		}
		var err error
		h, err = p.store.ReadHost(ctx, first.Instance)
		switch {
		case errors.Is(err, leases.ErrNotFound):
			return nil // withdrawn: the other process stopped
		case err != nil:
			continue
		case !p.foreign(h, p.opts.Now()):
			p.log.Info("the presence record of this instance expired: its process is gone", "instance", p.opts.Instance)
			return nil
		case h.Incarnation != first.Incarnation || h.Timestamp.After(first.Timestamp):
			return &DuplicateInstanceError{Instance: p.opts.Instance, Since: h.Since, Refreshed: h.Timestamp}
		}
	}
}

// namesake returns a live presence record of this host's name written by another incarnation,
// if there is one. Names match ignoring case, as owners do (a lease of "web" is a lease of
// "Web" to cfp and to .NET), but a record's id keeps its case: when the record of the exact
// name is missing, the records are listed. Without that, a host restarted after a crash under
// its name spelt in another case missed its previous process's record, started at once, and
// stopped at its first acquire cycle with a *DuplicateInstanceError (the running check saw a
// live record of an earlier start) instead of waiting for the record to expire. A record
// that cannot be read does not stop the host (the cycles look again).
func (p *Processor) namesake(ctx context.Context) (leases.Host, bool) {
	now := p.opts.Now()
	h, err := p.store.ReadHost(ctx, p.opts.Instance)
	if err == nil {
		return h, p.foreign(h, now)
	}
	if !errors.Is(err, leases.ErrNotFound) {
		return leases.Host{}, false
	}
	hosts, err := p.store.Hosts(ctx)
	if err != nil {
		return leases.Host{}, false
	}
	for _, h := range hosts {
		if p.foreign(h, now) {
			return h, true
		}
	}
	return leases.Host{}, false
}

// checkName looks, in an acquire cycle's records, for a live record of this host's name that
// another incarnation wrote (two processes started together under one name). The process that
// started first writes its record again and runs on; the other ends Run with a
// *DuplicateInstanceError. It reports whether this host must stop.
func (p *Processor) checkName(ctx context.Context, hosts []leases.Host) bool {
	now := p.opts.Now()
	for _, h := range hosts {
		if !p.foreign(h, now) {
			continue
		}
		if p.startedBefore(h) {
			p.log.Warn("another host runs under this instance name; it started later and stops", "instance", p.opts.Instance, "other_since", h.Since)
			p.announce(ctx)
			p.calm.announced = now
			return false
		}
		err := &DuplicateInstanceError{Instance: p.opts.Instance, Since: h.Since, Refreshed: h.Timestamp}
		p.log.Error("another host runs under this instance name and started first: stopping", "instance", p.opts.Instance, "err", err)
		p.abort(err)
		return true
	}
	return false
}

// startedBefore reports whether this process started before the writer of h (ties and unknown
// starts are broken by the incarnation, so that exactly one of two processes stops).
func (p *Processor) startedBefore(h leases.Host) bool {
	if !h.Since.IsZero() && !p.since.Equal(h.Since) {
		return p.since.Before(h.Since)
	}
	if h.Since.IsZero() {
		return false // an older cfp that cannot tell: it does not stop, so this one does
	}
	return p.incarnation < h.Incarnation
}
