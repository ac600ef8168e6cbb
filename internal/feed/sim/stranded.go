package sim

import (
	"strings"
	"time"

	"github.com/cfp-dev/cfp/internal/leases"
)

// Stranded leases: an acquire by a .NET or Java host that was written but answered with a
// timeout (the fault lease-answer-lost) counts as failed for the host, which starts no
// processor for the lease and gives it back with a release that finds another owner than the
// one it listed and gives up (.NET: PartitionControllerCore.AddOrUpdateLeaseAsync, then
// RemoveLeaseAsync and DocumentServiceLeaseManagerCosmos.ReleaseAsync; Java:
// PartitionControllerImpl.addOrUpdateLease, then removeLease, javatest's addOrUpdateLease). So
// the lease stays in that host's name, unread, until it expires, when another host (or that
// one) takes it as expired; neither SDK reads a lease again after a failed acquire (cfp does:
// feed's landedAcquire). Seed 2138 (-peer=java): java-7's acquire of 04-08 landed at 1m29.8
// under a lost answer, and java-4 took it as expired at 1m35.1, after the set had settled.
// The bound's clock starts after such a lease expired for every host, and the set does not
// count as settled before, while the lease still names that host (World.settle).

// strandedLease is a lease a non-cfp host acquired with the answer lost.
type strandedLease struct {
	token, owner string
	at           time.Time // when it was written
	until        time.Time // when every host sees it expired
}

// strandedBy returns h's lostWrite: it notes a lease write of h that names h as owner.
func (w *World) strandedBy(h *host) func(leases.Document) {
	return func(d leases.Document) {
		l, err := leases.Decode(d)
		if err != nil || !strings.EqualFold(strings.TrimSpace(l.Owner), h.name) {
			return
		}
		now := time.Now()
		until := now.Add(maxExpiration(w) + time.Second)
		w.logf("%s acquired %s with the answer lost: stranded in its name until %s", h.name, l.Token, until.Sub(w.start).Truncate(time.Millisecond))
		w.mu.Lock()
		w.stranded = append(w.stranded, strandedLease{token: l.Token, owner: h.name, at: now, until: until})
		w.mu.Unlock()
	}
}

// strandedEnd is the end of the last stranding of a lease that still names the host whose
// acquire stranded it, with no ownership change since (zero: none).
func (w *World) strandedEnd() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	var end time.Time
	for _, s := range w.stranded {
		o := w.owner[s.token]
		if o.owner == s.owner && !o.since.After(s.at) && s.until.After(end) {
			end = s.until
		}
	}
	return end
}
