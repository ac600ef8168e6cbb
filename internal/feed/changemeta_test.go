package feed

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

var metaCases = []string{
	`{"id":"a","_lsn":12,"_ts":1767225600}`,
	`{"_ts":"1767225600","_lsn":"12","id":"a"}`,
	` { "_LSN" : 7 , "_TS" : 1700000000 } `,
	`{"id":"x","nested":{"_lsn":99,"_ts":1},"list":[{"_lsn":98},"]}",[1,2]],"_lsn":3,"_ts":1700000001}`,
	`{"s":"a \"quoted\" } ] string","_lsn":4,"_ts":1700000002}`,
	`{"_l\u0073n":5,"_ts":1700000003}`,
	`{"id":"no meta"}`,
	`{"_lsn":null,"_ts":true}`,
	`{}`,
	`[1,2]`,
	`not json`,
	`{"_lsn":6`,
	`{"_lsn":-3,"_ts":-1}`,
	`{"_lsn":1e3,"_ts":1700000004}`,
	`{"id":"a","_rid":"r","_etag":"\"e\"","_ts":1700000005,"_lsn":13}`,
	` {"id":"a", "_TS" : 1700000006 , "_Lsn" : 14 } `,
	`{"_ts":1700000007,"_lsn":15}`,
	`{"a":{"_ts":1,"_lsn":2}}`,
	`{"a":[{"x":0,"_ts":1,"_lsn":2}]}`,
	`{"s":"x\",\"_ts\":1,\"_lsn\":2}"}`,
	`{"k\"_ts":1,"_lsn":16}`,
	`{"_ts":-1,"_lsn":17}`,
	`{"_ts":1700000008,"_lsn":"18"}`,
}

// TestChangeMeta_MatchesEncodingJSON checks that the scan reads what encoding/json reads.
func TestChangeMeta_MatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, in := range metaCases {
		lsn, ts := changeMeta(json.RawMessage(in))
		wantLSN, wantTS := decodeMeta(json.RawMessage(in))
		if lsn != wantLSN || !ts.Equal(wantTS) {
			t.Errorf("changeMeta(%s) = %d, %v; encoding/json reads %d, %v", in, lsn, ts, wantLSN, wantTS)
		}
	}
	if lsn, ts := changeMeta(json.RawMessage(metaCases[3])); lsn != 3 || ts.Unix() != 1700000001 {
		t.Errorf("nested keys were taken for the item's: %d, %v", lsn, ts)
	}
}

func FuzzChangeMeta(f *testing.F) {
	for _, c := range metaCases {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, in string) {
		if !json.Valid([]byte(in)) || strings.Count(strings.ToLower(in), `"_lsn"`) > 1 || strings.Count(strings.ToLower(in), `"_ts"`) > 1 {
			t.Skip() // items are valid JSON; with a duplicate key encoding/json keeps the last one
		}
		lsn, ts := changeMeta(json.RawMessage(in))
		wantLSN, wantTS := decodeMeta(json.RawMessage(in))
		if lsn != wantLSN || !ts.Equal(wantTS) {
			t.Errorf("changeMeta(%s) = %d, %v; encoding/json reads %d, %v", in, lsn, ts, wantLSN, wantTS)
		}
	})
}

// BenchmarkChangeMeta compares the scan with encoding/json on an item as the emulator and the
// service return it (system properties first, a ~200-byte body).
func BenchmarkChangeMeta(b *testing.B) {
	items := []struct {
		name string
		item json.RawMessage
	}{
		// cfp's emulator: system properties first (sorted keys), a ~200-byte body.
		{"emulator-200B", json.RawMessage(`{"_attachments":"attachments/","_etag":"\"40023be0-537f-43fe-93b6-06fd245670b1\"","_lsn":1234,"_rid":"41LY8PlY1VMCAAAAAAAAAA==","_self":"dbs/41LY8A==/colls/41LY8PlY1VM=/docs/41LY8PlY1VMCAAAAAAAAAA==/","_ts":1796044880,"id":"d8","pk":"p2","n":8,"payload":"` + strings.Repeat("x", 140) + `"}`)},
		// The service: the document's own properties, then the system properties, ~1 KB.
		{"service-1KB", json.RawMessage(`{"id":"d8","pk":"p2","n":8,"payload":"` + strings.Repeat("x", 940) + `","nested":{"a":[1,2,{"b":"c"}]},"_rid":"41LY8PlY1VMCAAAAAAAAAA==","_self":"dbs/41LY8A==/colls/41LY8PlY1VM=/docs/41LY8PlY1VMCAAAAAAAAAA==/","_etag":"\"40023be0-537f-43fe-93b6-06fd245670b1\"","_attachments":"attachments/","_ts":1796044880,"_lsn":1234}`)},
	}
	for _, it := range items {
		for _, bc := range []struct {
			name string
			fn   func(json.RawMessage) (int64, time.Time)
		}{{"scan", changeMeta}, {"encoding-json", decodeMeta}} {
			b.Run(it.name+"/"+bc.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if lsn, _ := bc.fn(it.item); lsn != 1234 {
						b.Fatal(lsn)
					}
				}
			})
		}
	}
}

// TestEqualBefore: for each change of a page, the changes before it with the same LSN (a merged
// partition's parents keep their LSNs), ascending or not, and a reused buffer holds no old counts.
func TestEqualBefore(t *testing.T) {
	tests := []struct {
		lsns []int64
		want []int
	}{
		{nil, []int{}},
		{[]int64{5}, []int{0}},
		{[]int64{1, 2, 3}, []int{0, 0, 0}},
		{[]int64{1, 1, 2, 2, 2, 3}, []int{0, 1, 0, 1, 2, 0}},
		{[]int64{7, 3, 7, 3, 7}, []int{0, 0, 1, 1, 2}},
		{[]int64{0, 0, 4}, []int{0, 1, 0}},
	}
	buf := []int{9, 9, 9, 9, 9, 9, 9, 9}
	for _, tt := range tests {
		buf = equalBefore(buf, tt.lsns)
		if !slices.Equal(buf, tt.want) {
			t.Errorf("equalBefore(%v) = %v, want %v", tt.lsns, buf, tt.want)
		}
	}
}

// TestMetaAtEnd: the service's item shape is read from its end; any other shape is left to the
// scan from the start (TestChangeMeta_MatchesEncodingJSON checks what both read).
func TestMetaAtEnd(t *testing.T) {
	for in, want := range map[string]bool{
		`{"id":"a","_rid":"r","_ts":1700000005,"_lsn":13}`: true,
		`{"_ts":1700000007,"_lsn":15}`:                     true,
		` {"id":"a", "_TS" : 1 , "_Lsn" : 14 } `:           true,
		`{"_lsn":12,"_ts":1767225600,"id":"a"}`:            false, // cfp's emulator: sorted keys
		`{"a":{"_ts":1,"_lsn":2}}`:                         false,
		`{"k\"_ts":1,"_lsn":16}`:                           false,
		`{"_ts":1,"_lsn":"18"}`:                            false,
		`{"_lsn":13}`:                                      false,
	} {
		if _, _, ok := metaAtEnd([]byte(in)); ok != want {
			t.Errorf("metaAtEnd(%s) ok = %v, want %v", in, ok, want)
		}
	}
}
