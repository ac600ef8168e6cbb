package cosmos

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cfp-dev/cfp/internal/epk"
	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/leases"
)

// Partitions lists the live physical partitions (partition key ranges with ids and parents),
// sorted by range, and refreshes the cache ReadPage resolves partition ids with.
func (c *Container) Partitions(ctx context.Context) ([]feed.Partition, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	var parts []feed.Partition
	var err error
	if c.acct.meta == nil {
		parts, err = c.clientPartitions(ctx)
	} else {
		parts, err = c.acct.meta.partitions(ctx, c.db, c.name)
	}
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.parts = parts
	c.mu.Unlock()
	return append([]feed.Partition(nil), parts...), nil
}

// partition returns the live partition id from the cache, refreshing it once when id is unknown.
// ok is false when the partition is gone.
func (c *Container) partition(ctx context.Context, id string) (p feed.Partition, ok bool, err error) {
	find := func() (feed.Partition, bool) {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, p := range c.parts {
			if p.ID == id {
				return p, true
			}
		}
		return feed.Partition{}, false
	}
	if p, ok := find(); ok {
		return p, true, nil
	}
	if _, err := c.Partitions(ctx); err != nil {
		return feed.Partition{}, false, err
	}
	p, ok = find()
	return p, ok, nil
}

// partitionOfKey returns the live partition that holds the logical partition key parts (V2 hash
// containers only).
func (c *Container) partitionOfKey(ctx context.Context, parts []any) (feed.Partition, error) {
	info, err := c.Info(ctx)
	if err != nil {
		return feed.Partition{}, err
	}
	if info.PartitionKeyVersion != 2 {
		return feed.Partition{}, fmt.Errorf("read change feed of %s: a partition-key read needs the partition id on a version %d partition key", c.path(), info.PartitionKeyVersion)
	}
	key := epk.HashV2(parts)
	parts2, err := c.Partitions(ctx)
	if err != nil {
		return feed.Partition{}, err
	}
	for _, p := range parts2 {
		if p.Range.Contains(key) {
			return p, nil
		}
	}
	return feed.Partition{}, fmt.Errorf("read change feed of %s: no partition holds EPK %s", c.path(), key)
}

// compositeToken is azcosmos's own change-feed continuation JSON, the only form ReadChangeFeed
// resumes from.
type compositeToken struct {
	Version    int              `json:"version"`
	ResourceID string           `json:"resourceId"`
	Ranges     []compositeRange `json:"continuation"`
}

type compositeRange struct {
	MinInclusive      string  `json:"minInclusive"`
	MaxExclusive      string  `json:"maxExclusive"`
	ContinuationToken *string `json:"continuationToken,omitempty"`
}

