package emulator_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/cfp-dev/cfp/emulator"
)

// The Java EPK Change Feed Processor reads the latest-version feed with
// x-ms-cosmos-changefeed-wire-format-version: 2021-09-15 and reads each change's document from
// "current" (ChangeFeedProcessorItem.getCurrent()). The emulator answered the plain documents,
// so every item's current was null and the Java handler failed on every batch.
func TestChangeFeed_LatestVersionInWireFormat20210915(t *testing.T) {
	t.Parallel()
	e := openEmu(t, emulator.Options{Partitions: 1})
	c := newClient(t, e, "")
	cc := setupContainer(t, c, "shop", "orders")
	upsert(t, cc, doc{ID: "a", PK: "p", V: 1})
	upsert(t, cc, doc{ID: "b", PK: "q", V: 1})
	upsert(t, cc, doc{ID: "a", PK: "p", V: 2})

	read := func(hdr map[string]string) []json.RawMessage {
		t.Helper()
		resp, body := rawRequest(t, e, http.MethodGet, "/dbs/shop/colls/orders/docs", hdr, "")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("change feed: %d %s", resp.StatusCode, body)
		}
		var page struct {
			Documents []json.RawMessage
			Count     int `json:"_count"`
		}
		if err := json.Unmarshal(body, &page); err != nil {
			t.Fatal(err)
		}
		if page.Count != len(page.Documents) {
			t.Errorf("_count %d for %d documents", page.Count, len(page.Documents))
		}
		return page.Documents
	}
	plain := read(map[string]string{"A-IM": "Incremental Feed"})
	wrapped := read(map[string]string{"A-IM": "Incremental Feed", "x-ms-cosmos-changefeed-wire-format-version": "2021-09-15"})
	if len(plain) != 2 || len(wrapped) != 2 {
		t.Fatalf("%d plain and %d wrapped documents, want 2 each (a at v2, b)", len(plain), len(wrapped))
	}
	for i := range plain {
		var p doc
		var w struct {
			Current  json.RawMessage
			Metadata struct {
				LSN  int64 `json:"lsn"`
				CRTS int64 `json:"crts"`
			}
		}
		if err := json.Unmarshal(wrapped[i], &w); err != nil {
			t.Fatal(err)
		}
		if string(w.Current) != string(plain[i]) {
			t.Errorf("current of item %d = %s, want the plain document %s", i, w.Current, plain[i])
		}
		var ts struct {
			TS int64 `json:"_ts"`
		}
		_ = json.Unmarshal(plain[i], &p)
		_ = json.Unmarshal(plain[i], &ts)
		if w.Metadata.LSN != p.LSN || p.LSN == 0 || w.Metadata.CRTS != ts.TS || ts.TS == 0 {
			t.Errorf("metadata of %s = %+v, want lsn %d and crts %d", p.ID, w.Metadata, p.LSN, ts.TS)
		}
	}
}
