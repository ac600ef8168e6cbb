// Package feedtest provides an in-memory change feed with real semantics for tests of the engine:
// MemSource implements feed.Source over partitions with EPK ranges and per-partition LSN counters,
// latest-version items or every version and delete (feed.AllVersionsAndDeletes), splits and
// merges, start positions and injected failures. Clock is a manual clock whose Sleep advances
// time instantly, for deterministic tests of polling and backoff.
package feedtest

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/leases"
)

var _ feed.Source = (*MemSource)(nil)

// DefaultPageSize is the page size of a read that does not set MaxItems.
const DefaultPageSize = 100

// EPK is the effective partition key MemSource gives a logical partition-key value: 32 upper-case
// hex digits, always below "40" like the service's hash V2 keys, so every key lies in ["", "FF").
func EPK(pk string) string {
	sum := md5.Sum([]byte(pk))
	sum[0] &= 0x3F
	return strings.ToUpper(hex.EncodeToString(sum[:]))
}

// Option configures a MemSource.
type Option func(*MemSource)

// WithClock sets the clock that stamps _ts on writes and resolves time start positions
// (default time.Now).
func WithClock(now func() time.Time) Option {
	return func(m *MemSource) { m.now = now }
}

// WithPageSize sets the page size used when a read does not set MaxItems.
func WithPageSize(n int) Option {
	return func(m *MemSource) { m.pageSize = n }
}

// MemSource is an in-memory change feed. Each physical partition owns an EPK range and an LSN
// counter; every write or delete in a partition increments its counter. In latest-version mode
// an updated item appears once, at its newest LSN, and a deleted item disappears; in
// all-versions mode every create, replace and delete appears, with its previous image. After a split the
// children inherit the parent's counter and items, so the parent's continuation stays valid on
// the children, and reads that name the parent fail with *feed.RangeGoneError.
// MemSource is safe for concurrent use.
type MemSource struct {
	mu       sync.Mutex
	now      func() time.Time
	pageSize int
	parts    map[string]*memPartition
	// live is the live partitions sorted by range; nil after a split or merge until it is
	// needed again (see sortedLive).
	live    []*memPartition
	nextID  int
	items   map[string]*memItem
	failN   int
	failErr error
	reads   int
}

type memPartition struct {
	id      string
	rng     leases.Range
	parents []string
	lsn     int64
	gone    bool
	log     []logEntry // ascending LSN; an entry is stale when its item moved on
}

type logEntry struct {
	lsn  int64
	item *memItem
	// The operation as the all-versions feed reports it: create, replace or delete, the body
	// written (nil for a delete), the time, and the version it replaced.
	op       string
	body     []byte
	ts       int64
	prevLSN  int64
	prevBody []byte
}

type memItem struct {
	pk, id, epk string
	lsn, ts     int64
	deleted     bool
	body        []byte
}

// NewMemSource returns a container with n physical partitions ("0".."n-1") that split the key
// space evenly.
func NewMemSource(n int, opts ...Option) *MemSource {
	if n < 1 {
		n = 1
	}
	m := &MemSource{
		now:      time.Now,
		pageSize: DefaultPageSize,
		parts:    make(map[string]*memPartition),
		items:    make(map[string]*memItem),
	}
	for _, o := range opts {
		o(m)
	}
	top := epkTop()
	for i := 0; i < n; i++ {
		lo := new(big.Int).Div(new(big.Int).Mul(top, big.NewInt(int64(i))), big.NewInt(int64(n)))
		hi := new(big.Int).Div(new(big.Int).Mul(top, big.NewInt(int64(i+1))), big.NewInt(int64(n)))
		r := leases.Range{Min: formatEPK(lo), Max: formatEPK(hi)}
		if i == 0 {
			r.Min = ""
		}
		if i == n-1 {
			r.Max = "FF"
		}
		m.addPartition(r, nil, 0, nil)
	}
	return m
}

func (m *MemSource) addPartition(r leases.Range, parents []string, lsn int64, log []logEntry) *memPartition {
	p := &memPartition{id: strconv.Itoa(m.nextID), rng: r, parents: parents, lsn: lsn, log: log}
	m.nextID++
	m.parts[p.id] = p
	m.live = nil
	return p
}

// Partitions lists the live partitions sorted by range.
func (m *MemSource) Partitions(ctx context.Context) ([]feed.Partition, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, err // ended while waiting for the lock
	}
	live := m.sortedLive()
	out := make([]feed.Partition, len(live))
	for i, p := range live {
		out[i] = feed.Partition{ID: p.id, Range: p.rng, Parents: append([]string(nil), p.parents...)}
	}
	return out, nil
}

