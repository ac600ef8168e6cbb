package auth

import (
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

const testDate = "Mon, 30 Nov 2026 12:00:00 GMT"

func wellKnownKey(t *testing.T) []byte {
	t.Helper()
	key, err := base64.StdEncoding.DecodeString(WellKnownKey)
	if err != nil {
		t.Fatalf("decode well-known key: %v", err)
	}
	return key
}

// TestSign_SpecVectors checks signatures computed by an independent implementation that verified
// the Go and JavaScript SDKs' live traffic (the rule is in docs/protocol-gateway.md).
func TestSign_SpecVectors(t *testing.T) {
	t.Parallel()
	key := wellKnownKey(t)
	tests := []struct {
		verb, resourceType, resourceLink, want string
	}{
		{"GET", "", "", "2ZfcJgINWolR04tHTWNybqUHDykXGrkG+WSyxc8wQq0="},
		{"POST", "dbs", "", "Nxe7BUv5l+XJunb2zPM5HluRfYGeKnXGjjZ2NXsn1tQ="},
		{"GET", "dbs", "dbs/db1", "cS0Z7IcvqQlkZ1Oe5W37niaPio4rS0O+/aB3WHM5FZM="},
		{"POST", "colls", "dbs/db1", "MctNwbepVLR7SZr9uncWBxCnsLTWKhdsPbBsU7zzo5w="},
		{"GET", "pkranges", "dbs/db1/colls/c1", "fq2dF3JlbpDjGjnJBliCNkKGi1KXTCXlVCIhZVz3rLA="},
		{"POST", "docs", "dbs/db1/colls/c1", "qxPJa5NCxEOVNKWFa5ju+XG4tyuzIUeNv4KOklfrZ1I="},
		{"GET", "docs", "dbs/db1/colls/c1", "ZupzGGGh3aKo3FSoEAPMBuUVWxj5LL/hg6cgtnuyu1I="},
		{"PUT", "docs", "dbs/db1/colls/c1/docs/a b é", "+sJORWl6pH+ki8RVGN5Y5sLkr6Su6qx6tnj/WCMZ+HY="},
	}
	for _, tc := range tests {
		if got := Sign(key, tc.verb, tc.resourceType, tc.resourceLink, testDate); got != tc.want {
			t.Errorf("Sign(%s %q %q) = %s, want %s", tc.verb, tc.resourceType, tc.resourceLink, got, tc.want)
		}
	}
	// The verb, type and date are case-insensitive; the link is not.
	if Sign(key, "get", "DOCS", "dbs/db1/colls/c1", strings.ToUpper(testDate)) != "ZupzGGGh3aKo3FSoEAPMBuUVWxj5LL/hg6cgtnuyu1I=" {
		t.Error("signature depends on the case of verb, type or date")
	}
	if Sign(key, "GET", "docs", "dbs/DB1/colls/c1", testDate) == "ZupzGGGh3aKo3FSoEAPMBuUVWxj5LL/hg6cgtnuyu1I=" {
		t.Error("signature ignores the case of the resource link")
	}
}

func TestResourceFromPath(t *testing.T) {
	t.Parallel()
	tests := []struct {
		path, wantType, wantLink string
	}{
		{"/", "", ""},
		{"", "", ""},
		{"/dbs", "dbs", ""},
		{"/dbs/d", "dbs", "dbs/d"},
		{"/dbs/d/colls", "colls", "dbs/d"},
		{"/dbs/d/colls/c", "colls", "dbs/d/colls/c"},
		{"/dbs/d/colls/c/docs", "docs", "dbs/d/colls/c"},
		{"/dbs/d/colls/c/pkranges", "pkranges", "dbs/d/colls/c"},
		{"/dbs/d/colls/c/docs/a b é", "docs", "dbs/d/colls/c/docs/a b é"},
		{"/dbs/d/colls/c/", "colls", "dbs/d/colls/c"},
		{"/offers", "offers", ""},
		{"/dbs/d/colls/c/operations/partitionkeydelete", "colls", "dbs/d/colls/c"},
	}
	for _, tc := range tests {
		gotType, gotLink := ResourceFromPath(tc.path)
		if gotType != tc.wantType || gotLink != tc.wantLink {
			t.Errorf("ResourceFromPath(%q) = %q, %q; want %q, %q", tc.path, gotType, gotLink, tc.wantType, tc.wantLink)
		}
	}
}

// sdkRequest builds a request the way azcosmos does: the id percent-escaped
// in the URL, the unescaped link signed, the token url.QueryEscape'd.
func sdkRequest(t *testing.T, key []byte, method, escapedPath string) *http.Request {
	t.Helper()
	r := httptest.NewRequest(method, "http://localhost:8081"+escapedPath, nil)
	unescaped, err := url.PathUnescape(escapedPath)
	if err != nil {
		t.Fatal(err)
	}
	typ, link := ResourceFromPath(unescaped)
	sig := Sign(key, method, typ, link, testDate)
	r.Header.Set("x-ms-date", testDate)
	r.Header.Set("Authorization", url.QueryEscape("type=master&ver=1.0&sig="+sig))
	return r
}

func TestVerify_SDKRoundTrip(t *testing.T) {
	t.Parallel()
	key := wellKnownKey(t)
	for _, tc := range []struct{ method, path string }{
		{http.MethodGet, "/"},
		{http.MethodPost, "/dbs"},
		{http.MethodGet, "/dbs/db1/colls/c1/pkranges"},
		{http.MethodPost, "/dbs/db1/colls/c1/docs"},
		// sig contains '+' and '/': it must survive URL decoding.
		{http.MethodPut, "/dbs/db1/colls/c1/docs/a%20b%20%C3%A9"},
		{http.MethodDelete, "/dbs/db1/colls/c1/docs/x%2By"},
	} {
		r := sdkRequest(t, key, tc.method, tc.path)
		if err := Verify(r, key); err != nil {
			t.Errorf("Verify(%s %s) = %v, want nil", tc.method, tc.path, err)
		}
	}
}

func TestVerify_Rejects(t *testing.T) {
	t.Parallel()
	key := wellKnownKey(t)
	otherKey := []byte("not the account key")
	const path = "/dbs/db1/colls/c1/docs/a%20b"
	tests := []struct {
		name   string
		mutate func(r *http.Request)
		want   error
	}{
		{"no authorization", func(r *http.Request) { r.Header.Del("Authorization") }, ErrMissing},
		{"no date", func(r *http.Request) { r.Header.Del("x-ms-date") }, ErrMissing},
		{"other date", func(r *http.Request) { r.Header.Set("x-ms-date", "Tue, 01 Dec 2026 12:00:00 GMT") }, ErrMismatch},
		{"other verb", func(r *http.Request) { r.Method = http.MethodDelete }, ErrMismatch},
		{"other path", func(r *http.Request) { r.URL.Path = "/dbs/db1/colls/c1/docs/a c" }, ErrMismatch},
		{"other key", func(r *http.Request) {
			r.Header.Set("Authorization", url.QueryEscape("type=master&ver=1.0&sig="+Sign(otherKey, "GET", "docs", "dbs/db1/colls/c1/docs/a b", testDate)))
		}, ErrMismatch},
		{"truncated signature", func(r *http.Request) {
			r.Header.Set("Authorization", strings.Replace(r.Header.Get("Authorization"), "sig%3D", "sig%3DA", 1))
		}, ErrMalformed},
		{"aad token", func(r *http.Request) {
			r.Header.Set("Authorization", url.QueryEscape("type=aad&ver=1.0&sig=eyJ0eXAi"))
		}, ErrMalformed},
		{"not base64", func(r *http.Request) {
			r.Header.Set("Authorization", url.QueryEscape("type=master&ver=1.0&sig=!!!"))
		}, ErrMalformed},
		{"bad escape", func(r *http.Request) { r.Header.Set("Authorization", "type%3Dmaster%zz") }, ErrMalformed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := sdkRequest(t, key, http.MethodGet, path)
			tc.mutate(r)
			err := Verify(r, key)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Verify = %v, want %v", err, tc.want)
			}
			if strings.Contains(err.Error(), WellKnownKey) || strings.Contains(err.Error(), string(key)) {
				t.Errorf("error %q leaks the key", err)
			}
		})
	}
}

