package emulator

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/emulator/auth"
	"github.com/cfp-dev/cfp/internal/epk"
)

// BenchmarkChangeFeed_HTTP measures the emulator serving latest-version change-feed pages over a
// real loopback socket, the way `cfp emulator` serves `cfp tail`: 20,000 documents of ~200 bytes
// on 4 partitions, each partition read from the beginning in pages of 1,000 by a plain
// http.Client sending the headers and master-key signature azcosmos sends.
func BenchmarkChangeFeed_HTTP(b *testing.B) {
	const docs = 20000
	e, err := Open(Options{Dir: b.TempDir(), Partitions: 4})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	s := e.store
	if _, err := s.createDatabase("db"); err != nil {
		b.Fatal(err)
	}
	if _, err := s.createContainer("db", []byte(`{"id":"c","partitionKey":{"paths":["/pk"]}}`), e.opts.Partitions); err != nil {
		b.Fatal(err)
	}
	payload := json.RawMessage(strconv.Quote(strings.Repeat("x", 140)))
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < docs; i += 16 {
				comps := []any{"p" + strconv.Itoa(i%1000)}
				id := "d" + strconv.Itoa(i)
				body := map[string]json.RawMessage{"id": json.RawMessage(strconv.Quote(id)), "pk": json.RawMessage(strconv.Quote(comps[0].(string))), "n": json.RawMessage(strconv.Itoa(i)), "payload": payload}
				if _, err := s.writeItem("db", "c", itemWrite{Op: opUpsert, ID: id, PK: epk.Canonical(comps), EPK: epk.HashV2(comps), Body: body}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	st, err := s.getContainer("db", "c")
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(e.Handler())
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	defer client.CloseIdleConnections()
	key, _ := base64.StdEncoding.DecodeString(auth.WellKnownKey)
	target := srv.URL + "/dbs/db/colls/c/docs"

	// read serves one page of range id after etag ("" for the beginning); it returns the
	// page's item count and etag.
	read := func(id, etag string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, target, nil)
		date := time.Now().UTC().Format(http.TimeFormat)
		h := req.Header
		h.Set("A-Im", "Incremental Feed")
		h.Set("Authorization", url.QueryEscape("type=master&ver=1.0&sig="+auth.Sign(key, "GET", "docs", "dbs/db/colls/c", date)))
		h.Set("User-Agent", "azsdk-go-azcosmos/v1.5.0 (go1.26; linux)")
		h.Set("X-Ms-Activity-Id", "5bf75ba9-e04f-4b0c-5762-92abb29fc792")
		h.Set("X-Ms-Cosmos-Sdk-Supportedcapabilities", "1")
		h.Set("X-Ms-Date", date)
		h.Set("X-Ms-Documentdb-Partitionkeyrangeid", id)
		h.Set("X-Ms-Max-Item-Count", "1000")
		h.Set("X-Ms-Version", "2020-11-05")
		if etag != "" {
			h.Set("If-None-Match", etag)
		}
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			b.Fatal(err)
		}
		switch resp.StatusCode {
		case http.StatusNotModified:
			return 0, resp.Header.Get("Etag")
		case http.StatusOK:
			n, _ := strconv.Atoi(resp.Header.Get("X-Ms-Item-Count"))
			return n, resp.Header.Get("Etag")
		}
		b.Fatalf("status %d", resp.StatusCode)
		return 0, ""
	}
	b.ReportAllocs()
	b.ResetTimer()
	items := 0
	for b.Loop() {
		for _, r := range st.live() {
			etag := ""
			for {
				n, next := read(r.idString(), etag)
				if n == 0 {
					break
				}
				items += n
				etag = next
			}
		}
	}
	if items != docs*b.N {
		b.Fatalf("read %d items, want %d", items, docs*b.N)
	}
	b.ReportMetric(float64(items)/b.Elapsed().Seconds(), "items/s")
}