// sortedLive returns the live partitions sorted by range, kept between calls until a split or
// merge. Every write looks up its partition, and every processor worker lists the partitions
// when it starts: scanning and sorting a thousand partitions under the source's lock for each
// (EPK comparisons allocate) made that lock the queue every read waited in (scalebench at
// 1000 leases). Callers hold m.mu.
func (m *MemSource) sortedLive() []*memPartition {
	if m.live == nil {
		for _, p := range m.parts {
			if !p.gone {
				m.live = append(m.live, p)
			}
		}
		sort.Slice(m.live, func(i, j int) bool { return leases.CompareEPK(m.live[i].rng.Min, m.live[j].rng.Min) < 0 })
	}
	return m.live
}

// partitionFor returns the live partition whose range holds epk. Callers hold m.mu.
func (m *MemSource) partitionFor(epk string) *memPartition {
	live := m.sortedLive()
	// The first partition that starts above epk; the one before it holds epk.
	i := sort.Search(len(live), func(i int) bool { return leases.CompareEPK(live[i].rng.Min, epk) > 0 })
	if i > 0 && live[i-1].rng.Contains(epk) {
		return live[i-1]
	}
	return nil
}

// Write upserts doc (a JSON object with a string "id") under partition-key value pk, stamping
// _lsn, _ts and _etag, and returns the LSN it was written at.
func (m *MemSource) Write(pk string, doc []byte) (int64, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(doc, &fields); err != nil {
		return 0, fmt.Errorf("write: document is not a JSON object: %w", err)
	}
	var id string
	if err := json.Unmarshal(fields["id"], &id); err != nil || id == "" {
		return 0, errors.New("write: document needs a non-empty string id")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	epk := EPK(pk)
	p := m.partitionFor(epk)
	p.lsn++
	lsn := p.lsn
	fields["_lsn"] = json.RawMessage(strconv.FormatInt(lsn, 10))
	ts := m.now().Unix()
	fields["_ts"] = json.RawMessage(strconv.FormatInt(ts, 10))
	fields["_etag"] = json.RawMessage(strconv.Quote(`"` + strconv.FormatInt(lsn, 10) + `"`))
	body, err := json.Marshal(fields)
	if err != nil {
		return 0, fmt.Errorf("write: %w", err)
	}
	key := pk + "\x00" + id
	it := m.items[key]
	if it == nil {
		it = &memItem{pk: pk, id: id, epk: epk, deleted: true}
		m.items[key] = it
	}
	e := logEntry{lsn: lsn, item: it, op: feed.OperationCreate, body: body, ts: ts}
	if !it.deleted {
		e.op, e.prevLSN, e.prevBody = feed.OperationReplace, it.lsn, it.body
	}
	it.lsn, it.ts, it.deleted, it.body = lsn, ts, false, body
	p.log = append(p.log, e)
	return lsn, nil
}

// Delete removes the item (pk, id); it consumes an LSN and is emitted by the all-versions feed
// only.
func (m *MemSource) Delete(pk, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	it := m.items[pk+"\x00"+id]
	if it == nil || it.deleted {
		return fmt.Errorf("delete %s: %w", id, feed.ErrNotFound)
	}
	p := m.partitionFor(it.epk)
	p.lsn++
	p.log = append(p.log, logEntry{lsn: p.lsn, item: it, op: feed.OperationDelete, ts: m.now().Unix(), prevLSN: it.lsn, prevBody: it.body})
	it.lsn, it.deleted = p.lsn, true
	return nil
}

// LSN returns the current LSN of a partition (live or gone).
func (m *MemSource) LSN(partitionID string) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.parts[partitionID]
	if p == nil {
		return 0, fmt.Errorf("partition %s: %w", partitionID, feed.ErrNotFound)
	}
	return p.lsn, nil
}

// Split splits a live partition at the middle of its range and returns the two children's ids.
// The children inherit the parent's LSN counter and its items; the parent is gone.
func (m *MemSource) Split(partitionID string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.parts[partitionID]
	if p == nil || p.gone {
		return nil, &feed.RangeGoneError{PartitionID: partitionID}
	}
	lo, hi := parseEPK(p.rng.Min), parseEPK(p.rng.Max)
	if hi.Cmp(epkTop()) > 0 {
		hi = epkTop()
	}
	mid := new(big.Int).Rsh(new(big.Int).Add(lo, hi), 1)
	if mid.Cmp(lo) <= 0 {
		return nil, fmt.Errorf("split partition %s: range %s is too small", partitionID, p.rng)
	}
	midS := formatEPK(mid)
	ranges := []leases.Range{{Min: p.rng.Min, Max: midS}, {Min: midS, Max: p.rng.Max}}
	parents := append(append([]string(nil), p.parents...), p.id)
	var ids []string
	for _, r := range ranges {
		var log []logEntry
		for _, e := range p.log {
			if r.Contains(e.item.epk) {
				log = append(log, e)
			}
		}
		c := m.addPartition(r, parents, p.lsn, log)
		ids = append(ids, c.id)
	}
	p.gone, m.live = true, nil
	return ids, nil
}