// TestVerify_LiteralPlus accepts a token whose '+' was not percent-encoded:
// decoding must not turn it into a space.
func TestVerify_LiteralPlus(t *testing.T) {
	t.Parallel()
	key := wellKnownKey(t)
	r := sdkRequest(t, key, http.MethodPut, "/dbs/db1/colls/c1/docs/a%20b%20%C3%A9")
	auth := r.Header.Get("Authorization")
	if !strings.Contains(auth, "%2B") {
		t.Fatalf("test vector lost its '+': %s", auth)
	}
	r.Header.Set("Authorization", strings.ReplaceAll(auth, "%2B", "+"))
	if err := Verify(r, key); err != nil {
		t.Errorf("Verify with literal '+' = %v, want nil", err)
	}
}

// FuzzVerifyEmulatorToken checks any aad token against a custom key: it never panics, and what
// it accepts is a JWT whose signature is the MAC of its header and payload under the key (the
// key's text, accepted for the well-known key only, never passes), with an exp.
func FuzzVerifyEmulatorToken(f *testing.F) {
	key := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("k", 64)))
	now := time.Unix(1_800_000_000, 0)
	good, _ := EmulatorToken(key, now.Add(time.Hour))
	enc := base64.RawURLEncoding.EncodeToString
	for _, seed := range []string{good, "a.b.c", "..", enc([]byte(`{}`)) + "." + enc([]byte(`{"exp":1}`)) + "." + enc([]byte(key))} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, tok string) {
		r := httptest.NewRequest(http.MethodGet, "/dbs", nil)
		r.Header.Set("Authorization", url.QueryEscape("type=aad&ver=1.0&sig="+tok))
		if VerifyEmulatorToken(r, key, now) != nil {
			return
		}
		parts := strings.Split(tok, ".")
		k, _ := base64.StdEncoding.DecodeString(key)
		sig, _ := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[2], "="))
		if string(sig) != string(tokenMAC(k, parts[0]+"."+parts[1])) {
			t.Errorf("accepted %q, whose signature is not the MAC under the key", tok)
		}
	})
}

