package cosmos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/leases"
)

// PerCallPolicies returns the per-call pipeline policies cfp's change-feed reads rely on: the
// x-ms-start-epk/x-ms-end-epk headers of a sub-range read, the all-versions-and-deletes mode
// headers, the capability to read a merged partition from a time, and the raw split of page
// bodies (see ReadPage). Each acts only on the requests of a
// ReadPage call, so a client built with them behaves as before for every other call. Open
// installs them; a caller that builds its own client for FromClient appends them to
// azcosmos.ClientOptions.PerCallPolicies.
func PerCallPolicies() []policy.Policy {
	return []policy.Policy{epkPolicy{}, modePolicy{}, startTimePolicy{}, feedBodyPolicy{}}
}

// ErrClientPolicies is returned by ReadPage on an account opened with FromClient whose client
// lacks PerCallPolicies, for a read that needs them (a sub-range of a partition, or the
// all-versions-and-deletes mode): without them the page would hold the wrong changes, so it is
// dropped.
var ErrClientPolicies = errors.New("the azcosmos client was built without the change feed pipeline policies this read needs " +
	"(x-ms-start-epk headers or the all-versions mode); build it with changefeed.ClientOptions")

// ClientConfig configures FromClient.
type ClientConfig struct {
	// LeasesOnly: see Config.LeasesOnly.
	LeasesOnly bool
	// Logger receives warnings (default: discard).
	Logger *slog.Logger
}

