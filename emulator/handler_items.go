package emulator

import (
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/cfp-dev/cfp/internal/epk"
)

// Items: point reads and writes, addressed by id and partition key, and deletes by partition key.

// routedIDRule answers as the service's routing gateway does for an item addressed by an id it
// cannot route (the item can still be created, and read through a query): a control character
// is 400; trailing whitespace, '/', '\\', '#' and '%' are 401, because the gateway trims and
// unescapes the path before it checks the signature. It returns 0 for an id it routes.
func routedIDRule(id string) (int, string) {
	if strings.ContainsAny(id, "\r\n\t") {
		return http.StatusBadRequest, "The request URL contains a control character in the resource id; address this item through a query"
	}
	if strings.TrimRight(id, " ") != id || strings.ContainsAny(id, "/\\#%") {
		return http.StatusUnauthorized, "The input authorization token can't serve the request: the gateway could not route the resource id (trailing whitespace, '/', '\\', '#' or '%'); address this item through a query"
	}
	return 0, ""
}

// writeInvalidURL answers 400 as the service's front end (HTTP.sys) does for a URL it refuses,
// before any Cosmos DB code sees it: an HTML page, not a Cosmos DB error. Clients see it so: the
// JavaScript SDK, which parses every error body as JSON, fails on it without a status code, and
// its own tests of such ids expect exactly that.
func writeInvalidURL(w http.ResponseWriter, msg string) {
	w.Header().Set("Content-Type", "text/html; charset=us-ascii")
	w.WriteHeader(http.StatusBadRequest)
	_, _ = io.WriteString(w, "<HTML><HEAD><TITLE>Bad Request</TITLE></HEAD>\n<BODY><h2>Bad Request - Invalid URL</h2>\n<hr><p>HTTP Error 400. The request URL is invalid. "+html.EscapeString(msg)+".</p>\n</BODY></HTML>\n")
}

// joinItemIDQuery puts back into an item's path the query the client's URL made of the rest of
// its id: the JavaScript SDK escapes a link with encodeURI, which leaves '?', so the id
// "Disallowed?Chars" arrives as the path .../docs/Disallowed and the query Chars, signed as the
// whole id. The Cosmos DB REST API has no query parameters, and the service's gateway serves
// such an id; so does this one, for item paths.
func joinItemIDQuery(u *url.URL) {
	if u.RawQuery == "" && !u.ForceQuery {
		return
	}
	escaped := u.EscapedPath()
	segs := strings.Split(strings.Trim(escaped, "/"), "/")
	if len(segs) != 6 || segs[0] != "dbs" || segs[2] != "colls" || segs[4] != "docs" {
		return
	}
	rest, err := url.PathUnescape(u.RawQuery)
	if err != nil {
		return
	}
	u.RawPath = strings.TrimSuffix(escaped, "/") + url.PathEscape("?"+rest)
	u.Path = strings.TrimSuffix(u.Path, "/") + "?" + rest
	u.RawQuery, u.ForceQuery = "", false
}

// msgMissingPK is the service's 400 for a point operation without a partition key on a
// partitioned container (RMResources.MissingPartitionKeyValue).
const msgMissingPK = "PartitionKey value must be supplied for this operation."

// keyedContainer resolves the container of a request that names one logical partition and
// the partition key of its header; missing names the header in the 400 (a format with one %s).
// On failure it has answered the request and reports false.
func (e *Emulator) keyedContainer(w http.ResponseWriter, r *http.Request, db, coll, missing string) (*collState, []any, bool) {
	st, err := e.store.getContainer(db, coll)
	if err != nil {
		e.fail(w, err)
		return nil, nil, false
	}
	comps, ok, err := headerPK(r)
	if err != nil {
		e.fail(w, err)
		return nil, nil, false
	}
	comps, ok = st.noneKey(comps, ok, true)
	if !ok {
		if strings.Contains(missing, "%s") {
			missing = fmt.Sprintf(missing, hdrPartitionKey)
		}
		e.fail(w, &badRequestError{msg: missing})
		return nil, nil, false
	}
	return st, comps, true
}

