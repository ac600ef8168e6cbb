package emulator

import (
	"bytes"
	"container/heap"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/cfp-dev/cfp/emulator/query"
	"github.com/cfp-dev/cfp/internal/epk"
)

// writeQueryPlan answers a query-plan request (x-ms-cosmos-is-query-plan-request) with the
// query's plan: what a client fanning it out over the partition key ranges must do to merge
// the results (TOP, ORDER BY, aggregates; docs/protocol-gateway.md, "Queries"). A query the
// emulator cannot plan correctly is refused, never answered with a plan that makes the client
// answer wrong.
func (e *Emulator) writeQueryPlan(w http.ResponseWriter, r *http.Request) {
	q, _, err := parseQuery(r)
	if err != nil {
		e.fail(w, err)
		return
	}
	plan, err := q.Plan()
	if err != nil {
		e.fail(w, refusal(err, ""))
		return
	}
	b, err := json.Marshal(plan)
	if err != nil {
		e.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, chargeMeta, b)
}

// msgNotSupported starts the message of every refusal of a query the emulator cannot answer
// right; it is always a 400.
const msgNotSupported = "not supported by cfp emulator: "

// refusal turns an error wrapping query.ErrUnsupported into the emulator's 400 refusal; other
// errors are returned as they are.
func refusal(err error, sql string) error {
	var ue *query.UnsupportedError
	if !errors.As(err, &ue) {
		return err
	}
	msg := msgNotSupported + ue.What
	if ue.Pos >= 0 && sql != "" {
		msg += fmt.Sprintf(" (at offset %d of query %q)", ue.Pos, sql)
	}
	return badRequest("%s", msg)
}

// writeNeedsQueryPlan answers a cross-partition query that the gateway cannot serve alone: 400
// with substatus 1004, and the query's plan as the error's additionalErrorInfo (a JSON string),
// which the SDKs read before they fetch a plan (the JS SDK switches to its plan pipeline only
// when it is there).
func writeNeedsQueryPlan(w http.ResponseWriter, plan *query.Plan) {
	info, _ := json.Marshal(plan)
	b, _ := json.Marshal(struct {
		Code                string `json:"code"`
		Message             string `json:"message"`
		AdditionalErrorInfo string `json:"additionalErrorInfo"`
	}{"BadRequest", msgNeedsQueryPlan, string(info)})
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set(hdrSubstatus, strconv.Itoa(substatusCrossPartitionQueryNotServable))
	w.WriteHeader(http.StatusBadRequest)
	_, _ = w.Write(b)
}

// querySpec is a query request body.
type querySpec struct {
	Query      string `json:"query"`
	Parameters []struct {
		Name  string          `json:"name"`
		Value json.RawMessage `json:"value"`
	} `json:"parameters"`
}

// parseQuery reads the query of r; a GET (read feed) is SELECT * FROM c.
func parseQuery(r *http.Request) (*query.Query, map[string]any, error) {
	spec := querySpec{Query: "SELECT * FROM c"}
	if r.Method == http.MethodPost {
		b, err := readBody(r)
		if err != nil {
			return nil, nil, err
		}
		if err := json.Unmarshal(b, &spec); err != nil {
			return nil, nil, badRequest("invalid query body: %v", err)
		}
	}
	q, err := query.Parse(spec.Query)
	if errors.Is(err, query.ErrUnsupported) {
		return nil, nil, refusal(err, spec.Query)
	}
	if err != nil {
		return nil, nil, badRequest("query %q: %v", spec.Query, err)
	}
	params := make(map[string]any, len(spec.Parameters))
	for _, p := range spec.Parameters {
		var v any
		if len(p.Value) > 0 {
			if err := json.Unmarshal(p.Value, &v); err != nil {
				return nil, nil, badRequest("invalid value of query parameter %s: %v", p.Name, err)
			}
		}
		params[p.Name] = v
	}
	if q, err = q.Bind(params); err != nil {
		return nil, nil, badRequest("query %q: %v", spec.Query, err)
	}
	return q, params, nil
}

// queryCont is the opaque query continuation: the document sequence number (the counter in
// its _rid) of the last result of an unordered query, or the offset into an ORDER BY result,
// plus the number of results returned so far (for TOP).
type queryCont struct {
	Seq      uint64 `json:"s,omitempty"`
	Offset   int    `json:"o,omitempty"`
	Returned int    `json:"n,omitempty"`
}

