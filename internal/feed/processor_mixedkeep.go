package feed

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cfp-dev/cfp/internal/leases"
)

// Keep-alive in a mixed lease set. A settled cfp host writes an idle lease once per KeepAlive
// (43-47s with the defaults), which keeps it live for hosts whose expiration is cfp's own. A
// .NET or Java host compares the lease's age with its own expiration, which cfp cannot read:
// WithLeaseConfiguration, the Functions trigger's LeaseExpirationInterval or a clock running
// ahead make it shorter, and such a host took cfp's idle leases as expired (issue 22, F1).
//
// What cfp can observe of such a host is how often it writes its own idle leases: its renew
// interval, the shortest time between two writes of one lease that changed neither its owner
// nor its continuation, the first renew after an acquire aside (the renewer's first write comes
// half an interval after the acquire). Whatever its expiration, it must exceed that interval,
// or the host's own leases would expire between its renewals. So in a set where a live lease is
// owned by a host that keeps no cfp presence record, a cfp host writes its leases so that none
// gets older than that interval; until it observed one, than the defaults' renew interval, 17s:
// .NET's ChangeFeedLeaseOptions.DefaultRenewInterval (ChangeFeedProcessor/Configuration/
// ChangeFeedLeaseOptions.cs:14, expiration 60s at :16), Java's
// ChangeFeedProcessorOptions.DEFAULT_RENEW_INTERVAL (com/azure/cosmos/models/
// ChangeFeedProcessorOptions.java, expiration DEFAULT_EXPIRATION_INTERVAL 60s) and the Functions
// trigger's LeaseRenewInterval (CosmosDBTriggerAttribute.cs in azure-webjobs-sdk-extensions:
// 17000 ms, LeaseExpirationInterval 60000 ms). A host whose clock runs ahead of
// cfp's by s still sees cfp's leases s older: with the defaults that is tolerated up to 43s of
// skew, where the 43s keep-alive tolerated 13s.

// foreignDefaultRenew is the renew interval of .NET's, Java's and the Functions trigger's
// defaults: ProcessorOptions.ForeignRenewInterval's default.
const foreignDefaultRenew = 17 * time.Second

// foreignView is what the balancing goroutine learned of the hosts that are not cfp; keep is
// read by the renewer, rebuffs written by the workers.
type foreignView struct {
	rebuffMu sync.Mutex
	rebuffs  map[string]rebuff // by lease token (see noteRebuff)
	stolen   map[string]rebuff // by lease token: stolen from owner, until an expiration later

	seen    map[string]foreignSeen // by lease token, leases of foreign owners in the last listing
	gaps    []time.Duration        // the last maxGaps times between two renews seen
	cadence time.Duration          // the renew interval they show (commonPeriod), 0 none yet
	keep    atomic.Int64           // the renewer's keep-alive (a time.Duration)
	mixed   bool
}

// foreignSeen is a foreign-owned lease as a listing showed it.
type foreignSeen struct {
	owner, cont string
	ts          time.Time
	// renewed: this version came from a renew by the same owner (the timestamp moved, the
	// continuation did not), so the next such change is a whole renew interval later.
	renewed bool
}

// keepAlive is how old a held lease's last write may get before the renewer writes it again:
// KeepAlive, shorter in a mixed set (see foreignView).
func (p *Processor) keepAlive() time.Duration {
	return time.Duration(p.others.keep.Load())
}

// observeTimings updates the foreign view from a full listing, and the keep-alive with it: in
// a mixed set short enough for the foreign hosts' renew cadence, and short enough for the
// shortest expiration a live cfp host's presence record carries (cfpExpiration: a cfp host
// started with a shorter expiration took the others' idle leases as expired, issue 22, F1).
func (p *Processor) observeTimings(all []*leases.Lease, hosts []leases.Host, now time.Time) {
	f := &p.others
	cfp := map[string]bool{strings.ToLower(p.opts.Instance): true}
	for _, h := range hosts {
		if !h.Expired(now, p.opts.Expiration) {
			cfp[strings.ToLower(h.Instance)] = true
		}
	}
	next := make(map[string]foreignSeen, len(f.seen))
	mixed := false
	for _, l := range all {
		owner := strings.ToLower(strings.TrimSpace(l.Owner))
		if owner == "" || cfp[owner] || l.Expired(now, p.opts.Expiration) {
			continue
		}
		mixed = true
		s := foreignSeen{owner: owner, cont: l.Continuation, ts: l.Timestamp}
		if prev, ok := f.seen[l.Token]; ok && prev.owner == owner {
			switch {
			case l.Timestamp.Equal(prev.ts):
				s = prev // not written since
			case prev.cont == l.Continuation && l.Timestamp.After(prev.ts):
				s.renewed = true
				if prev.renewed {
					f.gaps = append(f.gaps, l.Timestamp.Sub(prev.ts))
					if len(f.gaps) > maxGaps {
						f.gaps = f.gaps[len(f.gaps)-maxGaps:]
					}
				}
			}
		}
		next[l.Token] = s
	}
	f.seen = next
	if !mixed {
		f.gaps = nil
	}
	f.cadence = commonPeriod(f.gaps)
	keep := p.opts.KeepAlive()
	renew := p.opts.ForeignRenewInterval
	if f.cadence > 0 {
		renew = f.cadence
	}
	if mixed {
		keep = min(keep, keepUnder(renew, p.opts.RenewInterval))
	}
	short := shortestExpiration(hosts, now, p.opts.Expiration)
	if short < p.opts.Expiration {
		o := p.opts
		o.Expiration = short
		keep = min(keep, o.KeepAlive())
	}
	if old := time.Duration(f.keep.Swap(int64(keep))); old != keep || mixed != f.mixed {
		switch {
		case mixed:
			p.log.Info("mixed lease set: leases owned by hosts that are not cfp; renewing as often as they do",
				"keepAlive", keep, "foreignRenewInterval", renew, "observed", f.cadence > 0)
		case short < p.opts.Expiration:
			p.log.Info("a cfp host counts a shorter lease expiration; renewing so that no lease looks expired to it",
				"keepAlive", keep, "expiration", short)
		case f.mixed:
			p.log.Info("no lease owned by a host that is not cfp; renewing every keep-alive", "keepAlive", keep)
		}
	}
	f.mixed = mixed
}

