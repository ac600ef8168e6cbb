package leases

import "testing"

// FuzzCompareEPK holds CompareEPK, which walks both strings without allocating, to its
// definition (compareEPKPadded): upper-cased, the shorter padded with '0'.
func FuzzCompareEPK(f *testing.F) {
	for _, p := range [][2]string{
		{"", ""}, {"", "00"}, {"05C1", "05c1"}, {"05C1E0", "05C1"}, {"FF", "05C1DFFFFFFFFFFC"},
		{"3f", "3F0000"}, {"0A", "0a1"}, {"ß", "SS"}, {"é", "É0"}, {"ǅ", "Ǆ"},
	} {
		f.Add(p[0], p[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		if got, want := CompareEPK(a, b), compareEPKPadded(a, b); got != want {
			t.Fatalf("CompareEPK(%q, %q) = %d, want %d", a, b, got, want)
		}
	})
}

// BenchmarkCompareEPK compares the two boundaries of a split EPK lease, with the definition
// (upper-case both, pad the shorter) as the baseline in the same run.
func BenchmarkCompareEPK(b *testing.B) {
	x, y := "05C1DFFFFFFFFFFC", "05c1e0"
	b.Run("padded-baseline", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			compareEPKPadded(x, y)
		}
	})
	b.Run("walk", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			CompareEPK(x, y)
		}
	})
}
