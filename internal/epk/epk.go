// Package epk owns the emulator's partition-key arithmetic: V2 effective
// partition key (EPK) hashing with MurmurHash3 x64_128, V1 hashing with
// MurmurHash3 x86_32 and the service's binary key encoding, the
// x-ms-documentdb-partitionkey header codec, extraction of partition-key
// components from documents, and the semantic equality and canonical form the
// storage layer keys logical partitions by (docs/protocol-gateway.md, "Items" and
// "Effective partition keys").
package epk

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Undefined marks an absent partition-key component: the document has no
// property at the partition-key path (JS sends it as {} in the header).
type Undefined struct{}

// Component type markers of the V2 hashing encoding.
const (
	markUndefined byte = 0x00
	markNull      byte = 0x01
	markFalse     byte = 0x02
	markTrue      byte = 0x03
	markNumber    byte = 0x05
	markString    byte = 0x08
	stringEndV2   byte = 0xFF
)

// HashV2 returns the masked V2 effective partition key of components, the
// value both SDKs route with: 32 upper-case hex characters per component,
// concatenated (MultiHash) for hierarchical keys. A single-component key gives
// the same result under the Hash and MultiHash kinds.
//
// Components are the values encoding/json decodes (string, float64, bool,
// nil), Undefined{}, json.Number and Go integers; any other type hashes as
// Undefined. An empty key returns "", the lowest EPK: as a prefix it addresses
// the whole range ["", "FF").
func HashV2(components []any) string {
	var sb strings.Builder
	sb.Grow(32 * len(components))
	for _, c := range components {
		sum := rawV2(c)
		sum[0] &= 0x3F
		sb.WriteString(strings.ToUpper(hex.EncodeToString(sum[:])))
	}
	return sb.String()
}

// rawV2 is the unmasked V2 hash of one component, in EPK byte order.
func rawV2(c any) [16]byte {
	h1, h2 := murmur3x64128(encodeV2(nil, c), 0)
	var out [16]byte
	binary.BigEndian.PutUint64(out[0:8], h2)
	binary.BigEndian.PutUint64(out[8:16], h1)
	return out
}

// encodeV2 appends the V2 hashing encoding of one component to buf.
func encodeV2(buf []byte, c any) []byte {
	switch v := normalize(c).(type) {
	case nil:
		return append(buf, markNull)
	case bool:
		if v {
			return append(buf, markTrue)
		}
		return append(buf, markFalse)
	case float64:
		buf = append(buf, markNumber)
		return binary.LittleEndian.AppendUint64(buf, math.Float64bits(v))
	case string:
		buf = append(buf, markString)
		buf = append(buf, v...)
		return append(buf, stringEndV2)
	default:
		return append(buf, markUndefined)
	}
}

// normalize maps a component to one of nil, bool, float64, string or
// Undefined{}. Numbers of every accepted type become float64, since Cosmos DB
// hashes and compares all numbers as doubles.
func normalize(c any) any {
	switch v := c.(type) {
	case nil, bool, float64, string, Undefined:
		return v
	case json.Number:
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil {
			return Undefined{}
		}
		return f
	case float32:
		return float64(v)
	case int:
		return float64(v)
	case int8:
		return float64(v)
	case int16:
		return float64(v)
	case int32:
		return float64(v)
	case int64:
		return float64(v)
	case uint:
		return float64(v)
	case uint8:
		return float64(v)
	case uint16:
		return float64(v)
	case uint32:
		return float64(v)
	case uint64:
		return float64(v)
	default:
		return Undefined{}
	}
}

// Equal reports whether a and b are the same partition key: the same number
// of components, each of the same JSON type and value. Numbers compare by
// value whatever their Go type (5, 5.0 and json.Number("5e0") are equal), but
// 0 and -0 differ, because they hash to different EPKs. Equal(a, b) holds
// exactly when Canonical(a) == Canonical(b).
func Equal(a, b []any) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := normalize(a[i]), normalize(b[i])
		if xf, ok := x.(float64); ok {
			yf, ok := y.(float64)
			if !ok || math.Float64bits(xf) != math.Float64bits(yf) {
				return false
			}
			continue
		}
		if x != y {
			return false
		}
	}
	return true
}

