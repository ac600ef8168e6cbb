package feed

import (
	"bytes"
	"encoding/json"
	"time"
)

// changeMeta reads an item's _lsn and _ts; numbers or numeric strings are accepted, the key
// case-insensitively. It runs for every change the tail delivers, so it scans the top level of
// the item for the two keys and stops once it has both, without decoding the rest; an item it
// cannot scan that way (an escaped key, malformed JSON) goes through encoding/json.
func changeMeta(raw json.RawMessage) (int64, time.Time) {
	lsnRaw, tsRaw, ok := metaAtEnd(raw)
	if !ok {
		lsnRaw, tsRaw, ok = scanMeta(raw)
	}
	if !ok {
		return decodeMeta(raw)
	}
	return metaOf(lsnRaw, tsRaw)
}

// decodeMeta is changeMeta through encoding/json.
func decodeMeta(raw json.RawMessage) (int64, time.Time) {
	var v struct {
		LSN json.RawMessage `json:"_lsn"`
		TS  json.RawMessage `json:"_ts"`
	}
	if json.Unmarshal(raw, &v) != nil {
		return 0, time.Time{}
	}
	return metaOf(v.LSN, v.TS)
}

func metaOf(lsnRaw, tsRaw []byte) (int64, time.Time) {
	var ts time.Time
	if n := jsonInt(tsRaw); n > 0 {
		ts = time.Unix(n, 0).UTC()
	}
	return jsonInt(lsnRaw), ts
}

var (
	keyLSN = []byte("_lsn")
	keyTS  = []byte("_ts")
)

// scanMeta finds the values of the top-level keys _lsn and _ts of the JSON object b (the first
// occurrence of each). ok is false when b is not an object it can scan: then the caller decodes it.
func scanMeta(b []byte) (lsn, ts []byte, ok bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, nil, false
	}
	i++
	for {
		i = skipSpace(b, i)
		if i >= len(b) {
			return nil, nil, false
		}
		switch b[i] {
		case '}':
			return lsn, ts, true
		case ',':
			i = skipSpace(b, i+1)
			if i >= len(b) {
				return nil, nil, false
			}
		}
		if b[i] != '"' {
			return nil, nil, false
		}
		end, escaped := scanString(b, i)
		if end < 0 || escaped {
			return nil, nil, false
		}
		key := b[i+1 : end-1]
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return nil, nil, false
		}
		start := skipSpace(b, i+1)
		i = skipValue(b, start)
		if i < 0 {
			return nil, nil, false
		}
		switch {
		case lsn == nil && bytes.EqualFold(key, keyLSN):
			lsn = b[start:i]
		case ts == nil && bytes.EqualFold(key, keyTS):
			ts = b[start:i]
		}
		if lsn != nil && ts != nil {
			return lsn, ts, true
		}
	}
}

// metaAtEnd reads _lsn and _ts where the service puts them, as the last two members of the
// item: {...,"_ts":1764500000,"_lsn":8}. Items are valid JSON (the page's scanner checked
// them), so a number right before the final brace, after `"_lsn":` that follows a comma or the
// opening brace, is the item's top-level _lsn: inside a string it would leave the string
// unterminated. ok is false for any other shape (cfp's emulator sorts the keys, for one): the
// caller scans from the start then. Without it the scan read the whole document for the two
// last members (BenchmarkChangeMeta/service-1KB).
func metaAtEnd(b []byte) (lsn, ts []byte, ok bool) {
	end := len(b)
	for end > 0 && isSpace(b[end-1]) {
		end--
	}
	if end == 0 || b[end-1] != '}' {
		return nil, nil, false
	}
	lsn, i, ok := memberBefore(b, end-1, keyLSN)
	if !ok || i < 0 || b[i] != ',' {
		return nil, nil, false
	}
	ts, i, ok = memberBefore(b, i, keyTS)
	if !ok || i < 0 || (b[i] != ',' && b[i] != '{') {
		return nil, nil, false
	}
	return lsn, ts, true
}

// memberBefore reads the member `"key":digits` that ends right before b[end] (whitespace
// allowed around its tokens, the key in any letter case), and returns its digits and the index
// of the last non-space byte before it (-1 when none).
func memberBefore(b []byte, end int, key []byte) (val []byte, before int, ok bool) {
	i := end
	for i > 0 && isSpace(b[i-1]) {
		i--
	}
	j := i
	for j > 0 && '0' <= b[j-1] && b[j-1] <= '9' {
		j--
	}
	if j == i {
		return nil, 0, false
	}
	val = b[j:i]
	for j > 0 && isSpace(b[j-1]) {
		j--
	}
	if j == 0 || b[j-1] != ':' {
		return nil, 0, false
	}
	j--
	for j > 0 && isSpace(b[j-1]) {
		j--
	}
	k := j - len(key) - 2
	if k < 0 || b[k] != '"' || b[j-1] != '"' || !bytes.EqualFold(b[k+1:j-1], key) {
		return nil, 0, false
	}
	for k > 0 && isSpace(b[k-1]) {
		k--
	}
	return val, k - 1, true
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// scanString returns the index after the string that starts at b[i] (a quote), and whether it
// holds escapes; -1 if it does not end.
func scanString(b []byte, i int) (int, bool) {
	escaped := false
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			escaped = true
			j++
		case '"':
			return j + 1, escaped
		}
	}
	return -1, escaped
}

// skipValue returns the index after the JSON value that starts at b[i], -1 if it does not end.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		end, _ := scanString(b, i)
		return end
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end, _ := scanString(b, j)
				if end < 0 {
					return -1
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	default:
		j := i
		for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\t' && b[j] != '\n' && b[j] != '\r' {
			j++
		}
		if j == i {
			return -1
		}
		return j
	}
}

// Operations of an all-versions change (Change.Operation).
const (
	OperationCreate  = "create"
	OperationReplace = "replace"
	OperationDelete  = "delete"
)

// allVersionsMeta reads the LSN, time and operation of an all-versions change from its
// metadata ({"metadata":{"lsn","crts","operationType"}}); the time falls back to the current
// image's _ts when crts is absent. Zero values when the item has no such metadata.
func allVersionsMeta(raw json.RawMessage) (int64, time.Time, string) {
	var v struct {
		Current struct {
			TS json.RawMessage `json:"_ts"`
		} `json:"current"`
		Metadata struct {
			LSN  json.RawMessage `json:"lsn"`
			CRTS json.RawMessage `json:"crts"`
			Op   string          `json:"operationType"`
		} `json:"metadata"`
	}
	if json.Unmarshal(raw, &v) != nil {
		return 0, time.Time{}, ""
	}
	tsRaw := v.Metadata.CRTS
	if jsonInt(tsRaw) <= 0 {
		tsRaw = v.Current.TS
	}
	lsn, ts := metaOf(v.Metadata.LSN, tsRaw)
	return lsn, ts, v.Metadata.Op
}
