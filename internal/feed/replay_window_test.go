package feed

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/internal/leases"
)

func TestInWindow_CutsAtTheFirstChangePastTheEnd(t *testing.T) {
	t.Parallel()
	until := time.Date(2026, 1, 2, 10, 0, 0, 500e6, time.UTC) // 10:00:00.5
	sec := until.Unix()
	doc := func(id string, ts int64) json.RawMessage {
		return json.RawMessage(fmt.Sprintf(`{"id":%q,"_ts":%d}`, id, ts))
	}
	tests := []struct {
		name     string
		items    []json.RawMessage
		wantIDs  []string
		wantPast bool
	}{
		{"all inside", []json.RawMessage{doc("a", sec-5), doc("b", sec-1)}, []string{"a", "b"}, false},
		{"the end's own second is outside", []json.RawMessage{doc("a", sec-1), doc("b", sec)}, []string{"a"}, true},
		{"cut", []json.RawMessage{doc("a", sec-1), doc("b", sec+1), doc("c", sec+2)}, []string{"a"}, true},
		{"all past", []json.RawMessage{doc("a", sec+1)}, nil, true},
		{"no _ts is inside", []json.RawMessage{json.RawMessage(`{"id":"a"}`)}, []string{"a"}, false},
		{"empty", nil, nil, false},
	}
	for _, tt := range tests {
		got, past := inWindow(tt.items, until)
		var ids []string
		for _, it := range got {
			var v struct{ ID string }
			if err := json.Unmarshal(it, &v); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, v.ID)
		}
		if !slices.Equal(ids, tt.wantIDs) || past != tt.wantPast {
			t.Errorf("%s: inWindow = %v, %v; want %v, %v", tt.name, ids, past, tt.wantIDs, tt.wantPast)
		}
	}
	if got := windowClosed(until); !got.Equal(time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)) {
		t.Errorf("windowClosed = %v, want the end's whole second", got)
	}
}

func TestReplayName_SameWindowSameLeasesAndNeverALivePrefix(t *testing.T) {
	t.Parallel()
	a := ReplayName("orders-proj", "shop", "orders", "-2h", nil, "")
	if a != ReplayName("orders-proj", "shop", "orders", "-2h", nil, "") {
		t.Error("the same command line must find the same replay leases")
	}
	others := []string{
		ReplayName("orders-proj", "shop", "orders", "-3h", nil, ""),
		ReplayName("orders-proj", "shop", "orders", "-2h", nil, "now"),
		ReplayName("orders-proj", "shop", "orders2", "-2h", nil, ""),
		ReplayName("orders-proj", "shop", "orders", "@s.json", []byte(`{"version":1}`), ""),
		ReplayName("orders-proj", "shop", "orders", "@s.json", []byte(`{"version":2}`), ""),
	}
	for _, o := range others {
		if o == a {
			t.Errorf("another window shares the replay name %s", a)
		}
	}
	if !strings.HasPrefix(a, "orders-proj.replay-") || len(a) != len("orders-proj.replay-")+8 {
		t.Errorf("ReplayName = %q, want orders-proj.replay-<8 hex>", a)
	}
	// The live processor lists "<name><host>_..": a replay's ids never match it.
	live := leases.Prefix("orders-proj", "acct.documents.azure.com", "db==", "coll==") + ".."
	replay := leases.LeaseID(leases.Prefix(a, "acct.documents.azure.com", "db==", "coll=="), "0")
	if strings.HasPrefix(replay, live) {
		t.Errorf("replay lease %s is listed by the live processor (prefix %s)", replay, live)
	}
}

func TestWindowOfLeases_RoundTrip(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	for _, w := range []ReplayWindow{
		{Start: StartFrom{Kind: StartBeginning}, Until: now.Add(-time.Minute)},
		{Start: StartFrom{Kind: StartTime, Time: now.Add(-2 * time.Hour)}, Until: now.Add(-123456789)},
	} {
		l := leases.NewDotNetV0("p", "0", leases.Range{Min: "", Max: "FF"}, "")
		l.Properties = w.properties()
		got, err := windowOfLeases([]*leases.Lease{l}, now)
		if err != nil {
			t.Fatal(err)
		}
		if got.Start.Kind != w.Start.Kind || !got.Start.Time.Equal(w.Start.Time) || !got.Until.Equal(w.Until) {
			t.Errorf("window %+v came back as %+v", w, got)
		}
	}
	if _, err := windowOfLeases([]*leases.Lease{leases.NewDotNetV0("p", "0", leases.Range{}, "")}, now); err == nil {
		t.Error("leases without a window must be refused")
	}
}

func TestStateStart(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	st := &TailState{Version: 1, Ranges: []RangeState{
		{PartitionID: "0", Continuation: `"4"`},
		{PartitionID: "1", Start: "2026-01-02T10:00:00Z"},
	}}
	s, err := StateStart(st, now)
	if err != nil || s.Kind != StartTime || !s.Time.Equal(now.Add(-2*time.Hour)) {
		t.Errorf("StateStart = %+v, %v; want 10:00", s, err)
	}
	st.Ranges = append(st.Ranges, RangeState{PartitionID: "2", Start: "beginning"})
	if _, err := StateStart(st, now); err == nil {
		t.Error("ranges starting at different positions must be refused")
	}
}
