package emulator_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/emulator"
	"github.com/cfp-dev/cfp/emulator/auth"
)

// datedRequest sends GET /dbs signed with the well-known key at the given x-ms-date.
func datedRequest(t *testing.T, e *emulator.Emulator, date string) (*http.Response, string) {
	t.Helper()
	key, _ := base64.StdEncoding.DecodeString(auth.WellKnownKey)
	req, _ := http.NewRequest(http.MethodGet, "http://raw.test/dbs", nil)
	req.Header.Set("x-ms-date", date)
	req.Header.Set("Authorization", url.QueryEscape("type=master&ver=1.0&sig="+auth.Sign(key, "GET", "dbs", "", date)))
	resp, err := emulator.Transport{Handler: e.Handler()}.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var body struct{ Code, Message string }
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp, body.Message
}

func TestAuth_DateMustBeRFC1123AndRecent(t *testing.T) {
	t.Parallel()
	e := openEmu(t, emulator.Options{})
	now := time.Now().UTC()
	tests := []struct {
		name       string
		date       string
		wantStatus int
		wantMsg    string
	}{
		{"now", now.Format(http.TimeFormat), http.StatusOK, ""},
		{"now in UTC", now.Format(time.RFC1123), http.StatusOK, ""},
		{"14 minutes old", now.Add(-14 * time.Minute).Format(http.TimeFormat), http.StatusOK, ""},
		{"a minute ahead", now.Add(time.Minute).Format(http.TimeFormat), http.StatusOK, ""},
		{"garbage", "yesterday-ish", http.StatusUnauthorized, "The input date header is invalid format. Please pass in RFC 1123 style date format."},
		{"RFC 3339", now.Format(time.RFC3339), http.StatusUnauthorized, "The input date header is invalid format."},
		{"16 minutes old", now.Add(-16 * time.Minute).Format(http.TimeFormat), http.StatusForbidden, "The authorization token is not valid at the current time. Please create another token and retry (token start time: "},
		{"a day old", now.Add(-24 * time.Hour).Format(http.TimeFormat), http.StatusForbidden, "current server time: "},
		{"10 minutes ahead", now.Add(10 * time.Minute).Format(http.TimeFormat), http.StatusForbidden, "token expiry time: " + now.Add(25*time.Minute).Format(http.TimeFormat)},
	}
	for _, tc := range tests {
		resp, msg := datedRequest(t, e, tc.date)
		if resp.StatusCode != tc.wantStatus || !strings.Contains(msg, tc.wantMsg) {
			t.Errorf("%s (%q): %d %q, want %d with %q", tc.name, tc.date, resp.StatusCode, msg, tc.wantStatus, tc.wantMsg)
		}
		if tc.wantStatus != http.StatusOK && resp.Header.Get("Connection") != "close" {
			t.Errorf("%s: a refused request keeps its connection", tc.name)
		}
	}
}

func TestChangeFeed_OverflowingContinuationIs400(t *testing.T) {
	t.Parallel()
	e := openEmu(t, emulator.Options{Partitions: 1})
	cc := setupContainer(t, newClient(t, e, ""), "db", "c")
	for i := range 3 {
		upsert(t, cc, doc{ID: "d" + string(rune('0'+i)), PK: "p", V: 1})
	}
	for _, cont := range []string{`"18446744073709551615"`, "18446744073709551615", `"9223372036854775808"`, `"-1"`, `"1e3"`, `"abc"`, `""x`} {
		resp, body := rawRequest(t, e, http.MethodGet, "/dbs/db/colls/c/docs", map[string]string{
			"A-IM": "Incremental Feed", "If-None-Match": cont, "x-ms-documentdb-partitionkeyrangeid": "0",
		}, "")
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "continuation") {
			t.Errorf("continuation %s: %d %s, want 400 naming the continuation", cont, resp.StatusCode, body)
		}
	}
	// The largest LSN the service can have is read as an LSN in the future: nothing new yet.
	resp, body := rawRequest(t, e, http.MethodGet, "/dbs/db/colls/c/docs", map[string]string{
		"A-IM": "Incremental Feed", "If-None-Match": `"9223372036854775807"`, "x-ms-documentdb-partitionkeyrangeid": "0",
	}, "")
	if resp.StatusCode != http.StatusNotModified {
		t.Errorf("continuation at the largest LSN: %d %s, want 304", resp.StatusCode, body)
	}
}