// shortestExpiration is the shortest lease expiration the live presence records of hosts say
// their hosts count with (cfpExpiration), own if none is shorter.
func shortestExpiration(hosts []leases.Host, now time.Time, own time.Duration) time.Duration {
	short := own
	for _, h := range hosts {
		if h.Expiration > 0 && !h.Expired(now, own) {
			short = min(short, h.Expiration)
		}
	}
	return short
}

// keepUnder is the keep-alive that keeps a lease younger than renew: the renewer looks every
// quarter of its own renew interval, and a write takes time.
func keepUnder(renew, ownRenew time.Duration) time.Duration {
	return max(0, renew-ownRenew/4-min(keepAliveSlack, renew/10))
}

// maxGaps bounds the renew gaps a host remembers.
const maxGaps = 64

// commonPeriod is the longest period of which every gap is a whole multiple, within 5% or a
// second, whichever is more (a write's latency, a retried write): the listings come every acquire
// interval, so a host that renews more often is seen only every second or third renew (gaps of
// 10s and 15s are renewals every 5s). It tries the shortest gap divided by 1 to 8, down to
// minForeignPeriod; when none fits (irregular renewals), the shortest gap or the SDKs' default
// renew interval, whichever is shorter. 0 when there is no gap.
func commonPeriod(gaps []time.Duration) time.Duration {
	if len(gaps) == 0 {
		return 0
	}
	shortest := slices.Min(gaps)
	for j := 1; j <= 8; j++ {
		c := shortest / time.Duration(j)
		if c < minForeignPeriod {
			break
		}
		fits := true
		for _, g := range gaps {
			k := (g + c/2) / c
			if diff := (g - k*c).Abs(); diff > max(c/20*k, time.Second) {
				fits = false
				break
			}
		}
		if fits {
			return c
		}
	}
	return min(shortest, foreignDefaultRenew)
}

// minForeignPeriod is the shortest renew interval commonPeriod reads from gaps: a shorter one
// would have cfp rewrite every lease it holds at every look of its renewer, and one gap a second
// late (a retried write) must not make it so.
const minForeignPeriod = 4 * time.Second

// A lease this host stole from a .NET or Java host and lost to that host again within an
// expiration is not stolen from it again for two expirations. .NET acquires the children of a split
// without If-Match and its checkpointer goes on writing them without If-Match
// (ChangeFeedProcessor/LeaseManagement/DocumentServiceLeaseManagerCosmos.cs:329-338,
// Utils/CosmosContainerExtensions.cs:39-87): each checkpoint writes its own name back over the
// host that stole the child, which learns it at its next write, and would steal it again at its
// next cycle, processing the same changes as the .NET host each time (issue 22, F3). A steal
// .NET undid this way, or by balancing it differently, is not worth repeating at once.
type rebuff struct {
	owner string
	until time.Time
}

// noteSteal records that this host steals l from its live owner, a host that is not cfp.
func (p *Processor) noteSteal(l *leases.Lease, now time.Time) {
	f := &p.others
	f.rebuffMu.Lock()
	defer f.rebuffMu.Unlock()
	if f.stolen == nil {
		f.stolen = map[string]rebuff{}
	}
	for tok, r := range f.stolen {
		if !now.Before(r.until) {
			delete(f.stolen, tok)
		}
	}
	f.stolen[l.Token] = rebuff{owner: l.Owner, until: now.Add(p.opts.Expiration)}
}

// noteRebuff records a lease this worker stole from a host that is not cfp and lost to that
// host again within an expiration.
func (p *Processor) noteRebuff(ol *ownedLease, cause error) {
	var lost *leases.LeaseLostError
	if !errors.As(cause, &lost) || strings.TrimSpace(lost.Owner) == "" {
		return
	}
	now := p.opts.Now()
	f := &p.others
	f.rebuffMu.Lock()
	defer f.rebuffMu.Unlock()
	s, ok := f.stolen[ol.token]
	if !ok || !now.Before(s.until) || !strings.EqualFold(s.owner, lost.Owner) {
		return
	}
	delete(f.stolen, ol.token)
	if f.rebuffs == nil {
		f.rebuffs = map[string]rebuff{}
	}
	for tok, r := range f.rebuffs {
		if !now.Before(r.until) {
			delete(f.rebuffs, tok)
		}
	}
	f.rebuffs[ol.token] = rebuff{owner: lost.Owner, until: now.Add(2 * p.opts.Expiration)}
	p.log.Info("lease taken back by the host it was stolen from; not stealing it again for a while",
		"lease", ol.token, "owner", lost.Owner, "until", f.rebuffs[ol.token].until)
}

// cmpBool orders false before true.
func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}
