package emulator

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/cfp-dev/cfp/emulator/auth"
	"github.com/cfp-dev/cfp/internal/epk"
)

// Header names (canonical forms for http.Header lookups).
const (
	hdrActivityID     = "x-ms-activity-id"
	hdrCharge         = "x-ms-request-charge"
	hdrSession        = "x-ms-session-token"
	hdrSubstatus      = "x-ms-substatus"
	hdrRetryAfterMs   = "x-ms-retry-after-ms"
	hdrPartitionKey   = "x-ms-documentdb-partitionkey"
	hdrRangeID        = "x-ms-documentdb-partitionkeyrangeid"
	hdrMaxItemCount   = "x-ms-max-item-count"
	hdrContinuation   = "x-ms-continuation"
	hdrItemCount      = "x-ms-item-count"
	hdrIsUpsert       = "x-ms-documentdb-is-upsert"
	hdrAIM            = "A-IM"
	hdrStartEPK       = "x-ms-start-epk"
	hdrEndEPK         = "x-ms-end-epk"
	hdrQueryPlan      = "x-ms-cosmos-is-query-plan-request"
	hdrIsQuery        = "x-ms-documentdb-isquery"
	hdrQuery          = "x-ms-documentdb-query"
	hdrContentPath    = "x-ms-content-path"
	hdrAltContentPath = "x-ms-alt-content-path"
	hdrWireFormat     = "x-ms-cosmos-changefeed-wire-format-version"
	hdrPriority       = "x-ms-cosmos-priority-level"
	hdrBucket         = "x-ms-cosmos-throughput-bucket"
)

// echoPriority checks the request's priority level (Low or High, priority-based execution)
// and throughput bucket (1 to 5) and echoes them in the response, so that a client can see
// what the gateway received; the emulator has no throughput to divide, so both change nothing
// else. A value the service would refuse is a 400.
func echoPriority(r *http.Request, h http.Header) error {
	if v := r.Header.Get(hdrPriority); v != "" {
		if !strings.EqualFold(v, "Low") && !strings.EqualFold(v, "High") {
			return badRequest("invalid %s %q: want Low or High", hdrPriority, v)
		}
		h.Set(hdrPriority, v)
	}
	if v := r.Header.Get(hdrBucket); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 5 {
			return badRequest("invalid %s %q: want a throughput bucket from 1 to 5", hdrBucket, v)
		}
		h.Set(hdrBucket, v)
	}
	return nil
}

// Request charges of metadata requests reported in x-ms-request-charge (items, queries and
// change-feed pages are charged by size, see charge.go).
const (
	chargeMeta  = Meta
	chargeRead  = Meta
	chargeWrite = 4.95 // a database, container or offer write; a delete by partition key
)

// maxBodyBytes bounds request bodies (the service's item limit is 2 MB).
const maxBodyBytes = 2 << 20

// defaultPageSize is the page size when x-ms-max-item-count is absent or not positive.
const defaultPageSize = 100

// maxPageSize caps x-ms-max-item-count.
const maxPageSize = 1000

// Handler returns the gateway's http.Handler: the Cosmos DB REST subset described in
// docs/protocol-gateway.md, plus the admin endpoints under /_cfp/.
func (e *Emulator) Handler() http.Handler { return http.HandlerFunc(e.serveHTTP) }

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
		gatewayHeaderNames(w.Header())
	}
	w.ResponseWriter.WriteHeader(status)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
		gatewayHeaderNames(w.Header())
	}
	return w.ResponseWriter.Write(p)
}

// gatewayHeaderNames spells the Cosmos DB headers of a response as the service's gateway does,
// in lower case (etag, lsn, x-ms-continuation, x-ms-session-token, ...), whatever case the code
// that set them used: http.Header.Set canonicalises to Etag and X-Ms-Continuation, and a client
// that looks headers up case-sensitively (the Python SDK) misses those and silently stops a
// query after its first page. net/http writes map keys as they are; the standard HTTP headers
// (Content-Type, Content-Length, Connection) stay canonical, as net/http itself reads them so.
func gatewayHeaderNames(h http.Header) {
	for k, v := range h {
		lk := strings.ToLower(k)
		if lk == k || !(strings.HasPrefix(lk, "x-ms-") || lk == "etag" || lk == "lsn") {
			continue
		}
		delete(h, k)
		h[lk] = append(h[lk], v...)
	}
}

