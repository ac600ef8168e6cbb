package query

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

type tokenKind int

const (
	tokEOF tokenKind = iota
	tokIdent
	tokParam
	tokNumber
	tokString
	tokPunct
)

type token struct {
	kind tokenKind
	text string  // identifier, parameter (with '@') or punctuation as written
	str  string  // decoded string literal
	num  float64 // number literal
	pos  int     // byte offset in the query
}

func (t token) String() string {
	switch t.kind {
	case tokEOF:
		return "end of query"
	case tokString:
		return strconv.Quote(t.str)
	default:
		return fmt.Sprintf("%q", t.text)
	}
}

// is reports whether t is the punctuation p or the keyword p (any case).
func (t token) is(p string) bool {
	switch t.kind {
	case tokPunct:
		return t.text == p
	case tokIdent:
		return strings.EqualFold(t.text, p)
	}
	return false
}

func isIdentStart(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isIdentPart(c byte) bool {
	return isIdentStart(c) || (c >= '0' && c <= '9')
}

func lex(src string) ([]token, error) {
	var toks []token
	i := 0
	for {
		for i < len(src) && strings.IndexByte(" \t\r\n", src[i]) >= 0 {
			i++
		}
		if i >= len(src) {
			return append(toks, token{kind: tokEOF, pos: i}), nil
		}
		start := i
		c := src[i]
		switch {
		case isIdentStart(c):
			for i < len(src) && isIdentPart(src[i]) {
				i++
			}
			toks = append(toks, token{kind: tokIdent, text: src[start:i], pos: start})
		case c == '@':
			i++
			for i < len(src) && isIdentPart(src[i]) {
				i++
			}
			if i == start+1 {
				return nil, fmt.Errorf("offset %d: '@' without a parameter name", start)
			}
			toks = append(toks, token{kind: tokParam, text: src[start:i], pos: start})
		case c >= '0' && c <= '9', c == '.' && i+1 < len(src) && src[i+1] >= '0' && src[i+1] <= '9':
			for i < len(src) && (src[i] >= '0' && src[i] <= '9' || src[i] == '.') {
				i++
			}
			if i < len(src) && (src[i] == 'e' || src[i] == 'E') {
				i++
				if i < len(src) && (src[i] == '+' || src[i] == '-') {
					i++
				}
				for i < len(src) && src[i] >= '0' && src[i] <= '9' {
					i++
				}
			}
			if i < len(src) && isIdentPart(src[i]) {
				return nil, fmt.Errorf("offset %d: invalid number %q", start, src[start:i+1])
			}
			f, err := strconv.ParseFloat(src[start:i], 64)
			if err != nil {
				return nil, fmt.Errorf("offset %d: invalid number %q", start, src[start:i])
			}
			toks = append(toks, token{kind: tokNumber, text: src[start:i], num: f, pos: start})
		case c == '\'' || c == '"':
			s, n, err := lexString(src[i:])
			if err != nil {
				return nil, fmt.Errorf("offset %d: %w", start, err)
			}
			i += n
			toks = append(toks, token{kind: tokString, text: src[start:i], str: s, pos: start})
		default:
			p := ""
			for _, op := range []string{"!=", "<>", "<=", ">=", "=", "<", ">", "(", ")", "[", "]", "{", "}", ",", ".", "*", "-", ":"} {
				if strings.HasPrefix(src[i:], op) {
					p = op
					break
				}
			}
			if p == "" {
				r, _ := utf8.DecodeRuneInString(src[i:])
				return nil, fmt.Errorf("offset %d: unexpected character %q", start, r)
			}
			i += len(p)
			toks = append(toks, token{kind: tokPunct, text: p, pos: start})
		}
	}
}

// lexString decodes the quoted string at the start of s and returns it with
// the number of bytes consumed.
func lexString(s string) (string, int, error) {
	quote := s[0]
	var b strings.Builder
	i := 1
	for {
		if i >= len(s) {
			return "", 0, fmt.Errorf("unterminated string")
		}
		c := s[i]
		if c == quote {
			return b.String(), i + 1, nil
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			b.WriteRune(r) // invalid UTF-8 becomes U+FFFD, as in JSON
			i += size
			continue
		}
		if c != '\\' {
			b.WriteByte(c)
			i++
			continue
		}
		if i+1 >= len(s) {
			return "", 0, fmt.Errorf("unterminated string")
		}
		e := s[i+1]
		i += 2
		switch e {
		case '\'', '"', '\\', '/':
			b.WriteByte(e)
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'u':
			r, ok := hex4(s[i:])
			if !ok {
				return "", 0, fmt.Errorf("invalid \\u escape")
			}
			i += 4
			if utf16.IsSurrogate(r) {
				if lo, ok := hex4(strings.TrimPrefix(s[i:], `\u`)); ok && strings.HasPrefix(s[i:], `\u`) {
					if dec := utf16.DecodeRune(r, lo); dec != utf8.RuneError {
						r = dec
						i += 6
					}
				}
			}
			b.WriteRune(r) // a lone surrogate becomes U+FFFD
		default:
			return "", 0, fmt.Errorf("invalid escape \\%c", e)
		}
	}
}

func hex4(s string) (rune, bool) {
	if len(s) < 4 {
		return 0, false
	}
	v, err := strconv.ParseUint(s[:4], 16, 32)
	return rune(v), err == nil
}
