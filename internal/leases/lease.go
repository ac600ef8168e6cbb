package leases

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"
)

// Family is the lease document format a lease was read in; a lease is always written back in
// its own family.
type Family string

// Lease families (docs/protocol-leases.md, "Families").
const (
	// FamilyDotNetV0 is the .NET PK-range lease (version 0, or no version), including leases of
	// the V2 library (PartitionId) and leases without FeedRange.
	FamilyDotNetV0 Family = "dotnet-v0"
	// FamilyDotNetV1 is the .NET EPK-range lease (version 1, FeedRange).
	FamilyDotNetV1 Family = "dotnet-v1"
	// FamilyJavaPK is the Java PK-range lease (ServiceItemLease: names in the id, six fields).
	FamilyJavaPK Family = "java-pk"
	// FamilyJavaEPK is the Java EPK lease (ServiceItemLeaseV1: feedRange, Base64 state).
	FamilyJavaEPK Family = "java-epk"
)

// Lease document field names.
const (
	fID           = "id"
	fPK           = "partitionKey"
	fVersion      = "version"
	fETag         = "_etag"
	fTS           = "_ts"
	fToken        = "LeaseToken"
	fPartitionID  = "PartitionId"
	fFeedRange    = "FeedRange"
	fFeedRangeJ   = "feedRange"
	fOwner        = "Owner"
	fContinuation = "ContinuationToken"
	fProperties   = "properties"
	fTimestamp    = "timestamp"
	fMode         = "Mode"
)

// ErrNotLease reports a document of the lease container that is not a lease (a marker, or a
// document some other tool stored there).
var ErrNotLease = errors.New("not a lease document")

// Lease is one lease document, decoded. The original document is kept so that Encode writes
// back every field cfp does not own exactly as it was.
type Lease struct {
	// ID is the document id, "<prefix>..<Token>".
	ID string
	// PK is the document's partition-key value in the lease container.
	PK string
	// ETag is the document's _etag, for If-Match.
	ETag string
	// Token is the LeaseToken: a partition id (PK-range leases) or "<min>-<max>" (EPK leases).
	Token string
	// Range is the lease's EPK range; Range.Max == "" when the document does not say (PK-range
	// leases without FeedRange).
	Range Range
	// Owner is the instance name of the owner, "" when released.
	Owner string
	// Continuation is the raw change-feed ETag to resume after (e.g. `"42"` with the quotes), ""
	// for none. For Java EPK leases it is the token inside the Base64 state.
	Continuation string
	// Timestamp is the explicit timestamp, else _ts; zero when neither is present.
	Timestamp time.Time
	// Family is the format the lease was read in and will be written in.
	Family Family
	// Mode is the .NET Mode field or the Java state's Mode; "" when absent (incremental).
	Mode string
	// Properties are the .NET strategy properties (not persisted by Java).
	Properties map[string]string
	// StateError is set when the lease's continuation cannot be decoded (a Java state of a
	// version cfp does not know, such as "V":"2"). Such a lease is listed and checked, but it is
	// never written (Encode refuses it) and never processed: Continuation is "".
	StateError error

	raw        *object    // the document as read, never changed (see Clone); nil for a new lease
	java       *JavaState // the Java EPK state; nil when the lease has no state
	origTS     time.Time  // Timestamp as decoded, to keep the original text when unchanged
	explicitTS bool       // the document had a non-null timestamp
	pkField    bool       // write a partitionKey field (a /partitionKey lease container)
	modeSet    bool       // the document has a non-null Mode
}

// LSN returns the checkpoint LSN: the continuation with its quotes stripped, when it is a
// decimal number.
func (l *Lease) LSN() (int64, bool) { return ParseLSN(l.Continuation) }

// ParseLSN reads a raw change-feed ETag such as `"42"` (quotes optional) as an LSN.
func ParseLSN(etag string) (int64, bool) {
	s := strings.Trim(strings.TrimSpace(etag), `"`)
	if s == "" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}

// Expired reports whether the lease is free to take at now: no owner, or an owner whose last
// write (Timestamp) is older than expiration (the SDKs' rule, docs/protocol-leases.md, "Timestamps and expiry").
func (l *Lease) Expired(now time.Time, expiration time.Duration) bool {
	if strings.TrimSpace(l.Owner) == "" || l.Timestamp.IsZero() {
		return true
	}
	return l.Timestamp.Add(expiration).Before(now)
}

