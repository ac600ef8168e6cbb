package emulator

import (
	"bytes"
	"container/heap"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/cfp-dev/cfp/internal/emulator/epk"
	"github.com/cfp-dev/cfp/internal/emulator/query"
)

// queryPlan is the minimal plan answer for the JS SDK: one range over the whole key space, which
// drives its fan-out to every partition (docs/protocol-gateway.md, "Queries").
const queryPlan = `{"partitionedQueryExecutionInfoVersion":2,"queryInfo":{"distinctType":"None","top":null,"offset":null,"limit":null,"orderBy":[],"orderByExpressions":[],"groupByExpressions":[],"groupByAliases":[],"aggregates":[],"groupByAliasToAggregateType":{},"rewrittenQuery":"","hasSelectValue":false,"dCountInfo":null,"hasNonStreamingOrderBy":false},"queryRanges":[{"min":"","max":"FF","isMinInclusive":true,"isMaxInclusive":false}]}`

func writeQueryPlan(w http.ResponseWriter) {
	writeJSON(w, http.StatusOK, chargeMeta, []byte(queryPlan))
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
	if q, err = q.BindTop(params); err != nil {
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
	return c, nil
}

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
				writeError(w, http.StatusBadRequest, "BadRequest", msgNeedsQueryPlan, substatusCrossPartitionQueryNotServable)
				return
			}
		}
	}
	if q.Top >= 0 {
		size = min(size, q.Top-cont.Returned)
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
	case q.Aggregate != "":
		agg := q.NewAggregator(params)
		rid, err = e.store.scanItems(db, coll, scope, nil, func(_ []byte, it item) (bool, error) {
			doc, ok, err := match(it)
			if err != nil || !ok {
				return err == nil, err
			}
			return true, agg.Add(doc)
		})
		if v, ok := agg.Result(); ok && cont.Returned == 0 && size > 0 {
			b, _ := json.Marshal(v)
			docs = append(docs, b)
		}
	case q.OrderBy == nil:
		// Unordered results come in creation order (_rid order), as from one partition of
		// the service; the page keeps the size smallest sequence numbers after the cursor.
		h := &seqHeap{}
		more := false
		rid, err = e.store.scanItems(db, coll, scope, nil, func(_ []byte, it item) (bool, error) {
			seq := ridSeq(it.RID)
			if seq <= cont.Seq {
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
			if h.Len() < size {
				heap.Push(h, seqDoc{seq, bytes.Clone(body)})
			} else if seq < (*h)[0].seq {
				(*h)[0] = seqDoc{seq, bytes.Clone(body)}
				heap.Fix(h, 0)
				more = true
			} else {
				more = true
			}
			return true, nil
		})
		res := make([]seqDoc, h.Len())
		for i := len(res) - 1; i >= 0; i-- {
			res[i] = heap.Pop(h).(seqDoc)
		}
		for _, d := range res {
			docs = append(docs, d.body)
		}
		// A full page carries a continuation even when nothing follows (the next page is
		// empty), as the service's does.
		if len(res) > 0 && (more || len(res) == size) {
			next = &queryCont{Seq: res[len(res)-1].seq, Returned: cont.Returned + len(docs)}
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
		i := cont.Offset
		for ; err == nil && i < len(all) && len(docs) < size; i++ {
			body, ok, perr := project(all[i].doc, all[i].body)
			if perr != nil {
				err = perr
				break
			}
			if ok {
				docs = append(docs, body)
			}
		}
		if i < len(all) && len(docs) == size {
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
	if next != nil && q.Top >= 0 && next.Returned >= q.Top {
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
	if q.Top >= 0 && len(docs) > q.Top {
		docs = docs[:q.Top]
	}
	out := make([][]byte, len(docs))
	for i, d := range docs {
		out[i], _ = json.Marshal(d)
	}
	w.Header().Set(hdrItemCount, strconv.Itoa(len(out)))
	writeJSON(w, http.StatusOK, QueryBase, listBody(rid, field, out))
}