func (e *Emulator) serveHTTP(rw http.ResponseWriter, r *http.Request) {
	start := time.Now()
	e.bodyPhase(rw, r)
	w := &statusWriter{ResponseWriter: rw}
	activity := r.Header.Get(hdrActivityID)
	if activity == "" {
		activity = uuid.NewString()
	}
	h := w.Header()
	h.Set(hdrActivityID, activity)
	h.Set(hdrCharge, formatCharge(chargeMeta))
	h.Set("Content-Type", "application/json")

	joinItemIDQuery(r.URL)
	segs, err := splitPath(r.URL.EscapedPath())
	defer func() {
		e.log.Debug("request", "method", r.Method, "path", r.URL.Path, "status", w.status, "ms", time.Since(start).Milliseconds())
	}()
	// A data file that bbolt cannot read panics (or faults) in the middle of a request: answer
	// 500 with what is wrong instead of taking the process down.
	var corrupt error
	defer func() {
		if corrupt == nil {
			return
		}
		e.log.Error("request failed on a corrupt data file", "method", r.Method, "path", r.URL.Path, "err", corrupt)
		if w.status == 0 {
			writeError(w, http.StatusInternalServerError, "InternalServerError", corrupt.Error(), 0)
		}
	}()
	defer catchCorrupt(e.opts.Dir, &corrupt)()
	if err != nil {
		writeError(w, http.StatusBadRequest, "BadRequest", err.Error(), 0)
		return
	}
	if len(segs) > 0 && segs[0] == "_cfp" {
		e.serveAdmin(w, r, segs[1:])
		return
	}
	if len(segs) == 2 && segs[0] == "_explorer" && segs[1] == CertFileName && r.Method == http.MethodGet {
		e.serveCertPEM(w)
		return
	}
	segs, byRID := e.namesOfRIDs(segs)
	// An unauthenticated client gets its answer and loses its connection.
	if err := e.verify(r, segs, byRID); err != nil {
		var fe *forbiddenError
		if errors.As(err, &fe) { // a resource token outside its permission
			writeError(w, http.StatusForbidden, "Forbidden", fe.msg, 0)
			return
		}
		e.verdict(rw, r, false)
		h.Set("Connection", "close")
		writeError(w, http.StatusUnauthorized, "Unauthorized", "the input authorization token can't serve the request: "+err.Error(), 0)
		return
	}
	var de *auth.DateError
	if err := auth.CheckDate(r.Header.Get("x-ms-date"), time.Now()); errors.As(err, &de) {
		e.verdict(rw, r, false)
		h.Set("Connection", "close")
		if de.Malformed {
			writeError(w, http.StatusUnauthorized, "Unauthorized", de.ServiceMessage(), 0)
		} else {
			writeError(w, http.StatusForbidden, "Forbidden", de.ServiceMessage(), 0)
		}
		return
	}
	e.verdict(rw, r, true)
	if err := echoPriority(r, h); err != nil {
		e.fail(w, err)
		return
	}
	if len(segs) > 0 || r.Method == http.MethodGet {
		if f, ok := e.faults.pick(len(segs) > 0 && isChangeFeed(r, segs), len(segs) == 0); ok {

			if !e.applyFault(w, r, f) {
				return
			}
		}
	}
	e.route(w, r, segs)
}

// verify authenticates r: a master-key signature, or (with Options.AcceptEmulatorTokens) a
// Microsoft Entra ID token of the kind the SDKs send to the official emulator.
func (e *Emulator) verify(r *http.Request, segs []string, byRID bool) error {
	authz := strings.ToLower(r.Header.Get("Authorization"))
	if isResourceToken(authz) {
		return e.verifyResourceToken(r, segs)
	}
	if strings.HasPrefix(authz, "type%3daad") || strings.HasPrefix(authz, "type=aad") {
		if !e.opts.AcceptEmulatorTokens {
			return fmt.Errorf("%w: Microsoft Entra ID tokens are accepted only on loopback with the well-known key (cfp emulator --accept-emulator-tokens)", auth.ErrMalformed)
		}
		return auth.VerifyEmulatorToken(r, e.opts.Key, time.Now())
	}
	if byRID {
		return auth.VerifyByRID(r, e.key)
	}
	return auth.Verify(r, e.key)
}

// applyFault sleeps the rule's latency and answers its error; it reports whether the request
// should still be served normally.
func (e *Emulator) applyFault(w http.ResponseWriter, r *http.Request, f FaultRule) bool {
	if f.Latency > 0 {
		t := time.NewTimer(f.Latency)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
		}
	}
	switch f.Status {
	case http.StatusTooManyRequests:
		w.Header().Set(hdrRetryAfterMs, strconv.FormatInt(max(f.RetryAfter.Milliseconds(), 1), 10))
		writeError(w, f.Status, "TooManyRequests", "the request rate is too large (injected fault)", cmp0(f.Substatus, 3200))
	case http.StatusServiceUnavailable:
		writeError(w, f.Status, "ServiceUnavailable", "the service is unavailable (injected fault)", f.Substatus)
	case http.StatusInternalServerError:
		writeError(w, f.Status, "InternalServerError", "an internal server error occurred (injected fault)", f.Substatus)
	case http.StatusGone:
		writeError(w, f.Status, "Gone", "the partition key range is gone (injected fault)", f.Substatus)
	case http.StatusBadRequest:
		writeError(w, f.Status, "BadRequest", "the request is invalid (injected fault)", f.Substatus)
	default:
		return true
	}
	return false
}

