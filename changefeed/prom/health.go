package prom

import (
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/cfp-dev/cfp/changefeed"
)

// Health is what /healthz and /readyz answer for a long-running loop: a processor's acquire
// cycles (Metrics.OnCycleDone), or the rounds of `cfp estimate --watch --metrics-addr`;
// docs/scripting.md documents both.
//
//   - /healthz (liveness) answers 200 while the command's loop runs: from the start until it
//     stops, unless the loop has not reported a round (an acquire cycle, an estimate) for
//     longer than stallAfter, which means it is wedged and the process should be restarted.
//   - /readyz (readiness) answers 200 once the first round finished and while the last round
//     reached the account; 503 with the reason before that, while the account is unreachable,
//     while the reads of leases the host holds fail permanently (a *changefeed.ReadsFailingError:
//     a refused continuation, credentials refused), and once the command stops.
//
// Its methods are safe for concurrent use; the zero value is not: use NewHealth.
type Health struct {
	now        func() time.Time
	stallAfter time.Duration

	mu       sync.Mutex
	rounds   int       // rounds reported
	lastAt   time.Time // when the last round ended (or the loop started)
	lastErr  string    // the last round's failure, "" when it reached the account
	failing  bool      // the last round reached the account, but reads fail permanently
	stopping bool
}

// NewHealth returns the health of a loop that starts now; a loop that reports no round for
// stallAfter (0: never) is not live. now is the clock (nil: time.Now).
func NewHealth(now func() time.Time, stallAfter time.Duration) *Health {
	if now == nil {
		now = time.Now
	}
	return &Health{now: now, stallAfter: stallAfter, lastAt: now()}
}

// Round records the end of one round of the loop: err is nil when it reached the account. The
// message of err must not contain secrets (it is served to anyone who can reach the port).
func (h *Health) Round(err error) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rounds++
	h.lastAt = h.now()
	h.lastErr = ""
	_, h.failing = errors.AsType[*changefeed.ReadsFailingError](err)
	if err != nil {
		h.lastErr = err.Error()
	}
}

// Stop records that the loop ended: neither live nor ready from now on.
func (h *Health) Stop() {
	if h == nil {
		return
	}
	h.mu.Lock()
	h.stopping = true
	h.mu.Unlock()
}

// Live reports whether the loop runs, and why not.
func (h *Health) Live() (bool, string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.stopping:
		return false, "stopping"
	case h.stallAfter > 0 && h.now().Sub(h.lastAt) > h.stallAfter:
		return false, "no round finished for " + h.now().Sub(h.lastAt).Round(time.Second).String()
	}
	return true, "ok"
}

// Ready reports whether the command serves its purpose, and why not.
func (h *Health) Ready() (bool, string) {
	if ok, why := h.Live(); !ok {
		return false, why
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.rounds == 0:
		return false, "starting: the first round has not finished"
	case h.failing:
		return false, h.lastErr
	case h.lastErr != "":
		return false, "account unreachable: " + h.lastErr
	}
	return true, "ok"
}

// ServeLive answers /healthz: 200 "ok" while the loop is live, 503 and why not. A nil *Health
// is always live.
func (h *Health) ServeLive(w http.ResponseWriter, _ *http.Request) {
	if h == nil {
		writeHealth(w, true, "ok")
		return
	}
	ok, why := h.Live()
	writeHealth(w, ok, why)
}

// ServeReady answers /readyz: 200 "ok" while the loop is ready, 503 and why not. A nil *Health
// is always ready.
func (h *Health) ServeReady(w http.ResponseWriter, _ *http.Request) {
	if h == nil {
		writeHealth(w, true, "ok")
		return
	}
	ok, why := h.Ready()
	writeHealth(w, ok, why)
}

func writeHealth(w http.ResponseWriter, ok bool, why string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_, _ = w.Write([]byte(why + "\n"))
}
