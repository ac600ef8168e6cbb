package emulator

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
)

// Transport serves HTTP requests with Handler in process, without a socket. It satisfies azcore's
// policy.Transporter, so it can be handed to azcosmos as ClientOptions.Transport. It applies the
// three fixes an outgoing request needs to be served (docs/protocol-gateway.md, "Transport and signatures"): a nil body becomes http.NoBody, Host is copied from
// the URL when empty, and the response carries the request.
type Transport struct {
	Handler http.Handler
}

// Do serves req with t.Handler and returns the recorded response. It returns an error only when
// req's context has ended.
func (t Transport) Do(req *http.Request) (*http.Response, error) {
	if err := req.Context().Err(); err != nil {
		return nil, err
	}
	in := req.Clone(req.Context())
	if in.Body == nil {
		in.Body = http.NoBody
	}
	if in.Host == "" {
		in.Host = req.URL.Host
	}
	in.RequestURI = req.URL.RequestURI()
	if in.Proto == "" {
		in.Proto, in.ProtoMajor, in.ProtoMinor = "HTTP/1.1", 1, 1
	}
	w := &responseRecorder{header: make(http.Header)}
	t.Handler.ServeHTTP(w, in)
	if w.status == 0 {
		w.status = http.StatusOK
	}
	// A client reading the response from a socket gets its header names canonicalised by
	// net/http (the gateway writes etag, Header.Get looks up Etag): do the same.
	hdr := make(http.Header, len(w.header))
	for k, v := range w.header {
		ck := http.CanonicalHeaderKey(k)
		hdr[ck] = append(hdr[ck], v...)
	}
	resp := &http.Response{
		Status:        strconv.Itoa(w.status) + " " + http.StatusText(w.status),
		StatusCode:    w.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        hdr,
		Body:          io.NopCloser(bytes.NewReader(w.body.Bytes())),
		ContentLength: int64(w.body.Len()),
		Request:       req,
	}
	return resp, nil
}

// responseRecorder is a minimal http.ResponseWriter (net/http/httptest would register a
// command-line flag in every binary that links it).
type responseRecorder struct {
	header      http.Header
	status      int
	body        bytes.Buffer
	wroteHeader bool
}

func (r *responseRecorder) Header() http.Header { return r.header }

func (r *responseRecorder) WriteHeader(status int) {
	if r.wroteHeader {
		return
	}
	r.wroteHeader = true
	r.status = status
}

func (r *responseRecorder) Write(p []byte) (int, error) {
	if !r.wroteHeader {
		r.WriteHeader(http.StatusOK)
	}
	return r.body.Write(p)
}