// ReadPage reads one change-feed page of one physical partition (see feed.Source).
//
// In feed.AllVersionsAndDeletes mode the request carries A-IM: Full-Fidelity Feed and wire
// format 2021-09-15 (modePolicy), the items are the service's {current, previous, metadata}
// objects passed through raw, and the start must be now or a continuation (an empty one means
// now); the beginning and a time fail with feed.ErrAllVersionsStart.
//
// The start position becomes a one-range composite continuation for azcosmos: the raw ETag of a
// continuation, "*" for now, no token for the beginning (or a time, sent as If-Modified-Since).
// An empty continuation (a lease never checkpointed) reads from the beginning, as .NET does.
// With PartitionKey and no PartitionID, the partition is found by hashing the key (V2 only).
// A strict sub-range of the partition is sent as x-ms-start-epk/x-ms-end-epk. azcosmos follows
// splits by itself; when the page reveals that the partition no longer serves the range (the
// continuation spans several ranges, or the session token names another partition), ReadPage
// returns *feed.RangeGoneError and never hands a child's ETag back as the parent's.
func (c *Container) ReadPage(ctx context.Context, req feed.ReadRequest) (feed.Page, error) {
	if err := c.check(); err != nil {
		return feed.Page{}, err
	}
	op := "read change feed of " + c.path()
	opts := &azcosmos.ChangeFeedOptions{}
	if req.MaxItems > 0 {
		opts.MaxItemCount = int32(min(req.MaxItems, 1<<30))
	}

	var part feed.Partition
	if len(req.PartitionKey) > 0 {
		pk, parts, err := partitionKeyFromJSON(req.PartitionKey)
		if err != nil {
			return feed.Page{}, fmt.Errorf("%s: %w", op, err)
		}
		opts.PartitionKey = &pk
		if req.PartitionID == "" {
			if part, err = c.partitionOfKey(ctx, parts); err != nil {
				return feed.Page{}, err
			}
		}
	}
	if part.ID == "" {
		if req.PartitionID == "" {
			return feed.Page{}, fmt.Errorf("%s: the request names no partition", op)
		}
		p, ok, err := c.partition(ctx, req.PartitionID)
		if err != nil {
			return feed.Page{}, err
		}
		if !ok {
			return feed.Page{}, fmt.Errorf("%s: %w", op, &feed.RangeGoneError{PartitionID: req.PartitionID})
		}
		part = p
	}

	rng := part.Range
	sub := false
	if req.Range != (leases.Range{}) && !req.Range.Equal(part.Range) {
		if req.Range.Empty() || !req.Range.Within(part.Range) {
			return feed.Page{}, fmt.Errorf("%s: range %s is not inside partition %s (%s)", op, req.Range, part.ID, part.Range)
		}
		rng, sub = req.Range, true
	}

	info, err := c.Info(ctx)
	if err != nil {
		return feed.Page{}, err
	}
	entry := compositeRange{MinInclusive: rng.Min, MaxExclusive: rng.Max}
	if req.Mode == feed.AllVersionsAndDeletes {
		switch {
		case req.Start.Kind == feed.StartContinuation && req.Start.Continuation == "":
			// A lease never checkpointed starts from now in this mode, as Java does.
			req.Start = feed.StartFrom{Kind: feed.StartNow}
		case req.Start.Kind == feed.StartBeginning || req.Start.Kind == feed.StartTime:
			return feed.Page{}, fmt.Errorf("%s: start from %s: %w", op, feed.FormatStart(req.Start), feed.ErrAllVersionsStart)
		}
		ctx = context.WithValue(ctx, modeKey{}, req.Mode)
	}
	switch req.Start.Kind {
	case feed.StartContinuation:
		if req.Start.Continuation != "" {
			tok := req.Start.Continuation
			entry.ContinuationToken = &tok
		}
	case feed.StartNow:
		star := "*"
		entry.ContinuationToken = &star
	case feed.StartTime:
		t := req.Start.Time
		opts.StartFrom = &t
		ctx = context.WithValue(ctx, startTimeKey{}, true)
	case feed.StartBeginning:
	default:
		return feed.Page{}, fmt.Errorf("%s: unknown start kind %d", op, req.Start.Kind)
	}
	tokJSON, err := json.Marshal(compositeToken{Version: 1, ResourceID: info.ContainerRID, Ranges: []compositeRange{entry}})
	if err != nil {
		return feed.Page{}, fmt.Errorf("%s: %w", op, err)
	}
	tokStr := string(tokJSON)
	opts.Continuation = &tokStr

	if sub {
		ctx = context.WithValue(ctx, epkKey{}, rng)
	}
	hold := &rawFeed{reuse: req.Reuse}
	ctx = context.WithValue(ctx, rawFeedKey{}, hold)
	var probe *policyProbe
	if c.acct.borrowed && (sub || req.Mode == feed.AllVersionsAndDeletes) {
		probe = &policyProbe{}
		ctx = context.WithValue(ctx, policyProbeKey{}, probe)
	}
	resp, err := c.client.ReadChangeFeed(ctx, opts)
	if err != nil {
		putPageBuffer(hold.buf)
		return feed.Page{}, translate(err, opInfo{op: op, missing: "container " + c.path(), rbacAction: rbacReadChangeFeed, partitionID: part.ID})
	}
	if probe != nil && !probe.applied {
		putPageBuffer(hold.buf)
		return feed.Page{}, fmt.Errorf("%s: %w", op, ErrClientPolicies)
	}
	page, err := pageOf(resp, hold, part.ID, rng)
	if page.Release == nil {
		putPageBuffer(hold.buf) // nothing returned points into it (azcosmos decoded the body itself)
	}
	return page, err
}

// pageOf turns a ReadChangeFeed response for partition id and range rng into a Page, or a
// *feed.RangeGoneError when azcosmos followed a split or merge away from that partition. The
// items are those the feedBodyPolicy split into hold, with a Release that hands back the
// pooled buffer they point into (hold.buf, for ReadRequest.Reuse), or else those azcosmos decoded.
func pageOf(resp azcosmos.ChangeFeedResponse, hold *rawFeed, id string, rng leases.Range) (feed.Page, error) {
	gone := &feed.RangeGoneError{PartitionID: id}
	var tok compositeToken
	if err := json.Unmarshal([]byte(resp.ContinuationToken), &tok); err != nil {
		return feed.Page{}, fmt.Errorf("read change feed of partition %s: decode the sdk continuation: %w", id, err)
	}
	if len(tok.Ranges) != 1 || !rng.Equal(leases.Range{Min: tok.Ranges[0].MinInclusive, Max: tok.Ranges[0].MaxExclusive}) {
		return feed.Page{}, gone
	}
	var page feed.Page
	if resp.RawResponse != nil {
		rangeID, lsn, ok := parseSessionToken(resp.RawResponse.Header.Get("x-ms-session-token"))
		if ok && rangeID != id {
			return feed.Page{}, gone
		}
		page.LatestLSN = lsn
		if !ok {
			page.LatestLSN, _ = strconv.ParseInt(resp.RawResponse.Header.Get("lsn"), 10, 64)
		}
		page.NotModified = resp.RawResponse.StatusCode == http.StatusNotModified
	}
	if t := tok.Ranges[0].ContinuationToken; t != nil {
		page.Continuation = *t
	}
	page.RequestCharge = float64(resp.RequestCharge)
	if hold != nil && hold.ok && len(resp.Items) == 0 && resp.Count == len(hold.docs) {
		page.Items = hold.docs
		if buf := hold.buf; buf != nil && len(page.Items) > 0 {
			var once sync.Once
			page.Release = func() { once.Do(func() { putPageBuffer(buf) }) }
		}
	} else {
		page.Items = make([]json.RawMessage, len(resp.Items))
		for i, it := range resp.Items {
			page.Items[i] = it
		}
	}
	if len(page.Items) == 0 {
		page.NotModified = true
	}
	return page, nil
}

