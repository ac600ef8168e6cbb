package emulator

import (
	"encoding/json"
	"math"
	"strings"
	"sync"
)

// Request charges (x-ms-request-charge) modelled on the service's published figures, so that the
// RU a client measures against the emulator mean something:
//
//   - point reads and writes grow with the document's size along the service's published
//     table of a default-indexed document of 1 KB to 2 MB ("Understand request unit
//     consumption", learn.microsoft.com/azure/cosmos-db/understand-request-unit-consumption):
//     a 1 KB read 1 RU, 16 KB 1.67, 2 MB 291.8; a 1 KB write 4.95, 16 KB 9.52, 2 MB 1250;
//     between two rows the charge is interpolated linearly, below 1 KB it is the 1 KB row's;
//   - a write also grows with the number of indexed properties (every scalar the container's
//     indexing policy indexes, array elements included): the table's figure stands for
//     RefIndexedTerms of them, and each one more or less adds or saves PerIndexedTerm, down to
//     half the table's figure (a container that indexes nothing);
//   - a replace (and an upsert or patch that replaces) removes the old version's index terms
//     and writes the new one's: ReplaceFactor times the create of the same document (the
//     capacity planner's 1 KB figures, 5.71 to insert and 10.67 to replace); a delete costs a
//     create of the deleted document;
//   - a query page costs QueryBase plus, for each document it loads, PerDocumentLoaded plus
//     what its size adds to a point read beyond the first KB; a change-feed page the same with
//     FeedPageBase; a change-feed read with nothing new (304) costs FeedEmpty;
//   - metadata reads and failed requests cost Meta.
//
// ChargeRead, ChargeWrite and ChargeQueryPage are exported for harnesses that model the
// service's bill without the emulator (bench/scalebench).
const (
	RefIndexedTerms   = 20
	PerIndexedTerm    = 0.038
	ReplaceFactor     = 1.87
	QueryBase         = 2.79
	FeedPageBase      = 2.0
	FeedEmpty         = 1.0
	PerDocumentLoaded = 0.05
	Meta              = 1.0
)

// sizeCharges is the service's published table: document size in KB, point read, write.
var sizeCharges = [...]struct{ kb, read, write float64 }{
	{1, 1.00, 4.95}, {2, 1.04, 6.29}, {4, 1.14, 6.67}, {8, 1.33, 7.04}, {16, 1.67, 9.52},
	{32, 2.19, 11.23}, {64, 4.76, 22.67}, {128, 9.95, 48.19}, {256, 20.28, 98.29},
	{512, 40.95, 184.57}, {1024, 145.90, 625.00}, {2048, 291.80, 1250.00},
}

// bySize interpolates the table at size bytes; read selects the column.
func bySize(size int, read bool) float64 {
	kb := float64(size) / 1024
	col := func(i int) float64 {
		if read {
			return sizeCharges[i].read
		}
		return sizeCharges[i].write
	}
	if kb <= sizeCharges[0].kb {
		return col(0)
	}
	for i := 1; i < len(sizeCharges); i++ {
		if kb <= sizeCharges[i].kb {
			lo, hi := sizeCharges[i-1].kb, sizeCharges[i].kb
			return col(i-1) + (col(i)-col(i-1))*(kb-lo)/(hi-lo)
		}
	}
	last := len(sizeCharges) - 1
	return col(last) * kb / sizeCharges[last].kb
}

// round2 rounds a charge to two decimals, as the service reports them.
func round2(c float64) float64 { return math.Round(c*100) / 100 }

// ChargeRead is the charge of a point read of a document of size bytes.
func ChargeRead(size int) float64 { return round2(bySize(size, true)) }

// ChargeWrite is the charge of writing a document of size bytes with terms indexed
// properties; replace reports a replace (or an upsert or patch that replaced a document).
func ChargeWrite(size, terms int, replace bool) float64 {
	base := bySize(size, false)
	c := math.Max(base/2, base+PerIndexedTerm*float64(terms-RefIndexedTerms))
	if replace {
		c *= ReplaceFactor
	}
	return round2(c)
}

// ChargeQueryPage is the charge of a query page that loaded docs documents of bytes in all.
func ChargeQueryPage(docs, bytes int) float64 { return round2(QueryBase + loaded(docs, bytes)) }

// chargeFeedPage is the charge of a change-feed page of docs documents of bytes in all.
func chargeFeedPage(docs, bytes int) float64 { return round2(FeedPageBase + loaded(docs, bytes)) }