func cmp0(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

func isChangeFeed(r *http.Request, segs []string) bool {
	return r.Method == http.MethodGet && len(segs) == 5 && segs[4] == "docs" && r.Header.Get(hdrAIM) != ""
}

// splitPath splits an escaped path into unescaped segments.
func splitPath(escaped string) ([]string, error) {
	escaped = strings.Trim(escaped, "/")
	if escaped == "" {
		return nil, nil
	}
	parts := strings.Split(escaped, "/")
	for i, p := range parts {
		u, err := url.PathUnescape(p)
		if err != nil {
			return nil, fmt.Errorf("invalid path segment %q", p)
		}
		parts[i] = u
	}
	return parts, nil
}

func (e *Emulator) route(w http.ResponseWriter, r *http.Request, s []string) {
	if e.routeChildResources(w, r, s) { // users, permissions, sprocs, triggers, udfs
		return
	}
	n := len(s)
	switch {
	case n == 0:
		if r.Method == http.MethodGet {
			e.getAccount(w, r)
			return
		}
	case s[0] == "offers":
		e.serveOffers(w, r, s[1:])
		return
	case s[0] != "dbs":
	case n == 1:
		switch r.Method {
		case http.MethodPost:
			if isQuery(r) {
				e.queryDatabases(w, r)
			} else {
				e.createDatabase(w, r)
			}
			return
		case http.MethodGet:
			e.queryDatabases(w, r)
			return
		}
	case n == 2:
		switch r.Method {
		case http.MethodGet:
			e.readDatabase(w, s[1])
			return
		case http.MethodDelete:
			e.deleteDatabase(w, s[1])
			return
		}
	case s[2] != "colls":
	case n == 3:
		switch r.Method {
		case http.MethodPost:
			if isQuery(r) {
				e.queryContainers(w, r, s[1])
			} else {
				e.createContainer(w, r, s[1])
			}
			return
		case http.MethodGet:
			e.queryContainers(w, r, s[1])
			return
		}
	case n == 4:
		switch r.Method {
		case http.MethodGet:
			e.readContainer(w, r, s[1], s[3])
			return
		case http.MethodDelete:
			e.deleteContainer(w, s[1], s[3])
			return
		case http.MethodPut:
			e.replaceContainer(w, r, s[1], s[3])
			return
		}
	case n == 5 && s[4] == "pkranges":
		if r.Method == http.MethodGet {
			e.readPKRanges(w, r, s[1], s[3])
			return
		}
	case s[4] == "conflicts" && n <= 6:
		if e.serveConflicts(w, r, s[1], s[3], n == 6) {
			return
		}
	case s[4] != "docs":
	case n == 5:
		switch r.Method {
		case http.MethodPost:
			switch {
			case strings.EqualFold(r.Header.Get(hdrQueryPlan), "true"):
				e.writeQueryPlan(w, r)
			case strings.EqualFold(r.Header.Get(hdrIsBatch), "true"):
				e.executeBatch(w, r, s[1], s[3])
			case isQuery(r):
				e.queryItems(w, r, s[1], s[3])
			default:
				e.writeItem(w, r, s[1], s[3], "")
			}
			return
		case http.MethodGet:
			if r.Header.Get(hdrAIM) != "" {
				e.readChangeFeed(w, r, s[1], s[3])
			} else {
				// A read feed of the documents (no query) fans out over every partition
				// without asking, as the gateway serves it (the Python SDK's read_all_items).
				r.Header.Set(hdrEnableCrossPartition, "true")
				e.queryItems(w, r, s[1], s[3])
			}
			return
		}
	case n == 6:
		if status, msg := routedIDRule(s[5]); status == http.StatusBadRequest {
			writeInvalidURL(w, msg)
			return
		} else if status != 0 {
			writeError(w, status, http.StatusText(status), msg, 0)
			return
		}
		switch r.Method {
		case http.MethodGet:
			e.readItem(w, r, s[1], s[3], s[5])
			return
		case http.MethodPut, http.MethodDelete:
			e.writeItem(w, r, s[1], s[3], s[5])
			return
		case http.MethodPatch:
			e.patchItem(w, r, s[1], s[3], s[5])
			return
		}
	}
	if len(s) == 6 && s[0] == "dbs" && s[2] == "colls" && s[4] == "operations" {
		if s[5] == "partitionkeydelete" && r.Method == http.MethodPost {
			e.deleteByPartitionKey(w, r, s[1], s[3])
			return
		}
		e.notSupported(w, r, "operations/"+s[5])
		return
	}
	e.notSupported(w, r, "this operation")
}

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

func isQuery(r *http.Request) bool {
	ct := r.Header.Get("Content-Type")
	return strings.HasPrefix(ct, "application/query+json") ||
		strings.EqualFold(r.Header.Get(hdrIsQuery), "true") ||
		strings.EqualFold(r.Header.Get(hdrQuery), "true")
}

// --- responses -------------------------------------------------------------------------------

type errorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func writeError(w http.ResponseWriter, status int, code, msg string, substatus int) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if substatus != 0 {
		h.Set(hdrSubstatus, strconv.Itoa(substatus))
	}
	b, _ := json.Marshal(errorBody{Code: code, Message: msg})
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// fail answers err with the matching status.
func (e *Emulator) fail(w http.ResponseWriter, err error) {
	var bre *badRequestError
	switch {
	case errors.Is(err, errNotFound):
		writeError(w, http.StatusNotFound, "NotFound", "Entity with the specified id does not exist in the system.", 0)
	case errors.Is(err, errConflict):
		writeError(w, http.StatusConflict, "Conflict", "Entity with the specified id already exists in the system.", 0)
	case errors.Is(err, errPrecondition):
		writeError(w, http.StatusPreconditionFailed, "PreconditionFailed", "One of the specified pre-condition is not met.", 0)
	case errors.Is(err, errRangeGone):
		writeError(w, http.StatusGone, "Gone", "The requested partition key range is gone (split or merged); refresh the partition key ranges.", 1002)
	case errors.As(err, &bre):
		writeError(w, http.StatusBadRequest, "BadRequest", bre.msg, bre.substatus)
	case errors.Is(err, berrors.ErrDatabaseReadOnly) || errors.Is(err, syscall.ENOSPC):
		writeError(w, http.StatusForbidden, "Forbidden", errDiskFull(e.opts.Dir).Error(), 0)
	case errors.Is(err, berrors.ErrDatabaseNotOpen):
		writeError(w, http.StatusServiceUnavailable, "ServiceUnavailable", "the emulator is closed", 0)
	default:
		e.log.Error("request failed", "err", err)
		writeError(w, http.StatusInternalServerError, "InternalServerError", err.Error(), 0)
	}
}

// writeJSON answers with body, its length announced (the service's gateway sends a
// Content-Length; without it Go's server chunks any body over 4 KB, and a client cannot size its
// buffer).
func writeJSON(w http.ResponseWriter, status int, charge float64, body []byte) {
	w.Header().Set(hdrCharge, formatCharge(charge))
	if status != http.StatusNoContent && status != http.StatusNotModified {
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func formatCharge(c float64) string { return strconv.FormatFloat(c, 'f', -1, 64) }

func readBody(r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes+1))
	if err != nil {
		return nil, badRequest("read request body: %v", err)
	}
	if len(b) > maxBodyBytes {
		return nil, badRequest("the request body is larger than %d bytes", maxBodyBytes)
	}
	return b, nil
}

// --- account ---------------------------------------------------------------------------------

func (e *Emulator) getAccount(w http.ResponseWriter, r *http.Request) {
	host := r.Host
	if host == "" {
		host = r.URL.Host
	}
	scheme := "http"
	if requestIsTLS(r) {
		scheme = "https"
		// Over TLS the account advertises 127.0.0.1 for localhost, as the official emulator
		// does (SDK tests compare the regions' endpoints).
		if h, port, err := net.SplitHostPort(host); err == nil && strings.EqualFold(h, "localhost") {
			host = net.JoinHostPort("127.0.0.1", port)
		}
	}
	loc := []map[string]string{{"name": "South Central US", "databaseAccountEndpoint": scheme + "://" + host + "/"}}
	body := map[string]any{
		"id":                           "cfp-emulator",
		"_rid":                         "cfp-emulator.documents.azure.com",
		"_self":                        "",
		"_dbs":                         "//dbs/",
		"media":                        "//media/",
		"addresses":                    "//addresses/",
		"writableLocations":            loc,
		"readableLocations":            loc,
		"enableMultipleWriteLocations": false,
		"userConsistencyPolicy":        map[string]string{"defaultConsistencyLevel": e.opts.DefaultConsistency},
		"userReplicationPolicy":        map[string]any{"asyncReplication": false, "minReplicaSetSize": 1, "maxReplicasetSize": 4},
		"systemReplicationPolicy":      map[string]any{"minReplicaSetSize": 1, "maxReplicasetSize": 4},
		"readPolicy":                   map[string]any{"primaryReadCoefficient": 1, "secondaryReadCoefficient": 1},
		"queryEngineConfiguration":     `{"maxSqlQueryInputLength":262144,"maxJoinsPerSqlQuery":5,"sqlAllowTop":true,"sqlAllowAggregateFunctions":true}`,
	}
	b, _ := json.Marshal(body)
	writeJSON(w, http.StatusOK, chargeMeta, b)
}

// --- databases and containers ----------------------------------------------------------------

func dbBody(rec dbRecord) map[string]any {
	return map[string]any{
		"id": rec.ID, "_rid": rec.RID, "_self": "dbs/" + rec.RID + "/", "_etag": rec.Etag,
		"_colls": "colls/", "_users": "users/", "_ts": rec.Ts,
	}
}

func (e *Emulator) createDatabase(w http.ResponseWriter, r *http.Request) {
	b, err := readBody(r)
	if err != nil {
		e.fail(w, err)
		return
	}
	var req struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(b, &req); err != nil {
		e.fail(w, badRequest("invalid database definition: %v", err))
		return
	}
	rec, err := e.store.createDatabase(req.ID)
	if err != nil {
		e.fail(w, err)
		return
	}
	if err := e.createOffer(r, "dbs/"+rec.RID+"/", rec.RID, 0); err != nil {
		e.fail(w, err)
		return
	}
	out, _ := json.Marshal(dbBody(rec))
	w.Header().Set("etag", rec.Etag)
	writeJSON(w, http.StatusCreated, chargeWrite, out)
}

func (e *Emulator) readDatabase(w http.ResponseWriter, id string) {
	rec, err := e.store.getDatabase(id)
	if err != nil {
		e.fail(w, err)
		return
	}
	out, _ := json.Marshal(dbBody(rec))
	w.Header().Set("etag", rec.Etag)
	writeJSON(w, http.StatusOK, chargeRead, out)
}

func (e *Emulator) deleteDatabase(w http.ResponseWriter, id string) {
	if err := e.store.deleteDatabase(id); err != nil {
		e.fail(w, err)
		return
	}
	w.Header().Set(hdrCharge, formatCharge(chargeWrite))
	w.WriteHeader(http.StatusNoContent)
}

func collBody(st *collState) (map[string]any, error) {
	var props map[string]any
	if err := json.Unmarshal(st.Props, &props); err != nil {
		return nil, fmt.Errorf("decode container definition: %w", err)
	}
	props["_rid"] = st.RID
	props["_self"] = "dbs/" + st.DBRID + "/colls/" + st.RID + "/"
	props["_etag"] = st.Etag
	props["_ts"] = st.Ts
	props["_docs"] = "docs/"
	props["_sprocs"] = "sprocs/"
	props["_triggers"] = "triggers/"
	props["_udfs"] = "udfs/"
	props["_conflicts"] = "conflicts/"
	return props, nil
}

func (e *Emulator) writeColl(w http.ResponseWriter, status int, charge float64, st *collState) {
	body, err := collBody(st)
	if err != nil {
		e.fail(w, err)
		return
	}
	out, _ := json.Marshal(body)
	w.Header().Set("etag", st.Etag)
	w.Header().Set(hdrContentPath, st.RID)
	// The owner's name-based path, as the service sends it: the Java SDK builds the container's
	// name-based link from it (owner + "/colls/" + id), and without it reads no change feed.
	w.Header().Set(hdrAltContentPath, "dbs/"+st.DB)
	writeJSON(w, status, charge, out)
}

func (e *Emulator) createContainer(w http.ResponseWriter, r *http.Request, db string) {
	b, err := readBody(r)
	if err != nil {
		e.fail(w, err)
		return
	}
	st, err := e.store.createContainer(db, b)
	if err != nil {
		e.fail(w, err)
		return
	}
	shared, err := e.hasOffer("dbs/" + st.DBRID + "/")
	if err != nil {
		e.fail(w, err)
		return
	}
	defaultRU := defaultContainerThroughput
	if shared {
		defaultRU = 0
	}
	if err := e.createOffer(r, "dbs/"+st.DBRID+"/colls/"+st.RID+"/", st.RID, defaultRU); err != nil {
		e.fail(w, err)
		return
	}
	e.writeColl(w, http.StatusCreated, chargeWrite, st)
}

// replaceContainer serves PUT on a container: a new definition (indexing policy, time to live,
// ...) with the same partition key.
func (e *Emulator) replaceContainer(w http.ResponseWriter, r *http.Request, db, coll string) {
	b, err := readBody(r)
	if err != nil {
		e.fail(w, err)
		return
	}
	st, err := e.store.replaceContainer(db, coll, b)
	if err != nil {
		e.fail(w, err)
		return
	}
	e.writeColl(w, http.StatusOK, chargeWrite, st)
}

func (e *Emulator) readContainer(w http.ResponseWriter, r *http.Request, db, coll string) {
	st, err := e.store.getContainer(db, coll)
	if err != nil {
		e.fail(w, err)
		return
	}
	if strings.EqualFold(r.Header.Get("x-ms-documentdb-populatequotainfo"), "true") {
		// Indexing is never behind: every index transformation is complete.
		w.Header().Set("x-ms-documentdb-collection-index-transformation-progress", "100")
		w.Header().Set("x-ms-resource-quota", "collectionSize=10485760;documentSize=10240;documentsSize=10485760;")
		w.Header().Set("x-ms-resource-usage", "collectionSize=0;documentSize=0;documentsSize=0;")
	}
	if !strings.EqualFold(r.Header.Get("x-ms-documentdb-populatepartitionstatistics"), "true") {
		e.writeColl(w, http.StatusOK, chargeRead, st)
		return
	}
	body, err := collBody(st)
	if err == nil {
		body["statistics"], err = e.partitionStatistics(db, coll, st)
	}
	if err != nil {
		e.fail(w, err)
		return
	}
	out, _ := json.Marshal(body)
	w.Header().Set("etag", st.Etag)
	w.Header().Set(hdrContentPath, st.RID)
	writeJSON(w, http.StatusOK, chargeRead, out)
}

// partitionStatistics is a container's "statistics" when a read asks for them
// (x-ms-documentdb-populatepartitionstatistics): per live partition key range, its id, how many
// documents it holds and their size in KB.
func (e *Emulator) partitionStatistics(db, coll string, st *collState) ([]map[string]any, error) {
	live := st.live()
	stats := make([]map[string]any, 0, len(live))
	for _, rg := range live {
		var count, size int
		if _, err := e.store.scanItems(db, coll, scanScope{RangeID: rg.idString()}, nil, func(_ []byte, it item) (bool, error) {
			count++
			size += len(it.Body)
			return true, nil
		}); err != nil {
			return nil, err
		}
		stats = append(stats, map[string]any{"id": rg.idString(), "documentCount": count,
			"sizeInKB": (size + 1023) / 1024, "partitionKeys": []any{}})
	}
	return stats, nil
}

func (e *Emulator) deleteContainer(w http.ResponseWriter, db, coll string) {
	if err := e.store.deleteContainer(db, coll); err != nil {
		e.fail(w, err)
		return
	}
	w.Header().Set(hdrCharge, formatCharge(chargeWrite))
	w.WriteHeader(http.StatusNoContent)
}

// --- partition key ranges --------------------------------------------------------------------

func pkRangeRID(collRID string, id uint32) string {
	b, _ := decodeRID(collRID)
	b = binary.LittleEndian.AppendUint64(b, uint64(id)+1)
	b[15] = (b[15] & 0x0F) | 0x50
	return encodeRID(b)
}

func (e *Emulator) readPKRanges(w http.ResponseWriter, r *http.Request, db, coll string) {
	st, err := e.store.getContainer(db, coll)
	if err != nil {
		e.fail(w, err)
		return
	}
	etag := fmt.Sprintf(`"pk-%d"`, st.RangesGen)
	h := w.Header()
	h.Set("etag", etag)
	h.Set(hdrContentPath, st.RID)
	if r.Header.Get(hdrAIM) != "" && r.Header.Get("If-None-Match") == etag {
		h.Set(hdrCharge, formatCharge(chargeMeta))
		w.WriteHeader(http.StatusNotModified)
		return
	}
	live := st.live()
	ranges := make([]map[string]any, 0, len(live))
	for _, rg := range live {
		rid := pkRangeRID(st.RID, rg.ID)
		ranges = append(ranges, map[string]any{
			"id": rg.idString(), "_rid": rid, "_etag": fmt.Sprintf(`"pkr-%d-%d"`, rg.ID, st.RangesGen),
			"_self":        "dbs/" + st.DBRID + "/colls/" + st.RID + "/pkranges/" + rid + "/",
			"minInclusive": rg.Min, "maxExclusive": rg.Max, "ridPrefix": rg.ID,
			"throughputFraction": 1 / float64(len(live)), "status": "online",
			"parents": rg.Parents, "ownedArchivalPKRangeIds": []string{}, "_ts": rg.Ts, "lsn": rg.LSN,
		})
	}
	out, _ := json.Marshal(map[string]any{"_rid": st.RID, "PartitionKeyRanges": ranges, "_count": len(ranges)})
	h.Set(hdrItemCount, strconv.Itoa(len(ranges)))
	writeJSON(w, http.StatusOK, chargeMeta, out)
}

// --- items -----------------------------------------------------------------------------------

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
	if !ok {
		e.fail(w, badRequest(missing, hdrPartitionKey))
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
			return itemWrite{}, nil, badRequest("the %s header is required", hdrPartitionKey)
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
			// The service's item limit, whichever way the item was made (a patch can grow one).
			return itemWrite{}, nil, badRequest("the item is larger than %d bytes", maxBodyBytes)
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
	st, comps, ok := e.keyedContainer(w, r, db, coll, "the %s header is required")
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

// --- change feed -----------------------------------------------------------------------------

// parseModifiedSince accepts RFC 1123 with any zone name (Go sends UTC, JS sends GMT).
func parseModifiedSince(v string) (time.Time, error) {
	if t, err := time.Parse(time.RFC1123, v); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.RFC1123Z, v); err == nil {
		return t, nil
	}
	return http.ParseTime(v)
}

// capStartTimeAfterMerge is the bit of x-ms-cosmos-sdk-supportedcapabilities (a decimal bit
// set; bit 1 is partition merge) that lets a client read a merged partition from a time.
const capStartTimeAfterMerge = 1 << 1

// hasCapability reports whether the request's x-ms-cosmos-sdk-supportedcapabilities has bit.
func hasCapability(r *http.Request, bit uint64) bool {
	n, err := strconv.ParseUint(strings.TrimSpace(r.Header.Get("x-ms-cosmos-sdk-supportedcapabilities")), 10, 64)
	return err == nil && n&bit != 0
}

// parseFeedLSN parses a change-feed continuation (If-None-Match, an LSN, quoted or not). The
// service's LSNs are signed 64-bit numbers: a negative, overflowing or non-numeric value is a
// 400, never a number that wraps around to an early LSN.
func parseFeedLSN(v string) (uint64, error) {
	n, err := strconv.ParseInt(strings.Trim(v, `"`), 10, 64)
	if err != nil || n < 0 {
		return 0, badRequest("invalid change-feed continuation %q in If-None-Match: want an LSN between 0 and %d", v, int64(math.MaxInt64))
	}
	return uint64(n), nil
}

func pageSize(r *http.Request) (int, error) {
	v := r.Header.Get(hdrMaxItemCount)
	if v == "" {
		return defaultPageSize, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, badRequest("invalid %s %q", hdrMaxItemCount, v)
	}
	if n <= 0 {
		return defaultPageSize, nil
	}
	return min(n, maxPageSize), nil
}

func (e *Emulator) readChangeFeed(w http.ResponseWriter, r *http.Request, db, coll string) {
	var allVersions bool
	switch aim := r.Header.Get(hdrAIM); {
	case strings.EqualFold(aim, "Incremental Feed"):
	case strings.EqualFold(aim, "Full-Fidelity Feed"):
		allVersions = true
		if err := checkFullFidelity(r); err != nil {
			e.fail(w, err)
			return
		}
	default:
		e.fail(w, badRequest("change feed mode %q is not supported: send A-IM: Incremental Feed (latest version) or Full-Fidelity Feed (all versions and deletes)", aim))
		return
	}
	var req feedRequest
	var err error
	if req.Max, err = pageSize(r); err != nil {
		e.fail(w, err)
		return
	}
	req.RangeID = r.Header.Get(hdrRangeID)
	if comps, ok, err := headerPK(r); err != nil {
		e.fail(w, err)
		return
	} else if ok {
		req.PK, req.PKComps = epk.Canonical(comps), comps
	}
	req.StartEPK, req.EndEPK = r.Header.Get(hdrStartEPK), r.Header.Get(hdrEndEPK)
	// If-Modified-Since applies together with a continuation: the JavaScript SDK sends the start
	// time on every request, and the service needs it on a merged partition.
	if ims := r.Header.Get("If-Modified-Since"); ims != "" {
		t, err := parseModifiedSince(ims)
		if err != nil {
			e.fail(w, badRequest("invalid If-Modified-Since %q", ims))
			return
		}
		req.ModifiedSince = t
	}
	req.StartTimeAfterMerge = hasCapability(r, capStartTimeAfterMerge)
	switch inm := strings.TrimSpace(r.Header.Get("If-None-Match")); inm {
	case "":
	case "*":
		req.Now = true
	default:
		n, err := parseFeedLSN(inm)
		if err != nil {
			e.fail(w, err)
			return
		}
		req.Since = n
	}
	read := e.store.changeFeed
	if allVersions {
		read = e.store.changeFeedAll
	}
	page, err := read(db, coll, req)
	if err != nil {
		e.fail(w, err)
		return
	}
	h := w.Header()
	h.Set("etag", `"`+strconv.FormatUint(page.Etag, 10)+`"`)
	h.Set(hdrSession, page.RangeID+":-1#"+strconv.FormatUint(page.Current, 10))
	h.Set("lsn", strconv.FormatUint(page.Current, 10))
	h.Set(hdrRangeID, page.RangeID)
	h.Set(hdrItemCount, strconv.Itoa(len(page.Docs)))
	h.Set(hdrContentPath, page.CollRID)
	if len(page.Docs) == 0 {
		h.Set(hdrCharge, formatCharge(FeedEmpty))
		w.WriteHeader(http.StatusNotModified)
		return
	}
	size := 0
	for _, d := range page.Docs {
		size += len(d)
	}
	charge := chargeFeedPage(len(page.Docs), size)
	if !allVersions && r.Header.Get(hdrWireFormat) == wireFormatFullFidelity {
		body, err := latestEnvelope(page.CollRID, page.Docs)
		if page.Body != nil {
			putBody(page.Body)
		}
		if err != nil {
			e.fail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, charge, body)
		return
	}
	if page.Body == nil {
		writeJSON(w, http.StatusOK, charge, documentsBody(page.CollRID, page.Docs))
		return
	}
	writeJSON(w, http.StatusOK, charge, page.Body)
	putBody(page.Body) // the ResponseWriter does not keep it after Write
}

// retentionPeriodMsg is the sentence of the service's 400 to an all-versions read that starts
// before what the feed retains; SDK tests look for it.
const retentionPeriodMsg = "You must read the change feed from within the retention period."

// checkFullFidelity rejects the all-versions reads the service rejects: from the beginning (no
// If-None-Match) or from a time (If-Modified-Since), and any wire format but 2021-09-15.
func checkFullFidelity(r *http.Request) error {
	if v := r.Header.Get(hdrWireFormat); v != wireFormatFullFidelity {
		return badRequest("an all-versions-and-deletes change feed read needs %s: %s (got %q)", hdrWireFormat, wireFormatFullFidelity, v)
	}
	if r.Header.Get("If-Modified-Since") != "" {
		return badRequest("an all-versions-and-deletes change feed cannot start from a point in time (If-Modified-Since): start from now (If-None-Match: *) or from a continuation. %s", retentionPeriodMsg)
	}
	if strings.TrimSpace(r.Header.Get("If-None-Match")) == "" {
		return badRequest("an all-versions-and-deletes change feed cannot start from the beginning: start from now (If-None-Match: *) or from a continuation. %s", retentionPeriodMsg)
	}
	return nil
}

// documentsBody renders {"_rid":..., "Documents":[...], "_count":n} without re-encoding docs.
func documentsBody(rid string, docs [][]byte) []byte {
	return listBody(rid, "Documents", docs)
}

func listBody(rid, field string, docs [][]byte) []byte {
	size := 0
	for _, d := range docs {
		size += len(d)
	}
	b := make([]byte, 0, listBodySize(rid, field, len(docs), size))
	b = appendListHead(b, rid, field)
	for i, d := range docs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, d...)
	}
	return appendListTail(b, len(docs))
}

