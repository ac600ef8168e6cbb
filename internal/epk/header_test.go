package epk

import (
	"encoding/json"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// TestParseHeader covers the partition-key header encodings as both SDKs
// send them, and the Go-only escapes (docs/protocol-gateway.md, "Items").
func TestParseHeader(t *testing.T) {
	t.Parallel()
	tests := []struct {
		header string
		want   []any
	}{
		{`["a"]`, []any{"a"}},
		{`["\u00e9 p"]`, []any{"é p"}},
		{`["é p"]`, []any{"é p"}},
		{`[5]`, []any{5.0}},
		{`[1.5]`, []any{1.5}},
		{`[-0]`, []any{math.Copysign(0, -1)}},
		{`[1e3]`, []any{1000.0}},
		{`[true]`, []any{true}},
		{`[false]`, []any{false}},
		{`[null]`, []any{nil}},
		{`[{}]`, []any{Undefined{}}},
		{`[ { } ]`, []any{Undefined{}}},
		{`["a","b"]`, []any{"a", "b"}},
		{` [ "a" , 5 , null ] `, []any{"a", 5.0, nil}},
		{`[]`, []any{}},
		{`["\ud83d\ude00"]`, []any{"😀"}},
		{`["\ud83d"]`, []any{"\ufffd"}},
		{`["\"\\\/\b\f\n\r\t"]`, []any{"\"\\/\b\f\n\r\t"}},
		// Go's strconv.QuoteToASCII escapes, which JSON lacks.
		{`["\U0001f600"]`, []any{"😀"}},
		{`["\x01"]`, []any{"\x01"}},
		{`["\xff"]`, []any{"\xff"}},
		{`["\a\v"]`, []any{"\a\v"}},
	}
	for _, tc := range tests {
		got, err := ParseHeader(tc.header)
		if err != nil {
			t.Errorf("ParseHeader(%s): %v", tc.header, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) || !Equal(got, tc.want) {
			t.Errorf("ParseHeader(%s) = %#v, want %#v", tc.header, got, tc.want)
		}
	}
}

func TestParseHeader_GoSDKEncoding(t *testing.T) {
	t.Parallel()
	// azcosmos writes string components with strconv.QuoteToASCII.
	for _, s := range []string{"plain", "é p", "emoji 😀", "ctl \x01\x1f\x7f", "bad \xff\xfe utf8", "tab\tquote\"back\\", "\u2028"} {
		h := "[" + strconv.QuoteToASCII(s) + "]"
		got, err := ParseHeader(h)
		if err != nil {
			t.Errorf("ParseHeader(%s): %v", h, err)
			continue
		}
		if len(got) != 1 || got[0] != s {
			t.Errorf("ParseHeader(%s) = %q, want %q", h, got, s)
		}
		if HashV2(got) != HashV2([]any{s}) {
			t.Errorf("hash of %s differs from the SDK's key %q", h, s)
		}
	}
}

func TestParseHeader_Errors(t *testing.T) {
	t.Parallel()
	for _, h := range []string{
		``, `"a"`, `5`, `{}`, `[`, `["a"`, `["a",]`, `[,]`, `["a" "b"]`, `["a"] x`, `[["a"]]`,
		`[{"a":1}]`, `[{]`, `[tru]`, `[nul]`, `[01]`, `[1.]`, `[.5]`, `[1e]`, `[-]`, `[+1]`, `[1e999]`,
		`["a\q"]`, `["\u12"]`, `["\x1"]`, `["\U0011ffff"]`, `["\U0000d800"]`, "[\"a\nb\"]", `["a`, `["\`,
		`[NaN]`, `[Infinity]`, `['a']`,
	} {
		if got, err := ParseHeader(h); err == nil {
			t.Errorf("ParseHeader(%q) = %#v, want an error", h, got)
		} else if !strings.HasPrefix(err.Error(), "parse partition key header: ") {
			t.Errorf("ParseHeader(%q) error %q lacks its context", h, err)
		}
	}
}

func TestFromDocument(t *testing.T) {
	t.Parallel()
	var doc map[string]any
	if err := json.Unmarshal([]byte(`{"id":"1","pk":"p","n":5,"b":false,"z":null,
		"a":{"b":"deep","o":{"x":1},"l":[1]},"a b":"spaced"}`), &doc); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		paths []string
		want  []any
	}{
		{[]string{"/pk"}, []any{"p"}},
		{[]string{"/n"}, []any{5.0}},
		{[]string{"/b"}, []any{false}},
		{[]string{"/z"}, []any{nil}},
		{[]string{"/missing"}, []any{Undefined{}}},
		{[]string{"/a/b"}, []any{"deep"}},
		{[]string{"/a/missing"}, []any{Undefined{}}},
		{[]string{"/pk/x"}, []any{Undefined{}}},
		{[]string{"/a/o"}, []any{Undefined{}}},
		{[]string{"/a/l"}, []any{Undefined{}}},
		{[]string{`/"a b"`}, []any{"spaced"}},
		{[]string{"/pk", "/a/b", "/missing"}, []any{"p", "deep", Undefined{}}},
		{nil, []any{}},
	}
	for _, tc := range tests {
		got := FromDocument(doc, tc.paths)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("FromDocument(%v) = %#v, want %#v", tc.paths, got, tc.want)
		}
	}
}

func TestEqualAndCanonical(t *testing.T) {
	t.Parallel()
	negZero := math.Copysign(0, -1)
	tests := []struct {
		a, b  []any
		equal bool
	}{
		{[]any{"a"}, []any{"a"}, true},
		{[]any{5.0}, []any{5}, true},
		{[]any{5.0}, []any{json.Number("5.00")}, true},
		{[]any{int64(1) << 53}, []any{9007199254740992.0}, true},
		{[]any{nil}, []any{nil}, true},
		{[]any{Undefined{}}, []any{Undefined{}}, true},
		{[]any{"a", true}, []any{"a", true}, true},
		{[]any{}, nil, true},
		{[]any{"5"}, []any{5.0}, false},
		{[]any{nil}, []any{Undefined{}}, false},
		{[]any{false}, []any{nil}, false},
		{[]any{"a"}, []any{"A"}, false},
		{[]any{0.0}, []any{negZero}, false},
		{[]any{"a"}, []any{"a", "b"}, false},
		{[]any{"a", "b"}, []any{"b", "a"}, false},
		{[]any{"a,b"}, []any{"a", "b"}, false},
		{[]any{"\xff"}, []any{"\xfe"}, false},
		{[]any{"\xff"}, []any{"\ufffd"}, false},
		{[]any{"\xff"}, []any{"\xff"}, true},
	}
	for _, tc := range tests {
		if got := Equal(tc.a, tc.b); got != tc.equal {
			t.Errorf("Equal(%#v, %#v) = %v, want %v", tc.a, tc.b, got, tc.equal)
		}
		if got := Canonical(tc.a) == Canonical(tc.b); got != tc.equal {
			t.Errorf("Canonical(%#v) = %s, Canonical(%#v) = %s; same = %v, want %v",
				tc.a, Canonical(tc.a), tc.b, Canonical(tc.b), got, tc.equal)
		}
		if tc.equal && HashV2(tc.a) != HashV2(tc.b) {
			t.Errorf("equal keys %#v and %#v hash differently", tc.a, tc.b)
		}
	}
	for _, tc := range []struct {
		key  []any
		want string
	}{
		{[]any{"é", 1.5, true, nil, Undefined{}, -1}, `["é",1.5,true,null,{},-1]`},
		{[]any{"q\"b\\s\n<"}, `["q\"b\\s\u000a<"]`},
		{[]any{"bad\xff"}, `["bad\xff"]`},
	} {
		if got := Canonical(tc.key); got != tc.want {
			t.Errorf("Canonical(%#v) = %s, want %s", tc.key, got, tc.want)
		}
	}
}

// FuzzParseHeader checks that ParseHeader never panics; that it agrees with
// encoding/json on every valid JSON array of scalars; that the canonical form
// of whatever it accepts parses back to an equal key; and that strings the
// Go SDK encodes with strconv.QuoteToASCII come back byte for byte.
func FuzzParseHeader(f *testing.F) {
	for _, seed := range []string{
		`["a"]`, `["\u00e9 p"]`, `[5]`, `[1.5]`, `[true]`, `[null]`, `[{}]`, `["a","b"]`, `[]`,
		`["\U0001f600"]`, `["\x01"]`, `["\ud83d\ude00"]`, `[-0.5e-3]`, `[{"a":1}]`, `[[1]]`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, h string) {
		got, err := ParseHeader(h)

		var std []any
		if json.Unmarshal([]byte(h), &std) == nil && scalarsOnly(std) {
			if err != nil {
				t.Fatalf("ParseHeader(%q) failed on valid JSON: %v", h, err)
			}
			if !Equal(got, std) {
				t.Fatalf("ParseHeader(%q) = %#v, encoding/json gives %#v", h, got, std)
			}
		}
		if err == nil {
			c := Canonical(got)
			again, err := ParseHeader(c)
			if err != nil {
				t.Fatalf("Canonical %s of %q does not parse: %v", c, h, err)
			}
			if Canonical(again) != c {
				t.Fatalf("Canonical not stable: %s then %s", c, Canonical(again))
			}
		}

		// Treat the input as a Go string key the SDK encodes.
		enc := "[" + strconv.QuoteToASCII(h) + "]"
		back, err := ParseHeader(enc)
		if err != nil || len(back) != 1 || back[0] != h {
			t.Fatalf("ParseHeader(%s) = %#v, %v; want [%q]", enc, back, err, h)
		}
	})
}

// scalarsOnly reports whether every element is a value ParseHeader accepts:
// a JSON scalar or an empty object.
func scalarsOnly(vs []any) bool {
	for _, v := range vs {
		switch v := v.(type) {
		case []any:
			return false
		case map[string]any:
			if len(v) != 0 {
				return false
			}
		}
	}
	return true
}
