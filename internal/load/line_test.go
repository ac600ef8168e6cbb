package load

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestParseImportLine(t *testing.T) {
	t.Parallel()
	byID := [][]string{{"id"}}
	byCustomer := [][]string{{"customerId"}}
	nested := [][]string{{"address", "city"}}
	hier := [][]string{{"tenant"}, {"customerId"}}
	tests := []struct {
		name     string
		line     string
		paths    [][]string
		wantPK   any
		wantBody string // "" means the line itself
		wantErr  string
	}{
		{name: "string key", line: `{"id":"a","customerId":"c1"}`, paths: byCustomer, wantPK: "c1"},
		{name: "id key, blanks and newline", line: "  {\"id\":\"a\"}\r\n", paths: byID, wantPK: "a", wantBody: `{"id":"a"}`},
		{name: "number key keeps its digits", line: `{"id":"a","customerId":12345678901234567890}`, paths: byCustomer, wantPK: json.Number("12345678901234567890")},
		{name: "bool key", line: `{"id":"a","customerId":true}`, paths: byCustomer, wantPK: true},
		{name: "null key", line: `{"id":"a","customerId":null}`, paths: byCustomer, wantPK: nil},
		{name: "nested path", line: `{"id":"a","address":{"city":"Oslo"}}`, paths: nested, wantPK: "Oslo"},
		{name: "hierarchical", line: `{"id":"a","tenant":"t","customerId":"c"}`, paths: hier, wantPK: []any{"t", "c"}},
		{
			name: "system properties dropped", line: `{"id":"a","_rid":"x","_self":"s","_etag":"\"e\"","_attachments":"at","_ts":1,"_lsn":9,"customerId":"c","_keep":1}`,
			paths: byCustomer, wantPK: "c", wantBody: `{"_keep":1,"customerId":"c","id":"a"}`,
		},
		{name: "not JSON", line: `{"id": "a",`, paths: byID, wantErr: "invalid JSON: unexpected EOF"},
		{name: "garbage", line: `hello`, paths: byID, wantErr: "invalid JSON: invalid character 'h'"},
		{name: "two values", line: `{"id":"a"} {"id":"b"}`, paths: byID, wantErr: "invalid JSON: more than one JSON value"},
		{name: "array", line: `[{"id":"a"}]`, paths: byID, wantErr: "not a JSON object"},
		{name: "no id", line: `{"customerId":"c"}`, paths: byCustomer, wantErr: `no "id"`},
		{name: "numeric id", line: `{"id":7}`, paths: byID, wantErr: `"id" is not a string`},
		{name: "empty id", line: `{"id":""}`, paths: byID, wantErr: `"id" is empty`},
		{name: "missing key", line: `{"id":"a"}`, paths: byCustomer, wantErr: "no partition key at /customerId"},
		{name: "key not under an object", line: `{"id":"a","address":"x"}`, paths: nested, wantErr: "/address is not an object"},
		{name: "object key", line: `{"id":"a","customerId":{"x":1}}`, paths: byCustomer, wantErr: "is an object or array"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body, pk, _, err := ParseLine([]byte(tt.line), tt.paths)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(pk, tt.wantPK) {
				t.Errorf("pk = %#v, want %#v", pk, tt.wantPK)
			}
			want := tt.wantBody
			if want == "" {
				want = tt.line
			}
			if string(body) != want {
				t.Errorf("body = %s, want %s", body, want)
			}
		})
	}
}

func TestParsePartitionKeyPath(t *testing.T) {
	t.Parallel()
	for in, want := range map[string][]string{
		"/id":           {"id"},
		"/address/city": {"address", "city"},
		`/"odd name"/x`: {"odd name", "x"},
		"/customerId":   {"customerId"},
	} {
		got, err := ParsePartitionKeyPath(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("ParsePartitionKeyPath(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "id", "/", "/a//b"} {
		if _, err := ParsePartitionKeyPath(bad); err == nil {
			t.Errorf("ParsePartitionKeyPath(%q) succeeded, want an error", bad)
		}
	}
}
