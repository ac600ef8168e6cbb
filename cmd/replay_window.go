package cmd

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/leases"
	"github.com/cfp-dev/cfp/internal/sink"
)

// A replay's window lives in the properties of each of its leases, so that a resumed replay
// covers exactly the window of the run that created the leases, whatever the clock says now
// (relative times and the default end are resolved once, at the first run). Split children
// inherit the properties from their parent.
const (
	replayPropStart = "cfpReplayStart" // "beginning" or an RFC 3339 time: leases without a continuation start here
	replayPropUntil = "cfpReplayUntil" // RFC 3339: the window's end
)

// replayWindow is what a replay re-processes: the changes after Start (or after each range's
// position in State) whose _ts is before Until (see afterWindow).
type replayWindow struct {
	Start feed.StartFrom
	Until time.Time
	// State, when set, gives each range its own position (a `cfp tail --save-state` file).
	State *feed.TailState
}

// properties returns the lease properties that record the window.
func (w replayWindow) properties() map[string]string {
	return map[string]string{
		replayPropStart: feed.FormatStart(w.Start),
		replayPropUntil: w.Until.UTC().Format(time.RFC3339Nano),
	}
}

// windowOfLeases reads the window back from the replay's leases.
func windowOfLeases(ls []*leases.Lease, now time.Time) (replayWindow, error) {
	for _, l := range ls {
		until, ok := l.Properties[replayPropUntil]
		if !ok {
			continue
		}
		end, err := time.Parse(time.RFC3339Nano, until)
		if err != nil {
			return replayWindow{}, fmt.Errorf("lease %s: bad %s %q: %w", l.Token, replayPropUntil, until, err)
		}
		start, err := feed.ParseStart(l.Properties[replayPropStart], now)
		if err != nil {
			return replayWindow{}, fmt.Errorf("lease %s: bad %s: %w", l.Token, replayPropStart, err)
		}
		return replayWindow{Start: start, Until: end}, nil
	}
	return replayWindow{}, errors.New("the replay's leases do not record their window: run again with --fresh")
}

// replayName is the processor name of a replay: "<base>.replay-<id>", where id hashes the
// monitored container and the window as the user typed it (a state file by its contents). The
// same command line therefore finds the same leases and resumes; another window gets another
// lease set. A live processor's lease ids continue with the account host right after its name,
// so they never start with a replay's prefix.
func replayName(base, database, container, from string, stateFile []byte, until string) string {
	h := sha256.New()
	for _, s := range []string{database, container, from, until} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	if stateFile != nil {
		h.Write(stateFile)
	}
	return base + ".replay-" + hex.EncodeToString(h.Sum(nil))[:8]
}

// itemTime returns a change's _ts (zero when it has none).
func itemTime(raw json.RawMessage) time.Time {
	var v struct {
		TS json.RawMessage `json:"_ts"`
	}
	if json.Unmarshal(raw, &v) != nil {
		return time.Time{}
	}
	n, err := strconv.ParseInt(strings.Trim(string(v.TS), `"`), 10, 64)
	if err != nil || n <= 0 {
		return time.Time{}
	}
	return time.Unix(n, 0).UTC()
}

// afterWindow reports whether a change stamped ts lies at or after the window's end. The window
// is half-open, [start, until), in the whole seconds of _ts, the resolution at which the feed
// also starts from a time: windows that follow one another deliver each change once.
func afterWindow(ts, until time.Time) bool {
	return !ts.IsZero() && ts.Unix() >= until.Unix()
}

// windowClosed is the first moment at which no new change can be stamped inside the window.
func windowClosed(until time.Time) time.Time {
	return until.Truncate(time.Second)
}

// inWindow returns the leading items of a page that lie inside the window and whether the page
// reached its end. Within a range the feed is in LSN order and _ts never goes back, so
// everything after the first change past the end is past it too.
func inWindow(items []json.RawMessage, until time.Time) ([]json.RawMessage, bool) {
	for i, it := range items {
		if afterWindow(itemTime(it), until) {
			return items[:i], true
		}
	}
	return items, false
}

// windowHandler hands the delegate only the changes inside the window and records, per lease,
// the position the delegate acknowledged (so the end probe need not wait for a deferred
// checkpoint). It forwards OpenLease and CloseLease.
type windowHandler struct {
	next  feed.Handler
	until time.Time

	items   atomic.Int64
	batches atomic.Int64

	mu    sync.Mutex
	acked map[string]string // lease token -> continuation acknowledged by the delegate
	ended map[string]bool   // lease tokens whose range reached past the window
}

var _ feed.LeaseHandler = (*windowHandler)(nil)

func newWindowHandler(next feed.Handler, until time.Time) *windowHandler {
	return &windowHandler{next: next, until: until, acked: map[string]string{}, ended: map[string]bool{}}
}

// Handle delivers the batch's changes up to the window's end. A batch wholly past the end is
// acknowledged without reaching the delegate.
func (h *windowHandler) Handle(ctx context.Context, b feed.Batch) error {
	in, past := inWindow(b.Items, h.until)
	if len(in) == 0 {
		h.ack(b.LeaseToken, b.Continuation, past)
		return nil
	}
	b.Items = in
	err := h.next.Handle(ctx, b)
	if err == nil || errors.Is(err, feed.ErrNoCheckpoint) {
		h.items.Add(int64(len(in)))
		h.batches.Add(1)
		h.ack(b.LeaseToken, b.Continuation, past)
	}
	return err
}

func (h *windowHandler) ack(token, continuation string, past bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if continuation != "" {
		h.acked[token] = continuation
	}
	if past {
		h.ended[token] = true
	}
}

// position returns the continuation acknowledged for a lease ("" if none) and whether its
// range already reached past the window.
func (h *windowHandler) position(token string) (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.acked[token], h.ended[token]
}

// OpenLease forwards to the delegate.
func (h *windowHandler) OpenLease(ctx context.Context, l feed.LeaseInfo) error {
	return sink.OpenLease(ctx, h.next, l)
}

// CloseLease forwards to the delegate.
func (h *windowHandler) CloseLease(ctx context.Context, l feed.LeaseInfo, reason feed.CloseReason) error {
	return sink.CloseLease(ctx, h.next, l, reason)
}

// rangeDone reports whether lease l has nothing left inside the window when read from pos:
// the first change after pos is past the window's end, or there is none and the read began
// after the window closed. A lease whose range is gone or spans several partitions is not done:
// the processor splits it first.
func rangeDone(ctx context.Context, src feed.Source, parts []feed.Partition, l *leases.Lease, pos feed.StartFrom, until time.Time, now func() time.Time) (bool, error) {
	rt, err := feed.Route(l, parts)
	if err != nil {
		return false, nil
	}
	req := rt.Request()
	req.MaxItems, req.Start = 1, pos
	began := now()
	page, err := feed.NewReader(src, req, feed.ReaderOptions{Poll: -1, MaxThrottleRetries: 2}).Next(ctx)
	switch {
	case feed.IsRangeGone(err):
		return false, nil
	case err != nil:
		return false, err
	case len(page.Items) > 0:
		return afterWindow(itemTime(page.Items[0]), until), nil
	}
	return !began.Before(windowClosed(until)), nil
}