// Lease states reported by State.
const (
	StateOwned   = "owned"
	StateExpired = "expired"
	StateUnowned = "unowned"
)

// State is "unowned" without an owner, "expired" when the owner stopped renewing, else "owned".
func (l *Lease) State(now time.Time, expiration time.Duration) string {
	switch {
	case strings.TrimSpace(l.Owner) == "":
		return StateUnowned
	case l.Expired(now, expiration):
		return StateExpired
	}
	return StateOwned
}

// ModeValue returns the lease's mode as its document holds it: .NET's Mode field (ok even when
// it is ""), or the Java EPK state's Mode; ok is false when there is none (incremental).
func (l *Lease) ModeValue() (string, bool) {
	switch l.Family {
	case FamilyJavaEPK:
		return l.Mode, l.Mode != ""
	case FamilyJavaPK:
		return "", false
	}
	return l.Mode, l.modeSet
}

// RefusedMode returns the lease's Mode and true when a .NET processor refuses to start on it: a
// .NET lease whose Mode is set but is neither ModeIncremental nor ModeFullFidelity (ignoring
// case), such as "IncrementalFeed", "LatestVersion" or "". .NET reads a missing or null Mode
// as incremental; Java leases keep their mode in their state and are never refused.
func (l *Lease) RefusedMode() (string, bool) {
	if l.Family != FamilyDotNetV0 && l.Family != FamilyDotNetV1 || !l.modeSet {
		return "", false
	}
	if strings.EqualFold(l.Mode, ModeIncremental) || strings.EqualFold(l.Mode, ModeFullFidelity) {
		return "", false
	}
	return l.Mode, true
}

// HasRange reports whether the lease's EPK range is known.
func (l *Lease) HasRange() bool { return l.Range.Max != "" }

// NamesPartition reports whether the lease is a PK-range lease: one named after a physical
// partition (its Token is a partition key range id), as .NET v0 leases (including V2
// PartitionId leases) and Java PK-range leases are, rather than after an EPK range. It depends
// on the family only: an EPK (v1) lease whose document gave no range is not a PK-range lease.
func (l *Lease) NamesPartition() bool {
	return l.Family == FamilyDotNetV0 || l.Family == FamilyJavaPK
}

// JavaState returns the decoded Java state of a Java EPK lease, nil for other leases or a null
// continuation.
func (l *Lease) JavaState() *JavaState {
	if l.java == nil {
		return nil
	}
	return l.java.clone()
}

// Clone returns a deep copy. The document as read (raw) is shared: it is never changed once
// decoded (Encode writes a copy of it).
func (l *Lease) Clone() *Lease {
	c := *l
	if l.java != nil {
		c.java = l.java.clone()
	}
	if l.Properties != nil {
		c.Properties = maps.Clone(l.Properties)
	}
	return &c
}

