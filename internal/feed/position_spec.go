package feed

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// PositionKind says which form a PositionSpec was written in.
type PositionKind int

// Forms of a position.
const (
	// PositionNow is "now": the present.
	PositionNow PositionKind = iota
	// PositionBeginning is "beginning": before the oldest change still in the feed.
	PositionBeginning
	// PositionTime is an RFC 3339 time or a signed duration resolved against now.
	PositionTime
	// PositionFile is "@FILE": the positions saved in a file (a tail state file or a lease
	// export, depending on the command).
	PositionFile
	// PositionLSN is "lsn:N": just before the change at LSN N of one partition, so that the
	// feed starts with it. An LSN means something in one partition only: a command takes it
	// where it reads one range (tail --lease, tail --range).
	PositionLSN
)

// PositionGrammar is the one grammar of positions in a sentence, for help and errors.
const PositionGrammar = "beginning, now, an RFC 3339 time, -<duration>, lsn:<N> or @<file>"

// errNotAPosition is wrapped by ParsePosition's error for text that is in none of the forms.
var errNotAPosition = errors.New("not a position")

// unsignedError is a duration written without its sign. Its message offers -<duration>, which
// every position takes; ParseUntil, for ends, offers +<duration> too.
type unsignedError struct{ s string }

func (e *unsignedError) Error() string {
	return fmt.Sprintf("position %q: a duration needs a sign: -%s is that long ago", e.s, e.s)
}

// PositionSpec is a place in the change feed as a user writes it, in the one grammar that
// every cfp flag and argument taking a position reads (tail --from/--until, process --from,
// replay-from, leases reset --to; docs/user-guide.md, "Positions and durations"):
//
//	beginning          before the oldest change still in the feed
//	now                the present
//	<RFC 3339 time>    e.g. 2026-01-02T15:04:05Z or 2026-01-02T16:04:05+01:00
//	-<duration>        that long before now: -15m, -2h30m (Go durations: h, m, s, ms)
//	+<duration>        that long after now: an end only (--until +5m)
//	@<file>            the positions saved in a file
//	lsn:<N>            from the change at LSN N on, in one partition's range
//
// Each flag accepts the forms that make sense for it; a start refuses a time in the future,
// an end refuses beginning.
type PositionSpec struct {
	Kind PositionKind
	// Time is the absolute time of a PositionTime (a relative one resolved against now).
	Time time.Time
	// File is the file name of a PositionFile.
	File string
	// Relative says a PositionTime was written as a signed duration.
	Relative bool
	// LSN is the LSN of a PositionLSN (at least 1).
	LSN int64
}

// ParsePosition parses s in the position grammar (see PositionSpec), resolving relative times
// against now. Keywords are case-insensitive and blanks around s are ignored. It reads no
// file.
func ParsePosition(s string, now time.Time) (PositionSpec, error) {
	s = strings.TrimSpace(s)
	switch strings.ToLower(s) {
	case "":
		return PositionSpec{}, errors.New("empty position: want " + PositionGrammar)
	case "now":
		return PositionSpec{Kind: PositionNow}, nil
	case "beginning":
		return PositionSpec{Kind: PositionBeginning}, nil
	}
	if rest, ok := cutPrefixFold(s, "lsn:"); ok {
		n, err := strconv.ParseInt(strings.TrimSpace(rest), 10, 64)
		if err != nil || n < 1 {
			return PositionSpec{}, fmt.Errorf("position %q: want lsn:N with N a positive LSN", s)
		}
		return PositionSpec{Kind: PositionLSN, LSN: n}, nil
	}
	switch s[0] {
	case '@':
		if strings.TrimSpace(s[1:]) == "" {
			return PositionSpec{}, fmt.Errorf("position %q: missing file name after @", s)
		}
		return PositionSpec{Kind: PositionFile, File: strings.TrimSpace(s[1:])}, nil
	case '-', '+':
		d, err := time.ParseDuration(s[1:])
		if err != nil {
			return PositionSpec{}, fmt.Errorf("position %q: bad duration (want e.g. %c15m or %c2h30m): %w", s, s[0], s[0], err)
		}
		if d < 0 || strings.HasPrefix(s[1:], "+") {
			return PositionSpec{}, fmt.Errorf("position %q: the duration after the sign must be positive", s)
		}
		if s[0] == '-' {
			d = -d
		}
		return PositionSpec{Kind: PositionTime, Time: now.Add(d), Relative: true}, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return PositionSpec{}, &unsignedError{s: s}
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return PositionSpec{}, fmt.Errorf("position %q: want %s (e.g. 2026-01-02T15:04:05Z or -15m)%w", s, PositionGrammar, quiet{errNotAPosition})
	}
	return PositionSpec{Kind: PositionTime, Time: t}, nil
}

// cutPrefixFold is strings.CutPrefix, ignoring case.
func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix) {
		return s[len(prefix):], true
	}
	return s, false
}

// quiet wraps an error so that it can be matched with errors.Is without adding to the message.
type quiet struct{ err error }

func (quiet) Error() string   { return "" }
func (q quiet) Unwrap() error { return q.err }

// FormatPosition renders p in the form ParsePosition reads back: "now", "beginning", an
// absolute RFC 3339 time with nanoseconds (in its own offset, so that a year-0000 time east
// of UTC stays readable), or "@FILE".
func FormatPosition(p PositionSpec) string {
	switch p.Kind {
	case PositionBeginning:
		return "beginning"
	case PositionTime:
		return p.Time.Format(time.RFC3339Nano)
	case PositionFile:
		return "@" + p.File
	case PositionLSN:
		return "lsn:" + strconv.FormatInt(p.LSN, 10)
	default:
		return "now"
	}
}

// StartFrom turns a start position into where the change feed starts. A time after now is an
// error (the feed cannot start in the future); so is a file, which the caller reads.
func (p PositionSpec) StartFrom(now time.Time) (StartFrom, error) {
	switch p.Kind {
	case PositionNow:
		return StartFrom{Kind: StartNow}, nil
	case PositionBeginning:
		return StartFrom{Kind: StartBeginning}, nil
	case PositionFile:
		return StartFrom{}, fmt.Errorf("start position %q: a file is not accepted here", FormatPosition(p))
	case PositionLSN:
		return StartFrom{Kind: StartContinuation, Continuation: LSNContinuation(p.LSN - 1)}, nil
	}
	if p.Time.After(now) {
		return StartFrom{}, fmt.Errorf("start position %q is in the future", FormatPosition(p))
	}
	return StartFrom{Kind: StartTime, Time: p.Time}, nil
}
