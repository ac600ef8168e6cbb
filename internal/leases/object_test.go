package leases

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// FuzzParseObject checks parseObject, which scans JSON that json.Valid accepted by hand,
// against encoding/json's decoder (parseObjectDecoder): the same documents accepted, the same
// keys in the same order, the same values byte for byte.
func FuzzParseObject(f *testing.F) {
	AddCorpusSeeds(f)
	for _, s := range []string{
		`{}`, ` { } `, `{"a":1,"a":2,"b":[1,{"c":"}"}]}`, `{"k\"ey":"v\\\"al","\u00e9":null}`,
		`{"a":"\xff"}`, `{"a":1}{}`, `[1]`, `"s"`, `{"a":-1.5e3,"b":true,"c":false}`,
		`{"x":{"y":{"z":[[],{}]}}, "s":"a,b}c]d"}`, "{\"a\"\t:\n\"b\"\r}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, gerr := parseObject(b)
		want, werr := parseObjectDecoder(b)
		if (gerr == nil) != (werr == nil) {
			t.Fatalf("parseObject(%q) error %v, the decoder's %v", b, gerr, werr)
		}
		if gerr != nil {
			return
		}
		if !slices.Equal(got.keys, want.keys) {
			t.Fatalf("parseObject(%q) keys %q, the decoder's %q", b, got.keys, want.keys)
		}
		for _, k := range want.keys {
			if !bytes.Equal(got.vals[k], want.vals[k]) {
				t.Fatalf("parseObject(%q)[%q] = %s, the decoder's %s", b, k, got.vals[k], want.vals[k])
			}
		}
		for _, k := range want.keys {
			gs, gok := got.str(k)
			ws, wok := strViaUnmarshal(want.vals[k])
			if gs != ws || gok != wok {
				t.Fatalf("str(%q) of %q = %q, %v; json.Unmarshal reads %q, %v", k, b, gs, gok, ws, wok)
			}
		}
	})
}

// strViaUnmarshal is what object.str returned before its fast path: json.Unmarshal into a
// string.
func strViaUnmarshal(v []byte) (string, bool) {
	var s string
	if json.Unmarshal(v, &s) != nil {
		return "", false
	}
	return s, true
}

// TestDecode_RepeatedKeysReadAsEncodingJSONDoes: a .NET lease whose range bounds are spelled
// twice in different cases, or whose properties repeat a key, decodes as it did with
// encoding/json (which keeps the last bound of any case, and fails on a
// property value it cannot read even when a later one replaces it), not by the first spelling.
func TestDecode_RepeatedKeysReadAsEncodingJSONDoes(t *testing.T) {
	t.Parallel()
	const lease = `{"id":"x","LeaseToken":"00-FF","version":1,"FeedRange":{"Range":%s}%s}`
	for _, c := range []struct{ rng, props, want string }{
		{`{"min":"00","max":"FF","Max":"AA"}`, ``, "00-AA"},
		{`{"max":"FF","MAX":"AA"}`, ``, "-AA"},
		{`{"MIN":"00","Min":"11","max":"FF"}`, ``, "11-FF"},
		{`{"max":"AA","Max":"BB","max":"FF","min":""}`, ``, "-FF"},
	} {
		l, err := Decode(Document{ID: "x", Body: []byte(fmt.Sprintf(lease, c.rng, c.props))})
		if err != nil {
			t.Fatalf("Decode with range %s: %v", c.rng, err)
		}
		if got := l.Range.Min + "-" + l.Range.Max; got != c.want {
			t.Errorf("Decode with range %s: range %s, encoding/json reads %s", c.rng, got, c.want)
		}
	}
	body := fmt.Sprintf(lease, `{"min":"","max":"FF"}`, `,"properties":{"a":1e400,"a":"x"}`)
	if l, err := Decode(Document{ID: "x", Body: []byte(body)}); err == nil {
		t.Errorf("Decode of properties {\"a\":1e400,\"a\":\"x\"} = %v, want the error encoding/json gives", l.Properties)
	}
}

// FuzzLeaseFields checks the hand-written readers of a .NET lease's FeedRange, properties and
// numbers against encoding/json, which read them before (a FeedRange with two spellings of
// "Range" is left out: encoding/json's map gave either one).
func FuzzLeaseFields(f *testing.F) {
	for _, s := range []string{
		`{"Range":{"min":"","max":"FF"}}`, `{"range":{"Min":"a","MAX":"b","max":"c"}}`,
		`{"a":"b","c":1,"d":null}`, `{"a":1e400,"a":"x"}`, `1.5`, `"12"`, `[]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		o, err := parseObject([]byte(`{"v":` + string(b) + `}`))
		if err != nil || isNull(o.vals["v"]) {
			return
		}
		v := o.vals["v"]
		{
			r, err := feedRange(v)
			var fr map[string]json.RawMessage
			werr := json.Unmarshal(v, &fr)
			var want Range
			n := 0
			for k, rv := range fr {
				if strings.EqualFold(k, "Range") {
					n++
					want = Range{}
					werr = json.Unmarshal(rv, &want)
				}
			}
			if n <= 1 && ((err == nil) != (werr == nil) || err == nil && r != want) {
				t.Errorf("feedRange(%s) = %+v, %v; encoding/json %+v, %v", v, r, err, want, werr)
			}
		}
		props, err := decodeProperties(v)
		var m map[string]any
		werr := json.Unmarshal(v, &m)
		want := map[string]string{}
		for k, p := range m {
			if s, ok := p.(string); ok {
				want[k] = s
			} else if p != nil {
				b, _ := json.Marshal(p)
				want[k] = string(b)
			}
		}
		if (err == nil) != (werr == nil) || err == nil && !maps.Equal(props, want) {
			t.Errorf("decodeProperties(%s) = %v, %v; encoding/json %v, %v", v, props, err, want, werr)
		}
		n, err := number(v)
		var wn json.Number
		werr = json.Unmarshal(v, &wn)
		if (err == nil) != (werr == nil) || n != wn {
			t.Errorf("number(%s) = %v, %v; encoding/json %v, %v", v, n, err, wn, werr)
		}
	})
}

// AddCorpusSeeds adds every lease document of testdata/corpus as a seed of f (for the fuzz
// targets of both test packages).
func AddCorpusSeeds(f *testing.F) {
	files, _ := filepath.Glob("testdata/corpus/*.json")
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}
