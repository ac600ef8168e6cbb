package leases

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Partition is a live physical partition of the monitored container, as the hygiene checks
// need it (feed.Partition carries the same facts).
type Partition struct {
	ID      string
	Range   Range
	Parents []string
}

// FindingKind names a lease-set problem.
type FindingKind string

// Finding kinds reported by Check.
const (
	FindingGap           FindingKind = "gap"                     // keys no lease covers
	FindingOverlap       FindingKind = "overlap"                 // keys two leases cover
	FindingDuplicate     FindingKind = "duplicate-token"         // one LeaseToken in several documents
	FindingOrphanParent  FindingKind = "orphan-parent"           // a split parent next to its children
	FindingPendingSplit  FindingKind = "pending-split"           // a lease over a partition that is gone
	FindingStaleOwner    FindingKind = "stale-owner"             // an owner that stopped renewing
	FindingUnknownRange  FindingKind = "unknown-range"           // a lease whose range is not known
	FindingNoInfo        FindingKind = "no-info"                 // leases without the .info marker
	FindingStaleLock     FindingKind = "stale-lock"              // a bootstrap lock nobody removed
	FindingMixedFamilies FindingKind = "mixed-families"          // .NET and Java EPK leases share a prefix
	FindingMixedModes    FindingKind = "mixed-modes"             // leases of different change-feed modes
	FindingRefusedMode   FindingKind = "refused-mode"            // a Mode .NET refuses to start on
	FindingUnreadable    FindingKind = "unreadable-continuation" // a continuation cfp cannot decode
	FindingFutureTime    FindingKind = "future-timestamp"        // a lease timestamp ahead of now
	FindingBeyondLatest  FindingKind = "beyond-latest-lsn"       // a continuation past its partition's latest LSN
	FindingTimings       FindingKind = "timing-mismatch"         // hosts that renew at different paces (WithHosts)
)

// FutureTolerance is how far a lease timestamp may lie ahead of the checking clock before
// Check reports it: more than usual clock skew between hosts.
const FutureTolerance = time.Minute

// Severity of a finding.
type Severity string

// Severities, from the one that breaks processing to the one that only informs.
const (
	SeverityError   Severity = "error"
	SeverityWarning Severity = "warning"
	SeverityInfo    Severity = "info"
)

// Finding is one problem found by Check.
type Finding struct {
	Kind     FindingKind
	Severity Severity
	// Tokens are the lease tokens concerned (sorted), if any.
	Tokens []string
	// Range is the key range concerned, if any.
	Range *Range
	// Owner is the owner concerned (stale-owner).
	Owner string
	// Message explains the finding in one sentence.
	Message string
}

type checkConfig struct {
	partitions []Partition
	hosts      []Host
	hostsKnown bool
	markers    bool
	hasInfo    bool
	lockTime   time.Time
	lockTTL    time.Duration
}

// CheckOption adds facts that Check cannot learn from the leases alone.
type CheckOption func(*checkConfig)

// WithPartitions tells Check the live partitions of the monitored container, which resolves the
// ranges of PK-range leases without FeedRange and finds leases pending a split and orphan parents.
func WithPartitions(ps []Partition) CheckOption {
	return func(c *checkConfig) { c.partitions = ps }
}

// WithMarkers tells Check whether the .info marker exists and when the .lock marker was last
// written (zero: no lock).
func WithMarkers(hasInfo bool, lockTime time.Time) CheckOption {
	return func(c *checkConfig) { c.markers, c.hasInfo, c.lockTime = true, hasInfo, lockTime }
}

// WithHosts tells Check the cfp presence records of the prefix, which tell cfp hosts from
// .NET and Java hosts (they keep none): Check then compares how fresh each kind keeps its
// leases (FindingTimings).
func WithHosts(hs []Host) CheckOption {
	return func(c *checkConfig) { c.hosts, c.hostsKnown = hs, true }
}

// WithLockTTL tells Check the .lock marker's ttl (its "ttl" field; default DefaultLockTTL). A
// lock still there after its ttl is in a lease container without time to live: it never
// expires, and every processor start waits for it.
func WithLockTTL(ttl time.Duration) CheckOption {
	return func(c *checkConfig) { c.lockTTL = ttl }
}

// ranged is a lease with its resolved range.
type ranged struct {
	l *Lease
	r Range
}

