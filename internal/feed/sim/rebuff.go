package sim

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/cfp-dev/cfp/internal/leases"
)

// Rebuffs: issue 22, F3. A .NET host acquires the children of a split without If-Match and its
// checkpointer writes its leases without If-Match (ChangeFeedProcessor/LeaseManagement/
// DocumentServiceLeaseManagerCosmos.cs:329-338, Utils/CosmosContainerExtensions.cs:39-87), so a
// lease a cfp host steals from it can come back to it at its next checkpoint. A cfp host that
// lost a stolen lease to the host it stole it from within an expiration does not steal it from
// that host again for two expirations (feed's noteRebuff, internal/feed/processor_mixedkeep.go):
// repeating the steal would only repeat the overlap. Meanwhile the set may stay unbalanced by
// one lease more than the bound allows, by .NET's protocol, not by a cfp defect; so the settle
// bound counts from the end of the last rebuff window of a live cfp host (World.settle), and the
// set does not count as settled while one is open.

// rebuffWindow is a cfp host's refusal to steal token from owner again, until until (true time).
type rebuffWindow struct {
	h            *host
	token, owner string
	until        time.Time
}

// rebuffMsg is the message feed's noteRebuff logs, with the attributes lease, owner and until
// (the host's clock).
const rebuffMsg = "lease taken back by the host it was stolen from; not stealing it again for a while"

// rebuffLog is a cfp host's logger in the simulation: it discards every record but the rebuff
// notes, which it reports to the world.
type rebuffLog struct {
	w *World
	h *host
}

func (l rebuffLog) Enabled(_ context.Context, lv slog.Level) bool { return lv >= slog.LevelInfo }
func (l rebuffLog) WithAttrs([]slog.Attr) slog.Handler            { return l }
func (l rebuffLog) WithGroup(string) slog.Handler                 { return l }

func (l rebuffLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message != rebuffMsg {
		return nil
	}
	rw := rebuffWindow{h: l.h}
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "lease":
			rw.token = a.Value.String()
		case "owner":
			rw.owner = a.Value.String()
		case "until":
			if t, ok := a.Value.Any().(time.Time); ok {
				rw.until = t.Add(-l.h.skew) // the host's clock runs skew ahead
			}
		}
		return true
	})
	if rw.until.IsZero() {
		l.w.violate("cfp %s: a rebuff note without its end", l.h.name)
		return nil
	}
	l.w.logf("%s rebuffed by %s on %s: no steal of it until %s", l.h.name, rw.owner, rw.token, rw.until.Sub(l.w.start).Truncate(time.Millisecond))
	l.w.mu.Lock()
	l.w.rebuffs = append(l.w.rebuffs, rw)
	l.w.mu.Unlock()
	return nil
}

// rebuffEnd is the end of the last rebuff window of a live cfp host (zero: none).
func (w *World) rebuffEnd() time.Time {
	live := w.liveNow()
	w.mu.Lock()
	defer w.mu.Unlock()
	var end time.Time
	for _, r := range w.rebuffs {
		if live(r.h) && r.until.After(end) {
			end = r.until
		}
	}
	return end
}

// An overwrite is an owner change a .NET host made without If-Match: its checkpointer writes a
// lease it created (a split's child, a merge's EPK lease) with the lease object its create and
// acquire returned, which has no _etag (Utils/CosmosContainerExtensions.cs:39-87 returns the
// item sent; LeaseManagement/DocumentServiceLeaseUpdaterCosmos.cs:112-115 sends IfMatchEtag =
// lease.ConcurrencyToken, null here; the update function checks the owner of that cached
// object, its own name), so another host that took the lease meanwhile loses it at that host's
// next checkpoint. Between two .NET hosts this moves a lease after the set settled, by .NET's
// protocol alone: seed 1076 (TestSim_CI) had dotnet-3 take 2AAA-2D55 from dotnet-8, paused past
// its expiration, at the faults' end, and dotnet-8's next checkpoint take it back 0.5 s later.
// The settle bound counts from the last overwrite, and one after the set settled starts the
// wait for it again (World.settle).
type overwrite struct {
	token, from, to string
	at              time.Time
}

// noteOverwrite records d, written without If-Match, when it changed the lease's owner from
// another host to a .NET host. The caller holds wmu, so the world's owner of the lease is the
// one before this write.
func (w *World) noteOverwrite(d leases.Document) {
	l, err := leases.Decode(d)
	if err != nil {
		return
	}
	to := strings.TrimSpace(l.Owner)
	w.mu.Lock()
	defer w.mu.Unlock()
	from := w.owner[l.Token].owner
	h := w.hosts[to]
	if from == "" || from == to || h == nil || h.kind != DotNet {
		return
	}
	w.overwrites = append(w.overwrites, overwrite{token: l.Token, from: from, to: to, at: time.Now()})
	if w.trace {
		w.log = append(w.log, fmt.Sprintf("%s%s overwrote %s's ownership of %s without If-Match", w.stamp(), to, from, l.Token))
	}
}

// overwriteEnd is the time of the last overwrite (zero: none).
func (w *World) overwriteEnd() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	var end time.Time
	for _, o := range w.overwrites {
		if o.at.After(end) {
			end = o.at
		}
	}
	return end
}
