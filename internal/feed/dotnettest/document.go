package dotnettest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/cfp-dev/cfp/internal/leases"
)

// Lease modes as .NET writes them (HttpConstants.A_IMHeaderValues).
const (
	ModeIncremental  = "Incremental Feed"
	ModeFullFidelity = "Full-Fidelity Feed"
)

// lease is one lease document as the .NET host holds it in memory: DocumentServiceLeaseCore
// (version 0, PK-range lease) or DocumentServiceLeaseCoreEpk (version 1, EPK lease), read and
// written by Newtonsoft.Json. Fields .NET has no property for are dropped at the next write, as
// .NET drops them.
type lease struct {
	epk bool // DocumentServiceLeaseCoreEpk
	// migrating is DocumentServiceLeaseCore.isMigratingFromV2: the document had PartitionId,
	// which .NET then writes back (DocumentServiceLeaseCore.cs:47-66).
	migrating bool

	ID           string
	PartitionKey *string
	ETag         string
	LeaseToken   string
	FeedRange    *leases.Range
	Owner        *string
	Continuation *string
	Properties   map[string]string
	// Explicit is the "timestamp" property (ExplicitTimestamp); TS is _ts.
	Explicit *time.Time
	TS       int64
	Mode     *string
}

// owner returns Owner, "" for null.
func (l *lease) owner() string {
	if l.Owner == nil {
		return ""
	}
	return *l.Owner
}

// timestamp is DocumentServiceLeaseCore.Timestamp: ExplicitTimestamp ?? UnixStartTime + _ts
// (DocumentServiceLeaseCore.cs:80-84).
func (l *lease) timestamp() time.Time {
	if l.Explicit != nil {
		return *l.Explicit
	}
	return time.Unix(l.TS, 0).UTC()
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

// wireLease is the union of both classes' JSON properties for reading. encoding/json matches
// names case-insensitively, as Newtonsoft does by default, so a Java lease's "feedRange" lands in
// FeedRange as it does in .NET.
type wireLease struct {
	ID           string            `json:"id"`
	PartitionKey *string           `json:"partitionKey"`
	Version      *json.Number      `json:"version"`
	ETag         *string           `json:"_etag"`
	LeaseToken   *string           `json:"LeaseToken"`
	PartitionID  *string           `json:"PartitionId"`
	FeedRange    *wireFeedRange    `json:"FeedRange"`
	Owner        *string           `json:"Owner"`
	Continuation *string           `json:"ContinuationToken"`
	Properties   map[string]string `json:"properties"`
	Timestamp    *string           `json:"timestamp"`
	TS           *json.Number      `json:"_ts"`
	Mode         *string           `json:"Mode"`
}

// wireFeedRange is FeedRangeInternalConverter's form of a FeedRangeEpk:
// {"Range":{"min","max"[,"isMinInclusive":false][,"isMaxInclusive":true]}}
// (Serializer/FeedRange/FeedRangeInternalConverter.cs:99-108, Routing/RangeJsonConverter.cs:18-40).
type wireFeedRange struct {
	Range *struct {
		Min string `json:"min"`
		Max string `json:"max"`
	} `json:"Range"`
}

// decodeLease is DocumentServiceLeaseConverter.ReadJson (DocumentServiceLeaseConverter.cs:21-51):
// version 1 reads as DocumentServiceLeaseCoreEpk, anything else as DocumentServiceLeaseCore.
func decodeLease(body []byte) (*lease, error) {
	var w wireLease
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, fmt.Errorf("deserialize lease: %w", err)
	}
	l := &lease{ID: w.ID, PartitionKey: w.PartitionKey, Owner: w.Owner, Continuation: w.Continuation, Properties: w.Properties, Mode: w.Mode}
	if w.Version != nil {
		v, err := w.Version.Int64()
		if err != nil {
			return nil, fmt.Errorf("deserialize lease %s: version %s", w.ID, *w.Version)
		}
		l.epk = v == 1
	}
	if w.ETag != nil {
		l.ETag = *w.ETag
	}
	if w.LeaseToken != nil {
		l.LeaseToken = *w.LeaseToken
	}
	if w.PartitionID != nil && !l.epk {
		// The PartitionId setter (DocumentServiceLeaseCore.cs:60-64).
		l.LeaseToken, l.migrating = *w.PartitionID, true
	}
	if w.FeedRange != nil && w.FeedRange.Range != nil {
		l.FeedRange = &leases.Range{Min: w.FeedRange.Range.Min, Max: w.FeedRange.Range.Max}
	}
	if l.Properties == nil {
		l.Properties = map[string]string{}
	}
	if w.Timestamp != nil {
		t, err := leases.ParseTimestamp(*w.Timestamp)
		if err != nil {
			return nil, fmt.Errorf("deserialize lease %s: timestamp: %w", w.ID, err)
		}
		l.Explicit = &t
	}
	if w.TS != nil {
		f, err := w.TS.Float64()
		if err != nil {
			return nil, fmt.Errorf("deserialize lease %s: _ts: %w", w.ID, err)
		}
		l.TS = int64(f)
	}
	return l, nil
}

// encode writes the lease the way Newtonsoft serializes the class, property by property in
// declaration order (DocumentServiceLeaseCore.cs:26-99, DocumentServiceLeaseCoreEpk.cs:23-76):
// NullValueHandling.Ignore on partitionKey, PartitionId, FeedRange and Mode; null written for
// Owner, ContinuationToken and timestamp; the system properties _etag and _ts as read.
func (l *lease) encode() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	first := true
	put := func(name string, v any) {
		if !first {
			b.WriteByte(',')
		}
		first = false
		k, _ := json.Marshal(name)
		b.Write(k)
		b.WriteByte(':')
		switch v := v.(type) {
		case json.RawMessage:
			b.Write(v)
		default:
			j, _ := json.Marshal(v)
			b.Write(j)
		}
	}
	var etag any
	if l.ETag != "" {
		etag = l.ETag
	}
	var ts any
	if l.Explicit != nil {
		ts = formatTime(*l.Explicit)
	}
	props := l.Properties
	if props == nil {
		props = map[string]string{}
	}
	put("id", l.ID)
	if l.PartitionKey != nil {
		put("partitionKey", *l.PartitionKey)
	}
	if l.epk {
		put("version", 1)
	} else {
		put("version", 0)
	}
	put("_etag", etag)
	put("LeaseToken", l.LeaseToken)
	if !l.epk && l.migrating {
		put("PartitionId", l.LeaseToken)
	}
	if l.FeedRange != nil {
		put("FeedRange", map[string]any{"Range": map[string]string{"min": l.FeedRange.Min, "max": l.FeedRange.Max}})
	}
	put("Owner", l.Owner)
	put("ContinuationToken", l.Continuation)
	put("properties", props)
	if l.epk {
		if l.Mode != nil {
			put("Mode", *l.Mode)
		}
		put("timestamp", ts)
		put("_ts", l.TS)
	} else {
		put("timestamp", ts)
		put("_ts", l.TS)
		if l.Mode != nil {
			put("Mode", *l.Mode)
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// formatTime is Newtonsoft's IsoDateTimeConverter default for a UTC DateTime:
// "yyyy-MM-ddTHH:mm:ss.FFFFFFFK" (100 ns ticks, trailing zeros trimmed, "Z").
func formatTime(t time.Time) string {
	s := t.UTC().Truncate(100 * time.Nanosecond).Format("2006-01-02T15:04:05.0000000")
	s = strings.TrimRight(s, "0")
	s = strings.TrimSuffix(s, ".")
	return s + "Z"
}
