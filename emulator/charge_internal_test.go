package emulator

import "testing"

func TestChargeWrite_PublishedTable(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		size  int
		read  float64
		write float64
	}{{100, 1, 4.95}, {1 << 10, 1, 4.95}, {16 << 10, 1.67, 9.52}, {24 << 10, 1.93, 10.38}, {2 << 20, 291.8, 1250}} {
		if got := ChargeRead(c.size); got != c.read {
			t.Errorf("ChargeRead(%d) = %v, want %v", c.size, got, c.read)
		}
		if got := ChargeWrite(c.size, RefIndexedTerms, false); got != c.write {
			t.Errorf("ChargeWrite(%d, %d, create) = %v, want %v", c.size, RefIndexedTerms, got, c.write)
		}
	}
	if got := ChargeWrite(1<<10, 0, false); got >= 4.95 || got < 4.95/2 {
		t.Errorf("ChargeWrite(1 KB, no indexed terms) = %v, want less than 4.95, at least half", got)
	}
	if got, want := ChargeWrite(1<<10, RefIndexedTerms, true), 9.26; got != want {
		t.Errorf("ChargeWrite(1 KB, replace) = %v, want %v", got, want)
	}
}

func TestIndexPolicy_IndexedTerms(t *testing.T) {
	t.Parallel()
	doc := map[string]any{"id": "a", "_ts": 1.0, "a": map[string]any{"b": 1.0, "c": "x"}, "tags": []any{"x", "y", "z"}, "n": nil}
	for _, c := range []struct {
		props string
		want  int
	}{
		{`{}`, 7},
		{`{"indexingPolicy":{"indexingMode":"consistent","includedPaths":[{"path":"/*"}],"excludedPaths":[{"path":"/\"_etag\"/?"}]}}`, 7},
		{`{"indexingPolicy":{"indexingMode":"none"}}`, 0},
		{`{"indexingPolicy":{"includedPaths":[{"path":"/*"}],"excludedPaths":[{"path":"/a/*"}]}}`, 5},
		{`{"indexingPolicy":{"includedPaths":[{"path":"/a/b/?"}],"excludedPaths":[{"path":"/*"}]}}`, 1},
		{`{"indexingPolicy":{"includedPaths":[{"path":"/tags/[]/?"},{"path":"/id/?"}],"excludedPaths":[{"path":"/*"}]}}`, 4},
	} {
		if got := policyOf([]byte(c.props)).indexedTerms(doc); got != c.want {
			t.Errorf("%s: %d indexed terms, want %d", c.props, got, c.want)
		}
	}
}
