package leases

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// FuzzParseObject checks parseObject, which scans JSON that json.Valid accepted by hand,
// against encoding/json's decoder (parseObjectDecoder): the same documents accepted, the same
// keys in the same order, the same values byte for byte.
func FuzzParseObject(f *testing.F) {
	files, _ := filepath.Glob("testdata/corpus/*.json")
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
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
