package sim

import (
	"fmt"
	"testing/synctest"
	"time"
)

// ScaleCycles is what BalanceAtScale measured, in acquire cycles of Base counted on the
// bubble's clock: the protocol's figure, the same on any machine and under any load.
type ScaleCycles struct {
	// Start: every host starts at once on a fresh lease set.
	Start int `json:"start"`
	// Join: hosts/2 hosts join hosts-hosts/2 that hold the set balanced.
	Join int `json:"join"`
	// Kill: hosts/10 (at least one) of the balanced hosts are killed; counted from the moment
	// their leases expired (KillRaw from the kill, ExpiryCycles more).
	Kill    int `json:"kill"`
	KillRaw int `json:"kill_from_kill"`
}

// BalanceAtScale measures ScaleCycles for partitions leases and hosts hosts of kind (the
// events of bench/scalebench, in virtual time). It must run inside a synctest bubble. The
// error says which event did not balance within limit cycles.
func BalanceAtScale(kind Kind, partitions, hosts, limit int) (ScaleCycles, error) {
	var c ScaleCycles
	start := func(w *World, i int) error {
		defer synctest.Wait() // one bootstrap at a time (order.go)
		name := fmt.Sprintf("%s-%d", kind, i)
		if kind == CFP {
			if w.startCFP(name, Base, 0) == nil {
				return fmt.Errorf("start %s failed", name)
			}
			return nil
		}
		_, err := w.startDotNet(name, Base, 0)
		return err
	}
	// The start together, then the kill.
	w := newWorld(partitions, Batch)
	var e ended
	for i := range hosts {
		if err := start(w, i); err != nil {
			return c, stopAll(w, &e, err)
		}
	}
	var err error
	if c.Start, err = w.cyclesToBalance("start", limit); err != nil {
		return c, stopAll(w, &e, err)
	}
	for i := range max(1, hosts/10) {
		w.kill(w.hosts[fmt.Sprintf("%s-%d", kind, i)], &e)
	}
	if c.KillRaw, err = w.cyclesToBalance("kill", limit+ExpiryCycles); err != nil {
		return c, stopAll(w, &e, err)
	}
	c.Kill = max(1, c.KillRaw-ExpiryCycles)
	if err := stopAll(w, &e, nil); err != nil {
		return c, err
	}

	// The join, on a fresh set held balanced by the first half.
	w = newWorld(partitions, Batch)
	e = ended{}
	first := hosts - hosts/2
	for i := range first {
		if err := start(w, i); err != nil {
			return c, stopAll(w, &e, err)
		}
	}
	if _, err := w.cyclesToBalance("the first half's start", 4*limit); err != nil {
		return c, stopAll(w, &e, err)
	}
	time.Sleep(Base.Acquire)
	for i := first; i < hosts; i++ {
		if err := start(w, i); err != nil {
			return c, stopAll(w, &e, err)
		}
	}
	if c.Join, err = w.cyclesToBalance("join", limit); err != nil {
		return c, stopAll(w, &e, err)
	}
	return c, stopAll(w, &e, nil)
}

// cyclesToBalance waits until the set is balanced (World.balanced) and returns the acquire
// cycles it took, rounded up. It looks every tenth of a cycle: a listing of a thousand leases
// per look is the cost of the measure.
func (w *World) cyclesToBalance(what string, limit int) (int, error) {
	from := time.Now()
	for {
		if ok, _ := w.balanced(); ok {
			return int((time.Since(from) + Base.Acquire - 1) / Base.Acquire), nil
		}
		if time.Since(from) > time.Duration(limit)*Base.Acquire {
			_, why := w.balanced()
			return 0, fmt.Errorf("%s: not balanced within %d acquire cycles: %s", what, limit, why)
		}
		time.Sleep(Base.Acquire / 10)
		synctest.Wait() // look once the instant's goroutines ran to a stop (order.go)
	}
}

// stopAll stops every host of w gracefully, waits for them, and returns err.
func stopAll(w *World, e *ended, err error) error {
	w.mu.Lock()
	var up []*host
	for _, n := range w.order {
		up = append(up, w.hosts[n])
	}
	w.mu.Unlock()
	for _, h := range up {
		w.stop(h, e)
		synctest.Wait()
	}
	for _, wait := range e.waits {
		wait()
	}
	return err
}
