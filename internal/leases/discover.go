package leases

import (
	"slices"
	"strings"
	"time"
)

// ProcessorInfo describes one lease prefix found in a lease container: one processor (or
// estimator) deployment.
type ProcessorInfo struct {
	// Prefix is the lease prefix "<processor><host>_<db>_<container>".
	Prefix string
	// Processor is the processor name when the host could be told apart ("" otherwise: the name
	// is glued to the account name; see ProcessorName).
	Processor string
	// ProcessorHost is the prefix without its database and container parts: the processor
	// name followed by the account host.
	ProcessorHost string
	// Database and Container are the monitored container's identifiers as the prefix holds them.
	Database, Container string
	// ByName is true when Database and Container look like names rather than resource ids
	// (Java's PK-range processor).
	ByName bool
	// Family is the family of most of the leases ("" without leases); Families counts each.
	Family   Family
	Families map[Family]int
	// Leases is the number of lease documents that decode as leases; Invalid the number that
	// do not.
	Leases, Invalid int
	// Owners are the distinct non-empty owners, sorted.
	Owners []string
	// LastActivity is the newest lease timestamp.
	LastActivity time.Time
	// HasInfo and HasLock report the .info and .lock markers.
	HasInfo, HasLock bool
	// Hosts are the presence records of cfp hosts (markers, not leases), sorted by instance,
	// expired ones included.
	Hosts []Host
}

// Monitored names a monitored container by the identifiers a prefix may end with: its database
// and container names (Java's PK-range processor) or resource ids (.NET and Java EPK).
type Monitored struct {
	Database, Container string
}

// Discover groups every lease and marker document of a lease container by prefix, sorted by
// prefix; cfp's host presence records count as markers. Documents that are neither are
// ignored. A prefix is split into processor, host, database and container at its last two
// underscores, unless it ends with "_<database>_<container>" of one of known (or holds
// "_<database>_" when known names only the database): names may contain underscores, rids
// never do.
func Discover(docs []Document, known ...Monitored) []ProcessorInfo {
	byPrefix := map[string]*ProcessorInfo{}
	get := func(prefix string) *ProcessorInfo {
		p, ok := byPrefix[prefix]
		if !ok {
			p = newProcessorInfo(prefix, known...)
			byPrefix[prefix] = p
		}
		return p
	}
	for _, d := range docs {
		id := d.ID
		if id == "" {
			if o, err := parseObject(d.Body); err == nil {
				id, _ = o.str(fID)
			}
		}
		if strings.Contains(id, hostInfix) {
			if h, err := DecodeHost(Document{ID: id, PK: d.PK, ETag: d.ETag, Body: d.Body}); err == nil {
				p := get(h.Prefix)
				p.Hosts = append(p.Hosts, h)
				continue
			}
		}
		if prefix, kind, ok := markerPrefix(id); ok {
			if kind == "info" {
				get(prefix).HasInfo = true
			} else {
				get(prefix).HasLock = true
			}
			continue
		}
		prefix, _, ok := SplitID(id)
		if !ok {
			continue
		}
		p := get(prefix)
		l, err := Decode(d)
		if err != nil {
			p.Invalid++
			continue
		}
		p.Leases++
		p.Families[l.Family]++
		if l.Owner != "" && !slices.Contains(p.Owners, l.Owner) {
			p.Owners = append(p.Owners, l.Owner)
		}
		if l.Timestamp.After(p.LastActivity) {
			p.LastActivity = l.Timestamp
		}
	}
	out := make([]ProcessorInfo, 0, len(byPrefix))
	for _, p := range byPrefix {
		slices.Sort(p.Owners)
		slices.SortFunc(p.Hosts, func(a, b Host) int { return strings.Compare(a.Instance, b.Instance) })
		for f, n := range p.Families {
			if n > p.Families[p.Family] || (n == p.Families[p.Family] && f < p.Family) {
				p.Family = f
			}
		}
		out = append(out, *p)
	}
	slices.SortFunc(out, func(a, b ProcessorInfo) int { return strings.Compare(a.Prefix, b.Prefix) })
	return out
}

// localHosts are account hosts that can be recognised at the end of a prefix.
var localHosts = []string{"localhost", "127.0.0.1", "host.docker.internal", "[::1]"}

