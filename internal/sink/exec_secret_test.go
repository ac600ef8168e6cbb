package sink

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/cfp-dev/cfp/internal/feed"
)

// A secret that a delegate prints is redacted where it appears whole; the tail kept for a lease's
// failure record is cut from the front, and a cut through the secret must not leave a remnant
// that no redaction recognises (found by review: 64 of 88 key characters reached the lease).
// A nil Stderr discards the command's stderr, as documented (it panicked).
func TestExec_StderrTailKeepsNoRemnantOfACutSecret(t *testing.T) {
	key := strings.Repeat("K", 40) + strings.Repeat("Z", 48) // 88 characters, as a Cosmos DB key
	for _, tc := range []struct {
		name string
		line string
	}{
		// One long line: its kept end starts inside the key.
		{"long line", "AccountKey=" + key + strings.Repeat("y", 960)},
		// Many lines: the kept buffer starts inside the key.
		{"long stderr", strings.Repeat("x", 100) + key + strings.Repeat("\nsome output", 400)},
	} {
		for _, stderr := range []io.Writer{io.Discard, nil} {
			e := &Exec{Stderr: stderr, Command: "printf '%s\\n' \"$L\" >&2; exit 3", Env: []string{"L=" + tc.line}}
			err := e.Handle(context.Background(), feed.Batch{LeaseToken: "0"})
			var ee *ExecError
			if !errors.As(err, &ee) {
				t.Fatalf("%s: Handle = %v, want an *ExecError", tc.name, err)
			}
			tail := ee.StderrTail()
			if len(tail) == 0 {
				t.Errorf("%s: no stderr kept", tc.name)
			}
			for _, l := range tail {
				if strings.Contains(strings.ReplaceAll(l, key, "[REDACTED]"), "ZZZZZZZZ") {
					t.Errorf("%s: a remnant of the secret survives redaction: %.80q", tc.name, l)
				}
			}
		}
	}
}
