package emulator

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/cfp-dev/cfp/emulator/auth"
)

// Admin endpoints let other processes drive a running `cfp emulator`. They are authenticated
// with the account key, signed like a Cosmos DB request plus the SHA-256 of the body
// (auth.SignWithBody, see SignRequest), with the service's x-ms-date window (auth.CheckDate), so
// a captured request can be replayed for 15 minutes at most, and never with another body:
//
//	GET    /_cfp/status   data directory, pid, address, databases, containers and ranges
//	POST   /_cfp/faults   add a fault rule (FaultRuleJSON)
//	DELETE /_cfp/faults   remove every fault rule
//	POST   /_cfp/split    split a range: {"db":..., "coll":..., "range":...} -> {"children":[...]}
//	POST   /_cfp/merge    merge adjacent ranges: {"db":..., "coll":..., "ranges":[...]} -> {"merged":...}

// FaultRuleJSON is the wire form of a FaultRule on POST /_cfp/faults.
type FaultRuleJSON struct {
	Status         int     `json:"status,omitempty"`
	Substatus      int     `json:"substatus,omitempty"`
	RetryAfterMs   int64   `json:"retryAfterMs,omitempty"`
	LatencyMs      int64   `json:"latencyMs,omitempty"`
	Count          int     `json:"count,omitempty"`
	Fraction       float64 `json:"fraction,omitempty"`
	ChangeFeedOnly bool    `json:"changeFeedOnly,omitempty"`
	IncludeAccount bool    `json:"includeAccount,omitempty"`
}

// Rule converts the wire form.
func (j FaultRuleJSON) Rule() FaultRule {
	return FaultRule{
		Status: j.Status, Substatus: j.Substatus,
		RetryAfter: time.Duration(j.RetryAfterMs) * time.Millisecond,
		Latency:    time.Duration(j.LatencyMs) * time.Millisecond,
		Count:      j.Count, Fraction: j.Fraction, ChangeFeedOnly: j.ChangeFeedOnly,
		IncludeAccount: j.IncludeAccount,
	}
}

// SplitRequest is the body of POST /_cfp/split.
type SplitRequest struct {
	DB    string `json:"db"`
	Coll  string `json:"coll"`
	Range string `json:"range"`
}

// SplitResponse is the answer of POST /_cfp/split.
type SplitResponse struct {
	Children []string `json:"children"`
}

// MergeRequest is the body of POST /_cfp/merge.
type MergeRequest struct {
	DB     string   `json:"db"`
	Coll   string   `json:"coll"`
	Ranges []string `json:"ranges"`
}

// MergeResponse is the answer of POST /_cfp/merge.
type MergeResponse struct {
	Merged string `json:"merged"`
}

// Status is the answer of GET /_cfp/status.
type Status struct {
	Dir        string           `json:"dir"`
	PID        int              `json:"pid"`
	Addr       string           `json:"addr,omitempty"`
	FaultRules int              `json:"faultRules"`
	Databases  []DatabaseStatus `json:"databases"`
}

// DatabaseStatus describes one database in Status.
type DatabaseStatus struct {
	ID         string            `json:"id"`
	RID        string            `json:"rid"`
	Containers []ContainerStatus `json:"containers"`
}

// ContainerStatus describes one container in Status.
type ContainerStatus struct {
	ID     string        `json:"id"`
	RID    string        `json:"rid"`
	Paths  []string      `json:"partitionKeyPaths"`
	Ranges []RangeStatus `json:"ranges"`
}

// RangeStatus describes one live physical partition in Status.
type RangeStatus struct {
	ID      string   `json:"id"`
	Min     string   `json:"minInclusive"`
	Max     string   `json:"maxExclusive"`
	Parents []string `json:"parents"`
	LSN     uint64   `json:"lsn"`
}

// SignRequest sets x-ms-date and a master-key Authorization header on req, so that it passes the
// emulator's signature check (for admin calls from other processes). key is the base64 account
// key; "" means the well-known emulator key. A request to the admin API (/_cfp/) is signed with
// its body (auth.SignWithBody), which SignRequest reads through req.GetBody, or from req.Body,
// which it then replaces.
func SignRequest(req *http.Request, key string) error {
	if key == "" {
		key = auth.WellKnownKey
	}
	k, err := decodeKey(key)
	if err != nil {
		return err
	}
	date := time.Now().UTC().Format(http.TimeFormat)
	typ, link := auth.ResourceFromPath(req.URL.Path)
	var sig string
	if isAdminPath(req.URL.Path) {
		body, err := requestBody(req)
		if err != nil {
			return err
		}
		sig = auth.SignWithBody(k, req.Method, typ, link, date, body)
	} else {
		sig = auth.Sign(k, req.Method, typ, link, date)
	}
	req.Header.Set("x-ms-date", date)
	req.Header.Set("Authorization", url.QueryEscape("type=master&ver=1.0&sig="+sig))
	return nil
}

// isAdminPath reports whether an unescaped request path is in the admin API.
func isAdminPath(path string) bool {
	return path == "/_cfp" || strings.HasPrefix(path, "/_cfp/")
}