// Merge merges two live partitions with adjacent ranges into one and returns its id. The merged
// partition's LSN counter starts at the larger of the two, and its log holds both parents'
// entries in LSN order, so a parent's continuation read over the parent's range on the merged
// partition resumes exactly after it (as the service's EPK-filtered reads after a merge do);
// the parents are gone.
func (m *MemSource) Merge(a, b string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	pa, pb := m.parts[a], m.parts[b]
	for i, p := range []*memPartition{pa, pb} {
		if p == nil || p.gone {
			return "", &feed.RangeGoneError{PartitionID: []string{a, b}[i]}
		}
	}
	if leases.CompareEPK(pb.rng.Min, pa.rng.Min) < 0 {
		pa, pb = pb, pa
	}
	if pa.rng.Max != pb.rng.Min {
		return "", fmt.Errorf("merge partitions %s and %s: ranges %s and %s are not adjacent", a, b, pa.rng, pb.rng)
	}
	log := append(append([]logEntry(nil), pa.log...), pb.log...)
	sort.SliceStable(log, func(i, j int) bool { return log[i].lsn < log[j].lsn })
	var parents []string
	for _, p := range []*memPartition{pa, pb} {
		parents = append(append(parents, p.parents...), p.id)
	}
	c := m.addPartition(leases.Range{Min: pa.rng.Min, Max: pb.rng.Max}, parents, max(pa.lsn, pb.lsn), log)
	pa.gone, pb.gone, m.live = true, true, nil
	return c.id, nil
}

// Fail makes the next n ReadPage calls fail with err (after the context check, before anything
// else). Fail(0, nil) clears a pending failure.
func (m *MemSource) Fail(n int, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failN, m.failErr = n, err
}

// Reads returns how many ReadPage calls were made, failed ones included.
func (m *MemSource) Reads() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.reads
}