// Decode reads a lease document of any family. A document without a lease token (markers,
// foreign documents) gives an error wrapping ErrNotLease.
func Decode(doc Document) (*Lease, error) {
	o, err := parseObject(doc.Body)
	if err != nil {
		return nil, fmt.Errorf("decode lease %q: %w", doc.ID, err)
	}
	l := &Lease{raw: o, PK: doc.PK, ETag: doc.ETag}
	if l.ID, _ = o.str(fID); l.ID == "" {
		l.ID = doc.ID
	}
	if l.ID == "" {
		return nil, fmt.Errorf("decode lease: document without id: %w", ErrNotLease)
	}
	if l.Token, _ = o.str(fToken); l.Token == "" {
		l.Token, _ = o.str(fPartitionID)
	}
	if l.Token == "" {
		return nil, fmt.Errorf("decode lease %q: no LeaseToken: %w", l.ID, ErrNotLease)
	}
	if l.ETag == "" {
		l.ETag, _ = o.str(fETag)
	}
	if pk, ok := o.str(fPK); ok {
		l.pkField = true
		if l.PK == "" {
			l.PK = pk
		}
	}
	l.Owner, _ = o.str(fOwner)
	if err := l.decodeTimestamp(o); err != nil {
		return nil, err
	}
	version, err := leaseVersion(o)
	if err != nil {
		return nil, fmt.Errorf("decode lease %q: %w", l.ID, err)
	}
	cont, _ := o.str(fContinuation)
	_, _, dotnetRange := o.lookup(fFeedRange)
	_, hasJavaRange := o.vals[fFeedRangeJ]
	if exact := o.has(fFeedRange); exact {
		hasJavaRange = false
	}
	switch {
	case version == 1 && hasJavaRange:
		l.Family = FamilyJavaEPK
	case version == 1 && dotnetRange:
		l.Family = FamilyDotNetV1
	case version == 1:
		l.Family = FamilyDotNetV1
		if cont != "" && !strings.HasPrefix(cont, `"`) {
			if _, err := DecodeJavaState(cont); err == nil {
				l.Family = FamilyJavaEPK
			}
		}
	case o.has(fVersion) || dotnetRange || o.has(fPartitionID) || o.has(fMode) ||
		o.has(fProperties) || o.has(fPK):
		l.Family = FamilyDotNetV0
	default:
		l.Family = FamilyJavaPK
	}

	switch l.Family {
	case FamilyJavaEPK:
		if cont != "" {
			st, err := DecodeJavaState(cont)
			if err == nil && st.V > 1 {
				err = fmt.Errorf("decode java state: version %d is not known", st.V)
			}
			if err != nil {
				l.StateError = err
			} else {
				l.java = st
				l.Continuation = st.Token()
				l.Mode = st.Mode
			}
		}
		if v, ok := o.vals[fFeedRangeJ]; ok {
			if l.Range, err = feedRange(v); err != nil {
				return nil, fmt.Errorf("decode lease %q: feedRange: %w", l.ID, err)
			}
		}
		if !l.HasRange() && l.java != nil {
			l.Range = l.java.Range
		}
	case FamilyJavaPK:
		l.Continuation = cont
	default:
		l.Continuation = cont
		l.Mode, _ = o.str(fMode)
		_, mv, ok := o.lookup(fMode)
		l.modeSet = ok && !isNull(mv)
		if _, v, ok := o.lookup(fFeedRange); ok && !isNull(v) {
			if l.Range, err = feedRange(v); err != nil {
				return nil, fmt.Errorf("decode lease %q: FeedRange: %w", l.ID, err)
			}
		}
		if _, v, ok := o.lookup(fProperties); ok && !isNull(v) {
			if l.Properties, err = decodeProperties(v); err != nil {
				return nil, fmt.Errorf("decode lease %q: properties: %w", l.ID, err)
			}
		}
	}
	if !l.HasRange() && (l.Family == FamilyDotNetV1 || l.Family == FamilyJavaEPK) {
		if r, ok := ParseRangeToken(l.Token); ok {
			l.Range = r
		}
	}
	return l, nil
}

// number reads a JSON number as json.Unmarshal does into a json.Number: a number literal as
// it is (v comes from a parsed object, so it is valid JSON), else by json.Unmarshal.
func number(v json.RawMessage) (json.Number, error) {
	if c := v[0]; c == '-' || (c >= '0' && c <= '9') {
		return json.Number(v), nil
	}
	var n json.Number
	err := json.Unmarshal(v, &n)
	return n, err
}

// decodeProperties reads a .NET lease's properties: string values as they are, other values
// (never written by the SDKs) as the JSON encoding/json gives them once decoded. A repeated
// key takes encoding/json's path too: it fails on a value it cannot decode even when a later
// value of the key replaces it.
func decodeProperties(v json.RawMessage) (map[string]string, error) {
	if v[0] == '{' {
		po, err := parseValid(v, 2)
		if err != nil {
			return nil, err
		}
		if po.repeated {
			return decodePropertiesSlowly(v)
		}
		props := make(map[string]string, len(po.keys))
		for _, k := range po.keys {
			pv := po.vals[k]
			switch {
			case isNull(pv):
			case pv[0] == '"':
				if props[k], err = unquote(pv); err != nil {
					return nil, err
				}
			default:
				return decodePropertiesSlowly(v)
			}
		}
		return props, nil
	}
	return decodePropertiesSlowly(v)
}