// requestBody returns the body req will send, leaving req able to send it.
func requestBody(req *http.Request) ([]byte, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return nil, nil
	}
	if req.GetBody != nil {
		rc, err := req.GetBody()
		if err != nil {
			return nil, fmt.Errorf("read request body to sign: %w", err)
		}
		defer rc.Close()
		return io.ReadAll(rc)
	}
	b, err := io.ReadAll(req.Body)
	_ = req.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("read request body to sign: %w", err)
	}
	req.Body = io.NopCloser(bytes.NewReader(b))
	return b, nil
}

// maxAdminBodyBytes bounds admin request bodies, which are a few hundred bytes; the body is read
// before the signature over it can be checked.
const maxAdminBodyBytes = 64 << 10

// Status returns the emulator's state, as served on GET /_cfp/status.
func (e *Emulator) Status() (Status, error) {
	st := Status{Dir: e.opts.Dir, PID: os.Getpid(), Addr: e.ServingAddr(), FaultRules: e.faults.active(), Databases: []DatabaseStatus{}}
	dbs, err := e.store.listDatabases()
	if err != nil {
		return st, fmt.Errorf("list databases: %w", err)
	}
	for _, d := range dbs {
		ds := DatabaseStatus{ID: d.ID, RID: d.RID, Containers: []ContainerStatus{}}
		colls, err := e.store.listContainers(d.ID)
		if err != nil {
			return st, fmt.Errorf("list containers of %s: %w", d.ID, err)
		}
		for _, c := range colls {
			cs := ContainerStatus{ID: c.ID, RID: c.RID, Paths: c.Paths}
			for _, r := range c.live() {
				cs.Ranges = append(cs.Ranges, RangeStatus{ID: r.idString(), Min: r.Min, Max: r.Max, Parents: r.Parents, LSN: r.LSN})
			}
			ds.Containers = append(ds.Containers, cs)
		}
		st.Databases = append(st.Databases, ds)
	}
	return st, nil
}

func (e *Emulator) serveAdmin(w http.ResponseWriter, r *http.Request, segs []string) {
	refuse := func(status int, code, msg string) {
		e.verdict(w, r, false)
		w.Header().Set("Connection", "close")
		writeError(w, status, code, msg, 0)
	}
	// The date first: a stale request is refused before its body is read.
	var de *auth.DateError
	if err := auth.CheckDate(r.Header.Get("x-ms-date"), time.Now()); errors.As(err, &de) {
		if de.Malformed {
			refuse(http.StatusUnauthorized, "Unauthorized", "admin request not authorized: "+de.ServiceMessage())
		} else {
			refuse(http.StatusForbidden, "Forbidden", "admin request not authorized: "+de.ServiceMessage())
		}
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxAdminBodyBytes+1))
	if err != nil || len(body) > maxAdminBodyBytes {
		refuse(http.StatusBadRequest, "BadRequest", fmt.Sprintf("admin request body unreadable or larger than %d bytes", maxAdminBodyBytes))
		return
	}
	if err := auth.VerifyWithBody(r, e.key, body); err != nil {
		refuse(http.StatusUnauthorized, "Unauthorized", "admin request not authorized: "+err.Error())
		return
	}
	e.verdict(w, r, true)
	switch path := strings.Join(segs, "/"); {
	case path == "status" && r.Method == http.MethodGet:
		st, err := e.Status()
		if err != nil {
			e.fail(w, err)
			return
		}
		b, _ := json.Marshal(st)
		writeJSON(w, http.StatusOK, 0, b)
	case path == "faults" && r.Method == http.MethodPost:
		var j FaultRuleJSON
		if err := decodeJSONBody(body, &j); err != nil {
			e.fail(w, err)
			return
		}
		if err := e.InjectFaults(j.Rule()); err != nil {
			e.fail(w, badRequest("%v", err))
			return
		}
		writeJSON(w, http.StatusOK, 0, []byte(`{"faultRules":`+fmt.Sprint(e.faults.active())+`}`))
	case path == "faults" && r.Method == http.MethodDelete:
		e.ClearFaults()
		w.WriteHeader(http.StatusNoContent)
	case path == "split" && r.Method == http.MethodPost:
		var req SplitRequest
		if err := decodeJSONBody(body, &req); err != nil {
			e.fail(w, err)
			return
		}
		children, err := e.Split(req.DB, req.Coll, req.Range)
		if err != nil {
			e.fail(w, err)
			return
		}
		b, _ := json.Marshal(SplitResponse{Children: children})
		writeJSON(w, http.StatusOK, 0, b)
	case path == "merge" && r.Method == http.MethodPost:
		var req MergeRequest
		if err := decodeJSONBody(body, &req); err != nil {
			e.fail(w, err)
			return
		}
		merged, err := e.Merge(req.DB, req.Coll, req.Ranges)
		if err != nil {
			e.fail(w, err)
			return
		}
		b, _ := json.Marshal(MergeResponse{Merged: merged})
		writeJSON(w, http.StatusOK, 0, b)
	default:
		writeError(w, http.StatusNotFound, "NotFound", fmt.Sprintf("%s %s is not an admin endpoint", r.Method, r.URL.Path), 0)
	}
}

func decodeJSONBody(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badRequest("invalid request body: %v", err)
	}
	return nil
}
