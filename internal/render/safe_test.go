package render

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
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
		{"SGR hides text", "\x1b[8msecret\x1b[0m", `\e[8msecret\e[0m`},
		{"SGR recolours", "\x1b[1;32mowned\x1b[0m", `\e[1;32mowned\e[0m`},
	}
	for _, tc := range cases {
		if got := Safe(tc.in); got != tc.want {
			t.Errorf("%s: Safe(%q) = %q, want %q", tc.name, tc.in, got, tc.want)
		}
		if got := Safe(tc.in); strings.ContainsAny(got, "\x1b\x07\n\r\x00\u009b\u009d") {
			t.Errorf("%s: Safe left a control character in %q", tc.name, got)
		}
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
		for _, color := range []bool{false, true} {
			ios, _, out, _ := Test()
			ios.IsStdoutTTY, ios.ColorEnabled = tty, color
			tbl := NewLeaseTable(ios)
			tbl.Row("0", "host-a\n1\thost-b")
			tbl.Row("\x1b]0;title\x07", "\x1b[2J")
			// SGR from data: hidden text, a fake green "owned", an 8-bit CSI, a raw C1 byte.
			tbl.Row("1", "-FF", "\x1b[8mhidden\x1b[0m", "\x1b[32mowned\x1b[0m", "\u009b8m7")
			tbl.Row("2", "-FF", "a\x9bb", StateOwned)
			if err := tbl.Render(); err != nil {
				t.Fatal(err)
			}
			got := out.String()
			if strings.Count(got, "\n") != 5 || strings.Contains(got, "\x1b]") || strings.Contains(got, "\x1b[2J") {
				t.Errorf("tty=%v color=%v: table = %q: a cell added a row or a terminal sequence", tty, color, got)
			}
			// No escape sequence from the data survives; cfp's own colours are the only SGR, and
			// only on a terminal with colour: bold headers, the green of the real "owned".
			for _, bad := range []string{"\x1b[8m", "\u009b", "\x9bb"} {
				if strings.Contains(got, bad) {
					t.Errorf("tty=%v color=%v: table = %q passes %q from a cell", tty, color, got, bad)
				}
			}
			for _, want := range []string{`\e[8mhidden\e[0m`, `\e[32mowned\e[0m`, `\u009b8m7`, `a\x9bb`} {
				if !strings.Contains(got, want) {
					t.Errorf("tty=%v color=%v: table = %q lacks the escaped cell %q", tty, color, got, want)
				}
			}
			want := 0
			if tty && color {
				want = 1
			}
			if n := strings.Count(got, "\x1b[32m"); n != want {
				t.Errorf("tty=%v color=%v: %d green cells, want %d (the real owned lease, on a colour terminal):\n%q", tty, color, n, want, got)
			}
		}
	}
}

// TestStatus_EscapesSequencesFromMessages: the status line's messages quote rejected input
// (cfp import) and names; an SGR sequence in them is shown, not obeyed.
func TestStatus_EscapesSequencesFromMessages(t *testing.T) {
	t.Parallel()
	ios, _, _, errOut := Test()
	ios.IsStderrTTY = true
	s := NewStatus(ios)
	s.Update("reading %s", "\x1b[8mhidden")
	s.Println("cfp: line 3: %s", "\x1b[30;40mblack on black")
	s.Done("done %s", "\x1b[5mblink")
	got := errOut.String()
	for _, bad := range []string{"\x1b[8m", "\x1b[30;40m", "\x1b[5m"} {
		if strings.Contains(got, bad) {
			t.Errorf("status output %q passes %q", got, bad)
		}
	}
}

