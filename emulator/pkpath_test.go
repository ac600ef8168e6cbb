package emulator_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cfp-dev/cfp/emulator"
)

// A partition-key path may quote a property name, and the quotes may hold a "/" (the Python SDK's
// test_partitioned_collection_partition_key_extraction_special_chars): an item written with the
// value at that property is accepted with that value in the header, and read back by it.
func TestPartitionKeyPath_QuotedSegmentsHoldSlashes(t *testing.T) {
	t.Parallel()
	e := openEmu(t, emulator.Options{Partitions: 2})
	client := newClient(t, e, "")
	ctx := context.Background()
	if _, err := client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "db"}, nil); err != nil {
		t.Fatal(err)
	}
	db, _ := client.NewDatabase("db")
	for _, tc := range []struct {
		coll, path string
		doc        map[string]any
	}{
		{"double", `/"level' 1*()"/"le/vel2"`, map[string]any{"id": "d1", "level' 1*()": map[string]any{"le/vel2": "val1"}}},
		{"single", `/'level" 1*()'/'le/vel2'`, map[string]any{"id": "d2", `level" 1*()`: map[string]any{"le/vel2": "val2"}}},
	} {
		props := azcosmos.ContainerProperties{ID: tc.coll,
			PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{tc.path}, Kind: azcosmos.PartitionKeyKindHash, Version: 2}}
		if _, err := db.CreateContainer(ctx, props, nil); err != nil {
			t.Fatalf("create %s: %v", tc.coll, err)
		}
		cc, _ := db.NewContainer(tc.coll)
		val := tc.doc["id"].(string)
		want := map[string]string{"d1": "val1", "d2": "val2"}[val]
		body, _ := json.Marshal(tc.doc)
		if _, err := cc.CreateItem(ctx, azcosmos.NewPartitionKeyString(want), body, nil); err != nil {
			t.Fatalf("create an item in %s (path %s) with its value %q in the header: %v", tc.coll, tc.path, want, err)
		}
		if _, err := cc.ReadItem(ctx, azcosmos.NewPartitionKeyString(want), val, nil); err != nil {
			t.Errorf("read %s of %s back by %q: %v", val, tc.coll, want, err)
		}
	}
}