// TestHandler_DataFileDamagedWhileOpenIs500 truncates, then overwrites, the data file under a
// running emulator: reads then fault (SIGBUS) or panic inside bbolt, and each must be answered
// with a 500 that says the data directory is corrupt, not take the process down.
func TestHandler_DataFileDamagedWhileOpenIs500(t *testing.T) {
	t.Parallel()
	for _, damage := range []string{"truncate", "overwrite"} {
		t.Run(damage, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			e := openEmu(t, emulator.Options{Dir: dir, Partitions: 1, TTLSweepInterval: -1})
			cc := setupContainer(t, newClient(t, e, ""), "db", "c")
			for i := range 100 {
				upsert(t, cc, doc{ID: fmt.Sprintf("d%03d-%s", i, strings.Repeat("x", 200)), PK: "p", V: i})
			}
			path := filepath.Join(dir, "cfp-emulator.db")
			switch damage {
			case "truncate":
				if err := os.Truncate(path, 2*4096); err != nil {
					t.Fatal(err)
				}
			case "overwrite":
				fi, err := os.Stat(path)
				if err != nil {
					t.Fatal(err)
				}
				junk := make([]byte, fi.Size()-2*4096)
				for i := range junk {
					junk[i] = byte(i*7 + 3)
				}
				f, err := os.OpenFile(path, os.O_WRONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := f.WriteAt(junk, 2*4096); err != nil {
					t.Fatal(err)
				}
				_ = f.Close()
			}
			resp, body := rawRequest(t, e, http.MethodGet, "/dbs/db/colls/c/docs/d007-"+strings.Repeat("x", 200), map[string]string{"x-ms-documentdb-partitionkey": `["p"]`}, "")
			if resp.StatusCode != http.StatusInternalServerError || !strings.Contains(string(body), "data directory "+dir+" is corrupt: ") {
				t.Errorf("read after the damage: %d %s, want 500 naming the corrupt directory", resp.StatusCode, body)
			}
			resp, body = rawRequest(t, e, http.MethodPost, "/dbs/db/colls/c/docs", map[string]string{"x-ms-documentdb-partitionkey": `["p"]`}, `{"id":"new","pk":"p"}`)
			if resp.StatusCode != http.StatusInternalServerError {
				t.Errorf("write after the damage: %d %s, want 500", resp.StatusCode, body)
			}
		})
	}
}

// countingHandler counts the records of one message and keeps their "scanned" attribute.
type countingHandler struct {
	mu      sync.Mutex
	msg     string
	scanned []int64
}

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *countingHandler) WithGroup(string) slog.Handler            { return h }
func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message != h.msg {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "scanned" {
			h.mu.Lock()
			h.scanned = append(h.scanned, a.Value.Int64())
			h.mu.Unlock()
		}
		return true
	})
	return nil
}

