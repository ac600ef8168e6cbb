package javatest

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cfp-dev/cfp/internal/leases"
)

// lease is ServiceItemLeaseV1 (epkversion/ServiceItemLeaseV1.java): what the Java EPK processor
// holds of a lease document. Properties live in memory only: the serializer never writes them
// (ServiceItemLeaseV1JsonSerializer).
type lease struct {
	ID    string
	ETag  string
	Token string
	Owner *string
	// Continuation is the Base64 ChangeFeedStateV1, nil until the first checkpoint.
	Continuation *string
	// Timestamp is the "timestamp" property as Instant.toString writes it; TS is _ts.
	Timestamp  string
	TS         int64
	Version    int
	FeedRange  *leases.Range
	Properties map[string]string
}

func (l *lease) owner() string {
	if l.Owner == nil {
		return ""
	}
	return *l.Owner
}

func (l *lease) clone() *lease {
	c := *l
	if l.Properties != nil {
		c.Properties = make(map[string]string, len(l.Properties))
		for k, v := range l.Properties {
			c.Properties[k] = v
		}
	}
	return &c
}

func strPtr(s string) *string { return &s }

// errBase64 is the IllegalArgumentException java.util.Base64's decoder throws.
var errBase64 = errors.New("IllegalArgumentException: Illegal base64 character")

// decodeLease is ServiceItemLeaseV1.fromDocument: it reads id, _etag, _ts, Owner, LeaseToken,
// ContinuationToken, version, feedRange and timestamp. withContinuationToken Base64-decodes the
// continuation at once with java.util.Base64.getDecoder() (the standard alphabet), so a lease
// whose ContinuationToken is not Base64 (a .NET ETag, "\"131\"") fails the whole listing.
// A null timestamp leaves the constructor's ZonedDateTime.now(UTC) in place.
func decodeLease(body []byte, now time.Time) (*lease, error) {
	var w struct {
		ID           string          `json:"id"`
		ETag         string          `json:"_etag"`
		TS           int64           `json:"_ts"`
		Owner        *string         `json:"Owner"`
		LeaseToken   *string         `json:"LeaseToken"`
		Continuation *string         `json:"ContinuationToken"`
		Version      *int            `json:"version"`
		FeedRange    json.RawMessage `json:"feedRange"`
		Timestamp    *string         `json:"timestamp"`
	}
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, err
	}
	l := &lease{ID: w.ID, ETag: w.ETag, TS: w.TS, Owner: w.Owner, Continuation: w.Continuation, Properties: map[string]string{}}
	if w.LeaseToken != nil {
		l.Token = *w.LeaseToken
	}
	if w.Continuation != nil {
		if err := javaStdDecodable(*w.Continuation); err != nil {
			return nil, fmt.Errorf("lease %s: %w", w.ID, err)
		}
	}
	if w.Version != nil {
		l.Version = *w.Version
	}
	if len(w.FeedRange) > 0 && string(w.FeedRange) != "null" {
		var fr struct {
			Range *leases.Range `json:"Range"`
		}
		// A range that does not parse is logged and left out ("Failed to parse feed range").
		if json.Unmarshal(w.FeedRange, &fr) == nil && fr.Range != nil {
			l.FeedRange = fr.Range
		}
	}
	if w.Timestamp != nil {
		t, err := parseZoned(*w.Timestamp)
		if err != nil {
			return nil, fmt.Errorf("lease %s: DateTimeParseException: %w", w.ID, err)
		}
		l.Timestamp = instantString(t)
	} else {
		l.Timestamp = instantString(now)
	}
	return l, nil
}

// javaStdDecodable is whether java.util.Base64.getDecoder().decode(s) succeeds: the standard
// alphabet, padding optional but never inside, no other character.
func javaStdDecodable(s string) error {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '+', c == '/', c == '=':
		default:
			return fmt.Errorf("%w %x", errBase64, c)
		}
	}
	if _, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(s, "=")); err != nil {
		return fmt.Errorf("%w: %v", errBase64, err)
	}
	return nil
}

// parseZoned is ZonedDateTime.parse: ISO 8601 with an offset, and an optional "[zone]" suffix.
func parseZoned(s string) (time.Time, error) {
	if i := strings.IndexByte(s, '['); i > 0 {
		s = s[:i]
	}
	return time.Parse(time.RFC3339Nano, s)
}

// instantString is Instant.toString: UTC, the fraction in groups of three digits, none when
// whole.
func instantString(t time.Time) string {
	t = t.UTC()
	ns := t.Nanosecond()
	base := t.Format("2006-01-02T15:04:05")
	switch {
	case ns == 0:
		return base + "Z"
	case ns%1_000_000 == 0:
		return fmt.Sprintf("%s.%03dZ", base, ns/1_000_000)
	case ns%1000 == 0:
		return fmt.Sprintf("%s.%06dZ", base, ns/1000)
	}
	return fmt.Sprintf("%s.%09dZ", base, ns)
}

