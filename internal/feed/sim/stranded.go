package sim

import (
	"context"
	"strings"
	"time"

	"github.com/cfp-dev/cfp/internal/leases"
)

// Stranded leases: an acquire by a .NET or Java host that was written but answered with a
// timeout (the fault lease-answer-lost) counts as failed for the host, which starts no
// processor for the lease and gives it back with a release that finds another owner than the
// one it listed and gives up (.NET: FeedManagement/PartitionControllerCore.cs:62-72,
// AddOrUpdateLeaseAsync catches and calls RemoveLeaseAsync, whose ReleaseAsync,
// LeaseManagement/DocumentServiceLeaseManagerCosmos.cs:212-219, throws LeaseLostException; Java:
// PartitionControllerImpl.addOrUpdateLease, then removeLease, javatest's addOrUpdateLease). So
// the lease stays in that host's name, unread, until it expires, when another host (or that
// one) takes it as expired; neither SDK reads a lease again after a failed acquire (cfp does:
// feed's landedAcquire). Seed 2138 (-peer=java): java-7's acquire of 04-08 landed at 1m29.8
// under a lost answer, and java-4 took it as expired at 1m35.1, after the set had settled.
// The bound's clock starts after such a lease expired for every host, and the set does not
// count as settled before, while the lease still names that host (World.settle).
//
// A lease deleted under a .NET or Java host and restored later (deleted.go) is stranded the
// same way: the host stopped its processor when it found the lease gone (.NET at its next
// checkpoint's 404, DocumentServiceLeaseUpdaterCosmos.cs, UpdateLeaseAsync; Java at its next
// renew's read, LeaseStoreManagerImpl.renew, javatest's renew), and the restored document
// names it with the timestamp of the export: every host counts it as that host's until it
// expires. Seed 2288 (-peer=java): 39-3980, restored in java-5's name at the faults' end, was
// taken by cfp-9 as expired 2.3 s later, after the set had settled. Lenient when the host
// still processed the lease (a .NET host that saw no checkpoint since the deletion renews it
// again): the set then waits until the export's expiry for nothing.
//
// A lease a .NET or Java host stopped processing and failed to release is stranded the same
// way. Under the fault lease-412, every write of the host fails its If-Match: .NET's update
// retries 5 times (LeaseManagement/DocumentServiceLeaseUpdaterCosmos.cs:20, :35 and :73) and
// throws LeaseLostException, the renewer or checkpoint then ends the partition's processing, and
// RemoveLeaseAsync's ReleaseAsync fails the same way and is ignored
// (FeedManagement/PartitionControllerCore.cs:115-146, the catch at :128); Java's removeLease
// likewise. The document still names the host, which reads it no more, until it expires. Seed
// 792: dotnet-13 gave up 3955-3AAA under lease-412 at 1m29.66, and dotnet-10 took it as expired
// at 1m34.88, after the set had settled (the 2,000-seed run at b0c93a6).

// strandedLease is a lease a non-cfp host acquired with the answer lost, or a restored one in
// its name.
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

// abandonedBy returns h's ReleaseFailed: a lease h stopped processing and failed to release is
// stranded, when its document still names h, until its timestamp expired for every host.
func (w *World) abandonedBy(h *host) func(token string, err error) {
	return func(token string, _ error) {
		docs, err := w.mem.QueryPrefix(context.Background(), Prefix)
		if err != nil {
			return
		}
		for _, d := range docs {
			l, err := leases.Decode(d)
			if err != nil || l.Token != token || !strings.EqualFold(strings.TrimSpace(l.Owner), h.name) {
				continue
			}
			w.strandUntilExpiry(l, h.name, "%s gave up %s without releasing it: stranded in its name until %s", h.name, token)
			return
		}
	}
}

// restoredForeign notes a restored lease (deleted.go) whose document names a live .NET or Java
// host: stranded in its name until the export's timestamp expired for every host.
func (w *World) restoredForeign(d leases.Document) {
	l, err := leases.Decode(d)
	if err != nil {
		return
	}
	owner := strings.TrimSpace(l.Owner)
	w.mu.Lock()
	h := w.hosts[owner]
	w.mu.Unlock()
	if h == nil || h.kind == CFP {
		return
	}
	w.strandUntilExpiry(l, owner, "%s restored in the name of %s, which reads it no more: stranded until %s", l.Token, owner)
}

// strandUntilExpiry counts l stranded in owner's name until its timestamp expired for every
// host; it logs format with args and that instant.
//
// A lease whose timestamp already expired for every host is still in owner's name, unread,
// until the next acquire pass of a host that wants it: it stays stranded for the longest
// acquire interval of any host from now. Seed 9716: 16, deleted under dotnet-3 at 1m23.43 with
// the timestamp of dotnet-3's renew at 1m22.68, was restored at the faults' end, 1m30.29,
// expired for every host since 1m29.11 (6.43 s, dotnet-7's expiration and skew); the set
// looked settled at once with 16 in dotnet-3's name (which had stopped reading it at its
// checkpoint's 404, 1m26.36), and cfp-12 took it as expired at 1m30.94.
func (w *World) strandUntilExpiry(l *leases.Lease, owner, format string, args ...any) {
	now := time.Now()
	until := l.Timestamp.Add(maxExpiration(w) + time.Second)
	if !until.After(now) {
		until = now.Add(maxAcquire(w))
	}
	w.logf(format, append(args, until.Sub(w.start).Truncate(time.Millisecond))...)
	w.mu.Lock()
	w.stranded = append(w.stranded, strandedLease{token: l.Token, owner: owner, at: now, until: until})
	w.mu.Unlock()
}

// maxAcquire is the longest acquire interval of any host, with its clock's skew.
func maxAcquire(w *World) time.Duration {
	return w.longest(func(t Timing) time.Duration { return t.Acquire })
}
