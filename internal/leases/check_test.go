package leases_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/internal/leases"
)

var checkNow = time.Date(2024, 5, 24, 14, 0, 0, 0, time.UTC)

func v1(min, max, owner string) *leases.Lease {
	l := leases.NewDotNetV1("p", leases.Range{Min: min, Max: max}, `"1"`, "")
	l.Owner, l.Timestamp = owner, checkNow
	return l
}

func v0(token, min, max string) *leases.Lease {
	l := leases.NewDotNetV0("p", token, leases.Range{Min: min, Max: max}, "")
	l.Timestamp = checkNow
	return l
}

// kinds renders findings as "kind[tokens]range" for comparison.
func kinds(fs []leases.Finding) []string {
	var out []string
	for _, f := range fs {
		s := string(f.Kind) + "[" + strings.Join(f.Tokens, ",") + "]"
		if f.Range != nil {
			s += f.Range.String()
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

func TestCheck(t *testing.T) {
	t.Parallel()
	parts := []leases.Partition{
		{ID: "1", Range: leases.Range{Min: "", Max: "80"}, Parents: []string{"0"}},
		{ID: "2", Range: leases.Range{Min: "80", Max: "FF"}, Parents: []string{"0"}},
	}
	noRange := v0("1", "", "")
	noRange.Range = leases.Range{}
	stale := v1("80", "FF", "dead-host")
	stale.Timestamp = checkNow.Add(-2 * time.Minute)
	java := decodeFile(t, "testdata/corpus/java-epk.json")
	java.Range = leases.Range{Min: "80", Max: "FF"}
	avad := v1("80", "FF", "")
	avad.Mode = leases.ModeFullFidelity

	tests := []struct {
		name string
		ls   []*leases.Lease
		opts []leases.CheckOption
		want []string
	}{
		{"healthy", []*leases.Lease{v1("", "80", "a"), v1("80", "FF", "b")}, nil, nil},
		{"single full range", []*leases.Lease{v0("0", "", "FF")}, []leases.CheckOption{leases.WithMarkers(true, time.Time{})}, nil},
		{"gap in the middle and at the top", []*leases.Lease{v1("", "40", ""), v1("60", "C0", "")}, nil,
			[]string{"gap[]40-60", "gap[]C0-FF"}},
		{"gap at the bottom", []*leases.Lease{v1("10", "FF", "")}, nil, []string{"gap[]-10"}},
		{"overlap", []*leases.Lease{v1("", "90", ""), v1("80", "FF", "")}, nil, []string{"overlap[-90,80-FF]80-90"}},
		{"duplicate token", []*leases.Lease{v0("0", "", "FF"), v0("0", "", "FF")}, nil, []string{"duplicate-token[0]"}},
		{"parent and children without partitions", []*leases.Lease{v0("0", "", "FF"), v0("1", "", "80"), v0("2", "80", "FF")}, nil,
			[]string{"overlap[0,1]-80", "overlap[0,2]80-FF"}},
		{"orphan parent", []*leases.Lease{v0("0", "", "FF"), v0("1", "", "80"), v0("2", "80", "FF")},
			[]leases.CheckOption{leases.WithPartitions(parts)},
			[]string{"orphan-parent[0,1,2]-FF", "overlap[0,1]-80", "overlap[0,2]80-FF"}},
		{"pending split", []*leases.Lease{v0("0", "", "FF")}, []leases.CheckOption{leases.WithPartitions(parts)},
			[]string{"pending-split[0]-FF"}},
		{"epk lease over two partitions", []*leases.Lease{v1("", "FF", "")}, []leases.CheckOption{leases.WithPartitions(parts)},
			[]string{"pending-split[-FF]-FF"}},
		{"unknown range resolved by partitions", []*leases.Lease{noRange, v0("2", "80", "FF")}, []leases.CheckOption{leases.WithPartitions(parts)}, nil},
		{"unknown range", []*leases.Lease{noRange, v0("2", "80", "FF")}, nil, []string{"unknown-range[1]"}},
		{"stale owner", []*leases.Lease{v1("", "80", "a"), stale}, nil, []string{"stale-owner[80-FF]"}},
		{"no info and stale lock", []*leases.Lease{v0("0", "", "FF")},
			[]leases.CheckOption{leases.WithMarkers(false, checkNow.Add(-time.Hour))}, []string{"no-info[]", "stale-lock[]"}},
		{"fresh lock", []*leases.Lease{v0("0", "", "FF")},
			[]leases.CheckOption{leases.WithMarkers(true, checkNow.Add(-10*time.Second))}, nil},
		{"java and dotnet share a prefix", []*leases.Lease{v1("", "80", ""), java}, nil, []string{"mixed-families[-05C1DFFFFFFFFC]"}},
		{"mixed modes", []*leases.Lease{v1("", "80", ""), avad}, nil, []string{"mixed-modes[80-FF]"}},
		{"empty", nil, []leases.CheckOption{leases.WithMarkers(false, time.Time{})}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := kinds(leases.Check(tc.ls, checkNow, time.Minute, tc.opts...))
			slices.Sort(tc.want)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("Check = %v\nwant    %v", got, tc.want)
			}
		})
	}
}

func TestCheck_ErrorsFirst(t *testing.T) {
	t.Parallel()
	stale := v1("", "40", "dead")
	stale.Timestamp = checkNow.Add(-time.Hour)
	fs := leases.Check([]*leases.Lease{stale}, checkNow, time.Minute)
	if len(fs) != 2 || fs[0].Severity != leases.SeverityError || fs[1].Kind != leases.FindingStaleOwner || fs[1].Owner != "dead" {
		t.Errorf("findings = %+v, want the gap (error) before the stale owner", fs)
	}
}

func TestDiscover(t *testing.T) {
	t.Parallel()
	netPrefix := "orderEventscontoso-orders.documents.azure.com_Z4hMAA==_Z4hMAIs0cjs="
	javaPrefix := "orderEventscontoso-orders.documents.azure.com_orders-db_orders"
	localPrefix := "replaylocalhost_Z4hMAA==_Z4hMAIs0cjs="
	var docs []leases.Document
	add := func(file string) {
		docs = append(docs, readDoc(t, file))
	}
	add("testdata/corpus/dotnet-v0-in-use.json")
	add("testdata/corpus/dotnet-v1-partitionkey.json")
	add("testdata/corpus/java-pk.json")
	raw := func(s string) { docs = append(docs, leases.Document{Body: []byte(s)}) }
	raw(`{"id":"` + netPrefix + `.info"}`)
	raw(`{"id":"` + netPrefix + `..broken"}`)
	raw(`{"id":"` + localPrefix + `.lock","ttl":30}`)
	raw(`{"id":"` + localPrefix + `..0","version":0,"LeaseToken":"0","Owner":"cfp-1","timestamp":"2025-01-01T00:00:00Z"}`)
	raw(`{"id":"unrelated"}`)

	got := leases.Discover(docs)
	if len(got) != 3 {
		t.Fatalf("Discover found %d prefixes, want 3: %+v", len(got), got)
	}
	byPrefix := map[string]leases.ProcessorInfo{}
	for _, p := range got {
		byPrefix[p.Prefix] = p
	}
	net := byPrefix[netPrefix]
	if net.Leases != 2 || net.Invalid != 1 || !net.HasInfo || net.HasLock || net.Family != leases.FamilyDotNetV0 ||
		net.Families[leases.FamilyDotNetV1] != 1 || fmt.Sprint(net.Owners) != "[orders-worker-7f9c]" ||
		net.Database != "Z4hMAA==" || net.Container != "Z4hMAIs0cjs=" || net.ByName ||
		!net.LastActivity.Equal(time.Date(2024, 5, 24, 14, 40, 8, 110293400, time.UTC)) {
		t.Errorf(".NET prefix = %+v", net)
	}
	java := byPrefix[javaPrefix]
	if java.Leases != 1 || java.Family != leases.FamilyJavaPK || !java.ByName || java.Database != "orders-db" || java.Container != "orders" {
		t.Errorf("Java prefix = %+v", java)
	}
	local := byPrefix[localPrefix]
	if local.Processor != "replay" || !local.HasLock || local.HasInfo || local.Leases != 1 {
		t.Errorf("local prefix = %+v", local)
	}
	if name, ok := leases.ProcessorName(netPrefix, "contoso-orders.documents.azure.com"); !ok || name != "orderEvents" {
		t.Errorf("ProcessorName = %q, %v", name, ok)
	}
}

func TestNearest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		names []string
		want  []string
	}{
		{"ordrs-proj", []string{"billing", "orders-proj", "orders-projection", "orders-proj"}, []string{"orders-proj", "orders-projection", "billing"}},
		{"ORDERS", []string{"zz", "orders"}, []string{"orders", "zz"}},
		{"x", nil, []string{}},
	}
	for _, tt := range tests {
		if got := leases.Nearest(tt.name, tt.names); !slices.Equal(got, tt.want) {
			t.Errorf("Nearest(%q, %q) = %q, want %q", tt.name, tt.names, got, tt.want)
		}
	}
}