// loaded is what loading docs documents of bytes in all adds to a query or change-feed page:
// PerDocumentLoaded each, plus what their (average) size adds to a point read.
func loaded(docs, bytes int) float64 {
	if docs == 0 {
		return 0
	}
	return float64(docs) * (PerDocumentLoaded + bySize(bytes/docs, true) - sizeCharges[0].read)
}

// indexPolicy is the part of a container's indexing policy that decides which properties a
// write indexes.
type indexPolicy struct {
	none     bool
	included []indexPath
	excluded []indexPath
}

// indexPath is one path of an indexing policy: its segments, and whether it ends in /* (the
// subtree) rather than /? (the scalar at the path).
type indexPath struct {
	segs    []string
	subtree bool
}

func parseIndexPath(p string) indexPath {
	p = strings.TrimPrefix(p, "/")
	var ip indexPath
	switch {
	case p == "*":
		return indexPath{subtree: true}
	case strings.HasSuffix(p, "/*"):
		ip.subtree, p = true, strings.TrimSuffix(p, "/*")
	case strings.HasSuffix(p, "/?"):
		p = strings.TrimSuffix(p, "/?")
	}
	for _, s := range strings.Split(p, "/") {
		ip.segs = append(ip.segs, strings.Trim(s, `"`))
	}
	return ip
}

// match reports whether ip covers the scalar at path, and how precisely (the number of
// segments, a scalar path one more than a subtree of the same segments); -1 when it does not.
func (ip indexPath) match(path []string) int {
	if len(ip.segs) > len(path) || (!ip.subtree && len(ip.segs) != len(path)) {
		return -1
	}
	for i, s := range ip.segs {
		if s != path[i] {
			return -1
		}
	}
	if ip.subtree {
		return 2 * len(ip.segs)
	}
	return 2*len(ip.segs) + 1
}

// indexes reports whether the policy indexes the scalar at path: the most precise matching
// path decides, excluded winning a tie.
func (p *indexPolicy) indexes(path []string) bool {
	if p.none {
		return false
	}
	best := func(list []indexPath) int {
		b := -1
		for _, ip := range list {
			b = max(b, ip.match(path))
		}
		return b
	}
	inc := best(p.included)
	return inc >= 0 && inc > best(p.excluded)
}

// indexPolicies caches the parsed indexing policy by container definition.
var indexPolicies sync.Map // string(collState.Props) -> *indexPolicy

// policyOf returns the indexing policy of a container definition (its props JSON).
func policyOf(props []byte) *indexPolicy {
	if p, ok := indexPolicies.Load(string(props)); ok {
		return p.(*indexPolicy)
	}
	var def struct {
		IndexingPolicy struct {
			IndexingMode  string `json:"indexingMode"`
			IncludedPaths []struct {
				Path string `json:"path"`
			} `json:"includedPaths"`
			ExcludedPaths []struct {
				Path string `json:"path"`
			} `json:"excludedPaths"`
		} `json:"indexingPolicy"`
	}
	_ = json.Unmarshal(props, &def)
	ip := def.IndexingPolicy
	p := &indexPolicy{none: strings.EqualFold(ip.IndexingMode, "none")}
	for _, x := range ip.IncludedPaths {
		p.included = append(p.included, parseIndexPath(x.Path))
	}
	for _, x := range ip.ExcludedPaths {
		p.excluded = append(p.excluded, parseIndexPath(x.Path))
	}
	if len(ip.IncludedPaths) == 0 && len(ip.ExcludedPaths) == 0 && !p.none {
		p.included = []indexPath{{subtree: true}}
	}
	indexPolicies.Store(string(props), p)
	return p
}

// indexedTerms counts the scalars of doc (array elements included, system properties not)
// that p indexes.
func (p *indexPolicy) indexedTerms(doc map[string]any) int {
	if p.none {
		return 0
	}
	n := 0
	var walk func(v any, path []string)
	walk = func(v any, path []string) {
		switch x := v.(type) {
		case map[string]any:
			for k, c := range x {
				walk(c, append(path, k))
			}
		case []any:
			for _, c := range x {
				walk(c, append(path, "[]"))
			}
		default:
			if p.indexes(path) {
				n++
			}
		}
	}
	for k, v := range doc {
		if isSystemProp(k) {
			continue
		}
		walk(v, []string{k})
	}
	return n
}

func isSystemProp(k string) bool {
	for _, s := range systemProps {
		if k == s {
			return true
		}
	}
	return false
}
