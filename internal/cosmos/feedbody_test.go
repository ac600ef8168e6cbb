package cosmos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	azruntime "github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"

	"github.com/cfp-dev/cfp/internal/feed"
)

// feedAux is what azcosmos decodes a change-feed body into.
type feedAux struct {
	ResourceID string            `json:"_rid"`
	Documents  []json.RawMessage `json:"Documents"`
	Count      int               `json:"_count"`
}

func TestSplitFeedBody(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		body     string
		wantDocs []string
		wantRest string
		wantErr  error // nil: split; errFeedBodyUnsupported; else any syntax error
	}{
		{name: "page", body: `{"_rid":"abc=","Documents":[{"id":"a","n":1},{"id":"b"}],"_count":2}`,
			wantDocs: []string{`{"id":"a","n":1}`, `{"id":"b"}`}, wantRest: `{"_rid":"abc=","Documents":[],"_count":2}`},
		{name: "whitespace around everything", body: " {\n \"_rid\" : \"r\" ,\t\"Documents\" : [ {\"id\" : \"a\"} ,\r\n\"s\" , 12.5e-3 , [ ] , null ] , \"_count\" : 4 } \n",
			wantDocs: []string{`{"id" : "a"}`, `"s"`, `12.5e-3`, `[ ]`, `null`}, wantErr: errFeedBodyUnsupported},
		{name: "escapes and brackets inside strings", body: `{"Documents":[{"s":"a\"],}{[\\","u":"\u00e9\/"},"]"],"_count":2,"_rid":"x"}`,
			wantDocs: []string{`{"s":"a\"],}{[\\","u":"\u00e9\/"}`, `"]"`}, wantRest: `{"Documents":[],"_count":2,"_rid":"x"}`},
		{name: "empty page", body: `{"_rid":"r","Documents":[],"_count":0}`, wantDocs: []string{}, wantRest: `{"_rid":"r","Documents":[],"_count":0}`},
		{name: "other members kept", body: `{"a":{"b":[1,true,false,null]},"Documents":[1],"_count":1,"z":-0.5E+2}`,
			wantDocs: []string{`1`}, wantRest: `{"a":{"b":[1,true,false,null]},"Documents":[],"_count":1,"z":-0.5E+2}`},
		{name: "count disagrees", body: `{"Documents":[1,2],"_count":3}`, wantErr: errFeedBodyUnsupported},
		{name: "no count", body: `{"Documents":[1]}`, wantErr: errFeedBodyUnsupported},
		{name: "no documents", body: `{"_rid":"r","_count":0}`, wantErr: errFeedBodyUnsupported},
		{name: "documents null", body: `{"Documents":null,"_count":0}`, wantErr: errFeedBodyUnsupported},
		{name: "key in another case", body: `{"documents":[1],"_count":1}`, wantErr: errFeedBodyUnsupported},
		{name: "escaped key", body: `{"\u0044ocuments":[1],"_count":1}`, wantErr: errFeedBodyUnsupported},
		{name: "repeated documents", body: `{"Documents":[1],"Documents":[2],"_count":1}`, wantErr: errFeedBodyUnsupported},
		{name: "unterminated string", body: `{"Documents":["a],"_count":1}`, wantErr: errSyntax},
		{name: "bad escape", body: `{"Documents":["\x"],"_count":1}`, wantErr: errSyntax},
		{name: "long strings, escapes and UTF-8 past eight bytes", body: `{"Documents":["abcdefghijklmnopq\"rstuvwxyzé0123456789\\","Ünïcødé strings are kept as they are"],"_count":2}`,
			wantDocs: []string{`"abcdefghijklmnopq\"rstuvwxyzé0123456789\\"`, `"Ünïcødé strings are kept as they are"`}, wantRest: `{"Documents":[],"_count":2}`},
		{name: "control character past eight bytes", body: "{\"Documents\":[\"abcdefghijklmnopqrs\x1ftuv\"],\"_count\":1}", wantErr: errSyntax},
		{name: "control character", body: "{\"Documents\":[\"a\tb\"],\"_count\":1}", wantErr: errSyntax},
		{name: "trailing comma", body: `{"Documents":[1,],"_count":1}`, wantErr: errSyntax},
		{name: "leading zero", body: `{"Documents":[01],"_count":1}`, wantErr: errSyntax},
		{name: "bad literal", body: `{"Documents":[nul],"_count":1}`, wantErr: errSyntax},
		{name: "unbalanced", body: `{"Documents":[{"a":[1}],"_count":1}`, wantErr: errSyntax},
		{name: "data after the object", body: `{"Documents":[],"_count":0}x`, wantErr: errSyntax},
		{name: "not an object", body: `[{"Documents":[]}]`, wantErr: errFeedBodyUnsupported},
		{name: "truncated", body: `{"Documents":[{"id":"a"}`, wantErr: errSyntax},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			docs, rest, err := splitFeedBody([]byte(tt.body), 0)
			switch {
			case tt.wantErr == errSyntax:
				if err == nil || errors.Is(err, errFeedBodyUnsupported) {
					t.Fatalf("splitFeedBody() error = %v, want a syntax error", err)
				}
				if json.Valid([]byte(tt.body)) {
					t.Fatalf("test body is valid JSON")
				}
				return
			case tt.wantErr != nil && tt.wantDocs == nil:
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("splitFeedBody() error = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if tt.wantErr != nil { // the whitespace case: _count 4 for 5 documents
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("splitFeedBody() error = %v, want %v", err, tt.wantErr)
				}
				fixed := strings.Replace(tt.body, `"_count" : 4`, `"_count" : 5`, 1)
				if docs, rest, err = splitFeedBody([]byte(fixed), 0); err != nil {
					t.Fatalf("splitFeedBody(count fixed) error = %v", err)
				}
				tt.wantRest = strings.Replace(fixed, tt.body[strings.Index(tt.body, "[")+1:strings.LastIndex(tt.body, "]")], "", 1)
			} else if err != nil {
				t.Fatalf("splitFeedBody() error = %v", err)
			}
			got := make([]string, len(docs))
			for i, d := range docs {
				got[i] = string(d)
			}
			if strings.Join(got, "|") != strings.Join(tt.wantDocs, "|") || (docs == nil) != (tt.wantDocs == nil) {
				t.Errorf("documents = %q, want %q", got, tt.wantDocs)
			}
			if string(rest) != tt.wantRest {
				t.Errorf("rest = %s, want %s", rest, tt.wantRest)
			}
		})
	}
}

