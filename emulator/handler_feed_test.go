package emulator

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/cfp-dev/cfp/internal/epk"
)

// TestChangeFeed_RenderedBody checks that the response body a change-feed page renders in
// storage is the list body of its documents, also when it reuses a pooled buffer that held a
// larger page.
func TestChangeFeed_RenderedBody(t *testing.T) {
	t.Parallel()
	e, err := Open(Options{Dir: t.TempDir(), Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	s := e.store
	if _, err := s.createDatabase("db"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.createContainer("db", []byte(`{"id":"c","partitionKey":{"paths":["/pk"]}}`), e.opts.Partitions); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		comps := []any{"p" + strconv.Itoa(i)}
		id := "d" + strconv.Itoa(i)
		body := map[string]json.RawMessage{"id": json.RawMessage(strconv.Quote(id)), "pk": json.RawMessage(strconv.Quote(comps[0].(string)))}
		if _, err := s.writeItem("db", "c", itemWrite{Op: opUpsert, ID: id, PK: epk.Canonical(comps), EPK: epk.HashV2(comps), Body: body}); err != nil {
			t.Fatal(err)
		}
	}
	var since uint64
	for _, n := range []int{4, 4} { // a page of 4, then the last document into the same buffer
		page, err := s.changeFeed("db", "c", feedRequest{RangeID: "0", Since: since, Max: n})
		if err != nil {
			t.Fatal(err)
		}
		if want := string(documentsBody(page.CollRID, page.Docs)); string(page.Body) != want {
			t.Fatalf("rendered body\n%s\nwant\n%s", page.Body, want)
		}
		var got struct {
			Documents []struct{ ID string }
			Count     int `json:"_count"`
		}
		if err := json.Unmarshal(page.Body, &got); err != nil {
			t.Fatalf("body is not JSON: %v\n%s", err, page.Body)
		}
		if got.Count != len(page.Docs) || len(got.Documents) != len(page.Docs) {
			t.Fatalf("_count %d with %d documents, page has %d", got.Count, len(got.Documents), len(page.Docs))
		}
		since = page.Etag
		putBody(page.Body)
	}
	page, err := s.changeFeed("db", "c", feedRequest{RangeID: "0", Since: since, Max: 4})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Docs) != 0 || page.Body != nil {
		t.Fatalf("drained feed gave %d documents, body %q", len(page.Docs), page.Body)
	}
}