// parseSessionToken reads the partition key range id and the global LSN of a session token
// the way the .NET estimator reads the LSN: the part after the first ':' split on '#', its
// second field when there are two or more ("<pkRangeId>:<version>#<globalLSN>[#<region>=<lsn>...]",
// a vector token), else its only field ("<pkRangeId>:<globalLSN>", a simple token). Of several
// comma-joined tokens the first counts (the change feed of one range returns one). A token
// without an id, or whose LSN is not a non-negative number, gives ok == false.
func parseSessionToken(s string) (rangeID string, lsn int64, ok bool) {
	s, _, _ = strings.Cut(s, ",")
	id, rest, found := strings.Cut(s, ":")
	if !found || id == "" {
		return "", 0, false
	}
	fields := strings.Split(rest, "#")
	field := fields[0]
	if len(fields) >= 2 {
		field = fields[1]
	}
	n, err := strconv.ParseInt(field, 10, 64)
	if err != nil || n < 0 {
		return "", 0, false
	}
	return id, n, true
}

// modeKey is the context key of the change-feed mode of one ReadPage call.
type modeKey struct{}

// modePolicy turns the change-feed requests of a ReadPage call in all-versions mode into
// all-versions-and-deletes reads: azcosmos v1.5.0 has no mode option and always sends
// A-IM: Incremental Feed.
type modePolicy struct{}

func (modePolicy) Do(req *policy.Request) (*http.Response, error) {
	raw := req.Raw()
	if m, ok := raw.Context().Value(modeKey{}).(feed.FeedMode); ok && m == feed.AllVersionsAndDeletes &&
		raw.Method == http.MethodGet && raw.Header.Get("A-IM") != "" && strings.HasSuffix(raw.URL.Path, "/docs") {
		raw.Header.Set("A-IM", "Full-Fidelity Feed")
		raw.Header.Set("x-ms-cosmos-changefeed-wire-format-version", "2021-09-15")
		markApplied(raw.Context())
	}
	return req.Next()
}

// epkKey is the context key of the EPK sub-range of one ReadPage call.
type epkKey struct{}

// epkPolicy adds x-ms-start-epk/x-ms-end-epk to the change-feed requests of a ReadPage call whose
// context carries a sub-range: azcosmos never sends them, and without them a sub-range lease
// (after a merge) would read its whole physical partition.
type epkPolicy struct{}

func (epkPolicy) Do(req *policy.Request) (*http.Response, error) {
	raw := req.Raw()
	if rng, ok := raw.Context().Value(epkKey{}).(leases.Range); ok &&
		raw.Method == http.MethodGet && raw.Header.Get("A-IM") != "" && strings.HasSuffix(raw.URL.Path, "/docs") {
		raw.Header.Set("x-ms-start-epk", rng.Min)
		raw.Header.Set("x-ms-end-epk", rng.Max)
		raw.Header.Set("x-ms-read-key-type", "EffectivePartitionKeyRange")
		markApplied(raw.Context())
	}
	return req.Next()
}

// startTimeKey is the context key that marks a ReadPage call that starts from a time.
type startTimeKey struct{}

// capStartTimeAfterMerge is the bit of x-ms-cosmos-sdk-supportedcapabilities (a decimal bit
// set) that says the client can read a merged partition from a time: without it the service
// answers such a read with 400 "StartTime/IfModifiedSince is not currently supported with merged
// partitions.". With it the service applies If-Modified-Since and the continuation together.
const capStartTimeAfterMerge = 1 << 1

// startTimePolicy adds capStartTimeAfterMerge to the capabilities of the change-feed requests of
// a ReadPage call that starts from a time: azcosmos v1.5.0 sends only partition merge (1).
type startTimePolicy struct{}

func (startTimePolicy) Do(req *policy.Request) (*http.Response, error) {
	raw := req.Raw()
	if on, _ := raw.Context().Value(startTimeKey{}).(bool); on &&
		raw.Method == http.MethodGet && raw.Header.Get("A-IM") != "" && strings.HasSuffix(raw.URL.Path, "/docs") {
		const name = "x-ms-cosmos-sdk-supportedcapabilities"
		caps, _ := strconv.ParseUint(raw.Header.Get(name), 10, 64)
		raw.Header.Set(name, strconv.FormatUint(caps|capStartTimeAfterMerge, 10))
	}
	return req.Next()
}
