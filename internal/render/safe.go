package render

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Safe returns s with every character that could drive a terminal written as a visible escape:
// C0 controls (ESC, BEL, CR, LF, TAB, ... as \e \a \r \n \t or \xNN), DEL, C1 controls
// (U+0080..U+009F, as \u0080), the bidirectional overrides and isolates (U+202A..U+202E,
// U+2066..U+2069) and invalid UTF-8 (\xNN). A document id with "ESC ] 0;..." cannot set the
// window title, "ESC [2J" cannot clear the screen, "ESC [8m" cannot hide the text after it, and
// a newline cannot fake a table row. Every string from the service or the user that reaches a
// terminal or a table as text goes through it, SGR sequences (colours) included: cfp adds its
// own colours after escaping (Table.StateColumn). JSON output is escaped as JSON instead, on a
// terminal only (appendTerminalJSON): encoding/json escapes C0 controls but writes C1 and bidi
// controls raw, as JSON allows, and --jq writes strings raw.
func Safe(s string) string {
	clean := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f || c >= 0x80 {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		c := s[i]
		if c < 0x80 {
			switch {
			case c == '\n':
				b.WriteString(`\n`)
			case c == '\r':
				b.WriteString(`\r`)
			case c == '\t':
				b.WriteString(`\t`)
			case c == 0x1b:
				b.WriteString(`\e`)
			case c == 0x07:
				b.WriteString(`\a`)
			case c < 0x20 || c == 0x7f:
				fmt.Fprintf(&b, `\x%02x`, c)
			default:
				b.WriteByte(c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, c)
		case (r >= 0x80 && r <= 0x9f) || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// mayNeedTerminalEscape reports whether appendTerminalJSON may change b: whether it holds a
// byte outside printable ASCII and JSON's whitespace.
func mayNeedTerminalEscape(b []byte) bool {
	for _, c := range b {
		if c < 0x20 && c != '\t' && c != '\n' && c != '\r' || c >= 0x7f {
			return true
		}
	}
	return false
}

// appendTerminalJSON appends the JSON text b to dst for a terminal: the characters a terminal
// would obey are written as JSON escapes. They are C0 controls other than the whitespace JSON
// allows between tokens (tab, line feed, carriage return), DEL, C1 controls (an 8-bit CSI),
// the bidirectional overrides and isolates, and bytes of invalid UTF-8 (as \ufffd, as
// encoding/json writes them). In valid JSON these can only stand inside strings, where \uXXXX
// is the same character: a program reading the output gets the same value. Off a terminal JSON
// is written as it is.
func appendTerminalJSON(dst, b []byte) []byte {
	if !mayNeedTerminalEscape(b) {
		return append(dst, b...)
	}
	const hexDigits = "0123456789abcdef"
	esc := func(dst []byte, r rune) []byte {
		return append(dst, '\\', 'u', hexDigits[r>>12&0xf], hexDigits[r>>8&0xf], hexDigits[r>>4&0xf], hexDigits[r&0xf])
	}
	for i := 0; i < len(b); {
		c := b[i]
		if c < 0x80 {
			if c < 0x20 && c != '\t' && c != '\n' && c != '\r' || c == 0x7f {
				dst = esc(dst, rune(c))
			} else {
				dst = append(dst, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			dst = esc(dst, utf8.RuneError)
		case (r >= 0x80 && r <= 0x9f) || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069):
			dst = esc(dst, r)
		default:
			dst = append(dst, b[i:i+n]...)
		}
		i += n
	}
	return dst
}