// A request addressed by resource ids is signed over the addressed resource's rid (a feed's
// owner's), in lower case, as the Java SDK signs GET dbs/<db rid>/colls/<container rid>/pkranges.
func TestVerifyByRID(t *testing.T) {
	t.Parallel()
	key := wellKnownKey(t)
	sign := func(method, path, typ, link string) *http.Request {
		r := httptest.NewRequest(method, "http://emu.test"+path, nil)
		r.Header.Set("x-ms-date", testDate)
		r.Header.Set("Authorization", url.QueryEscape("type=master&ver=1.0&sig="+Sign(key, method, typ, link, testDate)))
		return r
	}
	for _, tc := range []struct{ path, typ, link string }{
		{"/dbs/hryXuw==/colls/hryXu5ALAfA=/pkranges", "pkranges", "hryxu5alafa="},
		{"/dbs/hryXuw==/colls/hryXu5ALAfA=", "colls", "hryxu5alafa="},
		{"/dbs/hryXuw==/colls", "colls", "hryxuw=="},
		{"/dbs/hryXuw==", "dbs", "hryxuw=="},
	} {
		if err := VerifyByRID(sign(http.MethodGet, tc.path, tc.typ, tc.link), key); err != nil {
			t.Errorf("VerifyByRID(GET %s signed over %q) = %v, want nil", tc.path, tc.link, err)
		}
		// Neither the rid as written nor the path (the name-based rule) serves it.
		for _, wrong := range []string{strings.ToUpper(tc.link), strings.TrimPrefix(tc.path, "/")} {
			if err := VerifyByRID(sign(http.MethodGet, tc.path, tc.typ, wrong), key); !errors.Is(err, ErrMismatch) {
				t.Errorf("VerifyByRID(GET %s signed over %q) = %v, want ErrMismatch", tc.path, wrong, err)
			}
		}
	}
}
