package sim

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"time"
)

// The fingerprint of a run: a hash of every lease write that changed an owner and every
// successful delivery, each with its virtual instant (to the nanosecond). Entries of one instant
// are sorted, so that the fingerprint names what happened when, not the order in which the
// goroutines of one instant took the world's lock. Two replays of a seed with one fingerprint
// saw the same schedule (-fingerprint prints it; TestSim_ReplaysExactly compares replays).

// recordLocked notes one event of the fingerprint; w.mu is held.
func (w *World) recordLocked(format string, args ...any) {
	w.events = append(w.events, fmt.Sprintf("%016d ", time.Since(w.start).Nanoseconds())+fmt.Sprintf(format, args...))
}

// fingerprint hashes the events recorded so far.
func (w *World) fingerprint() string {
	w.mu.Lock()
	ev := slices.Clone(w.events)
	w.mu.Unlock()
	slices.Sort(ev)
	h := sha256.New()
	for _, e := range ev {
		h.Write([]byte(e))
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}
