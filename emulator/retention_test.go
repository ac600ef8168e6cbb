package emulator_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/emulator"
)

// TestLogRetention_CompactsOldOperations: operations older than the retention window leave the
// operation log; the latest-version feed still has every item, the all-versions feed answers
// from a continuation inside the window, and a continuation from before it is a 400.
func TestLogRetention_CompactsOldOperations(t *testing.T) {
	t.Parallel()
	clk := newClock()
	e := openEmu(t, emulator.Options{Partitions: 1, Now: clk.Now, TTLSweepInterval: -1, LogRetention: time.Hour})
	cc := setupContainer(t, newClient(t, e, ""), "db", "av")
	range0 := map[string]string{"x-ms-documentdb-partitionkeyrangeid": "0"}
	with := func(k, v string) map[string]string {
		h := map[string]string{k: v}
		for k, v := range range0 {
			h[k] = v
		}
		return h
	}
	resp, _ := avFeed(t, e, "av", with("If-None-Match", "*"))
	start := resp.Header.Get("etag")
	for i := range 10 {
		upsert(t, cc, doc{ID: "old", PK: "a", V: i})
	}
	if n, err := e.CompactLog(); err != nil || n != 0 {
		t.Fatalf("CompactLog inside the window = %d, %v; want nothing to compact", n, err)
	}
	clk.Advance(2 * time.Hour)
	resp, _ = avFeed(t, e, "av", with("If-None-Match", "*"))
	recent := resp.Header.Get("etag")
	upsert(t, cc, doc{ID: "new", PK: "b", V: 1})
	n, err := e.CompactLog()
	if err != nil || n != 10 {
		t.Fatalf("CompactLog after the window = %d, %v; want the 10 old operations", n, err)
	}

	resp, got := avFeed(t, e, "av", with("If-None-Match", recent))
	if resp.StatusCode != http.StatusOK || changeList(got) != "create new@11" {
		t.Errorf("all versions inside the window: %d [%s], want [create new@11]", resp.StatusCode, changeList(got))
	}
	resp, _ = avFeed(t, e, "av", with("If-None-Match", start))
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("all versions from before the window: %d, want 400", resp.StatusCode)
	}
	latest, body := rawRequest(t, e, http.MethodGet, "/dbs/db/colls/av/docs", with("A-IM", "Incremental Feed"), "")
	if latest.StatusCode != http.StatusOK || !strings.Contains(string(body), `"id":"old"`) || !strings.Contains(string(body), `"id":"new"`) {
		t.Errorf("latest version from the beginning after compaction: %d %s, want both items", latest.StatusCode, body)
	}
}
