package feed

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ParseStart parses a start position (ParsePosition's grammar without @file): "now",
// "beginning", an RFC 3339 time, or "-<duration>" (that long before now, e.g. "-15m"). A time
// in the future is an error, since the change feed cannot start after the present.
func ParseStart(s string, now time.Time) (StartFrom, error) {
	p, err := ParsePosition(s, now)
	if err != nil {
		return StartFrom{}, err
	}
	return p.StartFrom(now)
}

// ParseUntil parses an end time (ParsePosition's grammar without beginning and @file): an RFC
// 3339 time, "-<duration>" (before now), "+<duration>" (after now) or "now". An empty string
// means no end and returns the zero time.
func ParseUntil(s string, now time.Time) (time.Time, error) {
	if strings.TrimSpace(s) == "" {
		return time.Time{}, nil
	}
	p, err := ParsePosition(s, now)
	if u := (*unsignedError)(nil); errors.As(err, &u) {
		return time.Time{}, fmt.Errorf("%w, +%s that long from now", err, u.s)
	}
	if errors.Is(err, errNotAPosition) {
		return time.Time{}, fmt.Errorf("end position %q: want now, an RFC 3339 time, -<duration> or +<duration>", strings.TrimSpace(s))
	}
	if err != nil {
		return time.Time{}, err
	}
	switch p.Kind {
	case PositionNow:
		return now, nil
	case PositionTime:
		return p.Time, nil
	}
	return time.Time{}, fmt.Errorf("end position %q: want now, an RFC 3339 time, -<duration> or +<duration>", strings.TrimSpace(s))
}

// FormatStart renders a start position in the form ParseStart reads back ("now", "beginning",
// RFC 3339 with nanoseconds). A continuation renders as the raw continuation.
func FormatStart(s StartFrom) string {
	switch s.Kind {
	case StartNow:
		return "now"
	case StartBeginning:
		return "beginning"
	case StartTime:
		return s.Time.UTC().Format(time.RFC3339Nano)
	default:
		return s.Continuation
	}
}

// ContinuationLSN decodes a raw change-feed continuation (an ETag such as `"42"`, quotes
// optional) into its LSN. It reports false for "*", the empty string and anything that is not a
// non-negative decimal LSN.
func ContinuationLSN(c string) (int64, bool) {
	c = strings.TrimSpace(c)
	c = strings.TrimPrefix(c, "W/")
	if len(c) >= 2 && c[0] == '"' && c[len(c)-1] == '"' {
		c = c[1 : len(c)-1]
	}
	n, err := strconv.ParseInt(c, 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}

// LSNContinuation is the raw continuation that resumes after lsn: the quoted decimal LSN.
func LSNContinuation(lsn int64) string {
	return `"` + strconv.FormatInt(lsn, 10) + `"`
}

// NowAnchorSkew is how far before its start a processor host anchors a "now" start (.NET's 1s).
const NowAnchorSkew = time.Second

// AnchorNow returns the start that a processor host started at started gives leases without a
// continuation. A latest-version "now" becomes the time started less NowAnchorSkew, as in .NET
// 3.59+: "now" is the host's start, once, so that a lease without a continuation that the host
// takes over later (its owner died before its first checkpoint) still delivers the changes
// written since then. Any other start, and every start of an all-versions-and-deletes processor
// (whose leases start when they are first read, and cannot start at a time), is unchanged.
func AnchorNow(s StartFrom, mode FeedMode, started time.Time) StartFrom {
	if s.Kind != StartNow || mode != LatestVersion {
		return s
	}
	return StartFrom{Kind: StartTime, Time: started.Add(-NowAnchorSkew)}
}
