package emulator

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cfp-dev/cfp/internal/epk"
)

// The change feed of a container: latest version and all versions and deletes.

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
	req, allVersions, err := feedRequestOf(r)
	if err != nil {
		e.fail(w, err)
		return
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
	e.writeFeedPage(w, r, page, allVersions)
}

// feedRequestOf reads a change-feed request's mode (allVersions: all versions and deletes),
// range or partition key, start and page size from its headers.
func feedRequestOf(r *http.Request) (req feedRequest, allVersions bool, err error) {
	switch aim := r.Header.Get(hdrAIM); {
	case strings.EqualFold(aim, "Incremental Feed"):
	case strings.EqualFold(aim, "Full-Fidelity Feed"):
		allVersions = true
		if err := checkFullFidelity(r); err != nil {
			return req, true, err
		}
	default:
		return req, false, badRequest("change feed mode %q is not supported: send A-IM: Incremental Feed (latest version) or Full-Fidelity Feed (all versions and deletes)", aim)
	}
	if req.Max, err = pageSize(r); err != nil {
		return req, allVersions, err
	}
	req.RangeID = r.Header.Get(hdrRangeID)
	if comps, ok, err := headerPK(r); err != nil {
		return req, allVersions, err
	} else if ok {
		req.PK, req.PKComps = epk.Canonical(comps), comps
	}
	req.StartEPK, req.EndEPK = r.Header.Get(hdrStartEPK), r.Header.Get(hdrEndEPK)
	// If-Modified-Since applies together with a continuation: the JavaScript SDK sends the start
	// time on every request, and the service needs it on a merged partition.
	if ims := r.Header.Get("If-Modified-Since"); ims != "" {
		t, err := parseModifiedSince(ims)
		if err != nil {
			return req, allVersions, badRequest("invalid If-Modified-Since %q", ims)
		}
		req.ModifiedSince = t
	}
	req.StartTimeAfterMerge = hasCapability(r, capStartTimeAfterMerge)
	switch inm := strings.TrimSpace(r.Header.Get("If-None-Match")); inm {
	case "":
	case "*":
		req.Now = true
	default:
		if req.Since, err = parseFeedLSN(inm); err != nil {
			return req, allVersions, err
		}
	}
	return req, allVersions, nil
}

// writeFeedPage answers a change-feed page: 304 when it is empty, else its documents, in the
// latest-version envelope of wire format 2021-09-15 when the client asked for it.
func (e *Emulator) writeFeedPage(w http.ResponseWriter, r *http.Request, page feedPage, allVersions bool) {
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
