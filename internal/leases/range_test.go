package leases_test

import (
	"testing"

	"github.com/cfp-dev/cfp/internal/leases"
)

func rg(min, max string) leases.Range { return leases.Range{Min: min, Max: max} }

// The rules below replaced five copies that disagreed at the edges: a Max of "" (one copy kept
// it, one read it as "FF"), boundaries of different lengths or case ("05" and "050", "0a" and
// "0A"), and an empty inner range (one "within" refused it, the other did not).
func TestRange_Intersect(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		a, b   leases.Range
		want   leases.Range
		wantOK bool
	}{
		{"inside", rg("", "FF"), rg("40", "80"), rg("40", "80"), true},
		{"partial", rg("", "80"), rg("40", "C0"), rg("40", "80"), true},
		{"touching is not overlapping", rg("", "80"), rg("80", "FF"), rg("80", "80"), false},
		{"disjoint", rg("", "40"), rg("80", "FF"), rg("80", "40"), false},
		{"empty Max is the top", rg("80", ""), rg("40", "C0"), rg("80", "C0"), true},
		{"both empty Max", rg("80", ""), rg("", ""), rg("80", "FF"), true},
		{"padded boundaries", rg("05", "FF"), rg("050", "80"), rg("05", "80"), true},
		{"lower-case hex", rg("0a", "FF"), rg("0B", "FF"), rg("0B", "FF"), true},
	}
	for _, tt := range tests {
		got, ok := tt.a.Intersect(tt.b)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("%s: %v.Intersect(%v) = %v, %v; want %v, %v", tt.name, tt.a, tt.b, got, ok, tt.want, tt.wantOK)
		}
		if ok != tt.a.Overlaps(tt.b) || ok != tt.b.Overlaps(tt.a) {
			t.Errorf("%s: Overlaps disagrees with Intersect (%v)", tt.name, ok)
		}
		if back, _ := tt.b.Intersect(tt.a); ok && !back.Equal(got) {
			t.Errorf("%s: Intersect is not symmetric: %v and %v", tt.name, got, back)
		}
	}
}

func TestRange_WithinEqualCompare(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		a, b       leases.Range
		within     bool
		equal      bool
		compare    int
		emptyInner bool
	}{
		{"same", rg("40", "80"), rg("40", "80"), true, true, 0, false},
		{"inside", rg("40", "80"), rg("", "FF"), true, false, 1, false},
		{"reaches past", rg("40", "C0"), rg("", "80"), false, false, 1, false},
		{"starts before", rg("", "80"), rg("40", "FF"), false, false, -1, false},
		{"empty Max equals FF", rg("80", ""), rg("80", "FF"), true, true, 0, false},
		{"padded boundaries are equal", rg("05", "80"), rg("050", "800"), true, true, 0, false},
		{"case does not matter", rg("0a", "FF"), rg("0A", "FF"), true, true, 0, false},
		{"lower max sorts first", rg("40", "60"), rg("40", "80"), true, false, -1, false},
		{"empty range lies anywhere", rg("90", "90"), rg("", "40"), true, false, 1, true},
	}
	for _, tt := range tests {
		if got := tt.a.Within(tt.b); got != tt.within {
			t.Errorf("%s: %v.Within(%v) = %v, want %v", tt.name, tt.a, tt.b, got, tt.within)
		}
		if got := tt.a.Equal(tt.b); got != tt.equal || tt.b.Equal(tt.a) != tt.equal {
			t.Errorf("%s: %v.Equal(%v) = %v, want %v", tt.name, tt.a, tt.b, got, tt.equal)
		}
		if got := tt.a.Compare(tt.b); got != tt.compare || tt.b.Compare(tt.a) != -tt.compare {
			t.Errorf("%s: %v.Compare(%v) = %d, want %d", tt.name, tt.a, tt.b, got, tt.compare)
		}
		if n := tt.a.Normal(); !n.Equal(tt.a) || n.Max == "" {
			t.Errorf("%s: %v.Normal() = %v", tt.name, tt.a, n)
		}
		if got := tt.a.Empty(); got != tt.emptyInner {
			t.Errorf("%s: %v.Empty() = %v, want %v", tt.name, tt.a, got, tt.emptyInner)
		}
	}
}