// TestQuery_ClientThatLeavesStopsTheScan: a query whose client has gone (its context ended)
// stops scanning and answers nothing, for ORDER BY, plain and aggregate queries.
func TestQuery_ClientThatLeavesStopsTheScan(t *testing.T) {
	t.Parallel()
	logs := &countingHandler{msg: "query abandoned by its client"}
	e := openEmu(t, emulator.Options{Partitions: 1, Logger: slog.New(logs)})
	cc := setupContainer(t, newClient(t, e, ""), "db", "c")
	const n = 2000
	for i := range n {
		upsert(t, cc, doc{ID: fmt.Sprintf("d%04d", i), PK: "p", V: i})
	}
	for _, q := range []string{"SELECT * FROM c ORDER BY c.v DESC", "SELECT * FROM c WHERE c.v < 0", "SELECT VALUE COUNT(1) FROM c"} {
		body, _ := json.Marshal(map[string]any{"query": q})
		req := httptest.NewRequest(http.MethodPost, "http://raw.test/dbs/db/colls/c/docs", strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/query+json")
		req.Header.Set("x-ms-documentdb-isquery", "true")
		req.Header.Set("x-ms-documentdb-partitionkey", `["p"]`)
		if err := emulator.SignRequest(req, ""); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		rec := httptest.NewRecorder()
		e.Handler().ServeHTTP(rec, req.WithContext(ctx))
		if rec.Body.Len() != 0 {
			t.Errorf("%s: a client that left got an answer: %d %s", q, rec.Code, rec.Body.String())
		}
	}
	logs.mu.Lock()
	defer logs.mu.Unlock()
	if len(logs.scanned) != 3 {
		t.Fatalf("%d abandoned queries logged, want 3", len(logs.scanned))
	}
	for _, s := range logs.scanned {
		if s >= n {
			t.Errorf("an abandoned query scanned %d of %d items, want it to stop early", s, n)
		}
	}
}

// TestQuery_OrderByBound: ORDER BY keeps at most MaxOrderByItems results per page, pages within
// the bound come in order, and a deeper page is a 400 that says so.
func TestQuery_OrderByBound(t *testing.T) {
	t.Parallel()
	e := openEmu(t, emulator.Options{Partitions: 1, MaxOrderByItems: 12})
	cc := setupContainer(t, newClient(t, e, ""), "db", "c")
	for i := range 30 {
		upsert(t, cc, doc{ID: fmt.Sprintf("d%02d", i), PK: "p", V: (i * 7) % 30})
	}
	page := func(cont string) (int, []doc, string, string) {
		hdr := map[string]string{"Content-Type": "application/query+json", "x-ms-documentdb-isquery": "true",
			"x-ms-documentdb-partitionkey": `["p"]`, "x-ms-max-item-count": "5"}
		if cont != "" {
			hdr["x-ms-continuation"] = cont
		}
		resp, body := rawRequest(t, e, http.MethodPost, "/dbs/db/colls/c/docs", hdr, `{"query":"SELECT * FROM c ORDER BY c.v DESC"}`)
		var out struct{ Documents []doc }
		_ = json.Unmarshal(body, &out)
		return resp.StatusCode, out.Documents, resp.Header.Get("x-ms-continuation"), string(body)
	}
	var got []int
	cont := ""
	for range 2 {
		code, docs, next, body := page(cont)
		if code != http.StatusOK || next == "" {
			t.Fatalf("page within the bound: %d %s", code, body)
		}
		for _, d := range docs {
			got = append(got, d.V)
		}
		cont = next
	}
	if want := []int{29, 28, 27, 26, 25, 24, 23, 22, 21, 20}; !slices.Equal(got, want) {
		t.Errorf("first two pages = %v, want %v", got, want)
	}
	code, _, _, body := page(cont)
	if code != http.StatusBadRequest || !strings.Contains(body, "not supported by cfp emulator: an ORDER BY page beyond the first 12 results") {
		t.Errorf("page beyond the bound: %d %s, want a 400 naming the bound", code, body)
	}
}

// TestQuery_ForgedContinuationIs400 sends query continuations no page of the emulator ever
// carries (negative or overflowing offsets and counts): each is a 400 naming the continuation,
// never a panic reported as a corrupt data directory.
func TestQuery_ForgedContinuationIs400(t *testing.T) {
	t.Parallel()
	e := openEmu(t, emulator.Options{Partitions: 1})
	cc := setupContainer(t, newClient(t, e, ""), "db", "c")
	for i := range 3 {
		upsert(t, cc, doc{ID: fmt.Sprintf("d%d", i), PK: "p", V: i})
	}
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	for _, q := range []string{"SELECT * FROM c ORDER BY c.v", "SELECT * FROM c"} {
		for _, cont := range []string{`{"o":-1}`, `{"o":-9223372036854775808}`, `{"o":9223372036854775807}`, `{"n":-1}`, `{"s":1,"n":-5}`} {
			hdr := map[string]string{"Content-Type": "application/query+json", "x-ms-documentdb-isquery": "true",
				"x-ms-documentdb-partitionkey": `["p"]`, "x-ms-max-item-count": "2", "x-ms-continuation": enc(cont)}
			resp, body := rawRequest(t, e, http.MethodPost, "/dbs/db/colls/c/docs", hdr, `{"query":"`+q+`"}`)
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "Invalid Continuation Token") {
				t.Errorf("%s with continuation %s: %d %s, want 400 Invalid Continuation Token", q, cont, resp.StatusCode, body)
			}
		}
	}
}

// FuzzQueryContinuation sends any x-ms-continuation with an ORDER BY and an unordered query:
// the answer is a page (200) or a 400, never a 500 (a panic reported as a corrupt data file).
func FuzzQueryContinuation(f *testing.F) {
	e := openEmu(f, emulator.Options{Partitions: 1})
	cc := setupContainer(f, newClient(f, e, ""), "db", "c")
	for i := range 3 {
		upsert(f, cc, doc{ID: fmt.Sprintf("d%d", i), PK: "p", V: i})
	}
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	for _, seed := range []string{"", enc(`{"o":1,"n":1}`), enc(`{"s":2,"n":2}`), enc(`{"o":-1}`), enc(`{"o":1e99}`), "!!", enc(`[]`)} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, cont string) {
		for _, q := range []string{"SELECT * FROM c ORDER BY c.v", "SELECT * FROM c"} {
			hdr := map[string]string{"Content-Type": "application/query+json", "x-ms-documentdb-isquery": "true",
				"x-ms-documentdb-partitionkey": `["p"]`, "x-ms-max-item-count": "2", "x-ms-continuation": cont}
			resp, body := rawRequest(t, e, http.MethodPost, "/dbs/db/colls/c/docs", hdr, `{"query":"`+q+`"}`)
			if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusBadRequest {
				t.Errorf("%s with continuation %q: %d %s", q, cont, resp.StatusCode, body)
			}
		}
	})
}
