package feed

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cfp-dev/cfp/internal/leases"
)

// Calm: what an acquire cycle reads once the hosts are settled. .NET lists every lease each
// cycle (13s), which makes the lease container's cost grow with leases × hosts. A cfp host
// whose last full cycle found nothing to do (every lease held by a live cfp host, none free,
// expired or asked for, itself at its fair share and no host below it) reads only the presence
// records in the cycles after it (a prefix query over one document per host), and lists
// every lease again as soon as something may have changed:
//
//   - the set of live presence records differs (a host joined, stopped, or was killed and its
//     record expired), or this host holds a different number of leases (one was lost, stolen
//     by a .NET host, split or handed off), or another cfp host does: a host rewrites its record
//     at its next cycle when the number of leases it holds changed (a split of one of its
//     leases makes a lease more, which a host below its share must come and ask for);
//   - every fullListEvery cycles, a safety net for what only the leases show (a .NET or Java
//     host, which keeps no presence record, taking or releasing leases);
//   - every cycle while a lease deleted under this host is not back (calm.unread): its
//     restore shows in the leases only;
//   - every cycle while some keys have no lease (settledLeases): a lease deleted under
//     another host, or under none (one its owner gave up without releasing it), whose restore
//     (`cfp leases import`, with the timestamp of the export: expired, in the name of a host
//     that reads it no more) shows in the leases only, and no presence record changes with
//     it. Seed 6604 of the simulation: cfp-1 gave up 15-2A under lease-412 at 1m19.86, the
//     lease was deleted at 1m20.69 and restored at 1m29.77, expired; every host was calm, and
//     cfp-10 took it at its next safety-net full list, at 1m42.44, 12.7 s later.
//
// A stolen lease shows at its owner's next write; a killed cfp host shows when its record
// expires, which is about when its leases do; a joining host writes its record before it asks
// for leases, so its requests are seen by the full cycles the new record causes.

// calm is the balancing goroutine's memory of its last full cycle.
type calm struct {
	settled   bool
	records   string    // the live presence records then, joined
	held      int       // the leases this host held then
	quiet     int       // quiet cycles since
	announced time.Time // the last successful write of this host's presence record
	told      int       // the leases that record says this host holds
	// unread are the leases deleted under this host whose range no listed lease covers yet
	// (see checkDeleted): nothing in the presence records shows their restore (`cfp leases
	// import`), so the host lists every cycle until the listing covers them again.
	unread []LeaseInfo
	// restored are the tokens of the leases of unread that the last listing shows again:
	// imported, and this host's to take back (see planCycle).
	restored []string
}

// settle records the outcome of a full cycle.
func (c *calm) settle(settled bool, records string, held int) {
	c.settled, c.records, c.held, c.quiet = settled, records, held, 0
}

// fullListEvery bounds the quiet cycles in a row: a full list at least every two expirations.
func (p *Processor) fullListEvery() int {
	return max(2, int((2*p.opts.Expiration+p.opts.AcquireInterval-1)/p.opts.AcquireInterval))
}

// quietCycle is an acquire cycle of a settled host: it refreshes the presence record when
// due and reads the records; it reports false, and changes nothing, when the cycle must list
// the leases instead.
func (p *Processor) quietCycle(ctx context.Context) bool {
	c := &p.calm
	if !c.settled || c.quiet+1 >= p.fullListEvery() || len(c.unread) > 0 || p.ho.relistDue() {
		return false
	}
	p.announceDue(ctx)
	hosts, err := p.store.Hosts(ctx)
	if err != nil {
		return false // the full cycle reports it
	}
	if p.checkName(ctx, hosts) {
		return true
	}
	now := p.opts.Now()
	if liveRecords(hosts, now, p.opts.Expiration) != c.records || p.holding() != c.held {
		return false
	}
	c.quiet++
	return true
}

// announceDue refreshes this host's presence record when it is half an expiration old less one
// acquire interval (every other cycle with the defaults): others count the record for an
// expiration, so a failed refresh is retried at least once before it could lapse.
//
// It also refreshes it at once when this host holds another number of leases than the record
// says, so that the settled hosts list the leases again.
func (p *Processor) announceDue(ctx context.Context) {
	held := p.holding()
	if !p.calm.announced.IsZero() && p.opts.Now().Sub(p.calm.announced) < p.opts.Expiration/2-p.opts.AcquireInterval &&
		held == p.calm.told {
		return
	}
	start := p.opts.Now()
	if p.announce(ctx) {
		p.calm.announced, p.calm.told = start, held
	}
}

// liveRecords joins the instances of the presence records that have not expired at now, each
// with the number of leases it says its host holds.
func liveRecords(hosts []leases.Host, now time.Time, expiration time.Duration) string {
	var b strings.Builder
	for _, h := range hosts {
		if !h.Expired(now, expiration) {
			fmt.Fprintf(&b, "%s %d\n", strings.ToLower(h.Instance), h.Leases)
		}
	}
	return b.String()
}

// settledLeases reports whether every lease is held by a live owner that keeps a live presence
// record (a cfp host), none carries a handoff request and the leases leave no keys uncovered
// (when every range is known).
func settledLeases(all []*leases.Lease, hosts []leases.Host, now time.Time, expiration time.Duration) bool {
	if leaseGap(all) {
		return false
	}
	cfp := map[string]bool{}
	for _, h := range hosts {
		if !h.Expired(now, expiration) {
			cfp[strings.ToLower(h.Instance)] = true
		}
	}
	for _, l := range all {
		if strings.TrimSpace(l.Owner) == "" || l.Expired(now, expiration) || !cfp[strings.ToLower(l.Owner)] {
			return false
		}
		if _, ok := l.Properties[handoffKey]; ok {
			return false
		}
	}
	return true
}

// leaseGap reports whether some keys of the key space lie in no lease of all, when every lease
// of all has a known range (a lease without one may cover any keys).
func leaseGap(all []*leases.Lease) bool {
	rs := make([]leases.Range, 0, len(all))
	for _, l := range all {
		if !l.HasRange() {
			return false
		}
		rs = append(rs, l.Range.Normal())
	}
	if len(rs) == 0 {
		return false
	}
	slices.SortFunc(rs, func(a, b leases.Range) int { return leases.CompareEPK(a.Min, b.Min) })
	cursor := leases.FullRange.Min
	for _, r := range rs {
		if leases.CompareEPK(r.Min, cursor) > 0 {
			return true
		}
		if leases.CompareEPK(r.Max, cursor) > 0 {
			cursor = r.Max
		}
	}
	return leases.CompareEPK(cursor, leases.FullRange.Max) < 0
}
