package emulator_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cfp-dev/cfp/emulator"
)

// Resource ids never contain '/': Cosmos DB encodes them as base64 with '-' for '/', and
// processors embed the database and container rids in lease ids, where a '/' would split the
// document's resource link (a 401 signature mismatch, then a 404).
func TestRIDs_NoSlash(t *testing.T) {
	t.Parallel()
	e := openEmu(t, emulator.Options{Partitions: 2})
	c := newClient(t, e, "")
	ctx := context.Background()
	// 40 databases with one container each: with plain base64, about one in four would hold a '/'.
	for i := range 40 {
		db, coll := fmt.Sprintf("db%d", i), "c"
		cc := setupContainer(t, c, db, coll)
		resp, err := cc.Read(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		dbc, _ := c.NewDatabase(db)
		dresp, err := dbc.Read(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		collRID, dbRID := resp.ContainerProperties.ResourceID, dresp.DatabaseProperties.ResourceID
		if strings.Contains(collRID, "/") || strings.Contains(dbRID, "/") {
			t.Fatalf("database %s rid %q, container rid %q: contains '/'", db, dbRID, collRID)
		}
		// A document whose id embeds both rids, as a lease id does, can be written and read.
		id := "proclocalhost_" + dbRID + "_" + collRID + ".info"
		body := fmt.Sprintf(`{"id":%q,"pk":%q}`, id, id)
		if _, err := cc.UpsertItem(ctx, azcosmos.NewPartitionKeyString(id), []byte(body), nil); err != nil {
			t.Fatalf("upsert %s: %v", id, err)
		}
		if _, err := cc.ReadItem(ctx, azcosmos.NewPartitionKeyString(id), id, nil); err != nil {
			t.Fatalf("read %s: %v", id, err)
		}
	}
}
