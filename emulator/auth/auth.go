// Package auth owns the emulator's master-key request signatures: computing
// them the way the SDKs do, deriving the signed resource type and link from a
// request path, and verifying an incoming request's Authorization header
// (docs/protocol-gateway.md, "Transport and signatures").
package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// WellKnownKey is the public account key of the Cosmos DB emulator, which
// `cfp emulator` accepts by default. It is Base64; decode it before passing it
// to Sign or Verify.
const WellKnownKey = "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw=="

// Sign returns the Base64 HMAC-SHA256 master-key signature of a request, the
// value of sig= before URL encoding. key is the Base64-decoded account key;
// verb, resourceType and date are lower-cased, resourceLink keeps its case and
// must be unescaped.
func Sign(key []byte, verb, resourceType, resourceLink, date string) string {
	return sign(key, verb, resourceType, resourceLink, date, "")
}

// SignWithBody is Sign for the emulator's admin API (/_cfp/): the string signed carries the
// base64 SHA-256 of the request body in the slot Sign leaves empty, so a captured request's
// signature does not cover another body.
func SignWithBody(key []byte, verb, resourceType, resourceLink, date string, body []byte) string {
	return sign(key, verb, resourceType, resourceLink, date, BodyDigest(body))
}

// BodyDigest is the base64 SHA-256 of a request body, as SignWithBody signs it.
func BodyDigest(body []byte) string {
	d := sha256.Sum256(body)
	return base64.StdEncoding.EncodeToString(d[:])
}

func sign(key []byte, verb, resourceType, resourceLink, date, extra string) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(strings.ToLower(verb) + "\n" +
		strings.ToLower(resourceType) + "\n" +
		resourceLink + "\n" +
		strings.ToLower(date) + "\n" +
		extra + "\n"))
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// ResourceFromPath returns the resource type and link signed for a request to
// the unescaped path: a feed (odd segment count, e.g. /dbs/d/colls) signs its
// last segment as the type and the rest as the link; a single resource (even
// count, e.g. /dbs/d/colls/c) signs its second-to-last segment as the type
// and the whole path as the link; the account (/) signs "" and "".
// Leading and trailing slashes are ignored.
func ResourceFromPath(path string) (resourceType, resourceLink string) {
	path = strings.Trim(path, "/")
	if path == "" {
		return "", ""
	}
	segs := strings.Split(path, "/")
	if len(segs) == 2 && segs[0] == "offers" {
		// Offers are addressed by resource id: the link signed is the id, in lower case.
		return "offers", strings.ToLower(segs[1])
	}
	if len(segs) == 6 && segs[0] == "dbs" && segs[2] == "colls" && segs[4] == "operations" {
		// An operation on a container (delete by partition key) is signed over the container.
		return "colls", strings.Join(segs[:4], "/")
	}
	if len(segs)%2 == 1 {
		return segs[len(segs)-1], strings.Join(segs[:len(segs)-1], "/")
	}
	return segs[len(segs)-2], path
}

// Errors Verify wraps; callers answer 401 for each.
var (
	// ErrMissing means the request has no Authorization or x-ms-date header.
	ErrMissing = errors.New("missing authorization")
	// ErrMalformed means the Authorization header is not a master-key token.
	ErrMalformed = errors.New("malformed authorization")
	// ErrMismatch means the signature does not match the request.
	ErrMismatch = errors.New("signature mismatch")
)

// Date rules of the service: a signed request is valid from its x-ms-date for DateWindow.
const (
	// DateWindow is how long after its x-ms-date a signature is accepted.
	DateWindow = 15 * time.Minute
	// DateAhead is how far an x-ms-date may be ahead of the emulator's clock. The service
	// refuses dates 7 minutes ahead; a few minutes of drift between a client and the emulator
	// are forgiven.
	DateAhead = 5 * time.Minute
)

// DateError is a request whose x-ms-date the service would refuse: not an RFC 1123 date
// (Malformed; the service answers 401), or outside the window it accepts (403).
type DateError struct {
	Malformed bool
	Start     time.Time // the request's x-ms-date (zero when Malformed)
	Now       time.Time // the emulator's clock
}

