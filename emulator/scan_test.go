package emulator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cfp-dev/cfp/emulator"
)

func TestScanChangeFeed_LatestVersionOfEveryItemOnce(t *testing.T) {
	t.Parallel()
	e := openEmu(t, emulator.Options{Partitions: 3})
	cc := setupContainer(t, newClient(t, e, ""), "db", "scan")
	ctx := context.Background()
	for v := 1; v <= 2; v++ {
		for i := range 50 {
			pk := fmt.Sprintf("p%d", i%7)
			body, _ := json.Marshal(doc{ID: fmt.Sprintf("d%d", i), PK: pk, V: v})
			if _, err := cc.UpsertItem(ctx, azcosmos.NewPartitionKeyString(pk), body, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	seen := map[string]int{}
	n, err := e.ScanChangeFeed("db", "scan", 4, func(raw []byte) {
		var d doc
		if err := json.Unmarshal(raw, &d); err != nil {
			t.Fatalf("scanned document %q: %v", raw, err)
		}
		if d.V != 2 {
			t.Errorf("%s: version %d, want the latest (2)", d.ID, d.V)
		}
		seen[d.ID]++
	})
	if err != nil || n != 50 || len(seen) != 50 {
		t.Fatalf("ScanChangeFeed() = %d, %v with %d distinct ids; want 50 of 50", n, err, len(seen))
	}
	if _, err := e.ScanChangeFeed("db", "missing", 0, func([]byte) {}); err == nil {
		t.Error("ScanChangeFeed of a missing container succeeded")
	}
}
