package emulator

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"
)

// FaultRule makes the gateway fail or slow down some data-plane requests (everything under
// /dbs, and the account read when IncludeAccount is set; the /_cfp/ admin endpoints are never
// affected). Rules are off by default; InjectFaults adds one and ClearFaults removes all.
type FaultRule struct {
	// Status is the error to answer: 429 (with x-ms-retry-after-ms), 500, 503, 410 (with
	// x-ms-substatus) or 400 (a request the service refuses, such as a bad continuation). 0
	// answers normally, after Latency.
	Status int
	// Substatus is sent as x-ms-substatus. Default for 410: 1002 (partition key range gone).
	Substatus int
	// RetryAfter is sent as x-ms-retry-after-ms with 429. Default: 10ms.
	RetryAfter time.Duration
	// Latency is added before answering (error or not).
	Latency time.Duration
	// Count limits the rule to the next Count matching requests; 0 means no limit.
	Count int
	// Fraction applies the rule to this fraction (0..1] of matching requests; 0 means all.
	Fraction float64
	// ChangeFeedOnly restricts the rule to change-feed reads.
	ChangeFeedOnly bool
	// IncludeAccount applies the rule to the account read (GET /) too, which clients send first.
	IncludeAccount bool
}

// Validate reports whether the rule can be injected.
func (f FaultRule) Validate() error {
	switch f.Status {
	case 0, http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusServiceUnavailable, http.StatusGone, http.StatusBadRequest:
	default:
		return fmt.Errorf("fault status must be 429, 500, 503, 410, 400 or 0, got %d", f.Status)
	}
	if f.Fraction < 0 || f.Fraction > 1 {
		return fmt.Errorf("fault fraction must be between 0 and 1, got %v", f.Fraction)
	}
	if f.Count < 0 || f.Latency < 0 || f.RetryAfter < 0 {
		return fmt.Errorf("fault count, latency and retry-after must not be negative")
	}
	if f.ChangeFeedOnly && f.IncludeAccount {
		return fmt.Errorf("a fault rule cannot be both change-feed-only and include the account read")
	}
	if f.Status == 0 && f.Latency == 0 {
		return fmt.Errorf("fault rule has neither a status nor a latency")
	}
	return nil
}

// InjectFaults adds a fault rule. Rules are checked in the order they were added; the first
// that applies to a request decides.
func (e *Emulator) InjectFaults(f FaultRule) error {
	if err := f.Validate(); err != nil {
		return err
	}
	if f.Status == http.StatusGone && f.Substatus == 0 {
		f.Substatus = 1002
	}
	if f.Status == http.StatusTooManyRequests && f.RetryAfter == 0 {
		f.RetryAfter = 10 * time.Millisecond
	}
	e.faults.add(f)
	e.log.Info("fault rule injected", "status", f.Status, "count", f.Count, "fraction", f.Fraction, "latency", f.Latency, "changeFeedOnly", f.ChangeFeedOnly, "includeAccount", f.IncludeAccount)
	return nil
}

// ClearFaults removes every fault rule.
func (e *Emulator) ClearFaults() { e.faults.clear() }

// faultInjector holds the active rules.
type faultInjector struct {
	mu    sync.Mutex
	rules []*activeRule
	rng   *rand.Rand
	hits  int64 // requests a rule applied to, for status
}

type activeRule struct {
	FaultRule
	left int // remaining applications when Count > 0
}

func (fi *faultInjector) init() {
	fi.rng = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
}

func (fi *faultInjector) add(f FaultRule) {
	fi.mu.Lock()
	defer fi.mu.Unlock()
	fi.rules = append(fi.rules, &activeRule{FaultRule: f, left: f.Count})
}

func (fi *faultInjector) clear() {
	fi.mu.Lock()
	defer fi.mu.Unlock()
	fi.rules = nil
}

func (fi *faultInjector) active() int {
	fi.mu.Lock()
	defer fi.mu.Unlock()
	return len(fi.rules)
}

// pick returns the rule that applies to a request (a change-feed read, the account read, or
// another data-plane request), consuming one of its uses.
func (fi *faultInjector) pick(changeFeed, account bool) (FaultRule, bool) {
	fi.mu.Lock()
	defer fi.mu.Unlock()
	for i, r := range fi.rules {
		if (r.ChangeFeedOnly && !changeFeed) || (account && !r.IncludeAccount) {
			continue
		}
		if r.Fraction > 0 && fi.rng.Float64() >= r.Fraction {
			continue
		}
		if r.Count > 0 {
			r.left--
			if r.left == 0 {
				fi.rules = append(fi.rules[:i:i], fi.rules[i+1:]...)
			}
		}
		fi.hits++
		return r.FaultRule, true
	}
	return FaultRule{}, false
}