// errSyntax marks the table cases that must fail as invalid JSON.
var errSyntax = errors.New("syntax")

// FuzzSplitFeedBody checks splitFeedBody against encoding/json: it reports a syntax error only
// for invalid JSON, splits only valid JSON, and when it splits, it yields the documents
// json.Unmarshal yields and a rest that decodes to the same _rid and _count with no documents.
// (A body it leaves to encoding/json is judged by encoding/json, so no claim is made on it.)
func FuzzSplitFeedBody(f *testing.F) {
	for _, s := range []string{
		`{"_rid":"abc=","Documents":[{"id":"a","n":1},{"id":"b"}],"_count":2}`,
		`{"Documents":[{"s":"a\"],}{[\\","u":"\u00e9\/"},"]"],"_count":2,"_rid":"x"}`,
		` {"_rid" : "r" , "Documents" : [ [ ] , -1.5e3 , true ] , "_count" : 3 } `,
		`{"Documents":[],"_count":0}`,
		`{"documents":[1],"_count":1}`,
		`{"Documents":[01],"_count":1}`,
		`{"Documents":["\ud83d\ude00",{"a":{"b":[null,false]}}],"_count":2}`,
		"{\"Documents\":[\"a long string, then \\\"escapes\\\" \\\\ and a raw tab:\t\"],\"_count\":1}",
		`{"Documents":["\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\"\\u00e9 many escapes, then the quote (or not)"],"_count":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		docs, rest, err := splitFeedBody(body, 0)
		valid := json.Valid(body)
		switch {
		case errors.Is(err, errFeedBodyUnsupported):
			return
		case err != nil:
			if valid {
				t.Fatalf("splitFeedBody(%q) = %v on valid JSON", body, err)
			}
			return
		case !valid:
			t.Fatalf("splitFeedBody(%q) accepted invalid JSON", body)
		}
		var want feedAux
		if err := json.Unmarshal(body, &want); err != nil {
			// A member of another type (a _rid number): azcosmos fails on rest alike.
			var got feedAux
			if json.Unmarshal(rest, &got) == nil {
				t.Fatalf("body %q fails to decode (%v) but rest %q decodes", body, err, rest)
			}
			return
		}
		if len(docs) != len(want.Documents) || want.Count != len(docs) {
			t.Fatalf("splitFeedBody(%q) = %d documents, encoding/json %d (_count %d)", body, len(docs), len(want.Documents), want.Count)
		}
		for i := range docs {
			if !bytes.Equal(docs[i], want.Documents[i]) {
				t.Fatalf("document %d = %q, encoding/json %q", i, docs[i], want.Documents[i])
			}
		}
		var got feedAux
		if err := json.Unmarshal(rest, &got); err != nil {
			t.Fatalf("rest %q does not decode: %v", rest, err)
		}
		if got.ResourceID != want.ResourceID || got.Count != want.Count || len(got.Documents) != 0 {
			t.Fatalf("rest %q decodes to %+v, want _rid %q, _count %d, no documents", rest, got, want.ResourceID, want.Count)
		}
	})
}

// fakeTransport answers each request with the next of its responses.
type fakeTransport struct {
	resps []*http.Response
	calls int
}

func (f *fakeTransport) Do(req *http.Request) (*http.Response, error) {
	r := f.resps[min(f.calls, len(f.resps)-1)]
	f.calls++
	r.Request = req
	return r, nil
}

func response(status int, body string, header ...string) *http.Response {
	h := http.Header{}
	for i := 0; i+1 < len(header); i += 2 {
		h.Set(header[i], header[i+1])
	}
	return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader(body))}
}

// TestFeedBodyPolicy runs the policy in an azcore pipeline, in the place azcosmos gives it
// (per call, before the retries), over a fake transport.
func TestFeedBodyPolicy(t *testing.T) {
	t.Parallel()
	const page = `{"_rid":"r=","Documents":[{"id":"a"},{"id":"b","x":[1,2]}],"_count":2}`
	const minimal = `{"_rid":"r=","Documents":[],"_count":2}`
	tests := []struct {
		name     string
		resps    func() []*http.Response
		feed     bool   // a change-feed read (A-IM, .../docs)
		hold     bool   // the ReadPage context value
		wantDocs string // "" when the policy must not split
		wantBody string
		wantCode int
	}{
		{name: "200 with items", resps: func() []*http.Response { return []*http.Response{response(200, page, "x-ms-item-count", "2")} }, feed: true, hold: true,
			wantDocs: `{"id":"a"}|{"id":"b","x":[1,2]}`, wantBody: minimal, wantCode: 200},
		{name: "429 retried, then 200", resps: func() []*http.Response {
			return []*http.Response{response(429, `{"code":"429"}`, "x-ms-retry-after-ms", "1"), response(200, page)}
		},
			feed: true, hold: true, wantDocs: `{"id":"a"}|{"id":"b","x":[1,2]}`, wantBody: minimal, wantCode: 200},
		{name: "304", resps: func() []*http.Response { return []*http.Response{response(304, "")} }, feed: true, hold: true, wantBody: "", wantCode: 304},
		{name: "410 split left to azcosmos", resps: func() []*http.Response {
			return []*http.Response{response(410, `{"code":"Gone"}`, "x-ms-substatus", "1002")}
		},
			feed: true, hold: true, wantBody: `{"code":"Gone"}`, wantCode: 410},
		{name: "body it does not take", resps: func() []*http.Response { return []*http.Response{response(200, `{"Documents":[1],"_count":7}`)} }, feed: true, hold: true,
			wantBody: `{"Documents":[1],"_count":7}`, wantCode: 200},
		{name: "other calls untouched", resps: func() []*http.Response { return []*http.Response{response(200, page)} }, feed: true, hold: false, wantBody: page, wantCode: 200},
		{name: "not a change-feed read", resps: func() []*http.Response { return []*http.Response{response(200, page)} }, feed: false, hold: true, wantBody: page, wantCode: 200},
	}
	// Each case runs in the pipeline of a client cfp builds itself (NewClientOptions: its
	// request policy reads the page whole) and in a FromClient one (azcore downloads it).
	for _, tt := range tests {
		for _, own := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/own client %v", tt.name, own), func(t *testing.T) {
				t.Parallel()
				resps := tt.resps()
				tr := &fakeTransport{resps: resps}
				pl := feedPipeline(tr, own)
				ctx := context.Background()
				hold := &rawFeed{docs: []json.RawMessage{json.RawMessage(`"stale"`)}, ok: true}
				if tt.hold {
					ctx = context.WithValue(ctx, rawFeedKey{}, hold)
				}
				url := "http://localhost:8081/dbs/db/colls/c/docs"
				if !tt.feed {
					url = "http://localhost:8081/dbs/db/colls/c/pkranges"
				}
				req, err := azruntime.NewRequest(ctx, http.MethodGet, url)
				if err != nil {
					t.Fatal(err)
				}
				req.Raw().Header.Set("A-IM", "Incremental Feed")
				resp, err := pl.Do(req)
				if err != nil {
					t.Fatalf("pipeline error = %v", err)
				}
				if tr.calls != len(resps) {
					t.Errorf("transport called %d times, want %d", tr.calls, len(resps))
				}
				if resp.StatusCode != tt.wantCode {
					t.Fatalf("status = %d, want %d", resp.StatusCode, tt.wantCode)
				}
				body, err := azruntime.Payload(resp)
				if err != nil || string(body) != tt.wantBody {
					t.Errorf("body azcosmos reads = %q, %v; want %q", body, err, tt.wantBody)
				}
				if !tt.hold {
					return
				}
				if !tt.feed {
					if !hold.ok || len(hold.docs) != 1 {
						t.Errorf("hold = %q (ok %v), want it untouched", hold.docs, hold.ok)
					}
					return
				}
				got := make([]string, len(hold.docs))
				for i, d := range hold.docs {
					got[i] = string(d)
				}
				if tt.wantDocs == "" {
					if hold.ok || len(hold.docs) != 0 {
						t.Errorf("hold = %q (ok %v), want cleared", got, hold.ok)
					}
					return
				}
				if !hold.ok || strings.Join(got, "|") != tt.wantDocs {
					t.Errorf("hold = %q (ok %v), want %s", got, hold.ok, tt.wantDocs)
				}
			})
		}
	}
}

// feedPipeline is the pipeline azcosmos builds around the feed body policy: with own, the one
// of a client cfp builds itself (NewClientOptions: the request policy per retry).
func feedPipeline(tr policy.Transporter, own bool) azruntime.Pipeline {
	opts := &policy.ClientOptions{
		Transport:       tr,
		PerCallPolicies: []policy.Policy{feedBodyPolicy{}},
		Retry:           policy.RetryOptions{MaxRetries: 2, RetryDelay: time.Millisecond, MaxRetryDelay: 10 * time.Millisecond},
	}
	if own {
		opts.PerRetryPolicies = []policy.Policy{newRequestPolicy(slog.New(slog.DiscardHandler), time.Minute, RetryOptions{MinBackoff: time.Millisecond})}
	}
	return azruntime.NewPipeline("cfp-test", "v0", azruntime.PipelineOptions{}, opts)
}

// TestRequestPolicy_ReadsFeedPageWhole: a client of cfp's own reads a change-feed page into one
// buffer of its Content-Length, within the attempt; a page cut short is an error of that
// attempt, retried like azcore's download error was, and the next page is split as usual.
func TestRequestPolicy_ReadsFeedPageWhole(t *testing.T) {
	t.Parallel()
	const page = `{"_rid":"r=","Documents":[{"id":"a"}],"_count":1}`
	short := response(200, page[:20])
	short.ContentLength = int64(len(page))
	whole := response(200, page)
	whole.ContentLength = int64(len(page))
	tr := &fakeTransport{resps: []*http.Response{short, whole}}
	hold := &rawFeed{}
	req, err := azruntime.NewRequest(context.WithValue(context.Background(), rawFeedKey{}, hold), http.MethodGet, "http://localhost:8081/dbs/db/colls/c/docs")
	if err != nil {
		t.Fatal(err)
	}
	req.Raw().Header.Set("A-IM", "Incremental Feed")
	resp, err := feedPipeline(tr, true).Do(req)
	if err != nil {
		t.Fatalf("pipeline error = %v, want the cut page retried", err)
	}
	if tr.calls != 2 {
		t.Errorf("transport called %d times, want 2 (the cut page, then the whole one)", tr.calls)
	}
	if !hold.ok || len(hold.docs) != 1 || string(hold.docs[0]) != `{"id":"a"}` {
		t.Errorf("hold = %q (ok %v), want the page's one document", hold.docs, hold.ok)
	}
	if body, err := azruntime.Payload(resp); err != nil || string(body) != `{"_rid":"r=","Documents":[],"_count":1}` {
		t.Errorf("body azcosmos reads = %q, %v", body, err)
	}
}

// TestReadFeedBody_ReuseHoldsAboutThePage: a page read into a pooled buffer holds about its own
// size, whatever the pool holds. A tail holds one page per range while the ranges wait for the
// output, so a 1 MB buffer under every small page made a tail of 32 ranges of 2 KB pages hold
// 39 MB instead of 3 MB (beyond cfp tail's 64 MB memory limit from about 60 ranges).
func TestReadFeedBody_ReuseHoldsAboutThePage(t *testing.T) {
	t.Parallel()
	page := `{"_rid":"r=","Documents":[` + strings.Repeat(`{"id":"a"},`, 200) + `{"id":"b"}],"_count":201}`
	big := make([]byte, 0, 1<<20)
	putPageBuffer(&big) // the released buffer of a big page
	for range 3 {
		resp := response(http.StatusOK, page)
		resp.ContentLength = int64(len(page))
		if err := readFeedBody(resp, true); err != nil {
			t.Fatal(err)
		}
		fb := resp.Body.(*feedBytes)
		if string(fb.b) != page {
			t.Fatalf("body = %q, want the page", fb.b)
		}
		if fb.buf == nil || cap(*fb.buf) > len(page)+len(page)/4+4<<10 {
			t.Fatalf("a %d-byte page holds a buffer of %d bytes", len(page), cap(*fb.buf))
		}
	}
}

// TestContainer_ReadPage_Reuse: a page read with Reuse carries a Release that hands its buffer
// back, and the next pages, read into released buffers, still hold exactly their own documents;
// a page read without Reuse has no Release and its items stay valid for good.
func TestContainer_ReadPage_Reuse(t *testing.T) {
	t.Parallel()
	a := openLocal(t, 1)
	c := newFeedContainer(t, a)
	want := upsert(t, c, somePKs, 0, 60)
	kept, err := c.ReadPage(context.Background(), feed.ReadRequest{PartitionID: "0", Start: feed.StartFrom{Kind: feed.StartBeginning}, MaxItems: 10})
	if err != nil {
		t.Fatal(err)
	}
	if kept.Release != nil {
		t.Error("a page read without Reuse has a Release")
	}
	keptCopy := make([]string, len(kept.Items))
	for i, it := range kept.Items {
		keptCopy[i] = string(it)
	}
	got := drainIDs(t, c, feed.ReadRequest{PartitionID: "0", Start: feed.StartFrom{Kind: feed.StartBeginning}, MaxItems: 10, Reuse: true},
		func(page feed.Page) {
			if page.Release == nil {
				t.Fatal("a page read with Reuse has no Release")
			}
		},
		func(page feed.Page) {
			page.Release()
			page.Release() // a second call does nothing
		})
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("ids = %v, want %v", got, want)
	}
	for i, it := range kept.Items {
		if string(it) != keptCopy[i] {
			t.Fatalf("item %d of the page read without Reuse changed: %s, was %s", i, it, keptCopy[i])
		}
	}
}

// TestContainer_ReadPage_ItemsAreSafe: the items ReadPage splits from one page body are the
// documents in order, and appending to one never overwrites the next.
func TestContainer_ReadPage_ItemsAreSafe(t *testing.T) {
	t.Parallel()
	a := openLocal(t, 1)
	c := newFeedContainer(t, a)
	want := upsert(t, c, somePKs, 0, 25)
	got := drainIDs(t, c, feed.ReadRequest{PartitionID: "0", Start: feed.StartFrom{Kind: feed.StartBeginning}, MaxItems: 10},
		func(page feed.Page) {
			for i := range page.Items {
				_ = append(page.Items[i], `,"clobbered"`...)
			}
		}, nil)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("ids = %v, want %v", got, want)
	}
}

// drainIDs reads req's partition page by page (at most 10) until it is caught up, and returns
// the ids of the items in order, each checked to be valid JSON; before runs on each page before
// its items are read, after once they were.
func drainIDs(t *testing.T, c *Container, req feed.ReadRequest, before, after func(feed.Page)) []string {
	t.Helper()
	var got []string
	for range 10 {
		page, err := c.ReadPage(context.Background(), req)
		if err != nil {
			t.Fatalf("ReadPage() error = %v", err)
		}
		if page.NotModified {
			break
		}
		if before != nil {
			before(page)
		}
		for _, it := range page.Items {
			if !json.Valid(it) {
				t.Fatalf("item %q is not valid JSON", it)
			}
			got = append(got, idOf(it))
		}
		if after != nil {
			after(page)
		}
		req.Start = feed.StartFrom{Kind: feed.StartContinuation, Continuation: page.Continuation}
	}
	return got
}

// TestTail_SplitWhileTailing: a tail through azcosmos and the feed body policy, over a partition
// that splits mid-tail while more changes arrive, delivers every change exactly once.
func TestTail_SplitWhileTailing(t *testing.T) {
	t.Parallel()
	a := openLocal(t, 1)
	c := newFeedContainer(t, a)
	want := upsert(t, c, somePKs, 0, 300)
	seen := map[string]int{}
	split := false
	sum, err := feed.Tail(context.Background(), c, feed.TailOptions{
		Start: feed.StartFrom{Kind: feed.StartBeginning}, ExitAtEnd: true, PageSize: 40, Poll: time.Millisecond,
	}, func(ch feed.Change) error {
		seen[idOf(ch.Item)]++
		if len(seen) == 100 && !split {
			split = true
			if _, err := a.Emulator().Split("db", "orders", "0"); err != nil {
				return err
			}
			want = append(want, upsert(t, c, somePKs, 300, 30)...)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Tail() error = %v", err)
	}
	if sum.Splits != 1 || sum.Ranges != 2 {
		t.Errorf("summary: %d splits, %d ranges; want 1 split into 2 ranges", sum.Splits, sum.Ranges)
	}
	for _, id := range want {
		if seen[id] != 1 {
			t.Errorf("%s delivered %d times, want once", id, seen[id])
		}
	}
	if len(seen) != len(want) {
		t.Errorf("delivered %d distinct changes, want %d", len(seen), len(want))
	}
}

// BenchmarkSplitFeedBody splits a page of 1,000 documents shaped like tailbench's (~300 bytes,
// a long string property) and reports MB/s of body.
func BenchmarkSplitFeedBody(b *testing.B) {
	for _, size := range []int{140, 940} {
		b.Run(fmt.Sprintf("payload=%d", size), func(b *testing.B) {
			var body bytes.Buffer
			body.WriteString(`{"_rid":"vK8bAA==","Documents":[`)
			payload := strings.Repeat("x", size)
			for i := range 1000 {
				if i > 0 {
					body.WriteByte(',')
				}
				fmt.Fprintf(&body, `{"id":"d%d","pk":"p%d","n":%d,"payload":%q,"_rid":"vK8bAKq%05dAA==","_self":"dbs/vK8bAA==/colls/vK8bAKq=/docs/vK8bAKq%05dAA==/","_etag":"\"%08x-0000\"","_attachments":"attachments/","_ts":1764510000,"_lsn":%d}`,
					i, i%1000, i, payload, i, i, i, i+1)
			}
			body.WriteString(`],"_count":1000}`)
			b.SetBytes(int64(body.Len()))
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := splitFeedBody(body.Bytes(), 1000); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
