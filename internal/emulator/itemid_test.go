package emulator_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cfp-dev/cfp/internal/emulator"
)

// TestItemIDs_RoutingGatewayRules: every id can be created; ids the routing gateway cannot
// address by URL are then 401 (trailing whitespace, / \ # %) or 400 (control characters) to
// read, replace and delete, as the SDK's own emulator tests pin.
func TestItemIDs_RoutingGatewayRules(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := openEmu(t, emulator.Options{Partitions: 1})
	cc := setupContainer(t, newClient(t, e, ""), "db", "c")
	pk := azcosmos.NewPartitionKeyString("a")
	for id, want := range map[string]int{
		"This is a test": 200, " Test": 200, "Disallowed?Chars": 200, "WithUnicode鱀": 200, "a,=.:~+-@()^${}[]!_b": 200,
		"Test ": 401, "x%20": 401, "Disallowed/Chars": 401, `Disallowed\Chars`: 401, "Disallowed#Chars": 401,
		"With\tTab": 400, "With\nLineFeed": 400,
	} {
		if _, err := cc.CreateItem(ctx, pk, []byte(`{"id":`+jsonString(id)+`,"pk":"a"}`), nil); err != nil {
			t.Errorf("create %q: %v", id, err)
			continue
		}
		_, err := cc.ReadItem(ctx, pk, id, nil)
		got := http.StatusOK
		if err != nil {
			got = statusOf(err)
		}
		if got != want {
			t.Errorf("read %q: %d (%v), want %d", id, got, err, want)
		}
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
