package emulator

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"sort"
	"strconv"

	"github.com/cfp-dev/cfp/internal/emulator/epk"
	"github.com/cfp-dev/cfp/internal/emulator/query"
)

// queryPlan is the minimal plan answer for the JS SDK (spec §6.2).
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
	return q, params, nil
}

// queryCont is the opaque query continuation: the last key of a key-order scan, or the offset
// into an ORDER BY result, plus the number of documents returned so far (for TOP).
type queryCont struct {
	Key      []byte `json:"k,omitempty"`
	Offset   int    `json:"o,omitempty"`
	Returned int    `json:"n,omitempty"`
}

func decodeCont(v string) (queryCont, error) {
	var c queryCont
	if v == "" {
		return c, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil {
		return c, badRequest("invalid continuation token")
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, badRequest("invalid continuation token")
	}
	return c, nil
}

func (c queryCont) encode() string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
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
	scope := scanScope{RangeID: r.Header.Get(hdrRangeID)}
	if comps, ok, err := headerPK(r); err != nil {
		e.fail(w, err)
		return
	} else if ok {
		scope.PK = epk.Canonical(comps)
		if len(comps) > 0 {
			// A prefix of a hierarchical key scopes the query to every logical partition
			// under it: their EPKs start with the prefix's EPK (one hash per component).
			st, err := e.store.getContainer(db, coll)
			if err != nil {
				e.fail(w, err)
				return
			}
			if len(comps) < len(st.Paths) {
				scope.PK, scope.EPKPrefix = "", epk.HashV2(comps)
			}
		}
	}
	if q.Top >= 0 {
		size = min(size, q.Top-cont.Returned)
	}

	var docs [][]byte
	var lastKey []byte
	var next *queryCont
	scanned := 0
	var rid string
	if q.OrderBy == nil {
		rid, err = e.store.scanItems(db, coll, scope, cont.Key, func(key []byte, it item) (bool, error) {
			scanned++
			var doc map[string]any
			if err := json.Unmarshal(it.Body, &doc); err != nil {
				return false, err
			}
			ok, err := q.Match(doc, params)
			if err != nil {
				return false, badRequest("%v", err)
			}
			if ok {
				if len(docs) >= size {
					// A further match exists: the next page resumes after the last returned key.
					if len(docs) > 0 {
						next = &queryCont{Key: lastKey, Returned: cont.Returned + len(docs)}
					}
					return false, nil
				}
				docs = append(docs, bytes.Clone(it.Body))
				lastKey = bytes.Clone(key)
			}
			return true, nil
		})
	} else {
		type match struct {
			doc  map[string]any
			body []byte
		}
		var all []match
		rid, err = e.store.scanItems(db, coll, scope, nil, func(_ []byte, it item) (bool, error) {
			scanned++
			var doc map[string]any
			if err := json.Unmarshal(it.Body, &doc); err != nil {
				return false, err
			}
			ok, err := q.Match(doc, params)
			if err != nil {
				return false, badRequest("%v", err)
			}
			if ok {
				all = append(all, match{doc, bytes.Clone(it.Body)})
			}
			return true, nil
		})
		sort.SliceStable(all, func(i, j int) bool { return q.Compare(all[i].doc, all[j].doc) < 0 })
		for i := cont.Offset; i < len(all) && len(docs) < size; i++ {
			docs = append(docs, all[i].body)
		}
		if end := cont.Offset + len(docs); end < len(all) && len(docs) == size {
			next = &queryCont{Offset: end, Returned: cont.Returned + len(docs)}
		}
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
	writeJSON(w, http.StatusOK, chargeQueryBase+chargePerDocRead*float64(scanned), documentsBody(rid, docs))
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
	writeJSON(w, http.StatusOK, chargeQueryBase, listBody(rid, field, out))
}