func (e *DateError) Error() string {
	if e.Malformed {
		return "x-ms-date is not an RFC 1123 date"
	}
	return fmt.Sprintf("x-ms-date %s is outside the accepted window at %s", e.Start.UTC().Format(http.TimeFormat), e.Now.UTC().Format(http.TimeFormat))
}

// ServiceMessage is the message the service answers the request with.
func (e *DateError) ServiceMessage() string {
	if e.Malformed {
		return "The input date header is invalid format. Please pass in RFC 1123 style date format."
	}
	return fmt.Sprintf("The authorization token is not valid at the current time. Please create another token and retry (token start time: %s, token expiry time: %s, current server time: %s).",
		e.Start.UTC().Format(http.TimeFormat), e.Start.Add(DateWindow).UTC().Format(http.TimeFormat), e.Now.UTC().Format(http.TimeFormat))
}

// CheckDate checks a request's x-ms-date against the clock reading now: it must be an RFC 1123
// date (any zone name: the SDKs send GMT or UTC) no older than DateWindow and no more than
// DateAhead ahead. Otherwise it returns a *DateError.
func CheckDate(date string, now time.Time) error {
	t, err := time.Parse(time.RFC1123, strings.TrimSpace(date))
	if err != nil {
		return &DateError{Malformed: true, Now: now}
	}
	if now.Before(t.Add(-DateAhead)) || now.After(t.Add(DateWindow)) {
		return &DateError{Start: t, Now: now}
	}
	return nil
}

// Verify checks r's master-key Authorization header
// (type=master&ver=1.0&sig=..., URL-encoded) against the request's verb,
// unescaped path and x-ms-date header, with key the Base64-decoded account
// key. Only master-key tokens are accepted; the date's window is CheckDate's. The error wraps ErrMissing,
// ErrMalformed or ErrMismatch and describes what was signed, never the key or
// the expected signature.
func Verify(r *http.Request, key []byte) error { return verify(r, key, "", false) }

// VerifyWithBody is Verify for a request signed with SignWithBody over body, the request's body
// as read by the caller. It does not check the date: CheckDate does.
func VerifyWithBody(r *http.Request, key, body []byte) error {
	return verify(r, key, BodyDigest(body), false)
}

// VerifyByRID is Verify for a request addressed by resource ids (dbs/<db rid>/colls/<container
// rid>/pkranges, as the Java SDK reads partition key ranges): the SDKs sign the rid of the
// resource addressed (of a feed's owner) alone, in lower case, not the path.
func VerifyByRID(r *http.Request, key []byte) error {
	return verify(r, key, "", true)
}

func verify(r *http.Request, key []byte, extra string, byRID bool) error {
	header := r.Header.Get("Authorization")
	if header == "" {
		return fmt.Errorf("%w: no Authorization header", ErrMissing)
	}
	date := r.Header.Get("x-ms-date")
	if date == "" {
		return fmt.Errorf("%w: no x-ms-date header", ErrMissing)
	}
	// PathUnescape, not QueryUnescape: '+' is part of the Base64 signature.
	decoded, err := url.PathUnescape(header)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	var typ, ver, sig string
	for field := range strings.SplitSeq(decoded, "&") {
		name, value, ok := strings.Cut(field, "=")
		if !ok {
			return fmt.Errorf("%w: field without '='", ErrMalformed)
		}
		switch name {
		case "type":
			typ = value
		case "ver":
			ver = value
		case "sig":
			sig = value
		}
	}
	if typ != "master" {
		return fmt.Errorf("%w: token type %q, only master keys are accepted", ErrMalformed, typ)
	}
	if ver != "1.0" {
		return fmt.Errorf("%w: token version %q, want 1.0", ErrMalformed, ver)
	}
	got, err := base64.StdEncoding.DecodeString(sig)
	if err != nil {
		return fmt.Errorf("%w: signature is not Base64", ErrMalformed)
	}
	resourceType, resourceLink := ResourceFromPath(r.URL.Path) // Path is unescaped
	if byRID {
		resourceLink = strings.ToLower(resourceLink[strings.LastIndex(resourceLink, "/")+1:])
	}
	want, _ := base64.StdEncoding.DecodeString(sign(key, r.Method, resourceType, resourceLink, date, extra))
	if !hmac.Equal(got, want) {
		what := ""
		if extra != "" {
			what = " and its body"
		}
		return fmt.Errorf("%w: signed %s with resource type %q, link %q and date %q%s",
			ErrMismatch, strings.ToUpper(r.Method), resourceType, resourceLink, date, what)
	}
	return nil
}