// Check finds the problems of one prefix's lease set at now: gaps and overlaps in the coverage of
// ["","FF"), duplicate tokens, orphan parents and leases pending a split (with WithPartitions),
// owners that stopped renewing within expiration, a missing .info or stale .lock (with
// WithMarkers), and families or modes that must not be mixed. Findings are sorted by severity.
func Check(ls []*Lease, now time.Time, expiration time.Duration, opts ...CheckOption) []Finding {
	var cfg checkConfig
	for _, o := range opts {
		o(&cfg)
	}
	var out []Finding
	add := func(f Finding) {
		slices.Sort(f.Tokens)
		out = append(out, f)
	}
	partByID := map[string]Partition{}
	for _, p := range cfg.partitions {
		partByID[p.ID] = p
	}

	// Duplicates.
	byToken := map[string][]*Lease{}
	var tokens []string
	for _, l := range ls {
		if _, ok := byToken[l.Token]; !ok {
			tokens = append(tokens, l.Token)
		}
		byToken[l.Token] = append(byToken[l.Token], l)
	}
	for _, t := range tokens {
		if n := len(byToken[t]); n > 1 {
			add(Finding{Kind: FindingDuplicate, Severity: SeverityError, Tokens: []string{t},
				Message: fmt.Sprintf("lease token %s is in %d documents; .NET balancing fails on duplicates", t, n)})
		}
	}

	// Ranges.
	var known []ranged
	unknown := 0
	for _, t := range tokens {
		l := byToken[t][0]
		r, ok := l.Range, l.HasRange()
		if !ok && l.NamesPartition() {
			if p, found := partByID[l.Token]; found {
				r, ok = p.Range, true
			}
		}
		if !ok {
			unknown++
			msg := "lease has no range; pass the live partitions to resolve it"
			if cfg.partitions != nil {
				msg = "lease has no range and its token is not a live partition id"
			}
			add(Finding{Kind: FindingUnknownRange, Severity: SeverityWarning, Tokens: []string{t}, Message: msg})
			continue
		}
		known = append(known, ranged{l, r})
	}
	slices.SortStableFunc(known, func(a, b ranged) int {
		if c := CompareEPK(a.r.Min, b.r.Min); c != 0 {
			return c
		}
		return CompareEPK(a.r.Max, b.r.Max)
	})

	// Overlaps: each lease against the one reaching furthest before it.
	var far ranged
	for i := 1; i < len(known); i++ {
		if i == 1 || CompareEPK(known[i-1].r.Max, far.r.Max) > 0 {
			far = known[i-1]
		}
		cur := known[i]
		if CompareEPK(cur.r.Min, far.r.Max) < 0 {
			ov := Range{Min: cur.r.Min, Max: minEPK(cur.r.Max, far.r.Max)}
			add(Finding{Kind: FindingOverlap, Severity: SeverityError, Tokens: []string{far.l.Token, cur.l.Token}, Range: &ov,
				Message: fmt.Sprintf("leases %s and %s both cover %s; changes there are processed twice", far.l.Token, cur.l.Token, ov)})
		}
	}

	// Gaps, only when every range is known.
	if unknown == 0 && len(ls) > 0 {
		cursor := FullRange.Min
		for _, k := range known {
			if CompareEPK(k.r.Min, cursor) > 0 {
				g := Range{Min: cursor, Max: k.r.Min}
				add(Finding{Kind: FindingGap, Severity: SeverityError, Range: &g,
					Message: fmt.Sprintf("no lease covers %s; changes there are never processed", g)})
			}
			cursor = maxEPK(cursor, k.r.Max)
		}
		if CompareEPK(cursor, FullRange.Max) < 0 {
			g := Range{Min: cursor, Max: FullRange.Max}
			add(Finding{Kind: FindingGap, Severity: SeverityError, Range: &g,
				Message: fmt.Sprintf("no lease covers %s; changes there are never processed", g)})
		}
	}

	// Splits and orphan parents, against the live partitions.
	if cfg.partitions != nil {
		for _, k := range known {
			gone := false
			switch {
			case k.l.NamesPartition():
				_, live := partByID[k.l.Token]
				gone = !live
			default:
				n := 0
				for _, p := range cfg.partitions {
					if p.Range.Overlaps(k.r) {
						n++
					}
				}
				gone = n > 1
			}
			if !gone {
				continue
			}
			var children []string
			for _, o := range known {
				if o.l != k.l && o.l.Token != k.l.Token && o.r.Within(k.r) {
					children = append(children, o.l.Token)
				}
			}
			if len(children) > 0 {
				add(Finding{Kind: FindingOrphanParent, Severity: SeverityError, Tokens: append([]string{k.l.Token}, children...), Range: &k.r,
					Message: fmt.Sprintf("lease %s was split into %s but still exists; delete it", k.l.Token, strings.Join(children, ", "))})
				continue
			}
			add(Finding{Kind: FindingPendingSplit, Severity: SeverityInfo, Tokens: []string{k.l.Token}, Range: &k.r,
				Message: fmt.Sprintf("lease %s spans a partition that split or merged; its owner splits it on the next read", k.l.Token)})
		}
	}

	// Owners.
	for _, l := range ls {
		if l.State(now, expiration) == StateExpired {
			age := now.Sub(l.Timestamp).Round(time.Second)
			add(Finding{Kind: FindingStaleOwner, Severity: SeverityWarning, Tokens: []string{l.Token}, Owner: l.Owner,
				Message: fmt.Sprintf("lease %s: owner %s has not renewed for %s (expiry %s)", l.Token, l.Owner, age, expiration)})
		}
	}

	if cfg.hostsKnown {
		if f, ok := timingMismatch(ls, cfg.hosts, now, expiration); ok {
			add(f)
		}
		if f, ok := expirationsDiffer(cfg.hosts, now, expiration); ok {
			add(f)
		}
	}

	// Markers.
	if cfg.markers {
		if !cfg.hasInfo && len(ls) > 0 {
			add(Finding{Kind: FindingNoInfo, Severity: SeverityWarning,
				Message: "leases exist but the .info marker does not; the next processor start bootstraps again and may add overlapping leases"})
		}
		ttl := cfg.lockTTL
		if ttl <= 0 {
			ttl = DefaultLockTTL
		}
		if !cfg.lockTime.IsZero() && now.Sub(cfg.lockTime) > ttl {
			add(Finding{Kind: FindingStaleLock, Severity: SeverityWarning,
				Message: fmt.Sprintf("the .lock marker is %s old, past its ttl of %s: the lease container has no time to live, so the lock never expires and every processor start waits for it (unless a bootstrap is still running)", now.Sub(cfg.lockTime).Round(time.Second), ttl)})
		}
	}

	// Modes .NET refuses, continuations nobody can read, timestamps from the future.
	for _, l := range ls {
		if m, refused := l.RefusedMode(); refused {
			add(Finding{Kind: FindingRefusedMode, Severity: SeverityError, Tokens: []string{l.Token},
				Message: fmt.Sprintf("lease %s has Mode %q, which .NET refuses to start on (%s); set it to %q or %q", l.Token, m, RefusedModeMessage(m, ModeIncremental), ModeIncremental, ModeFullFidelity)})
		}
		if l.StateError != nil {
			add(Finding{Kind: FindingUnreadable, Severity: SeverityError, Tokens: []string{l.Token},
				Message: fmt.Sprintf("lease %s: its continuation cannot be decoded (%v); cfp never processes or rewrites it", l.Token, l.StateError)})
		}
		if d := l.Timestamp.Sub(now); d > FutureTolerance {
			add(Finding{Kind: FindingFutureTime, Severity: SeverityError, Tokens: []string{l.Token}, Owner: l.Owner,
				Message: fmt.Sprintf("lease %s: its timestamp %s lies %s in the future; every SDK counts it as owned until then plus the expiration", l.Token, l.Timestamp.UTC().Format(time.RFC3339), d.Round(time.Second))})
		}
	}

	// Families and modes.
	families := map[Family][]string{}
	modes := map[string][]string{}
	for _, l := range ls {
		families[l.Family] = append(families[l.Family], l.Token)
		modes[DotNetMode(l.Mode)] = append(modes[DotNetMode(l.Mode)], l.Token)
	}
	_, hasJava := families[FamilyJavaEPK]
	if hasJava && (len(families[FamilyDotNetV0]) > 0 || len(families[FamilyDotNetV1]) > 0) {
		add(Finding{Kind: FindingMixedFamilies, Severity: SeverityError, Tokens: families[FamilyJavaEPK],
			Message: "Java EPK and .NET leases share this prefix; neither SDK can read the other's leases"})
	}
	if len(modes) > 1 {
		add(Finding{Kind: FindingMixedModes, Severity: SeverityError, Tokens: modes[ModeFullFidelity],
			Message: "leases of incremental and all-versions-and-deletes processors share this prefix; processors refuse to start"})
	}

	rank := map[Severity]int{SeverityError: 0, SeverityWarning: 1, SeverityInfo: 2}
	slices.SortStableFunc(out, func(a, b Finding) int { return rank[a.Severity] - rank[b.Severity] })
	return out
}

