package feed

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestRateLog_OneLinePerPeriodWithTheCountHeldBack: a failure repeated every second logs one line
// per period, the next one saying how many it held back; another key is not held back by it; a
// reset after a success logs the next failure at once.
func TestRateLog_OneLinePerPeriodWithTheCountHeldBack(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))
	r := newRateLog(log, func() time.Time { return now }, 30*time.Second)
	ctx := context.Background()
	renew := limitKey("renew lease", "0")
	for range 31 { // 0s .. 30s: the first line, then 29 held back, then the line at 30s
		r.logAt(ctx, slog.LevelWarn, renew, "lease operation failed", "lease", "0")
		r.logAt(ctx, slog.LevelWarn, limitKey("renew lease", "1"), "lease operation failed", "lease", "1")
		now = now.Add(time.Second)
	}
	r.reset(renew)
	r.logAt(ctx, slog.LevelWarn, renew, "lease operation failed", "lease", "0")

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	var of0 []string
	for _, l := range lines {
		if strings.Contains(l, "lease=0") {
			of0 = append(of0, l)
		}
	}
	want := []string{
		`level=WARN msg="lease operation failed" lease=0`,
		`level=WARN msg="lease operation failed" lease=0 suppressed=29`,
		`level=WARN msg="lease operation failed" lease=0`,
	}
	if strings.Join(of0, "\n") != strings.Join(want, "\n") {
		t.Errorf("lines of lease 0:\n%s\nwant:\n%s", strings.Join(of0, "\n"), strings.Join(want, "\n"))
	}
	if n := len(lines) - len(of0); n != 2 {
		t.Errorf("%d lines for lease 1, want 2 (its own period)", n)
	}
}