// headerPK parses the partition-key header; ok is false when the header is absent.
func headerPK(r *http.Request) (comps []any, ok bool, err error) {
	v := r.Header.Get(hdrPartitionKey)
	if v == "" {
		return nil, false, nil
	}
	comps, err = epk.ParseHeader(v)
	if err != nil {
		return nil, true, badRequest("invalid %s header: %v", hdrPartitionKey, err)
	}
	return comps, true, nil
}

func itemHeaders(w http.ResponseWriter, st *collState, rangeID string, it item) {
	h := w.Header()
	if it.Etag != "" {
		h.Set("etag", it.Etag)
	}
	if rangeID != "" {
		h.Set(hdrSession, rangeID+":-1#"+strconv.FormatUint(it.LSN, 10))
		h.Set(hdrRangeID, rangeID)
	}
	h.Set("lsn", strconv.FormatUint(it.LSN, 10))
	h.Set(hdrContentPath, st.RID)
	h.Set(hdrAltContentPath, "dbs/"+st.DB+"/colls/"+st.ID)
}

// writeItem serves create/upsert (POST, id ""), replace (PUT) and delete (DELETE).
func (e *Emulator) writeItem(w http.ResponseWriter, r *http.Request, db, coll, id string) {
	st, err := e.store.getContainer(db, coll)
	if err != nil {
		e.fail(w, err)
		return
	}
	hdrComps, hasHdr, err := headerPK(r)
	if err != nil {
		e.fail(w, err)
		return
	}
	// A write with a body takes a legacy collection's key from the document when the header
	// is absent; a delete addresses the none key.
	hdrComps, hasHdr = st.noneKey(hdrComps, hasHdr, r.Method == http.MethodDelete)
	op := opCreate
	var body []byte
	switch {
	case r.Method == http.MethodDelete:
		op = opDelete
	case r.Method == http.MethodPut:
		op = opReplace
	case strings.EqualFold(r.Header.Get(hdrIsUpsert), "true"):
		op = opUpsert
	}
	if op != opDelete {
		if body, err = readBody(r); err != nil {
			e.fail(w, err)
			return
		}
	}
	req := itemOpRequest{Op: op, ID: id, Body: body, PK: hdrComps, HasPK: hasHdr, IfMatch: r.Header.Get("If-Match")}
	if hasTriggers(r) {
		e.writeWithTriggers(w, r, st, req)
		return
	}
	status, res, charge, err := e.itemOp(st, db, coll, req)
	if err != nil {
		e.fail(w, err)
		return
	}
	e.writeItemResponse(w, r, st, status, res, charge)
}

// writeItemResponse answers a single-item write with its headers and, unless the client asked
// for Prefer: return=minimal or the item is gone, the item.
func (e *Emulator) writeItemResponse(w http.ResponseWriter, r *http.Request, st *collState, status int, res writeResult, charge float64) {
	itemHeaders(w, st, res.RangeID, res.Item)
	w.Header().Set(hdrCharge, formatCharge(charge))
	if status == http.StatusNoContent || strings.Contains(strings.ToLower(r.Header.Get("Prefer")), "return=minimal") {
		w.WriteHeader(status)
		return
	}
	writeJSON(w, status, charge, withoutLSN(res.Item.Body))
}

// itemOpRequest is one item write: of a request, or of a transactional batch.
type itemOpRequest struct {
	Op      opKind
	ID      string // the id in the URL (replace, delete)
	Body    []byte // the document (create, upsert, replace)
	PK      []any  // the partition key header's components
	HasPK   bool
	IfMatch string
}

// itemOp validates and applies one item write and returns the status to answer and the
// write's request charge.
func (e *Emulator) itemOp(st *collState, db, coll string, req itemOpRequest) (int, writeResult, float64, error) {
	wr, doc, err := prepareWrite(st, req)
	if err != nil {
		return 0, writeResult{}, 0, err
	}
	res, err := e.store.writeItem(db, coll, wr)
	if err != nil {
		return 0, res, 0, err
	}
	status, charge := writeOutcome(st, req.Op, res, doc)
	return status, res, charge, nil
}

