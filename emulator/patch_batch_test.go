package emulator_test

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cfp-dev/cfp/emulator"
)

func readDoc(t *testing.T, cc *azcosmos.ContainerClient, pk, id string) map[string]any {
	t.Helper()
	r, err := cc.ReadItem(context.Background(), azcosmos.NewPartitionKeyString(pk), id, nil)
	if err != nil {
		t.Fatalf("read %s: %v", id, err)
	}
	var m map[string]any
	_ = json.Unmarshal(r.Value, &m)
	return m
}

func TestPatchItem(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := openEmu(t, emulator.Options{Partitions: 1})
	cc := setupContainer(t, newClient(t, e, ""), "db", "c")
	pk := azcosmos.NewPartitionKeyString("a")
	if _, err := cc.CreateItem(ctx, pk, []byte(`{"id":"1","pk":"a","value":"4","count":3,"description":"x","tags":["t1"]}`), nil); err != nil {
		t.Fatal(err)
	}
	ops := azcosmos.PatchOperations{}
	ops.AppendReplace("/value", "5")
	ops.AppendSet("/hello", "world")
	ops.AppendAdd("/tags/-", "t2")
	ops.AppendRemove("/description")
	ops.AppendIncrement("/count", 1)
	if _, err := cc.PatchItem(ctx, pk, "1", ops, nil); err != nil {
		t.Fatalf("patch: %v", err)
	}
	got := readDoc(t, cc, "a", "1")
	if got["value"] != "5" || got["hello"] != "world" || got["count"] != 4.0 || got["description"] != nil || len(got["tags"].([]any)) != 2 {
		t.Errorf("patched document: %v", got)
	}

	// The JavaScript SDK sends the bare operations array.
	if resp, body := rawRequest(t, e, http.MethodPatch, "/dbs/db/colls/c/docs/1", map[string]string{"x-ms-documentdb-partitionkey": `["a"]`},
		`[{"op":"set","path":"/js","value":true}]`); resp.StatusCode != http.StatusOK {
		t.Errorf("patch with a bare operations array: %d %s", resp.StatusCode, body)
	}

	bad := azcosmos.PatchOperations{}
	bad.AppendReplace("/missing", 1)
	if _, err := cc.PatchItem(ctx, pk, "1", bad, nil); statusOf(err) != http.StatusBadRequest {
		t.Errorf("replace of a missing property: %v, want 400", err)
	}
	cond := azcosmos.PatchOperations{}
	cond.SetCondition("FROM c WHERE c.count > 10")
	cond.AppendSet("/x", 1)
	if _, err := cc.PatchItem(ctx, pk, "1", cond, nil); statusOf(err) != http.StatusPreconditionFailed {
		t.Errorf("patch whose condition fails: %v, want 412", err)
	}
	stale := azcore.ETag(`"stale"`)
	if _, err := cc.PatchItem(ctx, pk, "1", ops, &azcosmos.ItemOptions{IfMatchEtag: &stale}); statusOf(err) != http.StatusPreconditionFailed {
		t.Errorf("patch with a stale etag: %v, want 412", err)
	}
	if _, err := cc.PatchItem(ctx, pk, "nope", ops, nil); statusOf(err) != http.StatusNotFound {
		t.Errorf("patch of a missing item: %v, want 404", err)
	}
}

func TestTransactionalBatch_AllOrNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := openEmu(t, emulator.Options{Partitions: 1})
	cc := setupContainer(t, newClient(t, e, ""), "db", "c")
	pk := azcosmos.NewPartitionKeyString("a")
	upsert(t, cc, doc{ID: "keep", PK: "a", V: 1})

	b := cc.NewTransactionalBatch(pk)
	b.CreateItem([]byte(`{"id":"n1","pk":"a"}`), nil)
	b.ReadItem("keep", nil)
	p := azcosmos.PatchOperations{}
	p.AppendIncrement("/v", 1)
	b.PatchItem("keep", p, nil)
	resp, err := cc.ExecuteTransactionalBatch(ctx, b, nil)
	if err != nil || !resp.Success || len(resp.OperationResults) != 3 {
		t.Fatalf("batch: %v %+v", err, resp)
	}
	for i, want := range []int32{201, 200, 200} {
		if got := resp.OperationResults[i].StatusCode; got != want {
			t.Errorf("operation %d: status %d, want %d", i, got, want)
		}
	}
	if resp.OperationResults[1].ResourceBody == nil {
		t.Error("the read in the batch returned no body")
	}

	// A failing operation undoes the ones before it: 207, 424 for the others.
	b = cc.NewTransactionalBatch(pk)
	b.DeleteItem("keep", nil)
	b.UpsertItem([]byte(`{"id":"n2","pk":"a"}`), nil)
	b.CreateItem([]byte(`{"id":"n1","pk":"a"}`), nil)
	resp, err = cc.ExecuteTransactionalBatch(ctx, b, nil)
	if err != nil || resp.Success || resp.RawResponse.StatusCode != http.StatusMultiStatus {
		t.Fatalf("failing batch: %v success=%v", err, resp.Success)
	}
	for i, want := range []int32{424, 424, 409} {
		if got := resp.OperationResults[i].StatusCode; got != want {
			t.Errorf("failing batch operation %d: status %d, want %d", i, got, want)
		}
	}
	if got := readDoc(t, cc, "a", "keep"); got["v"] != 2.0 {
		t.Errorf("after the failed batch keep = %v, want v 2 (the delete undone)", got)
	}
	if _, err := cc.ReadItem(ctx, pk, "n2", nil); statusOf(err) != http.StatusNotFound {
		t.Errorf("n2 after the failed batch: %v, want 404 (the upsert undone)", err)
	}
}

