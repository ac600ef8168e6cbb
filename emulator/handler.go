package emulator

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	if !e.authenticate(rw, w, r, segs, byRID) {
		return
	}
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
	e.dispatch(w, r, segs)
}

// authenticate checks a request's credentials and date. A request that fails gets its 401 or
// 403 and, unless it is a resource token outside its permission, loses its connection; the
// verdict is recorded for the connection either way (rw is the connection's writer, w the
// request's). It reports whether the request may be served.
func (e *Emulator) authenticate(rw http.ResponseWriter, w http.ResponseWriter, r *http.Request, segs []string, byRID bool) bool {
	h := w.Header()
	if err := e.verify(r, segs, byRID); err != nil {
		var fe *forbiddenError
		if errors.As(err, &fe) { // a resource token outside its permission
			writeError(w, http.StatusForbidden, "Forbidden", fe.msg, 0)
			return false
		}
		e.verdict(rw, r, false)
		h.Set("Connection", "close")
		writeError(w, http.StatusUnauthorized, "Unauthorized", "the input authorization token can't serve the request: "+err.Error(), 0)
		return false
	}
	var de *auth.DateError
	if err := checkDate(r); errors.As(err, &de) {
		e.verdict(rw, r, false)
		h.Set("Connection", "close")
		if de.Malformed {
			writeError(w, http.StatusUnauthorized, "Unauthorized", de.ServiceMessage(), 0)
		} else {
			writeError(w, http.StatusForbidden, "Forbidden", de.ServiceMessage(), 0)
		}
		return false
	}
	e.verdict(rw, r, true)
	return true
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
	case errors.Is(err, errTooLarge):
		writeError(w, http.StatusRequestEntityTooLarge, "RequestEntityTooLarge", "Request size is too large.", 0)
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
		return nil, errTooLarge
	}
	return b, nil
}

// --- account ---------------------------------------------------------------------------------

// --- databases and containers ----------------------------------------------------------------

// --- partition key ranges --------------------------------------------------------------------

// --- items -----------------------------------------------------------------------------------

// --- change feed -----------------------------------------------------------------------------

// capStartTimeAfterMerge is the bit of x-ms-cosmos-sdk-supportedcapabilities (a decimal bit
// set; bit 1 is partition merge) that lets a client read a merged partition from a time.
const capStartTimeAfterMerge = 1 << 1

// retentionPeriodMsg is the sentence of the service's 400 to an all-versions read that starts
// before what the feed retains; SDK tests look for it.
const retentionPeriodMsg = "You must read the change feed from within the retention period."

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
