package leases

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// The lease properties cfp writes for estimators and other tools to judge a lease from the
// lease container alone (docs/protocol-leases.md, "cfp's properties"). .NET hosts keep the
// properties of a lease they rewrite and ignore these; Java leases have no properties, so
// their documents never carry them.
const (
	// PropProgressAt is when the lease's continuation last advanced (RFC 3339, UTC), and
	// PropProgressLSN the checkpoint LSN it advanced to. Store.Update writes both whenever a
	// write moves the checkpoint LSN forward. A stamp whose LSN is not the lease's checkpoint
	// LSN is stale (a .NET host moved the continuation since) or shows a rewind (the
	// checkpoint is lower).
	PropProgressAt  = "cfpProgressAt"
	PropProgressLSN = "cfpProgressLSN"
	// PropFailure is the last failure of the lease's batches (a handler error, or a batch in
	// flight for too long) as its cfp owner recorded it: a Failure as JSON.
	PropFailure = "cfpFailure"
)

// Progress is the record of the last advance of a lease's continuation (PropProgressAt,
// PropProgressLSN).
type Progress struct {
	At  time.Time
	LSN int64
}

// ProgressOf returns the progress record of l; ok is false when l has none (a lease no cfp
// host checkpointed, a Java lease) or it does not parse.
func ProgressOf(l *Lease) (p Progress, ok bool) {
	if l == nil {
		return Progress{}, false
	}
	at, lsn := l.Properties[PropProgressAt], l.Properties[PropProgressLSN]
	if at == "" || lsn == "" {
		return Progress{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, at)
	if err != nil {
		return Progress{}, false
	}
	n, err := strconv.ParseInt(lsn, 10, 64)
	if err != nil || n < 0 {
		return Progress{}, false
	}
	return Progress{At: t, LSN: n}, true
}

// stampProgress records on n, a new version of old, that its continuation advanced at now,
// when n's checkpoint LSN is higher than old's (or old had none). A write that does not move
// the LSN forward (a renew, a rewind) keeps the record as it was. Only the .NET families
// persist it.
func stampProgress(old, n *Lease, now time.Time) {
	if n.Family != FamilyDotNetV0 && n.Family != FamilyDotNetV1 {
		return
	}
	nl, ok := n.LSN()
	if !ok {
		return
	}
	if ol, had := old.LSN(); had && nl <= ol {
		return
	}
	if n.Properties == nil {
		n.Properties = map[string]string{}
	}
	n.Properties[PropProgressAt] = now.UTC().Format(time.RFC3339Nano)
	n.Properties[PropProgressLSN] = strconv.FormatInt(nl, 10)
}

// Bounds of a Failure as written (SetFailure): the error's length, and the lines and bytes of
// the handler's stderr kept.
const (
	MaxFailureError       = 300
	MaxFailureStderrLines = 5
	MaxFailureStderrBytes = 1024
)

// Failure is the last failure of a lease's batches, as the cfp host that owned the lease
// recorded it in PropFailure. The JSON names are part of the lease document format cfp
// writes (and of `cfp leases show -o json`).
type Failure struct {
	// Error is the handler's error (account keys redacted); for a batch in flight, what it
	// waits for.
	Error string `json:"error"`
	// ExitStatus is the --exec command's exit status, when it exited.
	ExitStatus *int `json:"exit_status,omitempty"`
	// Stderr is the last lines of the command's stderr (at most MaxFailureStderrLines lines
	// and MaxFailureStderrBytes bytes, keys redacted).
	Stderr []string `json:"stderr,omitempty"`
	// Attempts is how many deliveries of the batch failed since Since.
	Attempts int `json:"attempts"`
	// Since is the first failure of the batch, At the last time the record was written.
	Since time.Time `json:"since"`
	At    time.Time `json:"at"`
	// InFlightSince, when set, says the batch has been in the handler since then and has not
	// returned (a hung delegate): Error says so, ExitStatus is unset.
	InFlightSince *time.Time `json:"in_flight_since,omitempty"`
	// Checkpoint is the lease's continuation when the batch failed: the batch is the one
	// after it. The record is current while the lease's continuation is still this one.
	Checkpoint string `json:"checkpoint"`
	// Owner is the host that recorded the failure; Items the size of the batch.
	Owner string `json:"owner"`
	Items int    `json:"items,omitempty"`
}

// FailureOf returns the failure recorded on l, nil when there is none or it does not parse.
func FailureOf(l *Lease) *Failure {
	if l == nil || l.Properties[PropFailure] == "" {
		return nil
	}
	var f Failure
	if err := json.Unmarshal([]byte(l.Properties[PropFailure]), &f); err != nil {
		return nil
	}
	return &f
}

// CurrentFailure returns the failure recorded on l when it is about l's current position (the
// lease's continuation has not moved since), nil otherwise.
func CurrentFailure(l *Lease) *Failure {
	f := FailureOf(l)
	if f == nil || f.Checkpoint != l.Continuation {
		return nil
	}
	return f
}

// SetFailure writes f, cut to its bounds, as l's failure record; nil removes it.
func SetFailure(l *Lease, f *Failure) {
	if f == nil {
		delete(l.Properties, PropFailure)
		return
	}
	c := *f
	c.Error = clip(strings.Join(strings.Fields(c.Error), " "), MaxFailureError)
	c.Stderr = TailLines(c.Stderr, MaxFailureStderrLines, MaxFailureStderrBytes)
	b, err := json.Marshal(c)
	if err != nil {
		return
	}
	if l.Properties == nil {
		l.Properties = map[string]string{}
	}
	l.Properties[PropFailure] = string(b)
}

// TailLines returns the last lines of lines, at most maxLines of them and maxBytes in all; a
// single line longer than maxBytes keeps its end.
func TailLines(lines []string, maxLines, maxBytes int) []string {
	if len(lines) > maxLines {
		lines = lines[len(lines)-maxLines:]
	}
	var out []string
	total := 0
	for i := len(lines) - 1; i >= 0; i-- {
		s := lines[i]
		if total+len(s) > maxBytes {
			if len(out) == 0 {
				s = clipStart(s, maxBytes)
				out = append(out, s)
			}
			break
		}
		total += len(s)
		out = append(out, s)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// clip cuts s to at most n bytes (on a rune boundary), marking the cut with "...".
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "..."
}

// clipStart keeps the last n bytes of s (on a rune boundary), marking the cut with "...".
func clipStart(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[1:]
	}
	// The cut may fall inside a secret (a key whose start is cut off no longer matches its
	// redaction): the partial first word goes too.
	if i := strings.IndexFunc(s, unicode.IsSpace); i >= 0 {
		s = s[i:]
	} else {
		s = ""
	}
	return "..." + s
}