// timestamp is the lease's time for expiry: Instant.parse(getTimestamp()).
func (l *lease) timestamp() time.Time {
	t, err := time.Parse(time.RFC3339Nano, l.Timestamp)
	if err != nil {
		return time.Unix(l.TS, 0)
	}
	return t
}

// encode is ServiceItemLeaseV1JsonSerializer: id, _etag, LeaseToken, ContinuationToken,
// timestamp, Owner, version, feedRange (with its inclusive flags, as FeedRangeEpkImpl writes
// them) and nothing else.
func (l *lease) encode() ([]byte, error) {
	type rng struct {
		Min    string `json:"min"`
		Max    string `json:"max"`
		MinInc bool   `json:"isMinInclusive"`
		MaxInc bool   `json:"isMaxInclusive"`
	}
	var fr any
	if l.FeedRange != nil {
		fr = map[string]rng{"Range": {Min: l.FeedRange.Min, Max: l.FeedRange.Max, MinInc: true}}
	}
	var etag *string
	if l.ETag != "" {
		etag = &l.ETag
	}
	return json.Marshal(struct {
		ID           string  `json:"id"`
		ETag         *string `json:"_etag"`
		LeaseToken   string  `json:"LeaseToken"`
		Continuation *string `json:"ContinuationToken"`
		Timestamp    string  `json:"timestamp"`
		Owner        *string `json:"Owner"`
		Version      int     `json:"version"`
		FeedRange    any     `json:"feedRange"`
	}{l.ID, etag, l.Token, l.Continuation, l.Timestamp, l.Owner, l.Version, fr})
}

// state is the part of ChangeFeedStateV1 the processor uses (common/ChangeFeedStateV1.java,
// feedranges/FeedRangeCompositeContinuationImpl.java): the container rid, the mode, where to
// start without a continuation, and the one token of the lease's range.
type state struct {
	Rid       string
	Mode      string
	StartFrom string // BEGINNING or NOW
	Token     string // the raw ETag ("\"123\""), "" for none
	Range     leases.Range
}

type wireRange struct {
	Min string `json:"min"`
	Max string `json:"max"`
}

type wireState struct {
	V         int    `json:"V"`
	Rid       string `json:"Rid"`
	Mode      string `json:"Mode"`
	StartFrom struct {
		Type string `json:"Type"`
	} `json:"StartFrom"`
	Continuation *struct {
		V            int    `json:"V"`
		Rid          string `json:"Rid"`
		Continuation []struct {
			Token *string   `json:"token"`
			Range wireRange `json:"range"`
		} `json:"Continuation"`
		Range wireRange `json:"Range"`
	} `json:"Continuation,omitempty"`
	Range *wireRange `json:"Range,omitempty"`
}

// String is ChangeFeedState.toString: the JSON in Base64 with the URL-safe alphabet and
// padding (Base64.getUrlEncoder()).
func (s state) String() string {
	var w wireState
	w.V, w.Rid, w.Mode, w.StartFrom.Type = 1, s.Rid, s.Mode, s.StartFrom
	r := wireRange{Min: s.Range.Min, Max: s.Range.Max}
	if s.Token == "" {
		w.Range = &r
	} else {
		tok := s.Token
		w.Continuation = &struct {
			V            int    `json:"V"`
			Rid          string `json:"Rid"`
			Continuation []struct {
				Token *string   `json:"token"`
				Range wireRange `json:"range"`
			} `json:"Continuation"`
			Range wireRange `json:"Range"`
		}{V: 1, Rid: s.Rid, Range: r}
		w.Continuation.Continuation = append(w.Continuation.Continuation, struct {
			Token *string   `json:"token"`
			Range wireRange `json:"range"`
		}{Token: &tok, Range: r})
	}
	b, _ := json.Marshal(w)
	return base64.URLEncoding.EncodeToString(b)
}

// parseState is ChangeFeedState.fromString (Base64.getUrlDecoder(), then Jackson).
func parseState(s string) (state, error) {
	b, err := base64.URLEncoding.DecodeString(s)
	if err != nil {
		if b, err = base64.RawURLEncoding.DecodeString(s); err != nil {
			return state{}, fmt.Errorf("%w: %v", errBase64, err)
		}
	}
	var w wireState
	if err := json.Unmarshal(b, &w); err != nil {
		//lint:ignore ST1005 the Java SDK's own message, word for word
		return state{}, fmt.Errorf("The change feed state continuation contains invalid or unsupported json: %w", err)
	}
	st := state{Rid: w.Rid, Mode: w.Mode, StartFrom: w.StartFrom.Type}
	if w.Range != nil {
		st.Range = leases.Range{Min: w.Range.Min, Max: w.Range.Max}
	}
	if c := w.Continuation; c != nil {
		st.Range = leases.Range{Min: c.Range.Min, Max: c.Range.Max}
		if len(c.Continuation) > 0 && c.Continuation[0].Token != nil {
			st.Token = *c.Continuation[0].Token
		}
	}
	return st, nil
}
