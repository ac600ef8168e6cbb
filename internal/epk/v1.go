package epk

import (
	"encoding/binary"
	"encoding/hex"
	"math"
	"math/bits"
	"strings"
	"unicode/utf16"
)

// V1 (hash v1) partitioning, the service's partition key version 1 and its default for a
// container created without a version: the effective partition key is the binary encoding of
// the key's MurmurHash3-32 (as a number) followed by the key's own components, each string
// truncated to 100 UTF-16 code units (and its encoding to 101 bytes).
const (
	v1MaxStringChars      = 100
	v1MaxStringBytes      = 100
	stringEndV1      byte = 0x00
)

// HashV1 returns the V1 effective partition key of components, as upper-case hex. An empty key
// returns "", the lowest EPK.
func HashV1(components []any) string {
	if len(components) == 0 {
		return ""
	}
	trunc := make([]any, len(components))
	var buf []byte
	for i, c := range components {
		trunc[i] = truncateV1(normalize(c))
		buf = encodeV1Hashing(buf, trunc[i])
	}
	out := encodeV1Binary(nil, float64(murmur3x86_32(buf, 0)))
	for _, c := range trunc {
		out = encodeV1Binary(out, c)
	}
	return strings.ToUpper(hex.EncodeToString(out))
}

// NumberEPK is the V1 EPK of a key whose only component is the number f: the service lays out
// the ranges of a V1 container at the EPKs of hash values (0 ≤ f < 2^32).
func NumberEPK(f float64) string {
	return strings.ToUpper(hex.EncodeToString(encodeV1Binary(nil, f)))
}

// ParseNumberEPK reads the leading number of a V1 EPK (a range boundary made by NumberEPK).
func ParseNumberEPK(s string) (float64, bool) {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) < 3 || b[0] != markNumber {
		return 0, false
	}
	payload := uint64(b[1]) << 56
	shift := 56
	for _, c := range b[2:] {
		shift -= 7
		if shift < 0 {
			payload |= uint64(c>>1) >> -shift
		} else {
			payload |= uint64(c>>1) << shift
		}
		if c&1 == 0 {
			break
		}
	}
	var raw uint64
	if payload&(1<<63) != 0 {
		raw = payload ^ (1 << 63)
	} else {
		raw = -payload
	}
	return math.Float64frombits(raw), true
}

func truncateV1(c any) any {
	s, ok := c.(string)
	if !ok {
		return c
	}
	n := 0
	for i, r := range s {
		n += utf16.RuneLen(r)
		if n > v1MaxStringChars {
			return s[:i]
		}
	}
	return s
}

// encodeV1Hashing appends the bytes V1 hashes for one component: V2's, but a string ends with 0.
func encodeV1Hashing(buf []byte, c any) []byte {
	if s, ok := c.(string); ok {
		buf = append(buf, markString)
		buf = append(buf, s...)
		return append(buf, stringEndV1)
	}
	return encodeV2(buf, c)
}

// encodeV1Binary appends the order-preserving binary encoding of one component.
func encodeV1Binary(buf []byte, c any) []byte {
	switch v := c.(type) {
	case float64:
		buf = append(buf, markNumber)
		payload := math.Float64bits(v)
		if payload < 1<<63 {
			payload ^= 1 << 63
		} else {
			payload = ^payload + 1
		}
		buf = append(buf, byte(payload>>56))
		payload <<= 8
		var b byte
		first := true
		for {
			if !first {
				buf = append(buf, b)
			}
			first = false
			b = byte(payload>>56) | 0x01
			payload <<= 7
			if payload == 0 {
				break
			}
		}
		return append(buf, b&0xFE)
	case string:
		buf = append(buf, markString)
		short := len(v) <= v1MaxStringBytes
		n := len(v)
		if !short {
			n = v1MaxStringBytes + 1
		}
		for i := range n {
			ch := v[i]
			if ch < 0xFF {
				ch++
			}
			buf = append(buf, ch)
		}
		if short {
			buf = append(buf, stringEndV1)
		}
		return buf
	default:
		return encodeV2(buf, c)
	}
}

// murmur3x86_32 is MurmurHash3 x86_32 (Austin Appleby's public algorithm).
func murmur3x86_32(data []byte, seed uint32) uint32 {
	const (
		c1 = 0xcc9e2d51
		c2 = 0x1b873593
	)
	h := seed
	n := len(data)
	for i := 0; i+4 <= n; i += 4 {
		k := binary.LittleEndian.Uint32(data[i:])
		k *= c1
		k = bits.RotateLeft32(k, 15)
		k *= c2
		h ^= k
		h = bits.RotateLeft32(h, 13)
		h = h*5 + 0xe6546b64
	}
	tail := data[n&^3:]
	var k uint32
	switch len(tail) {
	case 3:
		k ^= uint32(tail[2]) << 16
		fallthrough
	case 2:
		k ^= uint32(tail[1]) << 8
		fallthrough
	case 1:
		k ^= uint32(tail[0])
		k *= c1
		k = bits.RotateLeft32(k, 15)
		k *= c2
		h ^= k
	}
	h ^= uint32(n)
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h
}
