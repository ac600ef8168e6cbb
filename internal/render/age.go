package render

import (
	"fmt"
	"time"
)

// Age says how long ago t was, relative to now, for eyes: "just now", "45s ago", "3m ago",
// "5h ago", "2d ago"; a time in the future reads "in 3m". The zero time is Empty.
func Age(t, now time.Time) string {
	if t.IsZero() {
		return Empty
	}
	d := now.Sub(t)
	suffix := " ago"
	prefix := ""
	if d < 0 {
		d = -d
		prefix, suffix = "in ", ""
	}
	var s string
	switch {
	case d < time.Second:
		return "just now"
	case d < time.Minute:
		s = fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		s = fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		s = fmt.Sprintf("%dh", int(d/time.Hour))
	default:
		s = fmt.Sprintf("%dd", int(d/(24*time.Hour)))
	}
	return prefix + s + suffix
}

// Timestamp formats t for a table cell: Age on a terminal, RFC 3339 (UTC) in a pipe. The zero
// time is Empty.
func (s *IOStreams) Timestamp(t, now time.Time) string {
	if t.IsZero() {
		return Empty
	}
	if s.IsStdoutTTY {
		return Age(t, now)
	}
	return t.UTC().Format(time.RFC3339)
}
