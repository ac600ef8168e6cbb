package sim

import (
	"fmt"
	"testing/synctest"
	"time"
)

// BalanceCycles is how many acquire cycles (of Base) a lease set takes to be balanced (every
// lease owned by a running host, the hosts' counts within one of each other) after each of
// three events: all hosts start at once, one more host joins, one host is killed (counted from
// the kill: its leases are free only once they expired, ExpiryCycles later). Figures in
// virtual time, the same on every machine.
type BalanceCycles struct {
	Start, Join, Kill int
}

// ExpiryCycles is the lease expiration in acquire cycles of Base, rounded up.
var ExpiryCycles = int((Base.Expiration + Base.Acquire - 1) / Base.Acquire)

// Balance measures BalanceCycles for partitions leases and hosts cfp hosts. It must run inside
// a synctest bubble. The error says which event never balanced within limit cycles.
func Balance(partitions, hosts, limit int) (BalanceCycles, error) {
	w := newWorld(partitions, Batch)
	var e ended
	defer func() {
		for _, n := range w.order {
			w.stop(w.hosts[n], &e)
			synctest.Wait()
		}
		for _, wait := range e.waits {
			wait()
		}
	}()
	w.write(nil)
	wait := func(what string) (int, error) {
		from := time.Now()
		for {
			if owners, _ := w.balanced(); owners {
				return int((time.Since(from) + Base.Acquire - 1) / Base.Acquire), nil
			}
			if time.Since(from) > time.Duration(limit)*Base.Acquire {
				return 0, fmt.Errorf("%s: not balanced within %d acquire cycles:%s", what, limit, w.describe())
			}
			time.Sleep(10 * time.Millisecond)
			synctest.Wait() // look once the instant's goroutines ran to a stop (order.go)
		}
	}
	var c BalanceCycles
	var err error
	for i := range hosts {
		w.startCFP(fmt.Sprintf("cfp-%d", i), Base, 0)
		synctest.Wait() // one bootstrap at a time (order.go)
	}
	if c.Start, err = wait("start"); err != nil {
		return c, err
	}
	w.startCFP(fmt.Sprintf("cfp-%d", hosts), Base, 0)
	if c.Join, err = wait("join"); err != nil {
		return c, err
	}
	w.kill(w.hosts["cfp-0"], &e)
	c.Kill, err = wait("kill")
	return c, err
}

// balanced reports whether every lease is owned by a running host and the running hosts'
// counts are within one of each other.
func (w *World) balanced() (bool, string) {
	live := w.live()
	counts := map[string]int{}
	for _, n := range live {
		counts[n] = 0
	}
	ls := w.leaseSet()
	if len(ls) != len(w.partitions()) {
		return false, "leases missing"
	}
	for _, l := range ls {
		if _, ok := counts[l.Owner]; !ok {
			return false, fmt.Sprintf("lease %s owned by %q", l.Token, l.Owner)
		}
		counts[l.Owner]++
	}
	lo, hi := len(ls), 0
	for _, n := range counts {
		lo, hi = min(lo, n), max(hi, n)
	}
	return hi-lo <= 1, fmt.Sprint(counts)
}
