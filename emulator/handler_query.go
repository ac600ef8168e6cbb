package emulator

import (
	"bytes"
	"container/heap"
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
	scope := scanScope{RangeID: r.Header.Get(hdrRangeID)}
	if comps, ok, err := headerPK(r); err != nil {
		e.fail(w, err)
		return
	} else if ok {
		scope.PK = epk.Canonical(comps)
		if len(comps) > 0 && len(comps) < len(st.Paths) {
			// A prefix of a hierarchical key scopes the query to every logical partition
			// under it: their EPKs start with the prefix's EPK (one hash per component).
			scope.PK, scope.EPKPrefix = "", epk.HashV2(comps)
		}
	}
	if scope.PK == "" && scope.EPKPrefix == "" && scope.RangeID == "" {
		// The gateway serves a query without a partition key only when told it may fan out,
		// and only when it needs no client-side plan — unless the WHERE pins the partition key.
		if len(st.Paths) == 1 {
			if v, ok := q.Equality(pathSegments(st.Paths[0]), params); ok {
				scope.PK = epk.Canonical([]any{v})
			}
		}
		if scope.PK == "" {
			if !strings.EqualFold(r.Header.Get(hdrEnableCrossPartition), "true") {
				writeError(w, http.StatusBadRequest, "BadRequest", msgCrossPartitionDisabled, 0)
				return
			}
			if q.NeedsQueryPlan() {
				plan, err := q.Plan()
				if err != nil {
					e.fail(w, refusal(err, ""))
					return
				}
				writeNeedsQueryPlan(w, plan)
				return
			}
		}
	}
	if r.Header.Get(hdrContinuation) == "" && q.Offset > 0 {
		// OFFSET n skips n results on the first page; later pages resume after them.
		cont.Offset = q.Offset
	}
	if n := q.RowLimit(); n >= 0 {
		size = min(size, n-cont.Returned)
	}

	var docs [][]byte
	var next *queryCont
	scanned, scannedBytes := 0, 0
	var rid string
	ctx := r.Context()
	match := func(it item) (map[string]any, bool, error) {
		scanned++
		if scanned%256 == 0 {
			// A client that leaves stops the scan.
			if err := ctx.Err(); err != nil {
				return nil, false, err
			}
		}
		scannedBytes += len(it.Body)
		var doc map[string]any
		if err := json.Unmarshal(it.Body, &doc); err != nil {
			return nil, false, err
		}
		ok, err := q.Match(doc, params)
		if err != nil {
			return nil, false, badRequest("%v", err)
		}
		return doc, ok, nil
	}
	project := func(doc map[string]any, body []byte) ([]byte, bool, error) {
		if !q.Projects() {
			return withoutLSN(body), true, nil
		}
		delete(doc, "_lsn")
		v, ok, err := q.Project(doc, params)
		if err != nil || !ok {
			return nil, ok, err
		}
		b, err := json.Marshal(v)
		return b, true, err
	}
	switch {
	case q.IsAggregate():
		agg := q.NewAggregator(params)
		rid, err = e.store.scanItems(db, coll, scope, nil, func(_ []byte, it item) (bool, error) {
			doc, ok, err := match(it)
			if err != nil || !ok {
				return err == nil, err
			}
			if err := agg.Add(doc); err != nil {
				return false, err
			}
			if agg.Len() > e.opts.MaxOrderByItems {
				return false, badRequest("not supported by cfp emulator: a GROUP BY query with more than %d groups; filter the query, or raise cfp emulator --max-order-by", e.opts.MaxOrderByItems)
			}
			return true, nil
		})
		var all []any
		if err == nil {
			if all, err = agg.Results(); err != nil {
				err = badRequest("%v", err)
			}
		}
		if err == nil && scope.RangeID != "" && scope.PK == "" && scope.EPKPrefix == "" && agg.NonNumeric() {
			// A range's SUM or AVG partial that is undefined because it met a non-number: the
			// plan-driven SDKs (JavaScript's among them) skip an undefined partial and add up
			// the other ranges', a number where the answer is none.
			err = badRequest(msgNotSupported + "SUM or AVG over values that are not all numbers, across partitions (a client would add up the other partitions' sums); filter with IS_NUMBER, or query one partition key")
		}
		// One result, or one per group (in the order of their first document); pages index
		// into them.
		i, pageBytes, full := cont.Offset, 0, false
		for ; err == nil && i < len(all) && len(docs) < size; i++ {
			b, _ := json.Marshal(all[i])
			if !fitsPage(len(docs), pageBytes, len(b)) {
				full = true // by bytes: the next page starts at i
				break
			}
			docs = append(docs, b)
			pageBytes += len(b)
		}
		if err == nil && i < len(all) && (len(docs) == size || full) {
			next = &queryCont{Offset: i, Returned: cont.Returned + len(docs)}
		}
	case q.Distinct:
		// Every match is kept (up to MaxOrderByItems), put in ORDER BY order or creation
		// order, projected, and each result kept at its first place; pages index into that.
		var all []orderDoc
		rid, err = e.store.scanItems(db, coll, scope, nil, func(_ []byte, it item) (bool, error) {
			doc, ok, err := match(it)
			if err != nil || !ok {
				return err == nil, err
			}
			if len(all) == e.opts.MaxOrderByItems {
				return false, badRequest("not supported by cfp emulator: a DISTINCT query over more than %d matches; filter the query, or raise cfp emulator --max-order-by", e.opts.MaxOrderByItems)
			}
			all = append(all, orderDoc{doc: doc, body: bytes.Clone(it.Body), seq: int(ridSeq(it.RID))})
			return true, nil
		})
		if err != nil {
			break
		}
		sort.SliceStable(all, func(i, j int) bool {
			if c := q.Compare(all[i].doc, all[j].doc); c != 0 {
				return c < 0
			}
			return all[i].seq < all[j].seq
		})
		seen := make(map[string]bool, len(all))
		var distinct [][]byte
		for _, d := range all {
			body, ok, perr := project(d.doc, d.body)
			if perr != nil {
				err = perr
				break
			}
			if !ok {
				continue
			}
			// Projections are marshalled by encoding/json (sorted keys): equal values, equal
			// bytes. Stored documents are re-marshalled the same way.
			key := string(body)
			if !q.Projects() {
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
		i, pageBytes, full := cont.Offset, 0, false
		for ; err == nil && i < len(distinct) && len(docs) < size; i++ {
			if !fitsPage(len(docs), pageBytes, len(distinct[i])) {
				full = true // by bytes: the next page starts at i
				break
			}
			docs = append(docs, distinct[i])
			pageBytes += len(distinct[i])
		}
		if err == nil && i < len(distinct) && (len(docs) == size || full) {
			next = &queryCont{Offset: i, Returned: cont.Returned + len(docs)}
		}
	case len(q.OrderBy) == 0:
		// Unordered results come in creation order (_rid order), as from one partition of
		// the service; the page keeps the size smallest sequence numbers after the cursor
		// (after skipping OFFSET's on the first page).
		skip := cont.Offset
		keep := max(size, 0) + skip
		if size > 0 && keep > e.opts.MaxOrderByItems {
			err = badRequest("not supported by cfp emulator: an OFFSET page beyond the first %d results (this page needs %d); filter the query, or raise cfp emulator --max-order-by", e.opts.MaxOrderByItems, keep)
			break
		}
		h := &seqHeap{}
		more := false
		// The page also fits in maxResponseBytes: the heap drops its highest sequence numbers
		// while it holds more, and nothing from the lowest dropped on is taken after that.
		heapBytes, ceiling := 0, uint64(math.MaxUint64)
		rid, err = e.store.scanItems(db, coll, scope, nil, func(_ []byte, it item) (bool, error) {
			seq := ridSeq(it.RID)
			if seq <= cont.Seq {
				return true, nil
			}
			if seq >= ceiling {
				more = true
				return true, nil
			}
			doc, ok, err := match(it)
			if err != nil || !ok {
				return err == nil, err
			}
			body, ok, err := project(doc, it.Body)
			if err != nil || !ok {
				return err == nil, err
			}
			if size <= 0 {
				more = true
				return true, nil
			}
			if h.Len() < keep {
				heap.Push(h, seqDoc{seq, bytes.Clone(body)})
				heapBytes += len(body)
			} else if seq < (*h)[0].seq {
				heapBytes += len(body) - len((*h)[0].body)
				(*h)[0] = seqDoc{seq, bytes.Clone(body)}
				heap.Fix(h, 0)
				more = true
			} else {
				more = true
			}
			for h.Len() > 1 && !fitsPage(h.Len()-1, heapBytes-len((*h)[0].body), len((*h)[0].body)) {
				d := heap.Pop(h).(seqDoc)
				heapBytes -= len(d.body)
				ceiling, more = min(ceiling, d.seq), true
			}
			return true, nil
		})
		res := make([]seqDoc, h.Len())
		for i := len(res) - 1; i >= 0; i-- {
			res[i] = heap.Pop(h).(seqDoc)
		}
		skipped := min(skip, len(res))
		for _, d := range res[skipped:] {
			docs = append(docs, d.body)
		}
		// A full page carries a continuation even when nothing follows (the next page is
		// empty), as the service's does: the azcosmos suite's TestCrossPartitionQuery, written
		// against the service's emulator, counts that empty page. It carries what OFFSET has
		// still to skip when the page held fewer results than that (cut by the response limit).
		if len(res) > 0 && (more || len(res) == size) {
			next = &queryCont{Seq: res[len(res)-1].seq, Offset: skip - skipped, Returned: cont.Returned + len(docs)}
		}
	default:
		// The page needs the first Offset+size results in order and whether one more follows:
		// a heap keeps the smallest k (ties in scan order) instead of every match, and a page
		// that would need more than MaxOrderByItems of them is refused.
		k := cont.Offset + size + 1
		if k > e.opts.MaxOrderByItems {
			err = badRequest("not supported by cfp emulator: an ORDER BY page beyond the first %d results (this page needs %d); filter the query, or raise cfp emulator --max-order-by", e.opts.MaxOrderByItems, k)
			break
		}
		top := &orderHeap{cmp: q.Compare}
		n := 0
		rid, err = e.store.scanItems(db, coll, scope, nil, func(_ []byte, it item) (bool, error) {
			doc, ok, err := match(it)
			if err != nil || !ok {
				return err == nil, err
			}
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
		i, pageBytes, full := cont.Offset, 0, false
		for ; err == nil && i < len(all) && len(docs) < size; i++ {
			body, ok, perr := project(all[i].doc, all[i].body)
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
		if i < len(all) && (len(docs) == size || full) {
			next = &queryCont{Offset: i, Returned: cont.Returned + len(docs)}
		}
	}
	if ctxErr := r.Context().Err(); ctxErr != nil {
		// The client left: nobody reads an answer.
		e.log.Debug("query abandoned by its client", "db", db, "coll", coll, "scanned", scanned, "err", ctxErr)
		return
	}
	if err != nil {
		e.fail(w, err)
		return
	}
	if n := q.RowLimit(); next != nil && n >= 0 && next.Returned >= n {
		next = nil
	}
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
			scanned, scannedBytes, len(docs), out))
	}
	if strings.EqualFold(r.Header.Get(hdrPopulateIndexMetrics), "true") {
		h.Set(hdrIndexUtilization, indexUtilization)
	}
	writeJSON(w, http.StatusOK, ChargeQueryPage(scanned, scannedBytes), documentsBody(rid, docs))
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