func decodePropertiesSlowly(v json.RawMessage) (map[string]string, error) {
	var props map[string]any
	if err := json.Unmarshal(v, &props); err != nil {
		return nil, err
	}
	out := make(map[string]string, len(props))
	for k, p := range props {
		if s, ok := p.(string); ok {
			out[k] = s
		} else if p != nil {
			b, _ := json.Marshal(p)
			out[k] = string(b)
		}
	}
	return out, nil
}

// ParseRangeToken reads an EPK lease token "<min>-<max>".
func ParseRangeToken(token string) (Range, bool) {
	min, max, ok := strings.Cut(token, "-")
	if !ok || max == "" || !isHex(min) || !isHex(max) {
		return Range{}, false
	}
	return Range{Min: min, Max: max}, true
}

func isHex(s string) bool {
	for _, c := range s {
		if !strings.ContainsRune("0123456789abcdefABCDEF", c) {
			return false
		}
	}
	return true
}

func leaseVersion(o *object) (int, error) {
	_, v, ok := o.lookup(fVersion)
	if !ok || isNull(v) {
		return 0, nil
	}
	n, err := number(v)
	if err != nil {
		var s string
		if json.Unmarshal(v, &s) != nil {
			return 0, fmt.Errorf("version: not a number: %s", v)
		}
		n = json.Number(s)
	}
	i, err := n.Int64()
	if err != nil {
		return 0, fmt.Errorf("version: %w", err)
	}
	return int(i), nil
}

// feedRange reads {"Range":{"min","max",...}} (the inclusive flags are accepted and ignored,
// leases always hold [min,max)).
func feedRange(v json.RawMessage) (Range, error) {
	if isNull(v) {
		return Range{}, nil
	}
	if v[0] != '{' {
		return Range{}, fmt.Errorf("not an object: %.40s", v)
	}
	fr, err := parseValid(v, 2)
	if err != nil {
		return Range{}, err
	}
	_, rv, ok := fr.lookup("Range")
	if !ok || isNull(rv) {
		return Range{}, nil
	}
	// The range itself is a small object: encoding/json reads it, with its rules for a bound
	// spelled twice ({"max":"FF","Max":"AA"} reads AA) and for the inclusive flags it ignores.
	var r Range
	err = json.Unmarshal(rv, &r)
	return r, err
}

func (l *Lease) decodeTimestamp(o *object) error {
	if s, ok := o.str(fTimestamp); ok && s != "" {
		t, err := ParseTimestamp(s)
		if err != nil {
			return fmt.Errorf("decode lease %q: timestamp: %w", l.ID, err)
		}
		l.Timestamp, l.explicitTS = t, true
	} else if v, ok := o.vals[fTS]; ok && !isNull(v) {
		n, err := number(v)
		if err != nil {
			return fmt.Errorf("decode lease %q: _ts: %w", l.ID, err)
		}
		f, err := n.Float64()
		if err != nil {
			return fmt.Errorf("decode lease %q: _ts: %w", l.ID, err)
		}
		if f > 0 {
			l.Timestamp = time.Unix(int64(f), 0).UTC()
		}
	}
	l.origTS = l.Timestamp
	return nil
}

// ParseTimestamp reads an ISO-8601 lease timestamp: .NET's (up to 7 fraction digits, Z),
// Java's Instant (0-9 digits) and ZonedDateTime forms ("...Z[UTC]"); no zone means UTC.
func ParseTimestamp(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '['); i > 0 && strings.HasSuffix(s, "]") {
		s = s[:i]
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("not an ISO-8601 time: %q", s)
}

// FormatDotNetTime writes t as .NET does: UTC, ISO-8601, at most 7 fraction digits, trailing
// zeros trimmed, "Z".
func FormatDotNetTime(t time.Time) string {
	return t.UTC().Truncate(100 * time.Nanosecond).Format("2006-01-02T15:04:05.9999999Z")
}

// FormatJavaTime writes t as Java's Instant.toString does: UTC, 0, 3, 6 or 9 fraction digits.
func FormatJavaTime(t time.Time) string {
	t = t.UTC()
	ns := t.Nanosecond()
	switch {
	case ns == 0:
		return t.Format("2006-01-02T15:04:05Z")
	case ns%1_000_000 == 0:
		return t.Format("2006-01-02T15:04:05.000Z")
	case ns%1_000 == 0:
		return t.Format("2006-01-02T15:04:05.000000Z")
	}
	return t.Format("2006-01-02T15:04:05.000000000Z")
}