// FromClient returns an Account over client, an azcosmos client the caller built and keeps
// owning: Close leaves it open. It does no I/O. The client of an Account NewAccount built (and
// did not close yet) gives a view of that Account, with all it can do.
//
// Such an account lists partitions through the SDK alone (ReadFeedRanges, and one change-feed
// read from now of each range it has not seen, whose session token names the partition), since
// cfp cannot sign its own requests without the client's credential; the Parents of the
// partitions it returns are only those this Container listed before. Reads that need PerCallPolicies fail with ErrClientPolicies when the client
// was built without them.
func FromClient(client *azcosmos.Client, cfg ClientConfig) (*Account, error) {
	if client == nil {
		return nil, errors.New("open account: the azcosmos client is nil")
	}
	u, err := url.Parse(client.Endpoint())
	if err != nil || u.Hostname() == "" {
		return nil, fmt.Errorf("open account: the client's endpoint %q is not a URL", client.Endpoint())
	}
	if v, ok := built.Load(client); ok {
		// A client cfp built: the account that built it lists partitions itself.
		o := v.(*Account)
		return &Account{
			client: o.client, endpoint: o.endpoint, host: o.host, log: o.log, meta: o.meta, opts: o.opts,
			leasesOnly: o.leasesOnly || cfg.LeasesOnly, view: true,
		}, nil
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := &Account{
		client: client, endpoint: client.Endpoint(), host: strings.ToLower(u.Hostname()),
		log: log, leasesOnly: cfg.LeasesOnly, borrowed: true,
	}
	if region, ok := RegionalHost(a.host); ok && !a.leasesOnly {
		a.log.Warn("the endpoint is a regional endpoint: lease ids embed the endpoint host, so processors started through it write a lease set separate from the global endpoint's; use the global endpoint with PreferredRegions instead",
			"host", a.host, "region", region)
	}
	return a, nil
}

// policyProbe records, for one ReadPage call on a borrowed client, whether cfp's header policies
// ran (they set applied when they add their headers).
type policyProbe struct{ applied bool }

type policyProbeKey struct{}

// markApplied tells the ReadPage call of req's context that a cfp policy added its headers.
func markApplied(ctx context.Context) {
	if p, ok := ctx.Value(policyProbeKey{}).(*policyProbe); ok {
		p.applied = true
	}
}

// clientPartitions lists the live partitions of an account opened with FromClient: the SDK's
// feed ranges, each named by the partition id in the session token of a one-item read from now
// (cached by range: a partition's id and range never change). When a read shows that the SDK's
// ranges were stale (it followed a split), the listing starts again.
func (c *Container) clientPartitions(ctx context.Context) ([]feed.Partition, error) {
	op := "list partitions of " + c.path()
	for attempt := 0; ; attempt++ {
		frs, err := c.client.ReadFeedRanges(ctx, nil)
		if err != nil {
			return nil, translate(err, opInfo{op: op, missing: "container " + c.path(), rbacAction: rbacReadMetadata})
		}
		ranges := make([]pkRange, 0, len(frs))
		stale := false
		for _, fr := range frs {
			rng := leases.Range{Min: fr.MinInclusive, Max: fr.MaxExclusive}.Normal()
			id, err := c.rangeID(ctx, rng)
			if errors.Is(err, errStaleRanges) && attempt < 3 {
				stale = true
				break
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w", op, err)
			}
			ranges = append(ranges, pkRange{ID: id, MinInclusive: rng.Min, MaxExclusive: rng.Max})
		}
		if !stale {
			return livePartitions(c.withSeenParents(ranges))
		}
	}
}

// errStaleRanges: a feed range no longer is one partition.
var errStaleRanges = errors.New("the partition key ranges changed while they were listed")

// withSeenParents fills in the Parents of each range from the partitions this Container saw
// before (the cache of rangeID): a partition seen earlier that is no longer live and overlaps
// the range is its parent (a split parent, or one of the partitions merged into it). A parent
// this process never saw stays unknown.
func (c *Container) withSeenParents(live []pkRange) []pkRange {
	c.mu.Lock()
	defer c.mu.Unlock()
	isLive := map[string]bool{}
	for _, r := range live {
		isLive[r.ID] = true
	}
	for i, r := range live {
		rng := leases.Range{Min: r.MinInclusive, Max: r.MaxExclusive}
		for seen, id := range c.ids {
			if !isLive[id] && seen.Overlaps(rng) && !slices.Contains(live[i].Parents, id) {
				live[i].Parents = append(live[i].Parents, id)
			}
		}
		slices.Sort(live[i].Parents)
	}
	return live
}

// rangeID returns the id of the partition whose range is rng, from the cache or from the session
// token of a one-item change-feed read of rng from now.
func (c *Container) rangeID(ctx context.Context, rng leases.Range) (string, error) {
	c.mu.Lock()
	id, ok := c.ids[rng]
	c.mu.Unlock()
	if ok {
		return id, nil
	}
	info, err := c.Info(ctx)
	if err != nil {
		return "", err
	}
	star := "*"
	tok, err := json.Marshal(compositeToken{Version: 1, ResourceID: info.ContainerRID,
		Ranges: []compositeRange{{MinInclusive: rng.Min, MaxExclusive: rng.Max, ContinuationToken: &star}}})
	if err != nil {
		return "", err
	}
	tokStr := string(tok)
	resp, err := c.client.ReadChangeFeed(ctx, &azcosmos.ChangeFeedOptions{MaxItemCount: 1, Continuation: &tokStr})
	if err != nil {
		return "", translate(err, opInfo{op: "read change feed of " + c.path(), missing: "container " + c.path(), rbacAction: rbacReadChangeFeed})
	}
	var got compositeToken
	if err := json.Unmarshal([]byte(resp.ContinuationToken), &got); err != nil {
		return "", fmt.Errorf("decode the sdk continuation: %w", err)
	}
	if len(got.Ranges) != 1 || !rng.Equal(leases.Range{Min: got.Ranges[0].MinInclusive, Max: got.Ranges[0].MaxExclusive}) {
		return "", errStaleRanges
	}
	if resp.RawResponse == nil {
		return "", fmt.Errorf("range %s: the change feed response has no headers", rng)
	}
	id, _, ok = parseSessionToken(resp.RawResponse.Header.Get("x-ms-session-token"))
	if !ok {
		return "", fmt.Errorf("range %s: the change feed response has no session token naming its partition", rng)
	}
	c.mu.Lock()
	if c.ids == nil {
		c.ids = map[leases.Range]string{}
	}
	c.ids[rng] = id
	c.mu.Unlock()
	return id, nil
}