// ReadPage reads one page. A partition id that is gone or never existed fails with
// *feed.RangeGoneError, as the service answers 410/1002 for ids missing from its routing map. Scope: the named partition (or, with only PartitionKey set, the
// partition holding that key), further restricted to req.Range and req.PartitionKey. Start:
// a continuation returns items with a greater LSN, beginning returns all, now returns none but
// the current position, a time returns items whose _ts is at or after it (whole seconds).
// A page with items continues after its last item; an empty page (NotModified) continues at
// max(start, current LSN). LatestLSN is the partition's current LSN (the session token's).
func (m *MemSource) ReadPage(ctx context.Context, req feed.ReadRequest) (feed.Page, error) {
	if err := ctx.Err(); err != nil {
		return feed.Page{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reads++
	if m.failN > 0 {
		m.failN--
		return feed.Page{}, m.failErr
	}
	var pkFilter string
	hasPK := len(req.PartitionKey) > 0
	if hasPK {
		var vals []string
		if err := json.Unmarshal(req.PartitionKey, &vals); err != nil || len(vals) != 1 {
			return feed.Page{}, fmt.Errorf("partition key %s: want a JSON array of one string", req.PartitionKey)
		}
		pkFilter = vals[0]
	}
	var p *memPartition
	switch {
	case req.PartitionID != "":
		p = m.parts[req.PartitionID]
		if p == nil || p.gone {
			return feed.Page{}, &feed.RangeGoneError{PartitionID: req.PartitionID}
		}
	case hasPK:
		p = m.partitionFor(EPK(pkFilter))
	default:
		return feed.Page{}, errors.New("read page: need a partition id or a partition key")
	}

	var since int64
	var minTS int64 = -1
	if req.Mode == feed.AllVersionsAndDeletes {
		switch {
		case req.Start.Kind == feed.StartContinuation && strings.TrimSpace(req.Start.Continuation) == "":
			req.Start.Kind = feed.StartNow
		case req.Start.Kind != feed.StartNow && req.Start.Kind != feed.StartContinuation:
			return feed.Page{}, errors.New("read page: the all-versions feed starts from now or a continuation only")
		}
	}
	switch req.Start.Kind {
	case feed.StartBeginning:
	case feed.StartNow:
		since = p.lsn
	case feed.StartTime:
		minTS = req.Start.Time.Unix()
	case feed.StartContinuation:
		if strings.TrimSpace(req.Start.Continuation) == "*" {
			since = p.lsn
			break
		}
		n, ok := feed.ContinuationLSN(req.Start.Continuation)
		if !ok {
			return feed.Page{}, fmt.Errorf("read page: invalid continuation %q", req.Start.Continuation)
		}
		since = n
	default:
		return feed.Page{}, fmt.Errorf("read page: unknown start kind %d", req.Start.Kind)
	}

	limit := req.MaxItems
	if limit <= 0 {
		limit = m.pageSize
	}
	sub := req.Range
	restrict := sub != (leases.Range{})
	page := feed.Page{LatestLSN: p.lsn, RequestCharge: 1}
	i := sort.Search(len(p.log), func(i int) bool { return p.log[i].lsn > since })
	var last int64
	for ; i < len(p.log); i++ {
		e := p.log[i]
		// A full page still takes the rest of its last LSN's changes: a merged partition holds
		// both parents' changes, whose LSNs count from the same split, and the next page starts
		// after that LSN (the service, likewise, returns one LSN's changes together).
		if len(page.Items) >= limit && e.lsn != last {
			break
		}
		it := e.item
		if req.Mode != feed.AllVersionsAndDeletes && (it.lsn != e.lsn || it.deleted) {
			continue
		}
		if restrict && !sub.Contains(it.epk) {
			continue
		}
		if hasPK && it.pk != pkFilter {
			continue
		}
		if minTS >= 0 && it.ts < minTS {
			continue
		}
		if req.Mode == feed.AllVersionsAndDeletes {
			page.Items = append(page.Items, allVersionsItem(e))
		} else {
			page.Items = append(page.Items, append(json.RawMessage(nil), it.body...))
		}
		last = e.lsn
	}
	if len(page.Items) == 0 {
		page.NotModified = true
		page.Continuation = feed.LSNContinuation(max(since, p.lsn))
		return page, nil
	}
	page.RequestCharge += float64(len(page.Items)) * 0.5
	page.Continuation = feed.LSNContinuation(last)
	return page, nil
}

// allVersionsItem renders a log entry as the service's all-versions change (wire format
// 2021-09-15): {"current","previous","metadata"}, a delete's current empty and its identity in
// the metadata.
func allVersionsItem(e logEntry) json.RawMessage {
	type metadata struct {
		OperationType     string          `json:"operationType"`
		LSN               int64           `json:"lsn"`
		CRTS              int64           `json:"crts"`
		PreviousImageLSN  int64           `json:"previousImageLSN"`
		TimeToLiveExpired bool            `json:"timeToLiveExpired"`
		ID                string          `json:"id,omitempty"`
		PartitionKey      json.RawMessage `json:"partitionKey,omitempty"`
	}
	v := struct {
		Current  json.RawMessage `json:"current"`
		Previous json.RawMessage `json:"previous,omitempty"`
		Metadata metadata        `json:"metadata"`
	}{
		Current:  e.body,
		Previous: e.prevBody,
		Metadata: metadata{OperationType: e.op, LSN: e.lsn, CRTS: e.ts, PreviousImageLSN: e.prevLSN},
	}
	if e.op == feed.OperationDelete {
		v.Current = json.RawMessage(`{}`)
		v.Metadata.ID = e.item.id
		pk, _ := json.Marshal(map[string]string{"pk": e.item.pk})
		v.Metadata.PartitionKey = pk
	}
	b, _ := json.Marshal(v)
	return b
}

// epkTop is the exclusive upper bound of the keys EPK produces ("40" followed by zeros).
func epkTop() *big.Int {
	return parseEPK("40")
}

// parseEPK reads an EPK boundary as a 128-bit number ("" is 0; shorter strings are padded).
func parseEPK(s string) *big.Int {
	s = strings.ToUpper(s)
	if len(s) > 32 {
		s = s[:32]
	}
	s += strings.Repeat("0", 32-len(s))
	n, _ := new(big.Int).SetString(s, 16)
	return n
}

// formatEPK renders a boundary with trailing zero pairs trimmed (at least two digits).
func formatEPK(n *big.Int) string {
	s := fmt.Sprintf("%032X", n)
	for len(s) > 2 && strings.HasSuffix(s, "00") {
		s = s[:len(s)-2]
	}
	return s
}

// Clock is a manual clock for deterministic tests: Now returns the set time and Sleep advances it
// at once, recording each duration. It is safe for concurrent use.
type Clock struct {
	mu     sync.Mutex
	t      time.Time
	sleeps []time.Duration
}

// NewClock returns a clock set to t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// Sleep records d and advances the clock by it, returning ctx's error if ctx is done.
func (c *Clock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps = append(c.sleeps, d)
	c.t = c.t.Add(d)
	return nil
}

// Sleeps returns the durations passed to Sleep so far.
func (c *Clock) Sleeps() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.sleeps...)
}
