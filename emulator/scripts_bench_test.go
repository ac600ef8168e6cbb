package emulator_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/cfp-dev/cfp/emulator"
)

// BenchmarkSproc compares, in one run, an upsert of one document through the REST API with the
// same upsert from a stored procedure (a new goja runtime, the script compiled and run, in one
// storage transaction), and a procedure that upserts ten: the cost of running server-side
// JavaScript in the emulator, as a ratio to a plain write.
func BenchmarkSproc(b *testing.B) {
	e := openEmu(b, emulator.Options{Partitions: 1})
	if resp, _ := rawRequest(b, e, http.MethodPost, "/dbs", nil, `{"id":"db"}`); resp.StatusCode != http.StatusCreated {
		b.Fatal("create database")
	}
	if resp, _ := rawRequest(b, e, http.MethodPost, "/dbs/db/colls", nil, `{"id":"c","partitionKey":{"paths":["/pk"],"kind":"Hash"}}`); resp.StatusCode != http.StatusCreated {
		b.Fatal("create container")
	}
	for id, n := range map[string]int{"one": 1, "ten": 10} {
		body := fmt.Sprintf(`{"id":%q,"body":"function (i) { var c = getContext().getCollection(); for (var k = 0; k < %d; k++) c.upsertDocument(c.getSelfLink(), {id: 'd' + i + '-' + k, pk: 'p', v: i}); }"}`, id, n)
		if resp, b2 := rawRequest(b, e, http.MethodPost, "/dbs/db/colls/c/sprocs", nil, body); resp.StatusCode != http.StatusCreated {
			b.Fatalf("create sproc: %s", b2)
		}
	}
	pk := map[string]string{"x-ms-documentdb-partitionkey": `["p"]`}
	upsertHdr := map[string]string{"x-ms-documentdb-partitionkey": `["p"]`, "x-ms-documentdb-is-upsert": "true"}
	b.Run("rest-upsert", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if resp, _ := rawRequest(b, e, http.MethodPost, "/dbs/db/colls/c/docs", upsertHdr, fmt.Sprintf(`{"id":"d%d-0","pk":"p","v":%d}`, i%100, i)); resp.StatusCode >= 300 {
				b.Fatal(resp.Status)
			}
		}
	})
	for _, id := range []string{"one", "ten"} {
		b.Run("sproc-upsert-"+id, func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				if resp, body := rawRequest(b, e, http.MethodPost, "/dbs/db/colls/c/sprocs/"+id, pk, fmt.Sprintf("[%d]", i%100)); resp.StatusCode != http.StatusOK {
					b.Fatalf("%d %s", resp.StatusCode, body)
				}
			}
		})
	}
}
