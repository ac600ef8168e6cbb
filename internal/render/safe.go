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
// window title, "ESC [2J" cannot clear the screen, and a newline cannot fake a table row.
// Every string from the service or the user that reaches a terminal as text goes through it;
// JSON output needs nothing (encoding/json escapes C0 controls; C1 and bidi controls stay
// literal there, as JSON allows, for the program that reads it).
func Safe(s string) string { return safe(s, false) }

// safeStyled is Safe that keeps SGR sequences (ESC [ digits and ';' m): the colours cfp's own
// styles put in table cells and status lines. A hostile SGR can only recolour text.
func safeStyled(s string) string { return safe(s, true) }

func safe(s string, keepSGR bool) string {
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
		if keepSGR && c == 0x1b {
			if n := sgrLen(s[i:]); n > 0 {
				b.WriteString(s[i : i+n])
				i += n
				continue
			}
		}
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

// sgrLen is the length of the SGR sequence s starts with (ESC [ [0-9;]* m), or 0.
func sgrLen(s string) int {
	if len(s) < 3 || s[0] != 0x1b || s[1] != '[' {
		return 0
	}
	for i := 2; i < len(s) && i < 64; i++ {
		switch c := s[i]; {
		case c == 'm':
			return i + 1
		case (c >= '0' && c <= '9') || c == ';':
		default:
			return 0
		}
	}
	return 0
}