// MaxTokenLifetime is how far in the future an emulator token's exp claim may lie: a token is a
// bearer secret, and one that expires in a year is one that never expires.
const MaxTokenLifetime = 24 * time.Hour

// EmulatorToken returns a Microsoft Entra ID token the emulator accepts (VerifyEmulatorToken)
// for the base64 account key, valid until exp: a JWT whose signature is the HMAC-SHA256 of its
// header and payload under the decoded key (HS256). The key itself is not in the token.
func EmulatorToken(key string, exp time.Time) (string, error) {
	k, err := base64.StdEncoding.DecodeString(key)
	if err != nil || len(k) == 0 {
		return "", errors.New("account key is not valid base64")
	}
	enc := base64.RawURLEncoding.EncodeToString
	signed := enc([]byte(`{"typ":"JWT","alg":"HS256"}`)) + "." + enc(fmt.Appendf(nil, `{"tid":"EmulatorFederation","exp":%d}`, exp.Unix()))
	return signed + "." + enc(tokenMAC(k, signed)), nil
}

func tokenMAC(key []byte, signed string) []byte {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(signed))
	return mac.Sum(nil)
}

// VerifyEmulatorToken checks r's Authorization header (type=aad&ver=1.0&sig=<JWT>), a Microsoft
// Entra ID token as the SDKs send it to an emulator. key is the base64 account key. The JWT's
// signature must be the HMAC-SHA256 of its header and payload under the decoded key
// (EmulatorToken), so a captured token proves knowledge of the key without carrying it. The
// SDKs' own emulator credentials put the key's text in the signature instead; that form is
// accepted only for WellKnownKey, which is public anyway. The token must carry an exp claim, not
// passed at now and at most MaxTokenLifetime ahead. The error wraps ErrMissing, ErrMalformed or
// ErrMismatch, and never contains the key.
func VerifyEmulatorToken(r *http.Request, key string, now time.Time) error {
	header := r.Header.Get("Authorization")
	if header == "" {
		return fmt.Errorf("%w: no Authorization header", ErrMissing)
	}
	decoded, err := url.PathUnescape(header)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	var typ, sig string
	for field := range strings.SplitSeq(decoded, "&") {
		name, value, _ := strings.Cut(field, "=")
		switch name {
		case "type":
			typ = value
		case "sig":
			sig = value
		}
	}
	if typ != "aad" {
		return fmt.Errorf("%w: token type %q is not aad", ErrMalformed, typ)
	}
	parts := strings.Split(sig, ".")
	if len(parts) != 3 {
		return fmt.Errorf("%w: the aad token is not a JWT", ErrMalformed)
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return fmt.Errorf("%w: the JWT payload is not base64url", ErrMalformed)
	}
	var claims struct {
		Exp *int64 `json:"exp"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil {
		return fmt.Errorf("%w: the JWT payload is not JSON", ErrMalformed)
	}
	got, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[2], "="))
	k, kerr := base64.StdEncoding.DecodeString(key)
	if err != nil || kerr != nil {
		return fmt.Errorf("%w: the aad token is not an emulator token for this account's key", ErrMismatch)
	}
	signed := hmac.Equal(got, tokenMAC(k, parts[0]+"."+parts[1]))
	if !signed && !(key == WellKnownKey && hmac.Equal(got, []byte(key))) {
		return fmt.Errorf("%w: the aad token is not an emulator token for this account's key", ErrMismatch)
	}
	switch {
	case claims.Exp == nil:
		return fmt.Errorf("%w: the aad token has no exp claim", ErrMalformed)
	case now.Unix() > *claims.Exp:
		return fmt.Errorf("%w: the aad token expired at %s", ErrMismatch, time.Unix(*claims.Exp, 0).UTC().Format(time.RFC3339))
	case time.Unix(*claims.Exp, 0).After(now.Add(MaxTokenLifetime)):
		return fmt.Errorf("%w: the aad token expires at %s, more than %s ahead", ErrMismatch, time.Unix(*claims.Exp, 0).UTC().Format(time.RFC3339), MaxTokenLifetime)
	}
	return nil
}