// A PK-range lease is one named after a partition, by family only. The copies in cmd called a
// v1 lease without a range a PK-range lease; the processor did not, and the processor is right:
// its token is not a partition id.
func TestLease_NamesPartition(t *testing.T) {
	t.Parallel()
	decode := func(body string) *leases.Lease {
		t.Helper()
		l, err := leases.Decode(leases.Document{ID: "x", Body: []byte(body)})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	tests := []struct {
		name string
		l    *leases.Lease
		want bool
	}{
		{".NET v0 with FeedRange", leases.NewDotNetV0("p", "0", leases.FullRange, ""), true},
		{".NET v0 without FeedRange", decode(`{"id":"p..3","LeaseToken":"3","version":0,"Owner":null,"ContinuationToken":null,"properties":{}}`), true},
		{"V2 PartitionId lease", decode(`{"id":"p..3","PartitionId":"3","Owner":null,"ContinuationToken":null}`), true},
		{"Java PK lease", decode(`{"id":"p..3","LeaseToken":"3","ContinuationToken":null,"timestamp":null,"Owner":null}`), true},
		{".NET v1", leases.NewDotNetV1("p", rg("", "80"), "", ""), false},
		{".NET v1 without a range", decode(`{"id":"p..weird","LeaseToken":"weird","version":1,"Owner":null,"ContinuationToken":null,"properties":{}}`), false},
		{"Java EPK", decode(`{"id":"p..-80","LeaseToken":"-80","version":1,"feedRange":{"Range":{"min":"","max":"80"}},"ContinuationToken":null,"Owner":null,"timestamp":null}`), false},
	}
	for _, tt := range tests {
		if got := tt.l.NamesPartition(); got != tt.want {
			t.Errorf("%s (%s): NamesPartition() = %v, want %v", tt.name, tt.l.Family, got, tt.want)
		}
	}
}

func TestModeNames(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in           string
		dotnet, java string
		parsed       string
		known        bool
	}{
		{"", leases.ModeIncremental, leases.JavaModeIncremental, "", false},
		{"Incremental Feed", leases.ModeIncremental, leases.JavaModeIncremental, leases.ModeIncremental, true},
		{"incremental feed", leases.ModeIncremental, leases.JavaModeIncremental, leases.ModeIncremental, true},
		{"INCREMENTAL", leases.ModeIncremental, leases.JavaModeIncremental, leases.ModeIncremental, true},
		{"Full-Fidelity Feed", leases.ModeFullFidelity, leases.JavaModeFullFidelity, leases.ModeFullFidelity, true},
		{"FULL_FIDELITY", leases.ModeFullFidelity, leases.JavaModeFullFidelity, leases.ModeFullFidelity, true},
		{"full_fidelity", leases.ModeFullFidelity, leases.JavaModeFullFidelity, leases.ModeFullFidelity, true},
		{"IncrementalFeed", leases.ModeIncremental, leases.JavaModeIncremental, "", false},
		{"LatestVersion", leases.ModeIncremental, leases.JavaModeIncremental, "", false},
		{"AllVersionsAndDeletes", leases.ModeIncremental, leases.JavaModeIncremental, "", false},
	}
	for _, tt := range tests {
		if got := leases.DotNetMode(tt.in); got != tt.dotnet {
			t.Errorf("DotNetMode(%q) = %q, want %q", tt.in, got, tt.dotnet)
		}
		if got := leases.JavaMode(tt.in); got != tt.java {
			t.Errorf("JavaMode(%q) = %q, want %q", tt.in, got, tt.java)
		}
		if got, ok := leases.ParseMode(tt.in); got != tt.parsed || ok != tt.known {
			t.Errorf("ParseMode(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.parsed, tt.known)
		}
	}
}

func TestParseRange(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in   string
		want leases.Range
		ok   bool
	}{
		{"-3F", leases.Range{Min: "", Max: "3F"}, true},
		{`""-3F`, leases.Range{Min: "", Max: "3F"}, true}, // the empty minimum as tables show it
		{"3f-", leases.Range{Min: "3F", Max: "FF"}, true},
		{"05C1C9CD673398-05C1D9CD673398", leases.Range{Min: "05C1C9CD673398", Max: "05C1D9CD673398"}, true},
		{"-", leases.Range{Min: "", Max: "FF"}, true},
		{"3F", leases.Range{}, false},
		{"3F-3F0", leases.Range{}, false},
		{"1-2-3", leases.Range{}, false},
		{"00-FF1", leases.Range{}, false},
	} {
		got, err := leases.ParseRange(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseRange(%q) = %v, %v; want %v, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}
