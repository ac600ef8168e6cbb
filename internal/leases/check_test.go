package leases_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
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
	java.Timestamp = checkNow
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

// mixedDoc decodes one lease document given as JSON.
func mixedDoc(t *testing.T, body string) *leases.Lease {
	t.Helper()
	l, err := leases.Decode(leases.Document{Body: []byte(body)})
	if err != nil {
		t.Fatalf("Decode(%s) = %v", body, err)
	}
	return l
}

// javaV2 is a Java EPK lease whose state has "V":"2", a version cfp cannot decode.
func javaV2(t *testing.T) *leases.Lease {
	t.Helper()
	state := base64.StdEncoding.EncodeToString([]byte(`{"V":"2","Rid":"Z4hMAIs0cjs=","Mode":"INCREMENTAL","StartFrom":{"Type":"NOW"}}`))
	return mixedDoc(t, `{"id":"j..80-FF","LeaseToken":"80-FF","ContinuationToken":"`+state+`","timestamp":"2024-05-24T14:00:00Z","Owner":null,"version":1,"feedRange":{"Range":{"min":"80","max":"FF"}}}`)
}

// TestCheck_ModesStatesTimesAndLocks: --check's findings for what .NET and Java see and cfp
// did not report: a Mode .NET refuses to start on, a continuation nobody can decode, a
// timestamp from the future, and a lock older than its own ttl.
func TestCheck_ModesStatesTimesAndLocks(t *testing.T) {
	t.Parallel()
	withMode := func(mode string) *leases.Lease {
		return mixedDoc(t, `{"id":"p..0","version":0,"LeaseToken":"0","FeedRange":{"Range":{"min":"","max":"FF"}},"Owner":null,"ContinuationToken":null,"properties":{},"timestamp":"2024-05-24T14:00:00Z","Mode":`+mode+`}`)
	}
	future := v0("0", "", "FF")
	future.Owner, future.Timestamp = "clock-ahead", checkNow.Add(24*time.Hour)
	skewed := v0("0", "", "FF")
	skewed.Owner, skewed.Timestamp = "skewed", checkNow.Add(10*time.Second)
	tests := []struct {
		name string
		ls   []*leases.Lease
		opts []leases.CheckOption
		want []string
	}{
		{"IncrementalFeed", []*leases.Lease{withMode(`"IncrementalFeed"`)}, nil, []string{"refused-mode[0]"}},
		{"LatestVersion", []*leases.Lease{withMode(`"LatestVersion"`)}, nil, []string{"refused-mode[0]"}},
		{"empty mode", []*leases.Lease{withMode(`""`)}, nil, []string{"refused-mode[0]"}},
		{"null mode", []*leases.Lease{withMode(`null`)}, nil, nil},
		{"lower-case mode", []*leases.Lease{withMode(`"incremental feed"`)}, nil, nil},
		{"full fidelity", []*leases.Lease{withMode(`"Full-Fidelity Feed"`)}, nil, nil},
		{"undecodable java state", []*leases.Lease{v1("", "80", ""), javaV2(t)}, nil,
			[]string{"mixed-families[80-FF]", "unreadable-continuation[80-FF]"}},
		{"future timestamp", []*leases.Lease{future}, nil, []string{"future-timestamp[0]"}},
		{"clock skew", []*leases.Lease{skewed}, nil, nil},
		{"lock past its own ttl", []*leases.Lease{v0("0", "", "FF")},
			[]leases.CheckOption{leases.WithMarkers(true, checkNow.Add(-90*time.Second)), leases.WithLockTTL(time.Minute)}, []string{"stale-lock[]"}},
		{"lock within its own ttl", []*leases.Lease{v0("0", "", "FF")},
			[]leases.CheckOption{leases.WithMarkers(true, checkNow.Add(-90*time.Second)), leases.WithLockTTL(2 * time.Minute)}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fs := leases.Check(tc.ls, checkNow, time.Minute, tc.opts...)
			got := kinds(fs)
			slices.Sort(tc.want)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("Check = %v\nwant    %v", got, tc.want)
			}
			for _, f := range fs {
				if f.Kind == leases.FindingRefusedMode && (f.Severity != leases.SeverityError || !strings.Contains(f.Message, "Switching ChangeFeedMode")) {
					t.Errorf("refused-mode finding = %+v, want an error quoting .NET", f)
				}
			}
		})
	}
}

