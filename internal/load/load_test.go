package load

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cfp-dev/cfp/internal/cosmos"
	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/leases"
)

// fakeTarget keeps the documents written, keyed by id; fail, when set, answers a write first.
type fakeTarget struct {
	mu      sync.Mutex
	docs    map[string]string
	deleted []string
	fail    func(id string, body []byte) error
}

func (f *fakeTarget) UpsertItem(_ context.Context, pk any, body []byte) error {
	id := idOf(body)
	if f.fail != nil {
		if err := f.fail(id, body); err != nil {
			return err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.docs == nil {
		f.docs = map[string]string{}
	}
	f.docs[id] = string(body)
	return nil
}

func (f *fakeTarget) DeleteItem(_ context.Context, pk any, id string) error {
	if f.fail != nil {
		if err := f.fail(id, nil); err != nil {
			return err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deleted = append(f.deleted, id)
	return nil
}

func idOf(body []byte) string {
	_, _, id, _ := ParseLine(body, [][]string{{"id"}})
	return id
}

func run(t *testing.T, target Target, opts Options, stdin string) (*Loader, []string, error) {
	t.Helper()
	var mu sync.Mutex
	var rejects []string
	opts.Stdin = strings.NewReader(stdin)
	opts.OnReject = func(where string, err error) {
		mu.Lock()
		defer mu.Unlock()
		rejects = append(rejects, where+": "+err.Error())
	}
	if opts.Paths == nil {
		opts.Paths = [][]string{{"id"}}
	}
	l := New(target, opts)
	err := l.Run(context.Background(), []string{"-"})
	return l, rejects, err
}

func TestLoader_LastVersionOfADocumentStays(t *testing.T) {
	t.Parallel()
	var in strings.Builder
	for v := range 20 {
		for d := range 10 {
			fmt.Fprintf(&in, `{"id":"d%d","v":%d}`+"\n", d, v)
		}
	}
	target := &fakeTarget{}
	l, rejects, err := run(t, target, Options{Concurrency: 4}, in.String())
	if err != nil || len(rejects) > 0 {
		t.Fatalf("Run = %v, rejects %q", err, rejects)
	}
	if l.Written() != 200 || l.Lines() != 200 || l.Rejected() != 0 {
		t.Errorf("written %d, lines %d, rejected %d; want 200, 200, 0", l.Written(), l.Lines(), l.Rejected())
	}
	for d := range 10 {
		if got, want := target.docs[fmt.Sprintf("d%d", d)], fmt.Sprintf(`{"id":"d%d","v":19}`, d); got != want {
			t.Errorf("d%d = %s, want %s (the last version in the input)", d, got, want)
		}
	}
}

func TestLoader_RejectsBadLinesAndCountsThem(t *testing.T) {
	t.Parallel()
	in := "{\"id\":\"a\"}\n\n  \nnot json\n{\"id\":7}\n{\"id\":\"b\"}\n"
	target := &fakeTarget{}
	l, rejects, err := run(t, target, Options{Concurrency: 2}, in)
	if err != nil {
		t.Fatal(err)
	}
	if l.Written() != 2 || l.Rejected() != 2 || l.Lines() != 4 {
		t.Errorf("written %d, rejected %d, lines %d; want 2, 2, 4 (blank lines are not counted)", l.Written(), l.Rejected(), l.Lines())
	}
	want := []string{"line 4: invalid JSON", `line 5: "id" is not a string`}
	if len(rejects) != len(want) {
		t.Fatalf("rejects = %q, want %q", rejects, want)
	}
	for i, w := range want {
		if !strings.HasPrefix(rejects[i], w) {
			t.Errorf("reject %d = %q, want it to start with %q", i, rejects[i], w)
		}
	}
}

func TestLoader_RetriesThrottledWrites(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	throttles := 0
	target := &fakeTarget{fail: func(id string, _ []byte) error {
		mu.Lock()
		defer mu.Unlock()
		if throttles < 2 {
			throttles++
			return &feed.ThrottledError{Status: http.StatusTooManyRequests, RetryAfter: time.Millisecond}
		}
		return nil
	}}
	l, rejects, err := run(t, target, Options{Concurrency: 1}, `{"id":"a"}`+"\n")
	if err != nil || len(rejects) > 0 || l.Written() != 1 {
		t.Fatalf("Run = %v, rejects %q, written %d; want the throttled write retried and done", err, rejects, l.Written())
	}
}

func TestLoader_DocumentErrorsAreRejectedServiceErrorsEndTheRun(t *testing.T) {
	t.Parallel()
	docErr := &cosmos.StatusError{Op: "upsert", Status: http.StatusRequestEntityTooLarge, Message: "too large"}
	target := &fakeTarget{fail: func(id string, _ []byte) error {
		switch id {
		case "big":
			return docErr
		case "conflict":
			return leases.ErrConflict
		}
		return nil
	}}
	l, rejects, err := run(t, target, Options{Concurrency: 1}, "{\"id\":\"big\"}\n{\"id\":\"conflict\"}\n{\"id\":\"ok\"}\n")
	if err != nil || l.Rejected() != 2 || l.Written() != 1 || len(rejects) != 2 {
		t.Fatalf("Run = %v, rejected %d, written %d, rejects %q; want two rejected, one written", err, l.Rejected(), l.Written(), rejects)
	}

	srvErr := &cosmos.StatusError{Op: "upsert", Status: http.StatusInternalServerError, Message: "boom"}
	target = &fakeTarget{fail: func(string, []byte) error { return srvErr }}
	l, _, err = run(t, target, Options{Concurrency: 1}, "{\"id\":\"a\"}\n{\"id\":\"b\"}\n")
	if !errors.Is(err, srvErr) || !strings.HasPrefix(err.Error(), "line 1: ") || l.Rejected() != 0 {
		t.Errorf("Run = %v, rejected %d; want the 5xx to end the run at line 1, nothing rejected", err, l.Rejected())
	}
}

func TestLoader_DeleteTakesAGoneDocumentAsDeleted(t *testing.T) {
	t.Parallel()
	target := &fakeTarget{fail: func(id string, _ []byte) error {
		if id == "gone" {
			return leases.ErrNotFound
		}
		return nil
	}}
	l, rejects, err := run(t, target, Options{Delete: true, Concurrency: 1}, "{\"id\":\"a\"}\n{\"id\":\"gone\"}\n")
	if err != nil || len(rejects) > 0 || l.Written() != 2 {
		t.Fatalf("Run = %v, rejects %q, written %d; want both counted as deleted", err, rejects, l.Written())
	}
	if len(target.docs) != 0 || len(target.deleted) != 1 || target.deleted[0] != "a" {
		t.Errorf("docs %v, deleted %v; want no upsert and a deleted", target.docs, target.deleted)
	}
}

func TestLoader_FilesInOrderAndAnUnreadableOne(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a := filepath.Join(dir, "a.jsonl")
	if err := os.WriteFile(a, []byte("{\"id\":\"x\",\"v\":1}\nbad\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	target := &fakeTarget{}
	var rejects []string
	l := New(target, Options{Paths: [][]string{{"id"}}, OnReject: func(where string, err error) { rejects = append(rejects, where) }})
	err := l.Run(context.Background(), []string{a, filepath.Join(dir, "missing.jsonl")})
	if err == nil || !strings.HasPrefix(err.Error(), "open input: ") {
		t.Errorf("Run = %v, want an open input error", err)
	}
	if l.Written() != 1 || len(rejects) != 1 || rejects[0] != a+":2" {
		t.Errorf("written %d, rejects %q; want 1 and [%s:2]", l.Written(), rejects, a)
	}
}

func TestLoader_ArrayHintOnce(t *testing.T) {
	t.Parallel()
	long := "[" + strings.Repeat(`{"id":"a"},`, 300_000) + `{"id":"a"}]`
	_, rejects, err := run(t, &fakeTarget{}, Options{Concurrency: 1}, long+"\n"+long+"\n")
	if err != nil || len(rejects) != 2 {
		t.Fatalf("Run = %v, rejects %d; want 2", err, len(rejects))
	}
	if !strings.Contains(rejects[0], "jq") || strings.Contains(rejects[1], "jq") {
		t.Errorf("rejects = %.200q / %.200q; want the jq hint on the first only", rejects[0], rejects[1])
	}
}

// TestLoader_BytesReadIsTheInputSize: the progress count ends at the input's size, whether the
// last line has its end or not, blank lines included; it counted each line end twice.
func TestLoader_BytesReadIsTheInputSize(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		"{\"id\":\"a\"}\n\n{\"id\":\"b\"}\n",
		"{\"id\":\"a\"}\r\n{\"id\":\"b\"}",
	} {
		l, rejects, err := run(t, &fakeTarget{}, Options{Concurrency: 1}, in)
		if err != nil || len(rejects) > 0 {
			t.Fatalf("Run = %v, rejects %q", err, rejects)
		}
		if got := l.BytesRead(); got != int64(len(in)) {
			t.Errorf("BytesRead() = %d after %q, want %d", got, in, len(in))
		}
	}
}

// heldTarget is a fakeTarget whose write of the body held waits for release: the test sees what
// the other workers write meanwhile.
type heldTarget struct {
	fakeTarget
	held    string
	release chan struct{}
}

func (h *heldTarget) UpsertItem(ctx context.Context, pk any, body []byte) error {
	if string(body) == h.held {
		<-h.release
	}
	return h.fakeTarget.UpsertItem(ctx, pk, body)
}

// TestLoader_NumericKeyWrittenTwoWaysIsOneDocument: a document whose numeric partition key is
// written 1 on one line and 1.0 on a later one is one document in Cosmos DB (numbers are
// compared as doubles), and the later line must win. The first line's write is held until every
// other worker is idle (synctest.Wait): the later line must not have been written past it. Sharding
// by the key's text put the two lines on different workers, and the older line was written last.
func TestLoader_NumericKeyWrittenTwoWaysIsOneDocument(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		paths [][]string
		lines []string
	}{
		{"1 then 1.0", [][]string{{"pk"}}, []string{`{"id":"a","pk":1,"v":1}`, `{"id":"a","pk":1.0,"v":2}`}},
		{"1.0 then 1e0", [][]string{{"pk"}}, []string{`{"id":"a","pk":1.0,"v":1}`, `{"id":"a","pk":1e0,"v":2}`}},
		{"hierarchical 10 then 1e1", [][]string{{"t"}, {"pk"}}, []string{`{"id":"a","t":"x","pk":10,"v":1}`, `{"id":"a","t":"x","pk":1e1,"v":2}`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				target := &heldTarget{held: tc.lines[0], release: make(chan struct{})}
				done := make(chan error, 1)
				go func() {
					_, rejects, err := run(t, target, Options{Paths: tc.paths, Concurrency: 16}, strings.Join(tc.lines, "\n")+"\n")
					if len(rejects) > 0 {
						err = fmt.Errorf("rejects %q", rejects)
					}
					done <- err
				}()
				synctest.Wait() // the first line's write is held; the other workers did what they could
				close(target.release)
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				if got, want := target.docs["a"], tc.lines[1]; got != want {
					t.Errorf("document a = %s, want %s (the later line: one document, written in input order)", got, want)
				}
			})
		})
	}
}
