package emulator_test

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"net/textproto"
	"strings"
	"testing"

	"github.com/cfp-dev/cfp/emulator"
)

// rawHeaderNames sends a signed request over a socket and returns the response's status and
// header names exactly as they came on the wire (no net/http parsing, which canonicalises them).
func rawHeaderNames(t *testing.T, addr, method, path string, hdr map[string]string, body string) (string, []string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+addr+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	if err := emulator.SignRequest(req, ""); err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := req.Write(conn); err != nil {
		t.Fatal(err)
	}
	tp := textproto.NewReader(bufio.NewReader(conn))
	status, err := tp.ReadLine()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for {
		line, err := tp.ReadLine()
		if err != nil {
			t.Fatal(err)
		}
		if line == "" {
			return status, names
		}
		name, _, _ := strings.Cut(line, ":")
		names = append(names, name)
	}
}

// The gateway writes its header names in lower case (etag, lsn, x-ms-continuation,
// x-ms-session-token), and the Python SDK looks them up case-sensitively: with Go's canonical
// X-Ms-Continuation it reads one page of a query and stops, silently.
func TestResponseHeaderNames_AreLowerCaseOnTheWire(t *testing.T) {
	e := openEmu(t, emulator.Options{Partitions: 2})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Serve(ctx, ln) }()
	defer func() {
		cancel()
		<-done
	}()
	cc := setupContainer(t, newClient(t, e, ""), "db", "c")
	for _, id := range []string{"a", "b", "c"} {
		upsert(t, cc, doc{ID: id, PK: "p"})
	}
	addr := ln.Addr().String()
	pk := map[string]string{"x-ms-documentdb-partitionkey": `["p"]`}

	check := func(what string, names []string, want ...string) {
		t.Helper()
		got := map[string]bool{}
		for _, n := range names {
			got[n] = true
			if lower := strings.ToLower(n); lower != n && (strings.HasPrefix(lower, "x-ms-") || lower == "etag" || lower == "lsn") {
				t.Errorf("%s: header %q is not in the gateway's lower case", what, n)
			}
		}
		for _, w := range want {
			if !got[w] {
				t.Errorf("%s: no %q header on the wire; got %q", what, w, names)
			}
		}
	}

	status, names := rawHeaderNames(t, addr, http.MethodGet, "/dbs/db/colls/c/docs/a", pk, "")
	if !strings.Contains(status, " 200 ") {
		t.Fatalf("read item: %s", status)
	}
	check("read item", names, "etag", "lsn", "x-ms-session-token", "x-ms-request-charge", "x-ms-activity-id")

	status, names = rawHeaderNames(t, addr, http.MethodPost, "/dbs/db/colls/c/docs", map[string]string{
		"x-ms-documentdb-partitionkey": `["p"]`,
		"x-ms-documentdb-isquery":      "true",
		"Content-Type":                 "application/query+json",
		"x-ms-max-item-count":          "1",
	}, `{"query":"SELECT * FROM c"}`)
	if !strings.Contains(status, " 200 ") {
		t.Fatalf("query: %s", status)
	}
	check("query page", names, "x-ms-continuation", "x-ms-item-count")

	status, names = rawHeaderNames(t, addr, http.MethodGet, "/dbs/db/colls/c/docs", map[string]string{
		"A-IM":                                "Incremental feed",
		"x-ms-documentdb-partitionkeyrangeid": "0",
	}, "")
	if !strings.Contains(status, " 200 ") && !strings.Contains(status, " 304 ") {
		t.Fatalf("change feed: %s", status)
	}
	check("change feed page", names, "etag", "x-ms-session-token")

	status, names = rawHeaderNames(t, addr, http.MethodGet, "/dbs/db/colls/c/docs/nope", pk, "")
	if !strings.Contains(status, " 404 ") {
		t.Fatalf("read missing item: %s", status)
	}
	check("error", names, "x-ms-activity-id")
}
