package leases_test

import (
	"slices"
	"testing"

	"github.com/cfp-dev/cfp/internal/leases"
)

func TestCompareTokens(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		a, b string
		want int // sign
	}{
		{"2", "10", -1}, {"10", "2", 1}, {"3", "3", 0},
		{"02", "1", -1}, // not canonical numbers: text order
		{"-1", "1", -1}, {"0-FF", "10", -1}, {"a", "b", -1},
	} {
		got := leases.CompareTokens(tt.a, tt.b)
		if (got < 0) != (tt.want < 0) || (got > 0) != (tt.want > 0) {
			t.Errorf("CompareTokens(%q, %q) = %d, want sign %d", tt.a, tt.b, got, tt.want)
		}
	}
}

// TestSort orders ranged leases by their start and leases without a range by token.
func TestSort(t *testing.T) {
	t.Parallel()
	tokens := func(ls []*leases.Lease) []string {
		var out []string
		for _, l := range ls {
			out = append(out, l.Token)
		}
		return out
	}
	ranged := []*leases.Lease{
		leases.NewDotNetV1("p", leases.Range{Min: "C0", Max: "FF"}, "", ""),
		leases.NewDotNetV1("p", leases.Range{Min: "", Max: "80"}, "", ""),
		leases.NewDotNetV1("p", leases.Range{Min: "80", Max: "C0"}, "", ""),
	}
	want := []string{ranged[1].Token, ranged[2].Token, ranged[0].Token}
	if leases.Sort(ranged); !slices.Equal(tokens(ranged), want) {
		t.Errorf("Sort of ranged leases = %v, want %v", tokens(ranged), want)
	}
	bare := []*leases.Lease{
		leases.NewDotNetV0("p", "10", leases.Range{}, ""),
		leases.NewDotNetV0("p", "2", leases.Range{}, ""),
		leases.NewDotNetV0("p", "1", leases.Range{}, ""),
	}
	if leases.Sort(bare); !slices.Equal(tokens(bare), []string{"1", "2", "10"}) {
		t.Errorf("Sort of leases without a range = %v, want 1 2 10", tokens(bare))
	}
}
