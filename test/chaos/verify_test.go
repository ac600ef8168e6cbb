//go:build unix

package chaos

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/cfp-dev/cfp/internal/leases"
)

// ledger counts the deliveries of the K documents from the hosts' record files.
type ledger struct {
	counts     []int32
	unique     int
	deliveries int
	batches    int
	// foreign counts items without a seq in 0..K-1: documents the writer never wrote.
	foreign  int
	perHost  map[string]int
	perLease map[string]int
	// offsets and partial let scan read each file incrementally, complete lines only.
	offsets map[string]int64
	partial map[string][]byte
}

func newLedger(k int) *ledger {
	return &ledger{
		counts:   make([]int32, k),
		perHost:  map[string]int{},
		perLease: map[string]int{},
		offsets:  map[string]int64{},
		partial:  map[string][]byte{},
	}
}

// add counts one delivered batch.
func (l *ledger) add(d delivery) {
	l.batches++
	l.perHost[d.Host] += len(d.Seqs)
	l.perLease[d.Lease] += len(d.Seqs)
	for _, s := range d.Seqs {
		if s < 0 || s >= len(l.counts) {
			l.foreign++
			continue
		}
		l.deliveries++
		if l.counts[s] == 0 {
			l.unique++
		}
		l.counts[s]++
	}
}

// duplicates is the number of deliveries beyond the first of each document.
func (l *ledger) duplicates() int { return l.deliveries - l.unique }

// lost is the number of documents never delivered.
func (l *ledger) lost() int { return len(l.counts) - l.unique }

// missing returns up to max seqs never delivered, ascending.
func (l *ledger) missing(max int) []int {
	var out []int
	for s, n := range l.counts {
		if n == 0 && len(out) < max {
			out = append(out, s)
		}
	}
	return out
}

// maxCount is the most times any one document was delivered.
func (l *ledger) maxCount() int {
	m := 0
	for _, n := range l.counts {
		m = max(m, int(n))
	}
	return m
}

// scan reads the lines appended to dir/*.jsonl since the last scan.
func (l *ledger) scan(dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		return err
	}
	for _, name := range files {
		if err := l.scanFile(name); err != nil {
			return err
		}
	}
	return nil
}

func (l *ledger) scanFile(name string) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Seek(l.offsets[name], io.SeekStart); err != nil {
		return err
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return err
	}
	l.offsets[name] += int64(len(b))
	b = append(l.partial[name], b...)
	end := bytes.LastIndexByte(b, '\n')
	l.partial[name] = append([]byte(nil), b[end+1:]...)
	for line := range bytes.SplitSeq(b[:end+1], []byte{'\n'}) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var d delivery
		if err := json.Unmarshal(line, &d); err != nil {
			return fmt.Errorf("%s: bad record %q: %w", filepath.Base(name), line, err)
		}
		l.add(d)
	}
	return nil
}

// leaseObs is what one sample saw of one lease.
type leaseObs struct {
	token  string
	rng    leases.Range
	hasRng bool
	lsn    int64
	hasLSN bool
	owner  string
}

// leaseChecker follows the lease documents sample by sample and records every checkpoint that
// moved backwards: a lease's LSN going down or disappearing, or a split child starting behind
// its parent's last checkpoint seen.
type leaseChecker struct {
	live map[string]leaseObs // by lease id
	gone map[string]leaseObs
	// violations say what went backwards, for the test's failure message.
	violations []string
	// ownerChanges counts the times a lease was seen with a new, non-empty owner.
	ownerChanges int
	// maxLeases is the most leases one sample saw.
	maxLeases int
	samples   int
}

func newLeaseChecker() *leaseChecker {
	return &leaseChecker{live: map[string]leaseObs{}, gone: map[string]leaseObs{}}
}

// observe checks one sample: every lease of the processor at one moment.
func (c *leaseChecker) observe(ls []*leases.Lease) {
	c.samples++
	c.maxLeases = max(c.maxLeases, len(ls))
	seen := make(map[string]bool, len(ls))
	var fresh []leaseObs
	for _, l := range ls {
		cur := leaseObs{token: l.Token, rng: l.Range, hasRng: l.HasRange(), owner: l.Owner}
		cur.lsn, cur.hasLSN = l.LSN()
		seen[l.ID] = true
		prev, ok := c.live[l.ID]
		if !ok {
			prev, ok = c.gone[l.ID]
			delete(c.gone, l.ID)
		}
		switch {
		case ok:
			c.compare(l.Token, prev, cur)
			if cur.owner != "" && cur.owner != prev.owner {
				c.ownerChanges++
			}
		default:
			fresh = append(fresh, cur)
		}
		c.live[l.ID] = cur
	}
	for id, o := range c.live {
		if !seen[id] {
			c.gone[id] = o
			delete(c.live, id)
		}
	}
	for _, child := range fresh {
		c.checkChild(child)
	}
}

func (c *leaseChecker) compare(token string, prev, cur leaseObs) {
	switch {
	case prev.hasLSN && !cur.hasLSN:
		c.violations = append(c.violations, fmt.Sprintf("lease %s: checkpoint went from LSN %d to none", token, prev.lsn))
	case prev.hasLSN && cur.lsn < prev.lsn:
		c.violations = append(c.violations, fmt.Sprintf("lease %s: checkpoint went back from LSN %d to %d", token, prev.lsn, cur.lsn))
	}
}

// checkChild compares a lease that appeared mid-run with every lease whose range strictly
// contains it (its split parent, live or gone): the child must start at or after the parent's
// last checkpoint seen, since children inherit the parent's continuation.
func (c *leaseChecker) checkChild(child leaseObs) {
	if !child.hasRng {
		return
	}
	check := func(parent leaseObs) {
		if parent.hasRng && parent.token != child.token && contains(parent.rng, child.rng) && parent.hasLSN {
			if !child.hasLSN || child.lsn < parent.lsn {
				c.violations = append(c.violations, fmt.Sprintf("lease %s starts at %s, behind its parent %s at LSN %d",
					child.token, lsnString(child), parent.token, parent.lsn))
			}
		}
	}
	for _, p := range c.live {
		check(p)
	}
	for _, p := range c.gone {
		check(p)
	}
}

func lsnString(o leaseObs) string {
	if !o.hasLSN {
		return "no checkpoint"
	}
	return fmt.Sprintf("LSN %d", o.lsn)
}

// contains reports whether outer strictly contains inner.
func contains(outer, inner leases.Range) bool {
	if outer == inner {
		return false
	}
	return leases.CompareEPK(outer.Min, inner.Min) <= 0 && leases.CompareEPK(inner.Max, outer.Max) <= 0
}

// owners returns the sorted owners of the live leases ("" for unowned) with their counts.
func (c *leaseChecker) owners() string {
	n := map[string]int{}
	for _, o := range c.live {
		n[o.owner]++
	}
	var parts []string
	for o, k := range n {
		if o == "" {
			o = "(none)"
		}
		parts = append(parts, fmt.Sprintf("%s:%d", o, k))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}