// prepareWrite validates an item write and returns it as a store write, with the document (nil
// for a delete) for the write's charge.
func prepareWrite(st *collState, req itemOpRequest) (itemWrite, map[string]any, error) {
	wr := itemWrite{IfMatch: req.IfMatch, Op: req.Op}
	var comps []any
	var doc map[string]any
	if req.Op == opDelete {
		if !req.HasPK {
			return itemWrite{}, nil, badRequest(msgMissingPK)
		}
		wr.ID, comps = req.ID, req.PK
		wr.PKObject = partitionKeyObject(st.Paths, req.PK)
	} else {
		var raw map[string]json.RawMessage
		if json.Unmarshal(req.Body, &raw) != nil || json.Unmarshal(req.Body, &doc) != nil || raw == nil {
			return itemWrite{}, nil, badRequest("the request body is not a JSON object")
		}
		docID, _ := doc["id"].(string)
		if err := validItemID(docID); err != nil {
			return itemWrite{}, nil, err
		}
		comps = epk.FromDocument(doc, st.Paths)
		if req.HasPK && !epk.Equal(req.PK, comps) {
			return itemWrite{}, nil, &badRequestError{msg: "PartitionKey extracted from document doesn't match the one specified in the header.", substatus: 1001}
		}
		if req.Op == opReplace && docID != req.ID {
			return itemWrite{}, nil, badRequest("the id in the body (%q) differs from the id in the URL (%q)", docID, req.ID)
		}
		if len(req.Body) > maxBodyBytes {
			// The service's item limit, whichever way the item was made (a patch can grow
			// one): a 413, as the service answers.
			return itemWrite{}, nil, errTooLarge
		}
		wr.Body, wr.ID, wr.Order = raw, docID, keyOrder(req.Body)
	}
	wr.PK, wr.EPK = epk.Canonical(comps), st.hashPK(comps)
	return wr, doc, nil
}

// writeOutcome returns the status to answer for a write of kind op done with result res, and its
// request charge (doc: the document written, from prepareWrite).
func writeOutcome(st *collState, op opKind, res writeResult, doc map[string]any) (int, float64) {
	switch {
	case op == opDelete:
		// The deleted version is not at hand: charged as a 1 KB document of the reference shape.
		return http.StatusNoContent, ChargeWrite(1024, RefIndexedTerms, false)
	case res.Created:
		return http.StatusCreated, ChargeWrite(len(res.Item.Body), policyOf(st.Props).indexedTerms(doc), false)
	}
	return http.StatusOK, ChargeWrite(len(res.Item.Body), policyOf(st.Props).indexedTerms(doc), true)
}

func (e *Emulator) readItem(w http.ResponseWriter, r *http.Request, db, coll, id string) {
	st, comps, ok := e.keyedContainer(w, r, db, coll, msgMissingPK)
	if !ok {
		return
	}
	it, rangeID, err := e.store.readItem(db, coll, epk.Canonical(comps), id)
	if err != nil {
		e.fail(w, err)
		return
	}
	itemHeaders(w, st, rangeID, it)
	if inm := r.Header.Get("If-None-Match"); inm != "" && inm == it.Etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	writeJSON(w, http.StatusOK, ChargeRead(len(it.Body)), withoutLSN(it.Body))
}

// deleteByPartitionKey serves POST .../operations/partitionkeydelete: every item of the logical
// partition in x-ms-documentdb-partitionkey is deleted at once (the service deletes in the
// background but hides the items at once; here they are gone when the answer comes), each a
// delete on the change feed. The service answers 200 with no body.
func (e *Emulator) deleteByPartitionKey(w http.ResponseWriter, r *http.Request, db, coll string) {
	st, comps, ok := e.keyedContainer(w, r, db, coll, msgMissingPK)
	if !ok {
		return
	}
	if len(comps) != len(st.Paths) {
		e.fail(w, &badRequestError{msg: "Partition key provided either doesn't correspond to definition in the collection or doesn't match partition key field values specified in the document.", substatus: 1001})
		return
	}
	if _, err := e.store.deletePartition(db, coll, epk.Canonical(comps)); err != nil {
		e.fail(w, err)
		return
	}
	w.Header().Set(hdrCharge, formatCharge(chargeWrite))
	w.WriteHeader(http.StatusOK)
}
