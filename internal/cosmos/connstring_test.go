package cosmos

import (
	"fmt"
	"strings"
	"testing"
)

const testKey = "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw=="

func TestParseConnectionString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		in       string
		endpoint string
		key      string
		wantErr  string
	}{
		{name: "portal form", in: "AccountEndpoint=https://acct.documents.azure.com:443/;AccountKey=" + testKey + ";",
			endpoint: "https://acct.documents.azure.com:443/", key: testKey},
		{name: "no trailing semicolon", in: "AccountEndpoint=http://localhost:8081/;AccountKey=" + testKey,
			endpoint: "http://localhost:8081/", key: testKey},
		{name: "any order and case, blanks", in: " accountkey = " + testKey + " ; ACCOUNTENDPOINT=https://a.documents.azure.com/ ; ",
			endpoint: "https://a.documents.azure.com/", key: testKey},
		{name: "unknown parts ignored", in: "AccountEndpoint=https://a.documents.azure.com/;AccountKey=" + testKey + ";Database=db1;",
			endpoint: "https://a.documents.azure.com/", key: testKey},
		{name: "key keeps its padding", in: "AccountEndpoint=https://a.documents.azure.com/;AccountKey=abc==",
			endpoint: "https://a.documents.azure.com/", key: "abc=="},
		{name: "empty", in: "", wantErr: "AccountEndpoint is missing"},
		{name: "no key", in: "AccountEndpoint=https://a.documents.azure.com/;", wantErr: "AccountKey is missing"},
		{name: "no endpoint", in: "AccountKey=" + testKey, wantErr: "AccountEndpoint is missing"},
		{name: "part without equals", in: "AccountEndpoint=https://a.documents.azure.com/;AccountKey=k;garbage", wantErr: "no '='"},
		{name: "twice", in: "AccountEndpoint=https://a/;AccountEndpoint=https://b/;AccountKey=k", wantErr: "appears twice"},
		{name: "not a URL scheme", in: "AccountEndpoint=acct.documents.azure.com;AccountKey=" + testKey, wantErr: "must start with https://"},
		{name: "no host", in: "AccountEndpoint=https:///;AccountKey=" + testKey, wantErr: "has no host"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseConnectionString(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseConnectionString() error = %v, want one containing %q", err, tc.wantErr)
				}
				if strings.Contains(err.Error(), testKey) {
					t.Fatalf("error leaks the key: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseConnectionString() error = %v", err)
			}
			if got.Endpoint != tc.endpoint || got.Key != tc.key {
				t.Fatalf("ParseConnectionString() = %q, %q; want %q, %q", got.Endpoint, got.Key, tc.endpoint, tc.key)
			}
			if strings.Contains(got.String(), tc.key) {
				t.Fatalf("String() leaks the key: %s", got)
			}
		})
	}
}

func FuzzParseConnectionString(f *testing.F) {
	f.Add("AccountEndpoint=https://acct.documents.azure.com:443/;AccountKey=" + testKey + ";")
	f.Add("AccountKey=a==;AccountEndpoint=http://localhost:8081/")
	f.Add(";;=;AccountEndpoint=;")
	f.Add("AccountEndpoint=https://a/;AccountEndpoint=https://b/")
	f.Fuzz(func(t *testing.T, s string) {
		cs, err := ParseConnectionString(s)
		if err != nil {
			return
		}
		if cs.Endpoint == "" || cs.Key == "" {
			t.Fatalf("accepted %q with an empty part: %+v", s, cs)
		}
		if checkEndpoint(cs.Endpoint) != nil {
			t.Fatalf("accepted an invalid endpoint %q", cs.Endpoint)
		}
		if strings.ContainsAny(cs.Key, ";") || strings.ContainsAny(cs.Endpoint, ";") {
			t.Fatalf("a value contains the separator: %+v", cs)
		}
		// Rendering and re-parsing with the real key gives the same result.
		again, err := ParseConnectionString("AccountEndpoint=" + cs.Endpoint + ";AccountKey=" + cs.Key + ";")
		if err != nil || again != cs {
			t.Fatalf("round trip of %+v = %+v, %v", cs, again, err)
		}
	})
}

func TestRegionalHost(t *testing.T) {
	t.Parallel()
	tests := []struct {
		host   string
		region string
		ok     bool
	}{
		{"acct-westus2.documents.azure.com", "westus2", true},
		{"my-orders-northeurope.documents.azure.com", "northeurope", true},
		{"acct.documents.azure.com", "", false},
		{"my-orders.documents.azure.com", "orders", false},
		{"acct-chinanorth2.documents.azure.cn", "chinanorth2", true},
		{"localhost", "", false},
		{"acct-westus2.example.com", "", false},
	}
	for _, tc := range tests {
		region, ok := RegionalHost(tc.host)
		if ok != tc.ok || (ok && region != tc.region) {
			t.Errorf("RegionalHost(%q) = %q, %v; want %q, %v", tc.host, region, ok, tc.region, tc.ok)
		}
	}
}

func TestParseSessionToken(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in  string
		id  string
		lsn int64
		ok  bool
	}{
		{"0:-1#12", "0", 12, true},
		{"3:1#456#1=20#2=30", "3", 456, true},
		{"7:-1#9,8:-1#10", "7", 9, true},
		{"", "", 0, false},
		{"0:-1", "", 0, false},
		{"0:12345", "0", 12345, true}, // a simple (V1) token: the .NET estimator reads 12345
		{"0:1#12345#3=12000", "0", 12345, true},
		{"0:", "", 0, false},
		{"0:-1#", "", 0, false},
		{"42", "", 0, false},
		{"0:-1#9223372036854775807", "0", 9223372036854775807, true},
		{"0:-1#x", "", 0, false},
	}
	for _, tc := range tests {
		id, lsn, ok := parseSessionToken(tc.in)
		if id != tc.id || lsn != tc.lsn || ok != tc.ok {
			t.Errorf("parseSessionToken(%q) = %q, %d, %v; want %q, %d, %v", tc.in, id, lsn, ok, tc.id, tc.lsn, tc.ok)
		}
	}
}

func FuzzParseSessionToken(f *testing.F) {
	f.Add("0", int64(-1), int64(12), "")
	f.Add("17", int64(1), int64(5), "#3=4")
	f.Add("9", int64(0), int64(0), "#2=1#3=9")
	f.Fuzz(func(t *testing.T, id string, version, lsn int64, regions string) {
		if id == "" || lsn < 0 || strings.ContainsAny(id, ":#,") || (regions != "" && (regions[0] != '#' || strings.Contains(regions, ","))) {
			t.Skip()
		}
		// The global LSN is the second '#' field after the first ':', whatever follows it.
		token := fmt.Sprintf("%s:%d#%d%s", id, version, lsn, regions)
		if gotID, got, ok := parseSessionToken(token); !ok || got != lsn || gotID != id {
			t.Fatalf("parseSessionToken(%q) = %q, %d, %v; want %q, %d", token, gotID, got, ok, id, lsn)
		}
		// Without a '#', the single field is the LSN.
		token = fmt.Sprintf("%s:%d", id, lsn)
		if gotID, got, ok := parseSessionToken(token); !ok || got != lsn || gotID != id {
			t.Fatalf("parseSessionToken(%q) = %q, %d, %v; want %q, %d", token, gotID, got, ok, id, lsn)
		}
	})
}