// Encode writes the lease in its own family's format, field for field: the fields cfp owns
// are set from l, every other field of the original document is kept as it was.
func Encode(l *Lease) ([]byte, error) {
	if l.ID == "" || l.Token == "" {
		return nil, errors.New("encode lease: id and token are required")
	}
	if l.StateError != nil {
		return nil, fmt.Errorf("encode lease %q: its continuation cannot be decoded (%v); cfp does not rewrite it", l.ID, l.StateError)
	}
	o := l.raw.clone()
	if o == nil {
		o = newObject()
	}
	set := func(name string, v any) {
		if err := o.set(name, v); err != nil {
			panic(err) // marshal of strings, numbers and maps cannot fail
		}
	}
	set(fID, l.ID)
	if l.pkField || o.has(fPK) {
		set(fPK, nullableString(l.PK))
	}
	ts := func(format func(time.Time) string) {
		switch {
		case l.Timestamp.Equal(l.origTS) && o.has(fTimestamp):
			// unchanged: keep the original text (Java's "[UTC]" suffix, or null).
		case l.Timestamp.IsZero():
			set(fTimestamp, nil)
		default:
			set(fTimestamp, format(l.Timestamp))
		}
	}
	switch l.Family {
	case FamilyDotNetV0, FamilyDotNetV1:
		version := 0
		if l.Family == FamilyDotNetV1 {
			version = 1
		}
		set(fVersion, version)
		set(fToken, l.Token)
		if o.has(fPartitionID) {
			set(fPartitionID, l.Token)
		}
		if err := setFeedRange(o, fFeedRange, l.Range); err != nil {
			return nil, err
		}
		set(fOwner, nullableString(l.Owner))
		set(fContinuation, nullableString(l.Continuation))
		props := l.Properties
		if props == nil {
			props = map[string]string{}
		}
		set(fProperties, props)
		ts(FormatDotNetTime)
		if l.Mode != "" {
			set(fMode, l.Mode)
		}
	case FamilyJavaPK:
		set(fToken, l.Token)
		set(fContinuation, nullableString(l.Continuation))
		ts(FormatJavaTime)
		set(fOwner, nullableString(l.Owner))
	case FamilyJavaEPK:
		set(fToken, l.Token)
		cont, err := l.javaContinuation()
		if err != nil {
			return nil, fmt.Errorf("encode lease %q: %w", l.ID, err)
		}
		set(fContinuation, cont)
		ts(FormatJavaTime)
		set(fOwner, nullableString(l.Owner))
		set(fVersion, 1)
		if err := setFeedRange(o, fFeedRangeJ, l.Range); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("encode lease %q: unknown family %q", l.ID, l.Family)
	}
	b, err := o.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("encode lease %q: %w", l.ID, err)
	}
	return b, nil
}

// javaContinuation is the ContinuationToken of a Java EPK lease: the original state re-encoded
// with the lease's continuation (without one, the state's StartFrom decides where Java starts),
// or null for a lease that never had a state.
func (l *Lease) javaContinuation() (any, error) {
	st := l.java
	if st == nil {
		if l.Continuation == "" {
			return nil, nil
		}
		st = NewJavaState(containerRid(l.ID), JavaMode(l.Mode), l.Range, "")
	}
	if st.Token() == l.Continuation && l.raw != nil {
		if orig, ok := l.raw.str(fContinuation); ok && orig != "" {
			return orig, nil
		}
	}
	s, err := EncodeJavaState(st.WithToken(l.Continuation, l.Range))
	if err != nil {
		return nil, err
	}
	return s, nil
}

// containerRid is the monitored container's rid embedded in a lease id
// (<processor><host>_<dbRid>_<collRid>..<token>), or "" when the id has no such prefix.
func containerRid(id string) string {
	prefix, _, ok := SplitID(id)
	if !ok {
		return ""
	}
	i := strings.LastIndexByte(prefix, '_')
	if i < 0 {
		return ""
	}
	return prefix[i+1:]
}

// setFeedRange writes {"Range":{"min","max"}} under key, keeping the original object (and its
// inclusive flags) when the range did not change; an unknown range leaves the field alone.
func setFeedRange(o *object, key string, r Range) error {
	if r.Max == "" {
		return nil
	}
	if v, ok := o.vals[key]; ok {
		if old, err := feedRange(v); err == nil && old == r {
			return nil
		}
	}
	return o.set(key, map[string]Range{"Range": r})
}

