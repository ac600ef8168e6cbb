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
	item := json.RawMessage(`{"_attachments":"attachments/","_etag":"\"40023be0-537f-43fe-93b6-06fd245670b1\"","_lsn":1234,"_rid":"41LY8PlY1VMCAAAAAAAAAA==","_self":"dbs/41LY8A==/colls/41LY8PlY1VM=/docs/41LY8PlY1VMCAAAAAAAAAA==/","_ts":1796044880,"id":"d8","pk":"p2","n":8,"payload":"` + strings.Repeat("x", 140) + `"}`)
	for _, bc := range []struct {
		name string
		fn   func(json.RawMessage) (int64, time.Time)
	}{{"scan", changeMeta}, {"encoding-json", decodeMeta}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if lsn, _ := bc.fn(item); lsn != 1234 {
					b.Fatal(lsn)
				}
			}
		})
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
