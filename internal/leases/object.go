package leases

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// object is a JSON object that keeps its keys in document order, so that a rewrite of a lease
// changes only the fields cfp owns and leaves every other field where it was.
type object struct {
	keys []string
	vals map[string]json.RawMessage
	// exact disables the case-insensitive fallback of lookup (Jackson, which reads Java states,
	// matches names exactly).
	exact bool
	// repeated is set by parseValid when a key came more than once (it kept the key's first
	// position and its last value).
	repeated bool
}

func newObject() *object { return &object{vals: map[string]json.RawMessage{}} }

// parseObject reads a JSON object; a repeated key keeps its first position and its last value.
// The values are slices of one copy of b (a listing decodes every lease document that changed
// since the last: this is most of an acquire cycle's work); invalid JSON takes the decoder's
// path, for its error.
func parseObject(b []byte) (*object, error) { return parseObjectN(b, 16) }

// parseObjectN is parseObject for an object of about n keys.
func parseObjectN(b []byte, n int) (*object, error) {
	if !json.Valid(b) {
		return parseObjectDecoder(b)
	}
	i := skipSpace(b, 0)
	if b[i] != '{' {
		return nil, errors.New("parse json: not an object")
	}
	return parseValid(bytes.Clone(b)[i:], n)
}

// parseValid reads the JSON object that starts b, JSON that json.Valid accepted (a document
// parseObject checked, or one of its values), of about n keys; the values are slices of b.
func parseValid(b []byte, n int) (*object, error) {
	o := &object{keys: make([]string, 0, n), vals: make(map[string]json.RawMessage, n)}
	members := 0
	for i := skipSpace(b, 1); b[i] != '}'; i = skipSpace(b, i) {
		if b[i] == ',' {
			i = skipSpace(b, i+1)
		}
		end := stringEnd(b, i)
		k, err := unquote(b[i:end])
		if err != nil {
			return nil, fmt.Errorf("parse json: %w", err)
		}
		i = skipSpace(b, skipSpace(b, end)+1) // past the colon
		end = valueEnd(b, i)
		o.setRaw(k, json.RawMessage(b[i:end:end]))
		members++
		i = end
	}
	o.repeated = members != len(o.keys)
	return o, nil
}

// parseObjectDecoder is parseObject by encoding/json's decoder, which reports what is wrong
// with invalid JSON.
func parseObjectDecoder(b []byte) (*object, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("parse json: %w", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errors.New("parse json: not an object")
	}
	o := newObject()
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("parse json: %w", err)
		}
		k, ok := tok.(string)
		if !ok {
			return nil, errors.New("parse json: object key is not a string")
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("parse json: field %q: %w", k, err)
		}
		o.setRaw(k, v)
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("parse json: %w", err)
	}
	if rest := b[dec.InputOffset():]; len(bytes.TrimSpace(rest)) > 0 {
		return nil, errors.New("parse json: data after the object")
	}
	return o, nil
}

// The scanners below walk JSON that json.Valid accepted.

// skipSpace returns the index of the first byte at or after i that is not JSON whitespace.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index after the string that starts (with its quote) at i.
func stringEnd(b []byte, i int) int {
	for i++; ; i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
}

// valueEnd returns the index after the value that starts at i.
func valueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for ; ; i++ {
			switch b[i] {
			case '"':
				i = stringEnd(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
	}
	for i < len(b) && !bytes.ContainsRune([]byte(",}] \t\n\r"), rune(b[i])) {
		i++
	}
	return i
}

// unquote decodes a JSON string as encoding/json does (invalid UTF-8 becomes U+FFFD): by a copy
// when it has no escape and is valid UTF-8.
func unquote(q []byte) (string, error) {
	inner := q[1 : len(q)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner), nil
	}
	var s string
	err := json.Unmarshal(q, &s)
	return s, err
}

func (o *object) clone() *object {
	if o == nil {
		return nil
	}
	c := &object{keys: append([]string(nil), o.keys...), vals: make(map[string]json.RawMessage, len(o.vals)), exact: o.exact, repeated: o.repeated}
	for k, v := range o.vals {
		c.vals[k] = append(json.RawMessage(nil), v...)
	}
	return c
}

func (o *object) has(k string) bool {
	_, ok := o.vals[k]
	return ok
}

// lookup finds a key exactly, else case-insensitively (Newtonsoft's fallback), and returns the
// key as spelled in the document.
func (o *object) lookup(name string) (string, json.RawMessage, bool) {
	if v, ok := o.vals[name]; ok {
		return name, v, true
	}
	if o.exact {
		return "", nil, false
	}
	for _, k := range o.keys {
		if strings.EqualFold(k, name) {
			return k, o.vals[k], true
		}
	}
	return "", nil, false
}

// str returns a string field found by lookup; null, absent and non-strings read as "".
func (o *object) str(name string) (string, bool) {
	_, v, ok := o.lookup(name)
	if !ok {
		return "", false
	}
	if isNull(v) {
		return "", true // as json.Unmarshal reads null into a string
	}
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	s, err := unquote(v)
	return s, err == nil
}

func (o *object) setRaw(k string, v json.RawMessage) {
	if _, ok := o.vals[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.vals[k] = v
}

// set stores v under the document's spelling of name (case-insensitive match), or under name.
func (o *object) set(name string, v any) error {
	raw, err := marshal(v)
	if err != nil {
		return fmt.Errorf("encode field %s: %w", name, err)
	}
	k, _, ok := o.lookup(name)
	if !ok {
		k = name
	}
	o.setRaw(k, raw)
	return nil
}

func (o *object) del(k string) {
	if _, ok := o.vals[k]; !ok {
		return
	}
	delete(o.vals, k)
	for i, key := range o.keys {
		if key == k {
			o.keys = append(o.keys[:i], o.keys[i+1:]...)
			break
		}
	}
}

func (o *object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, err := marshal(k)
		if err != nil {
			return nil, err
		}
		b.Write(kb)
		b.WriteByte(':')
		b.Write(o.vals[k])
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// marshal is json.Marshal without HTML escaping and without the trailing newline.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// nullableString encodes "" as JSON null, as the SDKs write absent owners and continuations.
func nullableString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// parseExact parses an object whose names match exactly (a Java state or part of one).
func parseExact(b []byte) (*object, error) {
	o, err := parseObjectN(b, 4)
	if err != nil {
		return nil, err
	}
	o.exact = true
	return o, nil
}

// newExact returns an empty object whose names match exactly.
func newExact() *object {
	o := newObject()
	o.exact = true
	return o
}