// TestDecode_UndecodableJavaStateIsKeptNotWritten: a lease whose Java state cfp cannot decode
// is decoded (listed, checked) with StateError, never re-encoded, and left out of Store.List
// with a report to OnSkip.
func TestDecode_UndecodableJavaStateIsKeptNotWritten(t *testing.T) {
	t.Parallel()
	l := javaV2(t)
	if l.StateError == nil || l.Family != leases.FamilyJavaEPK || l.Continuation != "" {
		t.Fatalf("decoded %+v, want a Java EPK lease with StateError and no continuation", l)
	}
	if _, err := leases.Encode(l); err == nil {
		t.Fatal("Encode of a lease with an undecodable state succeeded")
	}
	docs := leases.NewMemDocuments("/id")
	body, _ := json.Marshal(map[string]any{"id": "j..80-FF", "LeaseToken": "80-FF", "version": 1,
		"ContinuationToken": base64.StdEncoding.EncodeToString([]byte(`{"V":"2"}`)), "feedRange": map[string]any{"Range": map[string]string{"min": "80", "max": "FF"}}})
	if _, err := docs.Create(context.Background(), "j..80-FF", body); err != nil {
		t.Fatal(err)
	}
	var skipped []string
	s := leases.NewStore(docs, "j", leases.StoreOptions{OnSkip: func(id string, _ error) { skipped = append(skipped, id) }})
	ls, err := s.List(context.Background())
	if err != nil || len(ls) != 0 || fmt.Sprint(skipped) != "[j..80-FF]" {
		t.Fatalf("List = %v, %v (skipped %v); want none, the lease reported", ls, err, skipped)
	}
	all, err := s.ListAll(context.Background())
	if err != nil || len(all) != 1 || all[0].StateError == nil {
		t.Fatalf("ListAll = %v, %v; want the lease with its StateError", all, err)
	}
}

// TestDiscover_JavaNamePrefixes: a Java PK-range prefix built from names is split at the known
// database and container names even when they contain underscores, and the processor name is
// found whatever the case of the host.
func TestDiscover_JavaNamePrefixes(t *testing.T) {
	t.Parallel()
	prefix := "billingMyAccount.documents.azure.com_shop_eu_order_items"
	docs := []leases.Document{{ID: prefix + "..0", Body: []byte(`{"id":"` + prefix + `..0","LeaseToken":"0","ContinuationToken":"\"5\"","timestamp":"2024-05-24T14:00:00Z","Owner":"Host-A"}`)}}
	got := leases.Discover(docs, leases.Monitored{Database: "shop_eu", Container: "order_items"})
	if len(got) != 1 || got[0].Database != "shop_eu" || got[0].Container != "order_items" || !got[0].ByName || got[0].Family != leases.FamilyJavaPK {
		t.Fatalf("Discover = %+v, want database shop_eu, container order_items, by name", got)
	}
	if name, ok := leases.ProcessorName(prefix, "myaccount.documents.azure.com", leases.Monitored{Database: "shop_eu", Container: "order_items"}); !ok || name != "billing" {
		t.Errorf("ProcessorName = %q, %v; want billing (Java keeps the host's case)", name, ok)
	}
	if got := leases.Discover(docs, leases.Monitored{Database: "shop_eu"}); got[0].Database != "shop_eu" || got[0].Container != "order_items" {
		t.Errorf("with the database name only: %+v, want database shop_eu, container order_items", got[0])
	}
	if got := leases.Discover(docs); got[0].Database == "shop_eu" {
		t.Errorf("without known names the split is at the last underscores: %+v", got[0])
	}
}

