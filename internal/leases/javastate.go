package leases

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// JavaState is the decoded ChangeFeedStateV1 that Java's EPK processors store, Base64-encoded, in
// a lease's ContinuationToken (docs/protocol-leases.md, "Continuations"). Fields cfp does not model survive a
// re-encode, and the state is re-encoded in the Base64 alphabet it was read in.
type JavaState struct {
	// V is the state version (1).
	V int
	// Rid identifies the container; treat it as opaque (it can be a container link).
	Rid string
	// Mode is "INCREMENTAL" or "FULL_FIDELITY".
	Mode string
	// StartFrom is where a processor starts when the state has no continuation.
	StartFrom JavaStartFrom
	// Tokens are the composite continuation's entries; empty when the state has none.
	Tokens []JavaToken
	// Range is the state's feed range (the composite's Range, or the top-level one).
	Range Range

	raw      *object
	urlSafe  bool
	unpadded bool
}

// JavaStartFrom is the StartFrom part of a Java state.
type JavaStartFrom struct {
	// Type is BEGINNING, NOW, POINT_IN_TIME, LEASE or LEGACY_CHECKPOINT.
	Type string
	// PointInTime is set for POINT_IN_TIME.
	PointInTime time.Time
	// ETag is set for LEASE.
	ETag string
}

// JavaToken is one entry of a composite continuation: a raw ETag for a range.
type JavaToken struct {
	Token string `json:"token"`
	Range Range  `json:"range"`
}

// Java state property names (implementation/Constants.java).
const (
	jsV            = "V"
	jsRid          = "Rid"
	jsMode         = "Mode"
	jsStartFrom    = "StartFrom"
	jsContinuation = "Continuation"
	jsRange        = "Range"
)

// DecodeJavaState decodes a Base64 ChangeFeedStateV1 in either alphabet, with or without padding.
func DecodeJavaState(s string) (*JavaState, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, errors.New("decode java state: empty")
	}
	urlSafe := !strings.ContainsAny(s, "+/")
	unpadded := !strings.HasSuffix(s, "=") && len(s)%4 != 0
	var raw []byte
	var err error
	for _, enc := range []*base64.Encoding{
		base64.URLEncoding, base64.RawURLEncoding, base64.StdEncoding, base64.RawStdEncoding,
	} {
		if raw, err = enc.DecodeString(s); err == nil {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("decode java state: base64: %w", err)
	}
	o, err := parseExact(raw)
	if err != nil {
		return nil, fmt.Errorf("decode java state: %w", err)
	}
	if !o.has(jsV) && !o.has(jsContinuation) && !o.has(jsStartFrom) {
		return nil, errors.New("decode java state: not a ChangeFeedStateV1")
	}
	st := &JavaState{raw: o, urlSafe: urlSafe, unpadded: unpadded}
	if v, ok := o.vals[jsV]; ok && !isNull(v) {
		if err := json.Unmarshal(v, &st.V); err != nil {
			return nil, fmt.Errorf("decode java state: V: %w", err)
		}
	}
	st.Rid, _ = o.str(jsRid)
	st.Mode, _ = o.str(jsMode)
	if v, ok := o.vals[jsStartFrom]; ok && !isNull(v) {
		sf, err := parseExact(v)
		if err != nil {
			return nil, fmt.Errorf("decode java state: StartFrom: %w", err)
		}
		st.StartFrom.Type, _ = sf.str("Type")
		st.StartFrom.ETag, _ = sf.str("Etag")
		if v, ok := sf.vals["PointInTimeMs"]; ok && !isNull(v) {
			var ms int64
			if err := json.Unmarshal(v, &ms); err != nil {
				return nil, fmt.Errorf("decode java state: PointInTimeMs: %w", err)
			}
			st.StartFrom.PointInTime = time.UnixMilli(ms).UTC()
		}
	}
	if st.Range, err = exactRange(o.vals[jsRange]); err != nil {
		return nil, fmt.Errorf("decode java state: Range: %w", err)
	}
	if v, ok := o.vals[jsContinuation]; ok && !isNull(v) {
		c, err := parseExact(v)
		if err != nil {
			return nil, fmt.Errorf("decode java state: Continuation: %w", err)
		}
		var entries []json.RawMessage
		if v, ok := c.vals[jsContinuation]; ok && !isNull(v) {
			if err := json.Unmarshal(v, &entries); err != nil {
				return nil, fmt.Errorf("decode java state: Continuation: %w", err)
			}
		}
		for _, ev := range entries {
			e, err := parseExact(ev)
			if err != nil {
				return nil, fmt.Errorf("decode java state: continuation entry: %w", err)
			}
			tok := JavaToken{}
			tok.Token, _ = e.str("token")
			if tok.Range, err = exactRange(e.vals["range"]); err != nil {
				return nil, fmt.Errorf("decode java state: continuation range: %w", err)
			}
			st.Tokens = append(st.Tokens, tok)
		}
		if r, err := exactRange(c.vals[jsRange]); err != nil {
			return nil, fmt.Errorf("decode java state: Range: %w", err)
		} else if c.has(jsRange) {
			st.Range = r
		}
	}
	return st, nil
}

