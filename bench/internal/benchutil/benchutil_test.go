package benchutil

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/cfp-dev/cfp/emulator"
)

func TestSetupAndGenerate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e, err := emulator.Open(emulator.Options{Dir: dir, Partitions: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	client, err := InProcessClient(e)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx := context.Background()
	cc, existed, err := Setup(ctx, client)
	if err != nil || existed {
		t.Fatalf("first Setup: existed %v, %v; want a new database", existed, err)
	}
	const docs = 250
	if err := Generate(ctx, cc, GenerateOptions{Docs: docs, Writers: 8, Payload: "xyz"}); err != nil {
		t.Fatal(err)
	}
	if _, existed, err = Setup(ctx, client); err != nil || !existed {
		t.Fatalf("second Setup: existed %v, %v; want the database found", existed, err)
	}

	seen := make([]bool, docs)
	n, err := e.ScanChangeFeed(Database, Container, 100, func(raw []byte) {
		var d struct {
			ID      string `json:"id"`
			PK      string `json:"pk"`
			N       int    `json:"n"`
			Payload string `json:"payload"`
		}
		if err := json.Unmarshal(raw, &d); err != nil {
			t.Errorf("document %s: %v", raw, err)
			return
		}
		if d.N < 0 || d.N >= docs || d.ID != "d"+strconv.Itoa(d.N) || d.PK != "p"+strconv.Itoa(d.N%1000) || d.Payload != "xyz" {
			t.Errorf("unexpected document %s", raw)
			return
		}
		seen[d.N] = true
	})
	if err != nil {
		t.Fatal(err)
	}
	if n != docs {
		t.Errorf("the change feed holds %d documents, want %d", n, docs)
	}
	for i, ok := range seen {
		if !ok {
			t.Errorf("document d%d is missing", i)
		}
	}
}

func TestPayload_MakesTheUserPropertiesAboutBodyLong(t *testing.T) {
	t.Parallel()
	for _, body := range []int{200, 1000, 4000} {
		doc, _ := json.Marshal(map[string]any{"id": "d12345", "pk": "p345", "n": 12345, "payload": Payload(body)})
		if n := len(doc); n < body*9/10 || n > body*11/10 {
			t.Errorf("Payload(%d): the document has %d bytes of user properties, want %d ± 10%%", body, n, body)
		}
	}
}
