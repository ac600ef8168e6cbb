package feed

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cfp-dev/cfp/internal/leases"
)

// Deleted leases: a lease this host holds whose renew or checkpoint answers 404 was deleted
// under it (`cfp leases delete --force` while the host runs, or by hand). .NET counts that a
// lost lease (LeaseManagement/DocumentServiceLeaseUpdaterCosmos.cs, lines 95-98: a 404 on the
// replace is a LeaseLostException with isGone; DocumentServiceLeaseManagerCosmos.cs, RenewAsync,
// lines 251-256: a lease gone on the read before a renew too), stops its processor, and then
// lists no lease for the range: the host idles with nothing but a trace line. A cfp host says
// so: a warning and a lost event at once, and at its next acquire cycle it looks at the .info
// marker:
//
//   - gone too: the whole lease set was deleted (what `cfp leases delete` does). Recreating it
//     would undo the deletion (a processor being retired) from a start position the user did
//     not choose, so Run ends with a *LeaseSetDeletedError: the host releases what it still
//     holds and stops; started again, it bootstraps a new set from its start options, the
//     documented way to restart a processor.
//   - still there: one lease was deleted, its range has no lease and no host reads it. The
//     host logs an error naming the lease and its range, with what to do.

// LeaseSetDeletedError is what Run returns when the lease set was deleted under the host: a
// lease it held was deleted, and so was the .info marker.
type LeaseSetDeletedError struct {
	Prefix string
	// Leases are the tokens of the held leases found deleted.
	Leases []string
}

func (e *LeaseSetDeletedError) Error() string {
	return fmt.Sprintf("the lease set %s was deleted while this host ran (lease %s and the .info marker are gone)", e.Prefix, strings.Join(e.Leases, ", "))
}

// deletedLease records that the worker of l found it deleted (cause is its *LeaseLostError).
func (p *Processor) deletedLease(l LeaseInfo, cause error) {
	p.log.Warn("lease deleted while this host held it: its worker stopped", "lease", l.Token, "range", l.Range.String(), "err", cause)
	p.mu.Lock()
	p.deleted = append(p.deleted, l)
	p.mu.Unlock()
}

// isDeleted reports whether cause says the lease document is gone.
func isDeleted(cause error) bool {
	var lost *leases.LeaseLostError
	return errors.As(cause, &lost) && lost.Gone
}

// checkDeleted runs in an acquire cycle after a successful listing all: it handles the leases
// found deleted since the last cycle (see the comment above), and forgets those the listing
// covers again (see calm.unread). It reports whether Run must stop.
func (p *Processor) checkDeleted(ctx context.Context, all []*leases.Lease) bool {
	covered := func(d LeaseInfo) bool {
		for _, l := range all {
			if l.Token == d.Token || (l.HasRange() && d.Range != (Range{}) && l.Range.Overlaps(d.Range)) {
				return true // written again (an import), or replaced by child leases (a split)
			}
		}
		return false
	}
	p.calm.restored = nil
	p.calm.unread = slices.DeleteFunc(p.calm.unread, func(d LeaseInfo) bool {
		if !covered(d) {
			return false
		}
		if slices.ContainsFunc(all, func(l *leases.Lease) bool { return l.Token == d.Token }) {
			p.calm.restored = append(p.calm.restored, d.Token) // imported again (see planCycle)
		}
		return true
	})
	p.mu.Lock()
	deleted := p.deleted
	p.deleted = nil
	p.mu.Unlock()
	if len(deleted) == 0 {
		return false
	}
	ok, err := p.store.IsInitialized(ctx)
	if err != nil {
		p.mu.Lock()
		p.deleted = append(deleted, p.deleted...) // look again next cycle
		p.mu.Unlock()
		return false
	}
	if !ok {
		tokens := make([]string, 0, len(deleted))
		for _, l := range deleted {
			tokens = append(tokens, l.Token)
		}
		err := &LeaseSetDeletedError{Prefix: p.store.Prefix(), Leases: tokens}
		p.log.Error("the lease set was deleted under this host: stopping; start it again to bootstrap a new set from its start options", "err", err)
		p.abort(err)
		return true
	}
	for _, l := range deleted {
		if covered(l) {
			continue
		}
		p.calm.unread = append(p.calm.unread, l)
		p.log.Error("a lease was deleted under this host: no host reads its range until it is restored (cfp leases import) or the lease set is deleted and the processors restarted",
			"lease", l.Token, "range", l.Range.String())
	}
	return false
}