// listBodySize is an upper bound of the size of a list body of n documents of size bytes in all.
func listBodySize(rid, field string, n, size int) int {
	// Quoting takes at most 6 bytes per byte of the rid, and _count at most 20 digits.
	return len(`{"_rid":"","":[],"_count":}`) + 6*len(rid) + len(field) + 20 + size + n
}

// appendListHead appends {"_rid":rid,"field":[ to b.
func appendListHead(b []byte, rid, field string) []byte {
	b = append(b, `{"_rid":`...)
	b = strconv.AppendQuote(b, rid)
	b = append(b, `,"`...)
	b = append(b, field...)
	return append(b, `":[`...)
}

// appendListTail appends ],"_count":n} to b.
func appendListTail(b []byte, n int) []byte {
	b = append(b, `],"_count":`...)
	b = strconv.AppendInt(b, int64(n), 10)
	return append(b, '}')
}

// maxPooledBody is the largest response buffer kept for reuse: a page of 1,000 typical documents
// fits, a page of large ones is left to the garbage collector rather than held.
const maxPooledBody = 4 << 20

// bodyPool holds response buffers (*[]byte) of change-feed pages, so draining a feed does not
// allocate, zero and collect a page-sized buffer per request.
var bodyPool sync.Pool

// getBody returns an empty buffer with room for n bytes, reused when the pool has one.
func getBody(n int) []byte {
	if p, ok := bodyPool.Get().(*[]byte); ok {
		if cap(*p) >= n {
			return (*p)[:0]
		}
		bodyPool.Put(p)
	}
	return make([]byte, 0, n)
}

// putBody hands b, no longer referenced by its owner, back for reuse.
func putBody(b []byte) {
	if cap(b) > maxPooledBody {
		return
	}
	bodyPool.Put(&b)
}

// deleteByPartitionKey serves POST .../operations/partitionkeydelete: every item of the logical
// partition in x-ms-documentdb-partitionkey is deleted at once (the service deletes in the
// background but hides the items at once; here they are gone when the answer comes), each a
// delete on the change feed. The service answers 200 with no body.
func (e *Emulator) deleteByPartitionKey(w http.ResponseWriter, r *http.Request, db, coll string) {
	st, comps, ok := e.keyedContainer(w, r, db, coll, "the %s header is required")
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