// Errors of the query rules the service's gateway applies; SDKs match on these texts.
const (
	msgCrossPartitionDisabled = "Cross partition query is required but disabled. Please set x-ms-documentdb-query-enablecrosspartition to true, specify x-ms-documentdb-partitionkey, or revise your query to avoid this exception."
	msgNeedsQueryPlan         = "The provided cross partition query can not be directly served by the gateway. This is a first chance (internal) exception that all newer clients will know how to handle gracefully. This exception is traced, but unless you see it bubble up as an exception (which only happens on older SDK clients), then you can safely ignore this message."
	msgInvalidContinuation    = "Invalid Continuation Token"
)

// substatusCrossPartitionQueryNotServable is the 400 substatus of msgNeedsQueryPlan.
const substatusCrossPartitionQueryNotServable = 1004

// Query headers.
const (
	hdrEnableCrossPartition = "x-ms-documentdb-query-enablecrosspartition"
	hdrPopulateQueryMetrics = "x-ms-documentdb-populatequerymetrics"
	hdrPopulateIndexMetrics = "x-ms-cosmos-populateindexmetrics"
	hdrQueryMetrics         = "x-ms-documentdb-query-metrics"
	hdrIndexUtilization     = "x-ms-cosmos-index-utilization"
)

// indexUtilization is the x-ms-cosmos-index-utilization answer: base64 JSON saying which
// indexes a query used. The emulator indexes nothing, so every list is empty.
var indexUtilization = base64.StdEncoding.EncodeToString([]byte(`{"UtilizedSingleIndexes":[],"PotentialSingleIndexes":[],"UtilizedCompositeIndexes":[],"PotentialCompositeIndexes":[]}`))

