package emulator_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cfp-dev/cfp/emulator"
)

// bulkResult is one operation's answer in a bulk response.
type bulkResult struct {
	StatusCode   int             `json:"statusCode"`
	ResourceBody json.RawMessage `json:"resourceBody"`
}

// bulk sends ops as the JavaScript SDK's items.bulk does: a batch request that is not atomic,
// with no partition-key header, each operation carrying its key as the JSON text of the header.
func bulk(t *testing.T, e *emulator.Emulator, continueOnError string, ops string) (int, []bulkResult) {
	t.Helper()
	resp, body := rawRequest(t, e, http.MethodPost, "/dbs/db/colls/c/docs", map[string]string{
		"x-ms-cosmos-is-batch-request":        "true",
		"x-ms-cosmos-batch-atomic":            "false",
		"x-ms-cosmos-batch-continue-on-error": continueOnError,
		"x-ms-documentdb-partitionkeyrangeid": "0",
		"Content-Type":                        "application/json",
	}, ops)
	var results []bulkResult
	if err := json.Unmarshal(body, &results); err != nil {
		t.Fatalf("bulk answered %d %s", resp.StatusCode, body)
	}
	return resp.StatusCode, results
}

func statuses(rs []bulkResult) []int {
	out := make([]int, len(rs))
	for i, r := range rs {
		out[i] = r.StatusCode
	}
	return out
}

// TestBulk_OperationsOnSeveralPartitionKeysAreAppliedEachOnItsOwn: before bulk was told from a
// transactional batch, every bulk request of the JavaScript SDK got 400 "a transactional batch
// needs the x-ms-documentdb-partitionkey header".
func TestBulk_OperationsOnSeveralPartitionKeysAreAppliedEachOnItsOwn(t *testing.T) {
	t.Parallel()
	e := openEmu(t, emulator.Options{Partitions: 1})
	cc := setupContainer(t, newClient(t, e, ""), "db", "c")
	upsert(t, cc, doc{ID: "taken", PK: "b", V: 1})
	upsert(t, cc, doc{ID: "gone", PK: "c", V: 1})

	status, rs := bulk(t, e, "true", `[
		{"operationType":"Create","partitionKey":"[\"a\"]","resourceBody":{"id":"new","pk":"a","v":2}},
		{"operationType":"Create","partitionKey":"[\"b\"]","resourceBody":{"id":"taken","pk":"b","v":2}},
		{"operationType":"Upsert","partitionKey":"[\"b\"]","resourceBody":{"id":"other","pk":"b","v":3}},
		{"operationType":"Read","partitionKey":"[\"b\"]","id":"taken"},
		{"operationType":"Delete","partitionKey":"[\"c\"]","id":"gone"},
		{"operationType":"Create","partitionKey":"[\"a\"]","resourceBody":{"id":"mismatch","pk":"z"}},
		{"operationType":"Create","partitionKey":"[{}]","resourceBody":{"id":"nokey"}}
	]`)
	if want := []int{201, 409, 201, 200, 204, 400, 201}; status != http.StatusMultiStatus || !slices.Equal(statuses(rs), want) {
		t.Fatalf("bulk answered %d %v, want 207 %v", status, statuses(rs), want)
	}
	var read doc
	if err := json.Unmarshal(rs[3].ResourceBody, &read); err != nil || read.V != 1 {
		t.Errorf("the read operation returned %s, want the item with v 1", rs[3].ResourceBody)
	}
	ctx := context.Background()
	for _, d := range []doc{{ID: "new", PK: "a"}, {ID: "other", PK: "b"}} {
		if _, err := cc.ReadItem(ctx, azcosmos.NewPartitionKeyString(d.PK), d.ID, nil); err != nil {
			t.Errorf("item %s written by bulk: %v", d.ID, err)
		}
	}
	if _, err := cc.ReadItem(ctx, azcosmos.NewPartitionKeyString("c"), "gone", nil); statusOf(err) != http.StatusNotFound {
		t.Errorf("item deleted by bulk: read answered %v, want 404", err)
	}

	status, rs = bulk(t, e, "true", `[{"operationType":"Create","partitionKey":"[\"a\"]","resourceBody":{"id":"n2","pk":"a"}}]`)
	if status != http.StatusOK || !slices.Equal(statuses(rs), []int{201}) {
		t.Errorf("a bulk request that succeeds answered %d %v, want 200 [201]", status, statuses(rs))
	}
}

// TestBulk_StopsAtTheFirstFailureWithoutContinueOnError: the operations after a failed one are
// not run and answer 424, the ones before it stay applied.
func TestBulk_StopsAtTheFirstFailureWithoutContinueOnError(t *testing.T) {
	t.Parallel()
	e := openEmu(t, emulator.Options{Partitions: 1})
	cc := setupContainer(t, newClient(t, e, ""), "db", "c")
	upsert(t, cc, doc{ID: "taken", PK: "b", V: 1})

	status, rs := bulk(t, e, "false", `[
		{"operationType":"Create","partitionKey":"[\"a\"]","resourceBody":{"id":"first","pk":"a"}},
		{"operationType":"Create","partitionKey":"[\"b\"]","resourceBody":{"id":"taken","pk":"b"}},
		{"operationType":"Create","partitionKey":"[\"a\"]","resourceBody":{"id":"after","pk":"a"}}
	]`)
	if want := []int{201, 409, 424}; status != http.StatusMultiStatus || !slices.Equal(statuses(rs), want) {
		t.Fatalf("bulk answered %d %v, want 207 %v", status, statuses(rs), want)
	}
	ctx := context.Background()
	if _, err := cc.ReadItem(ctx, azcosmos.NewPartitionKeyString("a"), "first", nil); err != nil {
		t.Errorf("the operation before the failure: %v", err)
	}
	if _, err := cc.ReadItem(ctx, azcosmos.NewPartitionKeyString("a"), "after", nil); statusOf(err) != http.StatusNotFound {
		t.Errorf("the operation after the failure was applied (read: %v)", err)
	}
}
