package epk

import (
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// ParseHeader parses the x-ms-documentdb-partitionkey header: a JSON array of
// strings, numbers, booleans, nulls and {} (which yields Undefined{}).
//
// Strings are decoded as encoding/json decodes them, and leniently accept the
// escapes the Go SDK's strconv.QuoteToASCII produces although JSON lacks
// them: \UXXXXXXXX, \xXX (a raw byte), \a and \v. Numbers become float64.
// Anything else (nested arrays, non-empty objects, trailing data) is an error.
func ParseHeader(h string) ([]any, error) {
	p := headerParser{s: h}
	out, err := p.array()
	if err != nil {
		return nil, fmt.Errorf("parse partition key header: %w", err)
	}
	return out, nil
}

type headerParser struct {
	s   string
	pos int
}

func (p *headerParser) errorf(format string, args ...any) error {
	return fmt.Errorf("offset %d: %s", p.pos, fmt.Sprintf(format, args...))
}

func (p *headerParser) skipSpace() {
	for p.pos < len(p.s) {
		switch p.s[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *headerParser) peek() (byte, bool) {
	if p.pos >= len(p.s) {
		return 0, false
	}
	return p.s[p.pos], true
}

func (p *headerParser) expect(c byte) error {
	p.skipSpace()
	got, ok := p.peek()
	if !ok {
		return p.errorf("expected %q, found end of input", c)
	}
	if got != c {
		return p.errorf("expected %q, found %q", c, got)
	}
	p.pos++
	return nil
}

func (p *headerParser) array() ([]any, error) {
	if err := p.expect('['); err != nil {
		return nil, err
	}
	out := []any{}
	p.skipSpace()
	if c, ok := p.peek(); ok && c == ']' {
		p.pos++
	} else {
		for {
			v, err := p.value()
			if err != nil {
				return nil, err
			}
			out = append(out, v)
			p.skipSpace()
			c, ok := p.peek()
			if !ok {
				return nil, p.errorf("unterminated array")
			}
			p.pos++
			if c == ']' {
				break
			}
			if c != ',' {
				return nil, p.errorf("expected ',' or ']', found %q", c)
			}
		}
	}
	p.skipSpace()
	if p.pos != len(p.s) {
		return nil, p.errorf("unexpected data after the array")
	}
	return out, nil
}

func (p *headerParser) value() (any, error) {
	p.skipSpace()
	c, ok := p.peek()
	if !ok {
		return nil, p.errorf("expected a value, found end of input")
	}
	switch {
	case c == '"':
		return p.str()
	case c == '{':
		p.pos++
		if err := p.expect('}'); err != nil {
			return nil, fmt.Errorf("only {} (undefined) is accepted as an object: %w", err)
		}
		return Undefined{}, nil
	case c == '[':
		return nil, p.errorf("nested arrays are not partition key values")
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	}
	for _, lit := range []struct {
		word string
		v    any
	}{{"true", true}, {"false", false}, {"null", nil}} {
		if len(p.s)-p.pos >= len(lit.word) && p.s[p.pos:p.pos+len(lit.word)] == lit.word {
			p.pos += len(lit.word)
			return lit.v, nil
		}
	}
	return nil, p.errorf("unexpected character %q", c)
}

// number scans a number with JSON's grammar.
func (p *headerParser) number() (any, error) {
	start := p.pos
	digits := func() int {
		n := 0
		for p.pos < len(p.s) && p.s[p.pos] >= '0' && p.s[p.pos] <= '9' {
			p.pos++
			n++
		}
		return n
	}
	if p.s[p.pos] == '-' {
		p.pos++
	}
	if c, ok := p.peek(); ok && c == '0' {
		p.pos++
	} else if digits() == 0 {
		return nil, p.errorf("invalid number")
	}
	if c, ok := p.peek(); ok && c == '.' {
		p.pos++
		if digits() == 0 {
			return nil, p.errorf("invalid number: no digits after '.'")
		}
	}
	if c, ok := p.peek(); ok && (c == 'e' || c == 'E') {
		p.pos++
		if c, ok := p.peek(); ok && (c == '+' || c == '-') {
			p.pos++
		}
		if digits() == 0 {
			return nil, p.errorf("invalid number: no digits in exponent")
		}
	}
	f, err := strconv.ParseFloat(p.s[start:p.pos], 64)
	if err != nil {
		return nil, fmt.Errorf("number %s: %w", p.s[start:p.pos], err)
	}
	return f, nil
}

func (p *headerParser) hex(n int) (rune, error) {
	if len(p.s)-p.pos < n {
		return 0, p.errorf("truncated escape")
	}
	v, err := strconv.ParseUint(p.s[p.pos:p.pos+n], 16, 32)
	if err != nil {
		return 0, p.errorf("invalid escape \\%s", p.s[p.pos-1:p.pos+n])
	}
	p.pos += n
	return rune(v), nil
}

// str decodes a string literal. Invalid UTF-8 in the input and lone
// surrogates become U+FFFD, as with encoding/json; \xXX appends the raw byte.
func (p *headerParser) str() (string, error) {
	p.pos++ // opening quote
	var b []byte
	for {
		if p.pos >= len(p.s) {
			return "", p.errorf("unterminated string")
		}
		c := p.s[p.pos]
		switch {
		case c == '"':
			p.pos++
			return string(b), nil
		case c < 0x20:
			return "", p.errorf("control character %#x in string", c)
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRuneInString(p.s[p.pos:])
			p.pos += size
			b = utf8.AppendRune(b, r) // RuneError for invalid bytes
			continue
		case c != '\\':
			b = append(b, c)
			p.pos++
			continue
		}
		p.pos++
		if p.pos >= len(p.s) {
			return "", p.errorf("unterminated escape")
		}
		e := p.s[p.pos]
		p.pos++
		switch e {
		case '"', '\\', '/':
			b = append(b, e)
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'a': // Go only
			b = append(b, '\a')
		case 'v': // Go only
			b = append(b, '\v')
		case 'x': // Go only: one raw byte
			v, err := p.hex(2)
			if err != nil {
				return "", err
			}
			b = append(b, byte(v))
		case 'U': // Go only: a full code point
			r, err := p.hex(8)
			if err != nil {
				return "", err
			}
			if !utf8.ValidRune(r) {
				return "", p.errorf("invalid code point %#x", r)
			}
			b = utf8.AppendRune(b, r)
		case 'u':
			r, err := p.hex(4)
			if err != nil {
				return "", err
			}
			if utf16.IsSurrogate(r) {
				r = p.lowSurrogate(r)
			}
			b = utf8.AppendRune(b, r)
		default:
			return "", p.errorf("invalid escape \\%c", e)
		}
	}
}

// lowSurrogate completes the high surrogate hi with a following \uXXXX low
// surrogate, or returns U+FFFD (consuming nothing) when there is none.
func (p *headerParser) lowSurrogate(hi rune) rune {
	if len(p.s)-p.pos >= 6 && p.s[p.pos] == '\\' && p.s[p.pos+1] == 'u' {
		save := p.pos
		p.pos += 2
		lo, err := p.hex(4)
		if err == nil {
			if r := utf16.DecodeRune(hi, lo); r != utf8.RuneError {
				return r
			}
		}
		p.pos = save
	}
	return utf8.RuneError
}
