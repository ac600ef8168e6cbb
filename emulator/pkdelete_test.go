package emulator_test

import (
	"context"
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cfp-dev/cfp/emulator"
)

// azcosmos v1.5.0 has no delete-by-partition-key call: the request is sent as the .NET, Java and
// JS SDKs send it (POST .../operations/partitionkeydelete, signed over the container), and what
// it did is read back through azcosmos.
func TestDeleteByPartitionKey_DeletesOnlyThatPartitionAsDeletes(t *testing.T) {
	t.Parallel()
	e := openEmu(t, emulator.Options{Partitions: 1})
	cc := setupContainer(t, newClient(t, e, ""), "db", "c")
	ctx := context.Background()
	for _, d := range []doc{{ID: "a1", PK: "a"}, {ID: "a2", PK: "a"}, {ID: "a3", PK: "a"}, {ID: "b1", PK: "b"}} {
		upsert(t, cc, d)
	}
	now, _ := avFeed(t, e, "c", map[string]string{"x-ms-documentdb-partitionkeyrangeid": "0", "If-None-Match": "*"})

	resp, body := rawRequest(t, e, http.MethodPost, "/dbs/db/colls/c/operations/partitionkeydelete",
		map[string]string{"x-ms-documentdb-partitionkey": `["a"]`}, "")
	if resp.StatusCode != http.StatusOK || len(body) != 0 {
		t.Fatalf("delete by partition key: %d %s, want 200 with no body", resp.StatusCode, body)
	}

	for _, id := range []string{"a1", "a2", "a3"} {
		if _, err := cc.ReadItem(ctx, azcosmos.NewPartitionKeyString("a"), id, nil); statusOf(err) != http.StatusNotFound {
			t.Errorf("read %s after the delete: %v, want 404", id, err)
		}
	}
	if _, err := cc.ReadItem(ctx, azcosmos.NewPartitionKeyString("b"), "b1", nil); err != nil {
		t.Errorf("read b1 of another partition: %v", err)
	}
	got, _ := drainAll(t, cc)
	if len(got) != 1 || got[0].ID != "b1" {
		t.Errorf("latest-version feed after the delete: %v, want only b1", got)
	}

	_, all := avFeed(t, e, "c", map[string]string{"x-ms-documentdb-partitionkeyrangeid": "0", "If-None-Match": now.Header.Get("etag")})
	var deletes []string
	lsns := map[int64]bool{}
	for _, c := range all {
		if c.Metadata.OperationType != "delete" {
			t.Errorf("change %s after the delete by partition key, want only deletes", c)
		}
		deletes = append(deletes, c.Metadata.ID)
		lsns[c.Metadata.LSN] = true
	}
	sort.Strings(deletes)
	if strings.Join(deletes, ",") != "a1,a2,a3" || len(lsns) != 3 {
		t.Errorf("all-versions feed after the delete: [%s], want a delete of a1, a2 and a3, each at its own LSN", changeList(all))
	}

	// A key of the wrong shape is refused as the service refuses it; a key with no items is fine.
	if resp, body := rawRequest(t, e, http.MethodPost, "/dbs/db/colls/c/operations/partitionkeydelete",
		map[string]string{"x-ms-documentdb-partitionkey": `["a","x"]`}, ""); resp.StatusCode != http.StatusBadRequest || resp.Header.Get("x-ms-substatus") != "1001" {
		t.Errorf("two-component key on a one-path container: %d %s, want 400/1001", resp.StatusCode, body)
	}
	if resp, body := rawRequest(t, e, http.MethodPost, "/dbs/db/colls/c/operations/partitionkeydelete",
		map[string]string{"x-ms-documentdb-partitionkey": `["nobody"]`}, ""); resp.StatusCode != http.StatusOK {
		t.Errorf("empty partition: %d %s, want 200", resp.StatusCode, body)
	}
}