// RefusedModeMessage is the message .NET's VerifyChangeFeedProcessorMode throws when a
// processor of processorMode starts on a lease whose Mode is leaseMode.
func RefusedModeMessage(leaseMode, processorMode string) string {
	return fmt.Sprintf("Switching ChangeFeedMode %s to %s is not allowed.", leaseMode, processorMode)
}

func minEPK(a, b string) string {
	if CompareEPK(a, b) <= 0 {
		return a
	}
	return b
}

func maxEPK(a, b string) string {
	if CompareEPK(a, b) >= 0 {
		return a
	}
	return b
}

// BeyondLatest returns an error finding for every lease whose continuation is an LSN above its
// partition's latest LSN (latest maps lease tokens to it; leases missing from it or with 0 are
// not judged). Such a lease skips every change up to its continuation once they are written,
// while the lag looks like nothing is pending.
func BeyondLatest(ls []*Lease, latest map[string]int64) []Finding {
	var out []Finding
	for _, l := range ls {
		lsn, ok := ParseLSN(l.Continuation)
		top := latest[l.Token]
		if !ok || top <= 0 || lsn <= top {
			continue
		}
		out = append(out, Finding{Kind: FindingBeyondLatest, Severity: SeverityError, Tokens: []string{l.Token},
			Message: fmt.Sprintf("continuation LSN %d is past the partition's latest LSN %d: the next %d changes written there would be skipped", lsn, top, lsn-top)})
	}
	return out
}

