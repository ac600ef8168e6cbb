package render

import (
	"strings"
	"testing"
)

// TestSafe is the table of hostile strings: nothing that reaches a terminal through Safe can
// move the cursor, set the title, clear the screen, ring the bell or start a new line.
func TestSafe(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, in, want string }{
		{"plain", "order-17", "order-17"},
		{"unicode stays", "Bestellung-ü-注文", "Bestellung-ü-注文"},
		{"window title (OSC 0)", "x\x1b]0;pwned\x07y", `x\e]0;pwned\ay`},
		{"clear screen", "\x1b[2Jid", `\e[2Jid`},
		{"cursor up and erase", "\x1b[1A\x1b[Kfake", `\e[1A\e[Kfake`},
		{"newline fakes a row", "owner\nlease-9\thost-b", `owner\nlease-9\thost-b`},
		{"carriage return overwrites", "ok\rFAILED", `ok\rFAILED`},
		{"NUL and DEL", "a\x00b\x7fc", `a\x00b\x7fc`},
		{"C1 CSI", "a\u009b2Jb", `a\u009b2Jb`},
		{"C1 OSC", "a\u009d0;t\u009cb", `a\u009d0;t\u009cb`},
		{"bidi override", "abc\u202edcba", `abc\u202edcba`},
		{"bidi isolate", "x\u2066y\u2069", `x\u2066y\u2069`},
		{"invalid UTF-8", "a\xffb", `a\xffb`},
		{"8-bit ESC alone", "\x1b", `\e`},
	}
	for _, tc := range cases {
		if got := Safe(tc.in); got != tc.want {
			t.Errorf("%s: Safe(%q) = %q, want %q", tc.name, tc.in, got, tc.want)
		}
		if got := Safe(tc.in); strings.ContainsAny(got, "\x1b\x07\n\r\x00\u009b\u009d") {
			t.Errorf("%s: Safe left a control character in %q", tc.name, got)
		}
	}
	// Table cells keep cfp's own colours (SGR) and nothing else.
	if got := safeStyled("\x1b[1;32mok\x1b[0m \x1b]0;t\x07"); got != "\x1b[1;32mok\x1b[0m \\e]0;t\\a" {
		t.Errorf("safeStyled = %q", got)
	}
}

// FuzzSafe: whatever the input, Safe's output holds no C0 or C1 control character and no
// invalid UTF-8.
func FuzzSafe(f *testing.F) {
	f.Add("x\x1b]0;t\x07\n\u009b\xff")
	f.Fuzz(func(t *testing.T, s string) {
		got := Safe(s)
		for _, r := range got {
			if r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) || r == 0xfffd && !strings.ContainsRune(s, 0xfffd) {
				t.Fatalf("Safe(%q) = %q holds %U", s, got, r)
			}
		}
	})
}

func TestTable_EscapesHostileCells(t *testing.T) {
	t.Parallel()
	for _, tty := range []bool{false, true} {
		ios, _, out, _ := Test()
		ios.IsStdoutTTY = tty
		tbl := NewTable(ios, "lease", "owner")
		tbl.Row("0", "host-a\n1\thost-b")
		tbl.Row("\x1b]0;title\x07", "\x1b[2J")
		if err := tbl.Render(); err != nil {
			t.Fatal(err)
		}
		if strings.Count(out.String(), "\n") != 3 || strings.Contains(out.String(), "\x1b]") || strings.Contains(out.String(), "\x1b[2J") {
			t.Errorf("tty=%v: table = %q: a cell added a row or a terminal sequence", tty, out.String())
		}
	}
}
