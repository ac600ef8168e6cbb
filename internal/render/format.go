package render

import (
	"fmt"
	"strings"
)

// Format is an output format chosen with -o/--output.
type Format string

// Output formats. FormatAuto means "not chosen": each command resolves it with Resolve.
const (
	FormatAuto  Format = ""
	FormatTable Format = "table"
	FormatJSON  Format = "json"
	FormatJSONL Format = "jsonl"
)

// FormatNames lists the values -o accepts, for help text and completion.
var FormatNames = []string{string(FormatTable), string(FormatJSON), string(FormatJSONL)}

// ParseFormat parses the value of -o. The empty string is FormatAuto.
func ParseFormat(s string) (Format, error) {
	switch f := Format(strings.ToLower(strings.TrimSpace(s))); f {
	case FormatAuto, FormatTable, FormatJSON, FormatJSONL:
		return f, nil
	}
	return FormatAuto, fmt.Errorf("invalid output format %q: want one of %s", s, strings.Join(FormatNames, ", "))
}

// IsJSON reports whether f writes JSON (a document or JSON lines).
func (f Format) IsJSON() bool { return f == FormatJSON || f == FormatJSONL }

// Resolve returns f when it was chosen, else the default for where stdout goes: a table on a
// terminal, pipe (FormatJSON or FormatJSONL, as the command decides) otherwise.
func (f Format) Resolve(stdoutTTY bool, pipe Format) Format {
	if f != FormatAuto {
		return f
	}
	if stdoutTTY {
		return FormatTable
	}
	return pipe
}

// String returns the flag value of f ("" for FormatAuto).
func (f Format) String() string { return string(f) }