// Token returns the raw ETag to resume after: the first composite entry's token, "" for none.
func (st *JavaState) Token() string {
	if st == nil || len(st.Tokens) == 0 {
		return ""
	}
	return st.Tokens[0].Token
}

// WithToken returns a copy of the state whose every continuation entry resumes after token.
// When the state had no continuation, one entry over rng (or the state's range) is added.
// An empty token removes the continuation, leaving StartFrom to decide.
func (st *JavaState) WithToken(token string, rng Range) *JavaState {
	c := st.clone()
	if token == "" {
		c.Tokens = nil
		return c
	}
	if rng.Max == "" {
		rng = c.Range
	}
	if len(c.Tokens) == 0 {
		c.Tokens = []JavaToken{{Token: token, Range: rng}}
		return c
	}
	for i := range c.Tokens {
		c.Tokens[i].Token = token
	}
	return c
}

func (st *JavaState) clone() *JavaState {
	c := *st
	c.raw = st.raw.clone()
	c.Tokens = append([]JavaToken(nil), st.Tokens...)
	return &c
}

// EncodeJavaState writes st as Base64 JSON in the alphabet and padding it was decoded from (the
// URL-safe alphabet with padding, Java's own, for a new state). Unknown fields survive.
func EncodeJavaState(st *JavaState) (string, error) {
	o := st.raw.clone()
	if o == nil {
		o = newExact()
	}
	if err := o.set(jsV, max(st.V, 1)); err != nil {
		return "", err
	}
	if err := o.set(jsRid, st.Rid); err != nil {
		return "", err
	}
	if st.Mode != "" || o.has(jsMode) {
		if err := o.set(jsMode, st.Mode); err != nil {
			return "", err
		}
	}
	if st.StartFrom.Type != "" {
		sf := newExact()
		if v, ok := o.vals[jsStartFrom]; ok {
			if p, err := parseExact(v); err == nil {
				sf = p
			}
		}
		if err := sf.set("Type", st.StartFrom.Type); err != nil {
			return "", err
		}
		if !st.StartFrom.PointInTime.IsZero() {
			if err := sf.set("PointInTimeMs", st.StartFrom.PointInTime.UnixMilli()); err != nil {
				return "", err
			}
		}
		if st.StartFrom.ETag != "" {
			if err := sf.set("Etag", st.StartFrom.ETag); err != nil {
				return "", err
			}
		}
		if err := o.set(jsStartFrom, sf); err != nil {
			return "", err
		}
	}
	if len(st.Tokens) == 0 {
		o.del(jsContinuation)
		if err := o.set(jsRange, st.Range); err != nil {
			return "", err
		}
	} else {
		c := newExact()
		if v, ok := o.vals[jsContinuation]; ok {
			if p, err := parseExact(v); err == nil {
				c = p
			}
		}
		var old []json.RawMessage
		if v, ok := c.vals[jsContinuation]; ok {
			_ = json.Unmarshal(v, &old)
		}
		entries := make([]*object, len(st.Tokens))
		for i, t := range st.Tokens {
			e := newExact()
			if i < len(old) {
				if p, err := parseExact(old[i]); err == nil {
					e = p
				}
			}
			if err := e.set("token", t.Token); err != nil {
				return "", err
			}
			if err := e.set("range", t.Range); err != nil {
				return "", err
			}
			entries[i] = e
		}
		if err := c.set(jsV, 1); err != nil {
			return "", err
		}
		if err := c.set(jsRid, st.Rid); err != nil {
			return "", err
		}
		if err := c.set(jsContinuation, entries); err != nil {
			return "", err
		}
		if !c.has("PKRangeId") {
			if err := c.set(jsRange, st.Range); err != nil {
				return "", err
			}
		}
		if err := o.set(jsContinuation, c); err != nil {
			return "", err
		}
		o.del(jsRange)
	}
	b, err := o.MarshalJSON()
	if err != nil {
		return "", fmt.Errorf("encode java state: %w", err)
	}
	enc := base64.URLEncoding
	switch {
	case st.urlSafe && st.unpadded:
		enc = base64.RawURLEncoding
	case !st.urlSafe && st.unpadded:
		enc = base64.RawStdEncoding
	case !st.urlSafe:
		enc = base64.StdEncoding
	}
	return enc.EncodeToString(b), nil
}

// NewJavaState builds the state Java's checkpointer writes for a lease over rng resuming after
// token, in mode ("INCREMENTAL" when empty), started from NOW.
func NewJavaState(rid, mode string, rng Range, token string) *JavaState {
	if mode == "" {
		mode = JavaModeIncremental
	}
	st := &JavaState{V: 1, Rid: rid, Mode: mode, StartFrom: JavaStartFrom{Type: "NOW"}, Range: rng}
	return st.WithToken(token, rng)
}

// exactRange reads {"min":..,"max":..} with exact names; absent or null is the zero Range.
func exactRange(v json.RawMessage) (Range, error) {
	if isNull(v) {
		return Range{}, nil
	}
	o, err := parseExact(v)
	if err != nil {
		return Range{}, err
	}
	min, _ := o.str("min")
	max, _ := o.str("max")
	return Range{Min: min, Max: max}, nil
}

func isNull(v json.RawMessage) bool { return len(v) == 0 || string(v) == "null" }
