package emulator

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cfp-dev/cfp/internal/epk"
)

// signedDo sends a signed request to e's handler and returns the status and body.
func signedDo(t *testing.T, e *Emulator, method, path string, hdr map[string]string, body string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, "http://full.test"+path, rd)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	if err := SignRequest(req, ""); err != nil {
		t.Fatal(err)
	}
	resp, err := Transport{Handler: e.Handler()}.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestOpen_FullDiskServesReadOnly opens a data directory on a disk that is full (simulated: the
// data file cannot be initialised, the holder file is created but not written): the emulator
// starts read-only, serves reads and the change feed, answers writes with a 403 that says the
// disk is full, and leaves no empty temporary file behind.
func TestOpen_FullDiskServesReadOnly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e, err := Open(Options{Dir: dir, Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.createDatabase("db"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.createContainer("db", []byte(`{"id":"c","partitionKey":{"paths":["/pk"]}}`), e.opts.Partitions); err != nil {
		t.Fatal(err)
	}
	comps := []any{"p"}
	body := map[string]json.RawMessage{"id": json.RawMessage(`"a"`), "pk": json.RawMessage(`"p"`)}
	if _, err := e.store.writeItem("db", "c", itemWrite{Op: opCreate, ID: "a", PK: epk.Canonical(comps), EPK: epk.HashV2(comps), Body: body}); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	e, err = Open(Options{Dir: dir, Partitions: 1, simulateDiskFull: true})
	if err != nil {
		t.Fatalf("open on a full disk: %v, want a read-only emulator", err)
	}
	defer e.Close()
	if !e.ReadOnly() {
		t.Fatal("ReadOnly() = false on a full disk")
	}
	entries, _ := os.ReadDir(dir)
	for _, en := range entries {
		if strings.HasSuffix(en.Name(), ".tmp") {
			t.Errorf("left %s behind", filepath.Join(dir, en.Name()))
		}
	}
	pk := map[string]string{"x-ms-documentdb-partitionkey": `["p"]`}
	if code, b := signedDo(t, e, http.MethodGet, "/dbs/db/colls/c/docs/a", pk, ""); code != http.StatusOK || !strings.Contains(b, `"id":"a"`) {
		t.Errorf("read on a full disk: %d %s, want 200", code, b)
	}
	if code, b := signedDo(t, e, http.MethodGet, "/dbs/db/colls/c/docs", map[string]string{"A-IM": "Incremental Feed", "x-ms-documentdb-partitionkeyrangeid": "0"}, ""); code != http.StatusOK || !strings.Contains(b, `"id":"a"`) {
		t.Errorf("change feed on a full disk: %d %s, want 200", code, b)
	}
	code, b := signedDo(t, e, http.MethodPost, "/dbs/db/colls/c/docs", pk, `{"id":"b","pk":"p"}`)
	if code != http.StatusForbidden || !strings.Contains(b, "its disk is full (it serves reads only)") {
		t.Errorf("write on a full disk: %d %s, want 403 saying the disk is full", code, b)
	}
	if code, b := signedDo(t, e, http.MethodPost, "/dbs", nil, `{"id":"db2"}`); code != http.StatusForbidden {
		t.Errorf("create database on a full disk: %d %s, want 403", code, b)
	}
}
