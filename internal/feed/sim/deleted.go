package sim

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/cfp-dev/cfp/internal/leases"
)

// Leases deleted under running hosts: a lease's time to live in the lease container, or an
// operator's hand, removes one lease document while its owner runs; the operator, told so by
// cfp's error ("no host reads its range until it is restored (cfp leases import)"), restores
// it from the export taken before, some seconds later. What the hosts do meanwhile follows
// their sources:
//
//   - cfp: its next renew or look answers 404, the worker stops at once (a LeaseLostError with
//     Gone), the host logs an error naming the range (internal/feed/processor_deleted.go); it recreates
//     nothing (the .info marker is still there: one lease was deleted, not the set).
//   - .NET: its renewer logs the 404 and goes on (LeaseRenewerCore.cs:70-74); the processor
//     delivers its next batch and fails its checkpoint's replace with 404, a lost lease
//     (DocumentServiceLeaseUpdaterCosmos.cs, UpdateLeaseAsync), and stops; nothing recreates
//     the lease (the synchronizer runs at bootstrap only).
//
// So while the document is gone, its former owner may still deliver its changes (no other host
// can hold that lease): not counted against the ownership window. A .NET host that lost the
// lease shortly before the deletion (within its window) cannot learn of it while the lease is
// gone: its window counts from the restore (World.begin). Seed 355: dotnet-3 lost lease 0 to
// cfp-5 at 31.81, the lease was deleted at 32.36 and restored at 35.99, and dotnet-3's renewer
// read 404 at 32.58, 34.28 and 35.98; it delivered a batch at 36.23 and its checkpoint found
// cfp-5. After the restore every
// change must still be delivered, the set covered and balanced: the run's usual invariants.
//
// The deletions are drawn from their own stream of the seed, so that the schedule of every
// other fault, and the replay of every seed found before, stays as it was.

// deletion is one lease deleted and when the operator restores it.
type deletion struct {
	restoreAt time.Time
	doc       leases.Document
	token     string
}

// deleter plays the deletions of one run.
type deleter struct {
	w       *World
	rng     *rand.Rand
	next    time.Time
	pending []deletion
	n       int
}

func newDeleter(w *World, seed uint64, enabled bool) *deleter {
	if !enabled {
		return nil
	}
	d := &deleter{w: w, rng: rand.New(rand.NewPCG(seed^0x5deece66d, seed+0xb))}
	d.next = time.Now().Add(d.gap())
	return d
}

// gap is the time to the next deletion: about two per faulty phase.
func (d *deleter) gap() time.Duration {
	return time.Duration(20000+d.rng.IntN(40000)) * time.Millisecond
}

// step deletes a lease when one is due and restores those whose time came.
func (d *deleter) step(now time.Time) {
	if d == nil {
		return
	}
	for len(d.pending) > 0 && !d.pending[0].restoreAt.After(now) {
		d.restore(d.pending[0])
		d.pending = d.pending[1:]
	}
	if now.Before(d.next) {
		return
	}
	d.next = now.Add(d.gap())
	ls := d.w.leaseSet()
	if len(ls) == 0 {
		return
	}
	l := ls[d.rng.IntN(len(ls))]
	ctx := context.Background()
	doc, err := d.w.mem.Read(ctx, l.ID, l.PK)
	if err != nil {
		return
	}
	if err := d.w.docs.Delete(ctx, l.ID, l.PK, ""); err != nil {
		d.w.violate("delete lease %s: %v", l.Token, err)
		return
	}
	d.n++
	wait := time.Duration(2000+d.rng.IntN(8000)) * time.Millisecond
	d.w.logf("lease %s deleted under its owner %q (time to live, or by hand); restored in %s", l.Token, l.Owner, wait)
	d.w.mu.Lock()
	d.w.deleted[l.Token] = true
	d.w.deletions[l.Token] = append(d.w.deletions[l.Token], span{from: now})
	d.w.mu.Unlock()
	d.pending = append(d.pending, deletion{restoreAt: now.Add(wait), doc: doc, token: l.Token})
}

// restore is the operator's `cfp leases import` of the lease as it was exported.
func (d *deleter) restore(x deletion) {
	_, err := d.w.docs.Create(context.Background(), x.doc.PK, x.doc.Body)
	switch {
	case errors.Is(err, leases.ErrConflict):
		d.w.logf("lease %s restored: it exists again (left as it is)", x.token)
	case err != nil:
		d.w.violate("restore lease %s: %v", x.token, err)
	default:
		d.w.logf("lease %s restored (cfp leases import)", x.token)
		d.w.restoredForeign(x.doc)
	}
	d.w.mu.Lock()
	delete(d.w.deleted, x.token)
	if ds := d.w.deletions[x.token]; len(ds) > 0 && ds[len(ds)-1].to.IsZero() {
		ds[len(ds)-1].to = time.Now()
	}
	d.w.mu.Unlock()
}

// finish restores every lease still deleted: the operator's work is done when the faults stop.
func (d *deleter) finish() int {
	if d == nil {
		return 0
	}
	for _, x := range d.pending {
		d.restore(x)
	}
	d.pending = nil
	return d.n
}
