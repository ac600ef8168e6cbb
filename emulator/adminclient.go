package emulator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// AdminClient calls the /_cfp/ admin API (see the top of admin.go) of an emulator that another
// process serves, signing each request with the emulator's key. It is what `cfp emulator
// split`, `merge` and `faults` use to reach a running `cfp emulator`; LocalAdmin does the same
// on a data directory opened in process. Use one client from one goroutine at a time.
type AdminClient struct {
	base string
	key  string
	hc   *http.Client
}

// NewAdminClient returns a client of the emulator at endpoint ("http://localhost:8081/"),
// signing with key ("" for the well-known emulator key). Each call gives up after 30 seconds.
func NewAdminClient(endpoint, key string) *AdminClient {
	return &AdminClient{
		base: strings.TrimSuffix(endpoint, "/"),
		key:  key,
		hc:   &http.Client{Timeout: 30 * time.Second},
	}
}

// WithTransport makes the client send its requests through rt, for an https endpoint whose
// certificate is trusted through --ca-file; nil keeps the default transport. It returns c.
func (c *AdminClient) WithTransport(rt http.RoundTripper) *AdminClient {
	c.hc.Transport = rt
	return c
}

// Endpoint returns the emulator's base URL, without the trailing slash.
func (c *AdminClient) Endpoint() string { return c.base }

// ErrNoAdminAPI means the endpoint answered, but not as a cfp emulator: it has no /_cfp/ API.
var ErrNoAdminAPI = errors.New("no emulator admin API")

// ErrAdminKey means the key cannot sign a request (it is not base64).
var ErrAdminKey = errors.New("invalid emulator key")

// AdminError is an error answer of the admin API.
type AdminError struct {
	// Op names the call ("split", "read emulator status").
	Op      string
	Status  int
	Message string
}

func (e *AdminError) Error() string {
	return fmt.Sprintf("%s: HTTP %d: %s", e.Op, e.Status, e.Message)
}

// AuthError reports whether the emulator rejected the key.
func (e *AdminError) AuthError() bool { return e.Status == http.StatusUnauthorized }

// AdminUnreachableError means no answer came from the endpoint (nothing listens, a timeout).
type AdminUnreachableError struct {
	Op       string
	Endpoint string
	Err      error
}

func (e *AdminUnreachableError) Error() string { return e.Op + ": " + e.Err.Error() }
func (e *AdminUnreachableError) Unwrap() error { return e.Err }

// do sends one admin request with the JSON body in (nil for none) and decodes the answer into
// out (nil to ignore it). Errors are *AdminError, *AdminUnreachableError, or wrap ErrAdminKey
// or ErrNoAdminAPI.
func (c *AdminClient) do(ctx context.Context, op, method, path string, in, out any) error {
	var body io.Reader = http.NoBody
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	req.Header.Set("Content-Type", "application/json")
	if err := SignRequest(req, c.key); err != nil {
		return fmt.Errorf("%s: %w: %w", op, ErrAdminKey, err)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return &AdminUnreachableError{Op: op, Endpoint: c.base, Err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("%s: read answer: %w", op, err)
	}
	if resp.StatusCode == http.StatusNotFound && !json.Valid(b) {
		return fmt.Errorf("%s: %s has %w", op, c.base, ErrNoAdminAPI)
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(b, &e)
		if e.Message == "" {
			e.Message = http.StatusText(resp.StatusCode)
		}
		return &AdminError{Op: op, Status: resp.StatusCode, Message: e.Message}
	}
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("%s: decode answer: %w", op, err)
		}
	}
	return nil
}

// Status returns the emulator's state (GET /_cfp/status).
func (c *AdminClient) Status(ctx context.Context) (Status, error) {
	var st Status
	err := c.do(ctx, "read emulator status", http.MethodGet, "/_cfp/status", nil, &st)
	return st, err
}

// Split splits a live range of db/coll and returns its two children's ids (POST /_cfp/split).
func (c *AdminClient) Split(ctx context.Context, db, coll, rangeID string) ([]string, error) {
	var resp SplitResponse
	err := c.do(ctx, "split", http.MethodPost, "/_cfp/split", SplitRequest{DB: db, Coll: coll, Range: rangeID}, &resp)
	return resp.Children, err
}

// Merge merges adjacent live ranges of db/coll and returns the new range's id (POST /_cfp/merge).
func (c *AdminClient) Merge(ctx context.Context, db, coll string, rangeIDs []string) (string, error) {
	var resp MergeResponse
	err := c.do(ctx, "merge", http.MethodPost, "/_cfp/merge", MergeRequest{DB: db, Coll: coll, Ranges: rangeIDs}, &resp)
	return resp.Merged, err
}

// InjectFaults adds a fault rule and returns the number of active rules (POST /_cfp/faults).
func (c *AdminClient) InjectFaults(ctx context.Context, rule FaultRuleJSON) (int, error) {
	var resp struct {
		FaultRules int `json:"faultRules"`
	}
	err := c.do(ctx, "inject faults", http.MethodPost, "/_cfp/faults", rule, &resp)
	return resp.FaultRules, err
}

// ClearFaults removes every fault rule (DELETE /_cfp/faults).
func (c *AdminClient) ClearFaults(ctx context.Context) error {
	return c.do(ctx, "clear faults", http.MethodDelete, "/_cfp/faults", nil, nil)
}

// Close releases the client's idle connections.
func (c *AdminClient) Close() error {
	c.hc.CloseIdleConnections()
	return nil
}

// ErrNoFaultsInProcess means fault rules were asked of a LocalAdmin: they live in a serving
// emulator and end with its process.
var ErrNoFaultsInProcess = errors.New("fault rules need a serving emulator")

// LocalAdmin is the admin API of an emulator opened in process, with AdminClient's methods:
// Status, Split and Merge act on the emulator; InjectFaults is refused (ErrNoFaultsInProcess)
// and ClearFaults has nothing to clear. Close closes the emulator.
type LocalAdmin struct{ Emu *Emulator }

// Status returns the emulator's state.
func (l LocalAdmin) Status(context.Context) (Status, error) { return l.Emu.Status() }

// Split splits a live range of db/coll and returns its two children's ids.
func (l LocalAdmin) Split(_ context.Context, db, coll, rangeID string) ([]string, error) {
	return l.Emu.Split(db, coll, rangeID)
}

// Merge merges adjacent live ranges of db/coll and returns the new range's id.
func (l LocalAdmin) Merge(_ context.Context, db, coll string, rangeIDs []string) (string, error) {
	return l.Emu.Merge(db, coll, rangeIDs)
}

// InjectFaults returns ErrNoFaultsInProcess.
func (l LocalAdmin) InjectFaults(context.Context, FaultRuleJSON) (int, error) {
	return 0, ErrNoFaultsInProcess
}

// ClearFaults does nothing: an emulator opened in process holds no fault rules from a client.
func (l LocalAdmin) ClearFaults(context.Context) error { return nil }

// Close closes the emulator.
func (l LocalAdmin) Close() error { return l.Emu.Close() }