// timingMismatch compares how fresh the cfp hosts and the other hosts keep their leases. A .NET
// or Java host writes its expiration nowhere (a cfp host does, see expirationsDiffer), so
// whether it agrees with the others cannot be seen; how often a host writes its leases shows in
// their age: a live lease is younger than its owner's renew
// interval. A .NET or Java host renews every 17s by default (and expires leases after 60s,
// or less when configured so); a cfp host before issue 22 wrote an idle lease every 43-47s,
// which such a host with an expiration under about 48s takes as expired. So, when leases of
// a host without a cfp presence record are live, a live cfp lease older than the defaults'
// renew interval and than every lease of those hosts is reported: its owner renews less often
// than they do. One listing sees only ages; a cfp host that runs sees the others' renew
// intervals over several listings and matches them.
func timingMismatch(ls []*Lease, hosts []Host, now time.Time, expiration time.Duration) (Finding, bool) {
	cfp := map[string]bool{}
	for _, h := range hosts {
		if !h.Expired(now, expiration) {
			cfp[strings.ToLower(h.Instance)] = true
		}
	}
	threshold := DefaultRenewInterval
	var foreign []string
	for _, l := range ls {
		owner := strings.ToLower(strings.TrimSpace(l.Owner))
		if owner == "" || cfp[owner] || l.State(now, expiration) != StateOwned {
			continue
		}
		if !slices.Contains(foreign, l.Owner) {
			foreign = append(foreign, l.Owner)
		}
		threshold = max(threshold, now.Sub(l.Timestamp))
	}
	if len(foreign) == 0 {
		return Finding{}, false
	}
	var tokens, owners []string
	oldest := time.Duration(0)
	for _, l := range ls {
		owner := strings.ToLower(strings.TrimSpace(l.Owner))
		if !cfp[owner] || l.State(now, expiration) != StateOwned {
			continue
		}
		if age := now.Sub(l.Timestamp); age > threshold {
			tokens = append(tokens, l.Token)
			if !slices.Contains(owners, l.Owner) {
				owners = append(owners, l.Owner)
			}
			oldest = max(oldest, age)
		}
	}
	if len(tokens) == 0 {
		return Finding{}, false
	}
	slices.Sort(foreign)
	slices.Sort(owners)
	return Finding{Kind: FindingTimings, Severity: SeverityWarning, Tokens: tokens, Owner: strings.Join(owners, ","),
		Message: fmt.Sprintf("cfp host(s) %s last wrote %d lease(s) up to %s ago, while %s (no cfp presence record: .NET or Java) keep theirs under %s: a host whose lease expiration is shorter than that age takes them as expired; upgrade those cfp hosts (they then renew as often as the others) or give every host the same lease timings",
			strings.Join(owners, ", "), len(tokens), oldest.Round(time.Second), strings.Join(foreign, ", "), threshold.Round(time.Second))}, true
}

// expirationsDiffer reports live cfp hosts whose presence records carry different lease
// expirations (cfpExpiration): each such host keeps the leases it holds younger than the
// shortest of them (feed's mixed keep-alive), so none takes another's as expired, but the
// hosts count a dead host's leases free after different times. Informational: a host that
// writes its expiration adapts to the others'.
func expirationsDiffer(hosts []Host, now time.Time, expiration time.Duration) (Finding, bool) {
	byExp := map[time.Duration][]string{}
	for _, h := range hosts {
		if h.Expiration > 0 && !h.Expired(now, expiration) {
			byExp[h.Expiration] = append(byExp[h.Expiration], h.Instance)
		}
	}
	if len(byExp) < 2 {
		return Finding{}, false
	}
	exps := slices.Sorted(maps.Keys(byExp))
	var parts []string
	for _, e := range exps {
		names := byExp[e]
		slices.Sort(names)
		parts = append(parts, fmt.Sprintf("%s (%s)", e, strings.Join(names, ", ")))
	}
	return Finding{Kind: FindingTimings, Severity: SeverityInfo,
		Message: fmt.Sprintf("cfp hosts count different lease expirations: %s; each keeps the leases it holds younger than the shortest, %s, so none takes another's lease as expired, but a dead host's leases are free sooner for some hosts than for others; give every host the same --lease-expiration to make them agree",
			strings.Join(parts, "; "), exps[0])}, true
}