func newProcessorInfo(prefix string, known ...Monitored) *ProcessorInfo {
	p := &ProcessorInfo{Prefix: prefix, Families: map[Family]int{}}
	for _, k := range known {
		if k.Database == "" {
			continue
		}
		if k.Container != "" {
			if rest, ok := strings.CutSuffix(prefix, "_"+k.Database+"_"+k.Container); ok && rest != "" {
				return p.named(rest, k.Database, k.Container)
			}
			continue
		}
		// Only the database is known: the container is what follows it.
		if i := strings.LastIndex(prefix, "_"+k.Database+"_"); i > 0 && i+len(k.Database)+2 < len(prefix) {
			return p.named(prefix[:i], k.Database, prefix[i+len(k.Database)+2:])
		}
	}
	i := strings.LastIndexByte(prefix, '_')
	if i < 0 {
		p.ProcessorHost = prefix
		return p
	}
	p.Container = prefix[i+1:]
	rest := prefix[:i]
	if j := strings.LastIndexByte(rest, '_'); j >= 0 {
		p.Database, rest = rest[j+1:], rest[:j]
	}
	p.ProcessorHost = rest
	p.ByName = !looksLikeRid(p.Database) || !looksLikeRid(p.Container)
	p.Processor = processorOnLocalHost(rest)
	return p
}

// named fills p from a prefix split into "<processor><host>", database and container.
func (p *ProcessorInfo) named(processorHost, database, container string) *ProcessorInfo {
	p.Database, p.Container, p.ProcessorHost = database, container, processorHost
	p.ByName = !looksLikeRid(database) || !looksLikeRid(container)
	p.Processor = processorOnLocalHost(processorHost)
	return p
}

// processorOnLocalHost returns the processor name of "<processor><host>" when host is a local
// host cfp recognises (case-insensitively: Java keeps the host's case), else "".
func processorOnLocalHost(processorHost string) string {
	for _, h := range localHosts {
		if len(processorHost) >= len(h) && strings.EqualFold(processorHost[len(processorHost)-len(h):], h) {
			return processorHost[:len(processorHost)-len(h)]
		}
	}
	return ""
}

// ProcessorName returns the processor name of prefix given the account host the processor
// used, and whether prefix is built on that host.
func ProcessorName(prefix, host string, known ...Monitored) (string, bool) {
	p := newProcessorInfo(prefix, known...)
	if name, ok := strings.CutSuffix(p.ProcessorHost, host); ok {
		return name, true
	}
	// Java keeps the endpoint host's case; .NET and cfp lower-case it.
	if n, h := len(p.ProcessorHost), len(host); n >= h && strings.EqualFold(p.ProcessorHost[n-h:], host) {
		return p.ProcessorHost[:n-h], true
	}
	return "", false
}

// looksLikeRid reports whether s is shaped like a Cosmos resource id: Base64 of 4 (database) or
// 8 (container) bytes.
func looksLikeRid(s string) bool {
	if len(s) != 8 && len(s) != 12 {
		return false
	}
	if !strings.HasSuffix(s, "=") {
		return false
	}
	for _, c := range strings.TrimRight(s, "=") {
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '-') {
			return false
		}
	}
	return true
}

// Nearest orders the names by their edit distance to name, nearest first (ties in the order
// given), without duplicates. A command given a processor that has no leases names the
// processors it found this way, so a typo shows its correction first.
func Nearest(name string, names []string) []string {
	type cand struct {
		s string
		d int
	}
	var cs []cand
	for _, s := range names {
		if !slices.ContainsFunc(cs, func(c cand) bool { return c.s == s }) {
			cs = append(cs, cand{s, editDistance(strings.ToLower(name), strings.ToLower(s))})
		}
	}
	slices.SortStableFunc(cs, func(a, b cand) int { return a.d - b.d })
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.s
	}
	return out
}

// Suggest returns the name of names that name is most likely a typo of, for a "did you mean"
// hint: the nearest one (as Nearest orders them) when it differs from name by at most two
// edits, or a quarter of name's length for long names, or when one is a prefix of the other
// (case-insensitive). It reports false when name is among names or nothing is close.
func Suggest(name string, names []string) (string, bool) {
	if name == "" || slices.Contains(names, name) {
		return "", false
	}
	near := Nearest(name, names)
	if len(near) == 0 {
		return "", false
	}
	lower, best := strings.ToLower(name), strings.ToLower(near[0])
	if editDistance(lower, best) <= max(2, len([]rune(name))/4) || strings.HasPrefix(best, lower) || strings.HasPrefix(lower, best) {
		return near[0], true
	}
	return "", false
}

// editDistance is the Levenshtein distance between a and b, in runes.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