// TestJSONOutput_OnATerminalEscapesWhatItWouldObey: JSON output (views, -o jsonl, tail's
// changes, --jq results) of a value holding an 8-bit CSI (U+009B, "hide text" with 8m), a bidi
// override and DEL: on a terminal none of them is written raw and the JSON still reads back to
// the same value; a --jq string, written raw like jq -r, is escaped as a table cell is. In a
// pipe the output is the data as it is. encoding/json escapes C0 controls but writes C1 and
// bidi controls raw, which a terminal obeys.
func TestJSONOutput_OnATerminalEscapesWhatItWouldObey(t *testing.T) {
	t.Parallel()
	const hostile = "a\u009b8mhidden\u202eb\x7fc"
	item := json.RawMessage(`{"id":"` + hostile + `"}`)
	raw := []string{"\u009b", "\u202e", "\x7f"}
	q, err := CompileQuery(".id")
	if err != nil {
		t.Fatal(err)
	}
	qObj, err := CompileQuery("{id}")
	if err != nil {
		t.Fatal(err)
	}
	outputs := []struct {
		name  string
		json  bool // the output is JSON (else --jq raw strings)
		write func(ios *IOStreams) error
	}{
		{"view -o json", true, func(ios *IOStreams) error {
			return NewPrinter(ios, FormatJSON, nil).Print(context.Background(), map[string]string{"id": hostile}, nil)
		}},
		{"view -o jsonl", true, func(ios *IOStreams) error {
			return NewPrinter(ios, FormatJSONL, nil).Print(context.Background(), []map[string]string{{"id": hostile}}, nil)
		}},
		{"view --jq object", true, func(ios *IOStreams) error {
			return NewPrinter(ios, FormatJSON, qObj).Print(context.Background(), map[string]string{"id": hostile}, nil)
		}},
		{"view --jq string", false, func(ios *IOStreams) error {
			return NewPrinter(ios, FormatJSON, q).Print(context.Background(), map[string]string{"id": hostile}, nil)
		}},
		{"tail -o jsonl", true, func(ios *IOStreams) error {
			w := NewChangeWriter(ios, NewChangePrinter(ios, FormatJSONL, nil, false))
			if err := w.Emit(feed.Change{Item: item}); err != nil {
				return err
			}
			return w.Close(false, time.Second)
		}},
		{"tail -o json --envelope", true, func(ios *IOStreams) error {
			w := NewChangeWriter(ios, NewChangePrinter(ios, FormatJSON, nil, true))
			if err := w.Emit(feed.Change{Item: item}); err != nil {
				return err
			}
			return w.Close(false, time.Second)
		}},
		{"tail --jq string", false, func(ios *IOStreams) error {
			w := NewChangeWriter(ios, NewChangePrinter(ios, FormatJSONL, q, false))
			if err := w.Emit(feed.Change{Item: item}); err != nil {
				return err
			}
			return w.Close(false, time.Second)
		}},
	}
	for _, o := range outputs {
		for _, tty := range []bool{true, false} {
			ios, _, out, _ := Test()
			ios.IsStdoutTTY = tty
			if err := o.write(ios); err != nil {
				t.Fatalf("%s: %v", o.name, err)
			}
			got := out.String()
			for _, r := range raw {
				if tty && strings.Contains(got, r) {
					t.Errorf("%s on a terminal: output %q holds %q raw", o.name, got, r)
				}
			}
			if !tty && !strings.Contains(got, "\u009b") {
				t.Errorf("%s in a pipe: output %q is not the data as it is (U+009B escaped)", o.name, got)
			}
			if o.json && !strings.Contains(got, hostile) {
				// Whatever the escapes, the JSON reads back to the same id.
				var v any
				dec := json.NewDecoder(strings.NewReader(got))
				found := false
				for dec.More() {
					if err := dec.Decode(&v); err != nil {
						t.Fatalf("%s, terminal %v: output %q is not JSON: %v", o.name, tty, got, err)
					}
					found = found || strings.Contains(fmt.Sprint(v), hostile)
				}
				if !found {
					t.Errorf("%s, terminal %v: output %q does not read back to the id %q", o.name, tty, got, hostile)
				}
			}
		}
	}
}