// TestPatchItem_ConcurrentUnconditionalPatchesAllApply runs concurrent increments without
// If-Match: the service applies them one after the other, so every one succeeds and the count
// ends at their number (before, a patch that lost five read-modify-write races answered 412).
func TestPatchItem_ConcurrentUnconditionalPatchesAllApply(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := openEmu(t, emulator.Options{Partitions: 1})
	cc := setupContainer(t, newClient(t, e, ""), "db", "c")
	pk := azcosmos.NewPartitionKeyString("a")
	if _, err := cc.CreateItem(ctx, pk, []byte(`{"id":"n","pk":"a","count":0}`), nil); err != nil {
		t.Fatal(err)
	}
	const workers, each = 32, 25
	var failed atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				ops := azcosmos.PatchOperations{}
				ops.AppendIncrement("/count", 1)
				if _, err := cc.PatchItem(ctx, pk, "n", ops, nil); err != nil {
					if failed.Add(1) <= 3 {
						t.Errorf("patch: %v", err)
					}
				}
			}
		}()
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		t.Errorf("%d of %d unconditional patches failed", n, workers*each)
	}
	if got, want := readDoc(t, cc, "a", "n")["count"], float64(workers*each-failed.Load()); got != want {
		t.Errorf("count after %v acknowledged increments: %v", want, got)
	}
}

// TestPatchItem_KeepsNumbersExact checks that a patch writes back the values it does not touch
// as they were (an integer beyond 2^53 used to go through float64: 9007199254740993 became
// 9007199254740992), and that incr adds integers as integers, exactly.
func TestPatchItem_KeepsNumbersExact(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := openEmu(t, emulator.Options{Partitions: 1})
	cc := setupContainer(t, newClient(t, e, ""), "db", "c")
	pk := azcosmos.NewPartitionKeyString("a")
	if _, err := cc.CreateItem(ctx, pk, []byte(`{"id":"1","pk":"a","big":9007199254740993,"neg":-9007199254740993,"f":0.1,"exp":1E+3,"nested":{"big":9007199254740993,"arr":[9007199254740993,1.25]},"n":9007199254740993,"i":3,"x":2}`), nil); err != nil {
		t.Fatal(err)
	}
	ops := azcosmos.PatchOperations{}
	ops.AppendSet("/s", "patched")
	ops.AppendIncrement("/n", 2)
	ops.AppendIncrement("/i", 1)
	ops.AppendSet("/setbig", json.RawMessage(`18014398509481985`))
	if _, err := cc.PatchItem(ctx, pk, "1", ops, nil); err != nil {
		t.Fatalf("patch: %v", err)
	}
	if resp, body := rawRequest(t, e, http.MethodPatch, "/dbs/db/colls/c/docs/1", map[string]string{"x-ms-documentdb-partitionkey": `["a"]`},
		`{"operations":[{"op":"incr","path":"/x","value":0.5}]}`); resp.StatusCode != http.StatusOK {
		t.Fatalf("patch incr by 0.5: %d %s", resp.StatusCode, body)
	}
	resp, err := cc.ReadItem(ctx, pk, "1", nil)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal(resp.Value, &got); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{
		"big":    `9007199254740993`,
		"neg":    `-9007199254740993`,
		"f":      `0.1`,
		"exp":    `1E+3`,
		"nested": `{"arr":[9007199254740993,1.25],"big":9007199254740993}`,
		"n":      `9007199254740995`, // 9007199254740993 + 2, not rounded to 9007199254740996
		"i":      `4`,
		"x":      `2.5`,
		"setbig": `18014398509481985`,
		"s":      `"patched"`,
	} {
		if string(got[k]) != want {
			t.Errorf("%s after the patch: %s, want %s", k, got[k], want)
		}
	}
}