// NewDotNetV0 builds the lease the .NET bootstrapper creates for a physical partition
// (docs/protocol-leases.md, "Lease documents"): version 0, token = partition id, FeedRange, no owner, no continuation, empty
// properties, null timestamp and mode (ModeIncremental when empty).
func NewDotNetV0(prefix, token string, rng Range, mode string) *Lease {
	if mode == "" {
		mode = ModeIncremental
	}
	return &Lease{
		ID: LeaseID(prefix, token), PK: LeaseID(prefix, token), Token: token, Range: rng,
		Family: FamilyDotNetV0, Mode: mode, Properties: map[string]string{},
	}
}

// NewJavaEPK builds the lease Java's EPK bootstrapper creates for a range
// (epkversion/LeaseStoreManagerImpl.createLeaseIfNotExist): version 1, token "<min>-<max>",
// feedRange, no owner and a null continuation, so that each processor starts it from its own
// start position. Java writes no properties or mode; cfp writes none either.
func NewJavaEPK(prefix string, rng Range) *Lease {
	token := rng.String()
	return &Lease{
		ID: LeaseID(prefix, token), PK: LeaseID(prefix, token), Token: token, Range: rng,
		Family: FamilyJavaEPK, Properties: map[string]string{},
	}
}

// NewDotNetV1 builds a .NET EPK lease over rng (token "<min>-<max>"), as .NET creates after a
// v0 merge or a v1 split, resuming after continuation.
func NewDotNetV1(prefix string, rng Range, continuation, mode string) *Lease {
	if mode == "" {
		mode = ModeIncremental
	}
	token := rng.String()
	return &Lease{
		ID: LeaseID(prefix, token), PK: LeaseID(prefix, token), Token: token, Range: rng,
		Continuation: continuation, Family: FamilyDotNetV1, Mode: mode, Properties: map[string]string{},
	}
}

// Child builds the lease that takes over rng (partition partitionID) after this lease's range
// split, the way this lease's SDK does (docs/protocol-leases.md, "Splits and merges"): the same family (a PK-range lease's child is
// named after the child partition, an EPK lease's after its range), the parent's continuation,
// properties and mode, no owner. Java EPK children get the parent's state with the child range.
func (l *Lease) Child(partitionID string, rng Range) *Lease {
	prefix, _, _ := SplitID(l.ID)
	token := rng.String()
	if l.NamesPartition() {
		token = partitionID
	}
	c := &Lease{
		ID: LeaseID(prefix, token), Token: token, Range: rng, Continuation: l.Continuation,
		Family: l.Family, Mode: l.Mode, Properties: maps.Clone(l.Properties),
		pkField: l.pkField,
	}
	c.PK = c.ID
	if l.java != nil {
		st := l.java.clone()
		st.Range = rng
		for i := range st.Tokens {
			st.Tokens[i].Range = rng
		}
		st.raw.del(jsRange)
		c.java = st
	}
	return c
}

// Merged builds the lease that replaces a PK-range lease whose partition was merged: .NET
// replaces a v0 lease by a v1 lease over the same range (docs/protocol-leases.md, "Splits and merges"); EPK leases are kept as
// they are (the result is l itself).
func (l *Lease) Merged() *Lease {
	if l.Family != FamilyDotNetV0 || !l.HasRange() {
		return l
	}
	return l.EPKChild(l.Range)
}

// EPKChild builds the .NET v1 (EPK) lease that takes over rng, a part of this .NET v0 lease's
// range that now lies in a partition reaching past it (a merge, or a split child that was
// merged with a neighbour before anyone handled the split): the parent's continuation,
// properties and mode, no owner. A v0 child over the whole partition would overlap the
// neighbour's lease.
func (l *Lease) EPKChild(rng Range) *Lease {
	prefix, _, _ := SplitID(l.ID)
	c := NewDotNetV1(prefix, rng, l.Continuation, l.Mode)
	c.Properties = maps.Clone(l.Properties)
	c.pkField = l.pkField
	return c
}

// usePKField marks a new lease for a /partitionKey container: its partitionKey field is written.
func (l *Lease) usePKField() { l.pkField = true }