func decodeCont(v string) (queryCont, error) {
	var c queryCont
	if v == "" {
		return c, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil {
		return c, badRequest(msgInvalidContinuation)
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, badRequest(msgInvalidContinuation)
	}
	// The emulator's continuations carry offsets and counts of results, never negative and
	// far below maxContCount; a forged one must not index or size anything.
	if c.Offset < 0 || c.Offset > maxContCount || c.Returned < 0 || c.Returned > maxContCount {
		return queryCont{}, badRequest(msgInvalidContinuation)
	}
	return c, nil
}

// maxContCount bounds a query continuation's offset and result count.
const maxContCount = math.MaxInt32

func (c queryCont) encode() string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

// ridSeq is the document counter inside an item's _rid (its last 8 bytes, little endian): the
// order in which the container's documents were created.
func ridSeq(rid string) uint64 {
	b, err := decodeRID(rid)
	if err != nil || len(b) < 8 {
		return 0
	}
	return binary.LittleEndian.Uint64(b[len(b)-8:])
}

// seqHeap is a max-heap of results by sequence number: it keeps the smallest n seen.
type seqHeap []seqDoc

type seqDoc struct {
	seq  uint64
	body []byte
}

func (h seqHeap) Len() int           { return len(h) }
func (h seqHeap) Less(i, j int) bool { return h[i].seq > h[j].seq }
func (h seqHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *seqHeap) Push(x any)        { *h = append(*h, x.(seqDoc)) }
func (h *seqHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// queryItems serves a query of a container's documents (and a read feed): it reads the query
// and its page, decides what the query may scan (queryScope: the plan a client must fetch, a
// refusal, or the partitions it covers), scans with the strategy its shape needs (queryRun),
// and assembles the page with its continuation and metrics (writeQueryPage).
func (e *Emulator) queryItems(w http.ResponseWriter, r *http.Request, db, coll string) {
	q, params, err := parseQuery(r)
	if err != nil {
		e.fail(w, err)
		return
	}
	size, err := pageSize(r)
	if err != nil {
		e.fail(w, err)
		return
	}
	cont, err := decodeCont(r.Header.Get(hdrContinuation))
	if err != nil {
		e.fail(w, err)
		return
	}
	st, err := e.store.getContainer(db, coll)
	if err == nil {
		params, err = e.bindUDFs(q, params, st)
	}
	if err != nil {
		e.fail(w, err)
		return
	}
	scope, ok := e.queryScope(w, r, q, params, st)
	if !ok {
		return
	}
	if r.Header.Get(hdrContinuation) == "" && q.Offset > 0 {
		// OFFSET n skips n results on the first page; later pages resume after them.
		cont.Offset = q.Offset
	}
	if n := q.RowLimit(); n >= 0 {
		size = min(size, n-cont.Returned)
	}
	qr := &queryRun{e: e, ctx: r.Context(), db: db, coll: coll, q: q, params: params, scope: scope, cont: cont, size: size}
	docs, next, rid, err := qr.page()
	if ctxErr := r.Context().Err(); ctxErr != nil {
		// The client left: nobody reads an answer.
		e.log.Debug("query abandoned by its client", "db", db, "coll", coll, "scanned", qr.scanned, "err", ctxErr)
		return
	}
	if err != nil {
		e.fail(w, err)
		return
	}
	if n := q.RowLimit(); next != nil && n >= 0 && next.Returned >= n {
		next = nil
	}
	writeQueryPage(w, r, qr, docs, next, rid)
}

// queryScope returns the partitions a query scans: those of its partition key (or key
// prefix) or range header, of the partition key its WHERE pins, or every one when the client
// allows a fan-out and the query needs no client-side plan. Otherwise it answers the request
// (the gateway's 400 for a disabled cross-partition query, the 400 that asks for a query plan,
// or a refusal) and reports false.
func (e *Emulator) queryScope(w http.ResponseWriter, r *http.Request, q *query.Query, params map[string]any, st *collState) (scanScope, bool) {
	scope := scanScope{RangeID: r.Header.Get(hdrRangeID)}
	if comps, ok, err := headerPK(r); err != nil {
		e.fail(w, err)
		return scope, false
	} else if comps, ok = st.noneKey(comps, ok, false); ok {
		scope.PK = epk.Canonical(comps)
		if len(comps) > 0 && len(comps) < len(st.Paths) {
			// A prefix of a hierarchical key scopes the query to every logical partition
			// under it: their EPKs start with the prefix's EPK (one hash per component).
			scope.PK, scope.EPKPrefix = "", epk.HashV2(comps)
		}
	}
	if scope.PK != "" || scope.EPKPrefix != "" || scope.RangeID != "" {
		return scope, true
	}
	if st.Legacy {
		// A legacy collection is one partition: a query of it needs neither a key nor a plan.
		for _, rr := range st.Ranges {
			if rr.Live {
				scope.RangeID = strconv.FormatUint(uint64(rr.ID), 10)
			}
		}
		return scope, true
	}
	// The gateway serves a query without a partition key only when told it may fan out, and
	// only when it needs no client-side plan — unless the WHERE pins the partition key.
	if len(st.Paths) == 1 {
		if v, ok := q.Equality(pathSegments(st.Paths[0]), params); ok {
			scope.PK = epk.Canonical([]any{v})
			return scope, true
		}
	}
	if !strings.EqualFold(r.Header.Get(hdrEnableCrossPartition), "true") {
		writeError(w, http.StatusBadRequest, "BadRequest", msgCrossPartitionDisabled, 0)
		return scope, false
	}
	if q.NeedsQueryPlan() {
		plan, err := q.Plan()
		if err != nil {
			e.fail(w, refusal(err, ""))
		} else {
			writeNeedsQueryPlan(w, plan)
		}
		return scope, false
	}
	return scope, true
}

// queryRun is one page of a query being scanned: what it scans, and what it has scanned.
type queryRun struct {
	e         *Emulator
	ctx       context.Context
	db, coll  string
	q         *query.Query
	params    map[string]any
	scope     scanScope
	cont      queryCont
	size      int // the page's most results
	scanned   int // documents read
	scannedSz int // their bytes
}

// page scans with the strategy the query's shape needs and returns the page's results, the
// continuation of the next page (nil when none follows), and the container's rid.
func (qr *queryRun) page() ([][]byte, *queryCont, string, error) {
	switch {
	case qr.q.IsAggregate():
		return qr.aggregatePage()
	case qr.q.Distinct:
		return qr.distinctPage()
	case len(qr.q.OrderBy) == 0:
		return qr.unorderedPage()
	default:
		return qr.orderedPage()
	}
}

// scan calls fn for every document of the scope that matches the query, decoded.
func (qr *queryRun) scan(fn func(it item, doc map[string]any) (bool, error)) (string, error) {
	return qr.e.store.scanItems(qr.db, qr.coll, qr.scope, nil, func(_ []byte, it item) (bool, error) {
		doc, ok, err := qr.match(it)
		if err != nil || !ok {
			return err == nil, err
		}
		return fn(it, doc)
	})
}

// match decodes an item and reports whether it matches the query's WHERE.
func (qr *queryRun) match(it item) (map[string]any, bool, error) {
	qr.scanned++
	if qr.scanned%256 == 0 {
		// A client that leaves stops the scan.
		if err := qr.ctx.Err(); err != nil {
			return nil, false, err
		}
	}
	qr.scannedSz += len(it.Body)
	var doc map[string]any
	if err := json.Unmarshal(it.Body, &doc); err != nil {
		return nil, false, err
	}
	ok, err := qr.q.Match(doc, qr.params)
	if err != nil {
		return nil, false, badRequest("%v", err)
	}
	return doc, ok, nil
}

// project returns a matching document's result: its body, or its SELECT projection (ok false
// when the projection is undefined: no result).
func (qr *queryRun) project(doc map[string]any, body []byte) ([]byte, bool, error) {
	if !qr.q.Projects() {
		return withoutLSN(body), true, nil
	}
	delete(doc, "_lsn")
	v, ok, err := qr.q.Project(doc, qr.params)
	if err != nil || !ok {
		return nil, ok, err
	}
	b, err := json.Marshal(v)
	return b, true, err
}

// indexedPage takes the page of results that starts at the continuation's offset from all,
// as many as the page's size and the response limit allow, and the next page's continuation.
func (qr *queryRun) indexedPage(all [][]byte) ([][]byte, *queryCont) {
	var docs [][]byte
	i, pageBytes, full := qr.cont.Offset, 0, false
	for ; i < len(all) && len(docs) < qr.size; i++ {
		if !fitsPage(len(docs), pageBytes, len(all[i])) {
			full = true // by bytes: the next page starts at i
			break
		}
		docs = append(docs, all[i])
		pageBytes += len(all[i])
	}
	if i < len(all) && (len(docs) == qr.size || full) {
		return docs, &queryCont{Offset: i, Returned: qr.cont.Returned + len(docs)}
	}
	return docs, nil
}

// aggregatePage serves an aggregate: one result, or one per group (in the order of their
// first document); pages index into them.
func (qr *queryRun) aggregatePage() ([][]byte, *queryCont, string, error) {
	agg := qr.q.NewAggregator(qr.params)
	maxGroups := qr.e.opts.MaxOrderByItems
	rid, err := qr.scan(func(_ item, doc map[string]any) (bool, error) {
		if err := agg.Add(doc); err != nil {
			return false, err
		}
		if agg.Len() > maxGroups {
			return false, badRequest("not supported by cfp emulator: a GROUP BY query with more than %d groups; filter the query, or raise cfp emulator --max-order-by", maxGroups)
		}
		return true, nil
	})
	if err != nil {
		return nil, nil, rid, err
	}
	all, err := agg.Results()
	if err != nil {
		return nil, nil, rid, badRequest("%v", err)
	}
	if s := qr.scope; s.RangeID != "" && s.PK == "" && s.EPKPrefix == "" && agg.NonNumeric() {
		// A range's SUM or AVG partial that is undefined because it met a non-number: the
		// plan-driven SDKs (JavaScript's among them) skip an undefined partial and add up the
		// other ranges', a number where the answer is none.
		return nil, nil, rid, badRequest(msgNotSupported + "SUM or AVG over values that are not all numbers, across partitions (a client would add up the other partitions' sums); filter with IS_NUMBER, or query one partition key")
	}
	bodies := make([][]byte, len(all))
	for i, v := range all {
		bodies[i], _ = json.Marshal(v)
	}
	docs, next := qr.indexedPage(bodies)
	return docs, next, rid, nil
}

// distinctPage serves DISTINCT: every match is kept (up to MaxOrderByItems), put in ORDER BY
// order or creation order, projected, and each result kept at its first place; pages index
// into that.
func (qr *queryRun) distinctPage() ([][]byte, *queryCont, string, error) {
	var all []orderDoc
	limit := qr.e.opts.MaxOrderByItems
	rid, err := qr.scan(func(it item, doc map[string]any) (bool, error) {
		if len(all) == limit {
			return false, badRequest("not supported by cfp emulator: a DISTINCT query over more than %d matches; filter the query, or raise cfp emulator --max-order-by", limit)
		}
		all = append(all, orderDoc{doc: doc, body: bytes.Clone(it.Body), seq: int(ridSeq(it.RID))})
		return true, nil
	})
	if err != nil {
		return nil, nil, rid, err
	}
	sort.SliceStable(all, func(i, j int) bool {
		if c := qr.q.Compare(all[i].doc, all[j].doc); c != 0 {
			return c < 0
		}
		return all[i].seq < all[j].seq
	})
	seen := make(map[string]bool, len(all))
	var distinct [][]byte
	for _, d := range all {
		body, ok, err := qr.project(d.doc, d.body)
		if err != nil {
			return nil, nil, rid, err
		}
		if !ok {
			continue
		}
		// Projections are marshalled by encoding/json (sorted keys): equal values, equal
		// bytes. Stored documents are re-marshalled the same way.
		key := string(body)
		if !qr.q.Projects() {
			var v any
			_ = json.Unmarshal(body, &v)
			b, _ := json.Marshal(v)
			key = string(b)
		}
		if !seen[key] {
			seen[key] = true
			distinct = append(distinct, body)
		}
	}
	docs, next := qr.indexedPage(distinct)
	return docs, next, rid, nil
}

// unorderedPage serves a query without ORDER BY: results come in creation order (_rid order),
// as from one partition of the service; the page keeps the size smallest sequence numbers after
// the cursor (after skipping OFFSET's on the first page).
func (qr *queryRun) unorderedPage() ([][]byte, *queryCont, string, error) {
	skip := qr.cont.Offset
	keep := max(qr.size, 0) + skip
	if qr.size > 0 && keep > qr.e.opts.MaxOrderByItems {
		return nil, nil, "", badRequest("not supported by cfp emulator: an OFFSET page beyond the first %d results (this page needs %d); filter the query, or raise cfp emulator --max-order-by", qr.e.opts.MaxOrderByItems, keep)
	}
	sk := &seqKeeper{keep: keep, ceiling: math.MaxUint64}
	rid, err := qr.e.store.scanItems(qr.db, qr.coll, qr.scope, nil, func(_ []byte, it item) (bool, error) {
		seq := ridSeq(it.RID)
		if seq <= qr.cont.Seq {
			return true, nil
		}
		if seq >= sk.ceiling {
			sk.more = true
			return true, nil
		}
		doc, ok, err := qr.match(it)
		if err != nil || !ok {
			return err == nil, err
		}
		body, ok, err := qr.project(doc, it.Body)
		if err != nil || !ok {
			return err == nil, err
		}
		if qr.size <= 0 {
			sk.more = true
			return true, nil
		}
		sk.add(seq, body)
		return true, nil
	})
	res := sk.sorted()
	skipped := min(skip, len(res))
	var docs [][]byte
	for _, d := range res[skipped:] {
		docs = append(docs, d.body)
	}
	// A full page carries a continuation even when nothing follows (the next page is empty),
	// as the service's does: the azcosmos suite's TestCrossPartitionQuery, written against the
	// service's emulator, counts that empty page. It carries what OFFSET has still to skip when
	// the page held fewer results than that (cut by the response limit).
	var next *queryCont
	if len(res) > 0 && (sk.more || len(res) == qr.size) {
		next = &queryCont{Seq: res[len(res)-1].seq, Offset: skip - skipped, Returned: qr.cont.Returned + len(docs)}
	}
	return docs, next, rid, err
}

// seqKeeper keeps the keep results of smallest sequence number, within the response limit: it
// drops its highest sequence numbers while it holds more, and nothing from the lowest dropped
// on (ceiling) is taken after that. more says whether a result was left out.
type seqKeeper struct {
	h       seqHeap
	keep    int
	bytes   int
	ceiling uint64
	more    bool
}

func (k *seqKeeper) add(seq uint64, body []byte) {
	h := &k.h
	switch {
	case h.Len() < k.keep:
		heap.Push(h, seqDoc{seq, bytes.Clone(body)})
		k.bytes += len(body)
	case seq < (*h)[0].seq:
		k.bytes += len(body) - len((*h)[0].body)
		(*h)[0] = seqDoc{seq, bytes.Clone(body)}
		heap.Fix(h, 0)
		k.more = true
	default:
		k.more = true
	}
	for h.Len() > 1 && !fitsPage(h.Len()-1, k.bytes-len((*h)[0].body), len((*h)[0].body)) {
		d := heap.Pop(h).(seqDoc)
		k.bytes -= len(d.body)
		k.ceiling, k.more = min(k.ceiling, d.seq), true
	}
}

// sorted empties the keeper into its results in sequence order.
func (k *seqKeeper) sorted() []seqDoc {
	res := make([]seqDoc, k.h.Len())
	for i := len(res) - 1; i >= 0; i-- {
		res[i] = heap.Pop(&k.h).(seqDoc)
	}
	return res
}

// orderedPage serves ORDER BY: the page needs the first Offset+size results in order and
// whether one more follows; a heap keeps the smallest k (ties in scan order) instead of every
// match, and a page that would need more than MaxOrderByItems of them is refused.
func (qr *queryRun) orderedPage() ([][]byte, *queryCont, string, error) {
	k := qr.cont.Offset + qr.size + 1
	if k > qr.e.opts.MaxOrderByItems {
		return nil, nil, "", badRequest("not supported by cfp emulator: an ORDER BY page beyond the first %d results (this page needs %d); filter the query, or raise cfp emulator --max-order-by", qr.e.opts.MaxOrderByItems, k)
	}
	top := &orderHeap{cmp: qr.q.Compare}
	n := 0
	rid, err := qr.scan(func(it item, doc map[string]any) (bool, error) {
		n++
		d := orderDoc{doc: doc, seq: n}
		if top.Len() == k {
			if !top.less(d, top.docs[0]) {
				return true, nil
			}
			d.body = bytes.Clone(it.Body)
			top.docs[0] = d
			heap.Fix(top, 0)
			return true, nil
		}
		d.body = bytes.Clone(it.Body)
		heap.Push(top, d)
		return true, nil
	})
	all := make([]orderDoc, top.Len())
	for i := len(all) - 1; i >= 0; i-- {
		all[i] = heap.Pop(top).(orderDoc)
	}
	var docs [][]byte
	i, pageBytes, full := qr.cont.Offset, 0, false
	for ; err == nil && i < len(all) && len(docs) < qr.size; i++ {
		body, ok, perr := qr.project(all[i].doc, all[i].body)
		if perr != nil {
			err = perr
			break
		}
		if ok && !fitsPage(len(docs), pageBytes, len(body)) {
			full = true // by bytes: the next page starts at i
			break
		}
		if ok {
			docs = append(docs, body)
			pageBytes += len(body)
		}
	}
	var next *queryCont
	if i < len(all) && (len(docs) == qr.size || full) {
		next = &queryCont{Offset: i, Returned: qr.cont.Returned + len(docs)}
	}
	return docs, next, rid, err
}

// writeQueryPage answers a query's page: its results, continuation, item count, and the
// metrics the client asked for.
func writeQueryPage(w http.ResponseWriter, r *http.Request, qr *queryRun, docs [][]byte, next *queryCont, rid string) {
	h := w.Header()
	if next != nil {
		h.Set(hdrContinuation, next.encode())
	}
	h.Set(hdrItemCount, strconv.Itoa(len(docs)))
	if strings.EqualFold(r.Header.Get(hdrPopulateQueryMetrics), "true") {
		out := 0
		for _, d := range docs {
			out += len(d)
		}
		h.Set(hdrQueryMetrics, fmt.Sprintf("totalExecutionTimeInMs=0.00;queryCompileTimeInMs=0.00;queryLogicalPlanBuildTimeInMs=0.00;"+
			"queryPhysicalPlanBuildTimeInMs=0.00;queryOptimizationTimeInMs=0.00;VMExecutionTimeInMs=0.00;indexLookupTimeInMs=0.00;"+
			"instructionCount=0;documentLoadTimeInMs=0.00;systemFunctionExecuteTimeInMs=0.00;userFunctionExecuteTimeInMs=0.00;"+
			"retrievedDocumentCount=%d;retrievedDocumentSize=%d;outputDocumentCount=%d;outputDocumentSize=%d;writeOutputTimeInMs=0.00;indexUtilizationRatio=1.00",
			qr.scanned, qr.scannedSz, len(docs), out))
	}
	if strings.EqualFold(r.Header.Get(hdrPopulateIndexMetrics), "true") {
		h.Set(hdrIndexUtilization, indexUtilization)
	}
	writeJSON(w, http.StatusOK, ChargeQueryPage(qr.scanned, qr.scannedSz), documentsBody(rid, docs))
}

// orderDoc is an ORDER BY result: the decoded document to compare, its body, and its place in
// the scan (ties keep scan order).
type orderDoc struct {
	doc  map[string]any
	body []byte
	seq  int
}

// orderHeap is a max-heap of orderDocs under cmp then seq: its root is the last of the smallest
// results kept.
type orderHeap struct {
	docs []orderDoc
	cmp  func(a, b map[string]any) int
}

func (h *orderHeap) less(a, b orderDoc) bool {
	if c := h.cmp(a.doc, b.doc); c != 0 {
		return c < 0
	}
	return a.seq < b.seq
}

func (h *orderHeap) Len() int           { return len(h.docs) }
func (h *orderHeap) Less(i, j int) bool { return h.less(h.docs[j], h.docs[i]) }
func (h *orderHeap) Swap(i, j int)      { h.docs[i], h.docs[j] = h.docs[j], h.docs[i] }
func (h *orderHeap) Push(x any)         { h.docs = append(h.docs, x.(orderDoc)) }
func (h *orderHeap) Pop() any {
	x := h.docs[len(h.docs)-1]
	h.docs = h.docs[:len(h.docs)-1]
	return x
}

// pathSegments splits a partition key path ("/a/b") into its property names.
func pathSegments(path string) []string {
	return strings.Split(strings.TrimPrefix(path, "/"), "/")
}

// queryDatabases serves GET /dbs and queries over it.
func (e *Emulator) queryDatabases(w http.ResponseWriter, r *http.Request) {
	q, params, err := parseQuery(r)
	if err != nil {
		e.fail(w, err)
		return
	}
	recs, err := e.store.listDatabases()
	if err != nil {
		e.fail(w, err)
		return
	}
	bodies := make([]map[string]any, 0, len(recs))
	for _, rec := range recs {
		bodies = append(bodies, dbBody(rec))
	}
	e.writeMetaQuery(w, q, params, "", "Databases", bodies)
}

// queryContainers serves GET /dbs/{db}/colls and queries over it.
func (e *Emulator) queryContainers(w http.ResponseWriter, r *http.Request, db string) {
	q, params, err := parseQuery(r)
	if err != nil {
		e.fail(w, err)
		return
	}
	sts, err := e.store.listContainers(db)
	if err != nil {
		e.fail(w, err)
		return
	}
	dbr, err := e.store.getDatabase(db)
	if err != nil {
		e.fail(w, err)
		return
	}
	bodies := make([]map[string]any, 0, len(sts))
	for _, st := range sts {
		b, err := collBody(st)
		if err != nil {
			e.fail(w, err)
			return
		}
		bodies = append(bodies, b)
	}
	e.writeMetaQuery(w, q, params, dbr.RID, "DocumentCollections", bodies)
}

func (e *Emulator) writeMetaQuery(w http.ResponseWriter, q *query.Query, params map[string]any, rid, field string, bodies []map[string]any) {
	var docs []map[string]any
	for _, b := range bodies {
		// Match on the decoded form, as for items.
		raw, _ := json.Marshal(b)
		var doc map[string]any
		_ = json.Unmarshal(raw, &doc)
		ok, err := q.Match(doc, params)
		if err != nil {
			e.fail(w, badRequest("%v", err))
			return
		}
		if ok {
			docs = append(docs, doc)
		}
	}
	sort.SliceStable(docs, func(i, j int) bool { return q.Compare(docs[i], docs[j]) < 0 })
	if q.Offset > 0 {
		docs = docs[min(q.Offset, len(docs)):]
	}
	if n := q.RowLimit(); n >= 0 && len(docs) > n {
		docs = docs[:n]
	}
	out := make([][]byte, len(docs))
	for i, d := range docs {
		out[i], _ = json.Marshal(d)
	}
	w.Header().Set(hdrItemCount, strconv.Itoa(len(out)))
	writeJSON(w, http.StatusOK, QueryBase, listBody(rid, field, out))
}