func TestSuggest(t *testing.T) {
	t.Parallel()
	names := []string{"orders-proj", "billing", "audit-trail-projection", "a"}
	for _, tt := range []struct {
		name, want string
		ok         bool
	}{
		{"orders-prj", "orders-proj", true},
		{"Orders-Proj", "orders-proj", true},
		{"ordersproj", "orders-proj", true},
		{"biling", "billing", true},
		{"orders", "orders-proj", true},                             // a prefix
		{"audit-trail-projektion2", "audit-trail-projection", true}, // 3 edits in 23 runes
		{"orders-proj", "", false},                                  // exists: nothing to suggest
		{"inventory", "", false},                                    // nothing close
		{"", "", false},
	} {
		got, ok := leases.Suggest(tt.name, names)
		if got != tt.want || ok != tt.ok {
			t.Errorf("Suggest(%q) = %q, %v; want %q, %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
	if _, ok := leases.Suggest("x", nil); ok {
		t.Error("Suggest with no names suggested something")
	}
}

// TestCheck_TimingMismatch: with leases of a .NET or Java host (an owner without a cfp
// presence record) live, a live cfp lease older than the defaults' renew interval (17s) and
// than every lease of those hosts is reported: a host with a shorter expiration takes it
// (issue 22, F1). Without such hosts, or without the presence records, nothing is said.
func TestCheck_TimingMismatch(t *testing.T) {
	t.Parallel()
	lease := func(min, max, owner string, age time.Duration) *leases.Lease {
		l := v1(min, max, owner)
		l.Timestamp = checkNow.Add(-age)
		return l
	}
	hosts := []leases.Host{{Instance: "cfp-a", Timestamp: checkNow.Add(-5 * time.Second)}}
	s := time.Second
	for _, tc := range []struct {
		name string
		ls   []*leases.Lease
		opts []leases.CheckOption
		want []string
	}{
		{"cfp lease 44s old next to a .NET host", []*leases.Lease{lease("", "80", "cfp-a", 44*s), lease("80", "FF", "dotnet-a", 10*s)},
			[]leases.CheckOption{leases.WithHosts(hosts)}, []string{"timing-mismatch[]"}},
		{"cfp lease 15s old", []*leases.Lease{lease("", "80", "cfp-a", 15*s), lease("80", "FF", "dotnet-a", 10*s)},
			[]leases.CheckOption{leases.WithHosts(hosts)}, nil},
		{"the .NET host renews slowly too", []*leases.Lease{lease("", "80", "cfp-a", 30*s), lease("80", "FF", "dotnet-a", 35*s)},
			[]leases.CheckOption{leases.WithHosts(hosts)}, nil},
		{"cfp hosts only", []*leases.Lease{lease("", "80", "cfp-a", 44*s), lease("80", "FF", "cfp-a", 10*s)},
			[]leases.CheckOption{leases.WithHosts(hosts)}, nil},
		{"no presence records given", []*leases.Lease{lease("", "80", "cfp-a", 44*s), lease("80", "FF", "dotnet-a", 10*s)},
			nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := leases.Check(tc.ls, checkNow, time.Minute, tc.opts...)
			got := kinds(fs)
			if tc.want != nil {
				tc.want[0] = strings.Replace(tc.want[0], "[]", "["+tc.ls[0].Token+"]", 1)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("findings %v, want %v", got, tc.want)
			}
			for _, f := range fs {
				if f.Kind == leases.FindingTimings && (f.Severity != leases.SeverityWarning || !strings.Contains(f.Message, "cfp-a last wrote 1 lease(s) up to 44s ago, while dotnet-a")) {
					t.Errorf("finding %+v", f)
				}
			}
		})
	}
}

// TestCheck_CfpHostsDisagreeOnExpiration reports live cfp hosts whose presence records carry
// different lease expirations (issue 22: "says in leases list --check when hosts disagree on
// timings"); hosts that agree, a record without an expiration (an older cfp) and an expired
// record say nothing.
func TestCheck_CfpHostsDisagreeOnExpiration(t *testing.T) {
	t.Parallel()
	ls := []*leases.Lease{v1("", "FF", "cfp-a")}
	ls[0].Timestamp = checkNow
	rec := func(name string, exp, age time.Duration) leases.Host {
		return leases.Host{Instance: name, Timestamp: checkNow.Add(-age), Expiration: exp}
	}
	s := time.Second
	for _, tc := range []struct {
		name  string
		hosts []leases.Host
		want  string // the message's list of expirations; "" for no finding
	}{
		{"60s and 30s", []leases.Host{rec("cfp-a", 60*s, s), rec("cfp-b", 30*s, s), rec("cfp-c", 60*s, s)}, "30s (cfp-b); 1m0s (cfp-a, cfp-c); each keeps the leases it holds younger than the shortest, 30s"},
		{"all 60s", []leases.Host{rec("cfp-a", 60*s, s), rec("cfp-b", 60*s, s)}, ""},
		{"an older cfp without the field", []leases.Host{rec("cfp-a", 60*s, s), rec("cfp-b", 0, s)}, ""},
		{"the other record expired", []leases.Host{rec("cfp-a", 60*s, s), rec("cfp-b", 30*s, 2*time.Minute)}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []leases.Finding
			for _, f := range leases.Check(ls, checkNow, time.Minute, leases.WithHosts(tc.hosts)) {
				if f.Kind == leases.FindingTimings {
					got = append(got, f)
				}
			}
			switch {
			case tc.want == "" && len(got) > 0:
				t.Errorf("findings %+v, want none", got)
			case tc.want != "" && (len(got) != 1 || got[0].Severity != leases.SeverityInfo || !strings.Contains(got[0].Message, tc.want)):
				t.Errorf("findings %+v, want one info saying %q", got, tc.want)
			}
		})
	}
}