// Canonical returns a canonical JSON array for the key, usable as a storage
// key: Equal keys give the same string and different keys different strings.
// Undefined is written as {}, so the result parses back with ParseHeader.
// Two departures from JSON keep it injective for keys JSON cannot carry:
// bytes of invalid UTF-8 in strings are written as \xXX (the Go escape
// ParseHeader accepts), and NaN and infinities as the bare tokens NaN, +Inf
// and -Inf.
func Canonical(components []any) string {
	var sb strings.Builder
	sb.WriteByte('[')
	for i, c := range components {
		if i > 0 {
			sb.WriteByte(',')
		}
		switch v := normalize(c).(type) {
		case nil:
			sb.WriteString("null")
		case bool:
			sb.WriteString(strconv.FormatBool(v))
		case float64:
			switch {
			case math.IsNaN(v):
				sb.WriteString("NaN")
			case math.IsInf(v, 1):
				sb.WriteString("+Inf")
			case math.IsInf(v, -1):
				sb.WriteString("-Inf")
			default:
				b, _ := json.Marshal(v) // cannot fail for finite numbers
				sb.Write(b)
			}
		case string:
			writeString(&sb, v)
		default:
			sb.WriteString("{}")
		}
	}
	sb.WriteByte(']')
	return sb.String()
}

// writeString writes s as a JSON string literal, with invalid UTF-8 bytes as
// \xXX.
func writeString(sb *strings.Builder, s string) {
	const hexDigits = "0123456789abcdef"
	sb.WriteByte('"')
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			sb.WriteByte('\\')
			sb.WriteByte(c)
			i++
		case c < 0x20:
			sb.WriteString(`\u00`)
			sb.WriteByte(hexDigits[c>>4])
			sb.WriteByte(hexDigits[c&0xF])
			i++
		case c < utf8.RuneSelf:
			sb.WriteByte(c)
			i++
		default:
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				sb.WriteString(`\x`)
				sb.WriteByte(hexDigits[c>>4])
				sb.WriteByte(hexDigits[c&0xF])
			} else {
				sb.WriteString(s[i : i+size])
			}
			i += size
		}
	}
	sb.WriteByte('"')
}

// FromDocument extracts the partition-key components of doc for the
// container's partition-key paths ("/pk", nested "/a/b"; a segment may be
// double-quoted, as in `/"a b"`). A path that does not lead to a string,
// number, bool or null yields Undefined{}.
func FromDocument(doc map[string]any, paths []string) []any {
	out := make([]any, len(paths))
	for i, p := range paths {
		out[i] = lookup(doc, p)
	}
	return out
}

// PathSegments splits a partition-key path into its property names as the service and the
// SDKs parse it: "/a/b" is a, b; a segment in double or single quotes is the text between them,
// "/" included ("/\"le/vel\"" is le/vel), and a quote preceded by a backslash does not end it. A
// path that is not well formed (no leading "/", an unclosed quote) splits at every "/", the
// quotes of a segment that wholly stands in them removed.
func PathSegments(path string) []string {
	var segs []string
	for i := 0; i < len(path); {
		if path[i] != '/' {
			return splitPlain(path)
		}
		i++
		if i == len(path) {
			break
		}
		if q := path[i]; q == '"' || q == '\'' {
			end := i + 1
			for {
				k := strings.IndexByte(path[end:], q)
				if k < 0 {
					return splitPlain(path)
				}
				end += k
				if path[end-1] != '\\' {
					break
				}
				end++
			}
			segs = append(segs, path[i+1:end])
			i = end + 1
			continue
		}
		end := strings.IndexByte(path[i:], '/')
		if end < 0 {
			end = len(path) - i
		}
		segs = append(segs, path[i:i+end])
		i += end
	}
	return segs
}

// splitPlain is PathSegments for a path it cannot parse: the earlier split at every "/".
func splitPlain(path string) []string {
	segs := strings.Split(strings.TrimPrefix(path, "/"), "/")
	for i, seg := range segs {
		if len(seg) >= 2 && seg[0] == '"' && seg[len(seg)-1] == '"' {
			segs[i] = seg[1 : len(seg)-1]
		}
	}
	return segs
}

func lookup(doc map[string]any, path string) any {
	var cur any = doc
	for _, seg := range PathSegments(path) {
		m, ok := cur.(map[string]any)
		if !ok {
			return Undefined{}
		}
		if cur, ok = m[seg]; !ok {
			return Undefined{}
		}
	}
	switch v := normalize(cur).(type) {
	case nil, bool, float64, string:
		return v
	default:
		return Undefined{}
	}
}
