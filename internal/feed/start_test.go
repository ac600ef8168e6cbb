package feed

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

var now0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func TestParseStart(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    StartFrom
		wantErr string
	}{
		{in: "now", want: StartFrom{Kind: StartNow}},
		{in: " NOW ", want: StartFrom{Kind: StartNow}},
		{in: "beginning", want: StartFrom{Kind: StartBeginning}},
		{in: "Beginning", want: StartFrom{Kind: StartBeginning}},
		{in: "2026-11-30T10:00:00Z", want: StartFrom{Kind: StartTime, Time: now0.Add(-2 * time.Hour)}},
		{in: "2026-11-30T11:00:00+01:00", want: StartFrom{Kind: StartTime, Time: now0.Add(-2 * time.Hour)}},
		{in: "2026-11-30T11:59:59.5Z", want: StartFrom{Kind: StartTime, Time: now0.Add(-500 * time.Millisecond)}},
		{in: "-15m", want: StartFrom{Kind: StartTime, Time: now0.Add(-15 * time.Minute)}},
		{in: "-2h30m", want: StartFrom{Kind: StartTime, Time: now0.Add(-150 * time.Minute)}},
		{in: "-0s", want: StartFrom{Kind: StartTime, Time: now0}},
		{in: "", wantErr: "empty position"},
		{in: "@state.json", wantErr: "a file is not accepted here"},
		{in: "1h", wantErr: "needs a sign: -1h"},
		{in: "yesterday", wantErr: "RFC 3339"},
		{in: "2026-11-30", wantErr: "RFC 3339"},
		{in: "-15", wantErr: "bad duration"},
		{in: "--15m", wantErr: "positive"},
		{in: "+5m", wantErr: "future"},
		{in: "2027-01-01T00:00:00Z", wantErr: "future"},
	}
	for _, tt := range tests {
		got, err := ParseStart(tt.in, now0)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseStart(%q) error = %v, want containing %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseStart(%q): %v", tt.in, err)
			continue
		}
		if got.Kind != tt.want.Kind || !got.Time.Equal(tt.want.Time) || got.Continuation != tt.want.Continuation {
			t.Errorf("ParseStart(%q) = %+v, want %+v", tt.in, got, tt.want)
		}
	}
}

func TestParseUntil(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    time.Time
		wantErr bool
	}{
		{in: "", want: time.Time{}},
		{in: "now", want: now0},
		{in: "+10m", want: now0.Add(10 * time.Minute)},
		{in: "-1h", want: now0.Add(-time.Hour)},
		{in: "2027-01-01T00:00:00Z", want: time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)},
		{in: "beginning", wantErr: true},
		{in: "tomorrow", wantErr: true},
	}
	for _, tt := range tests {
		got, err := ParseUntil(tt.in, now0)
		if (err != nil) != tt.wantErr {
			t.Errorf("ParseUntil(%q) error = %v, wantErr %v", tt.in, err, tt.wantErr)
			continue
		}
		if !got.Equal(tt.want) {
			t.Errorf("ParseUntil(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestFormatStart_RoundTrip(t *testing.T) {
	t.Parallel()
	for _, s := range []StartFrom{
		{Kind: StartNow},
		{Kind: StartBeginning},
		{Kind: StartTime, Time: now0.Add(-1500 * time.Millisecond)},
	} {
		got, err := ParseStart(FormatStart(s), now0)
		if err != nil {
			t.Fatalf("%+v: %v", s, err)
		}
		if got.Kind != s.Kind || !got.Time.Equal(s.Time) {
			t.Errorf("round trip %+v -> %q -> %+v", s, FormatStart(s), got)
		}
	}
}

func TestContinuationLSN(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{`"42"`, 42, true},
		{`42`, 42, true},
		{` "0" `, 0, true},
		{`W/"7"`, 7, true},
		{`*`, 0, false},
		{``, 0, false},
		{`"-1"`, 0, false},
		{`"abc"`, 0, false},
		{`"42`, 0, false},
	}
	for _, tt := range tests {
		got, ok := ContinuationLSN(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("ContinuationLSN(%q) = %d, %v; want %d, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
	if c := LSNContinuation(42); c != `"42"` {
		t.Errorf("LSNContinuation(42) = %s", c)
	}
}

func FuzzParseStart(f *testing.F) {
	for _, s := range []string{"now", "beginning", "-15m", "+1h", "2026-11-30T10:00:00Z", "@x", "", "-", "2026-11-30T10:00:00.123456789+05:30"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseStart(s, now0)
		if err != nil {
			return
		}
		switch got.Kind {
		case StartNow, StartBeginning:
		case StartTime:
			if got.Time.After(now0) {
				t.Fatalf("ParseStart(%q) = %v, after now", s, got.Time)
			}
			back, err := ParseStart(FormatStart(got), now0)
			if err != nil || !back.Time.Equal(got.Time) {
				t.Fatalf("ParseStart(%q) = %v does not round-trip: %v %v", s, got.Time, back, err)
			}
		default:
			t.Fatalf("ParseStart(%q) kind %d", s, got.Kind)
		}
		if _, err := ParseUntil(s, now0); err != nil && got.Kind == StartTime {
			t.Fatalf("ParseUntil rejects %q that ParseStart accepts: %v", s, err)
		}
	})
}

func TestAnchorNow(t *testing.T) {
	t.Parallel()
	started := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	at := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		in   StartFrom
		mode FeedMode
		want StartFrom
	}{
		{"latest now is the start less a second", StartFrom{Kind: StartNow}, LatestVersion, StartFrom{Kind: StartTime, Time: started.Add(-time.Second)}},
		{"all-versions now stays now", StartFrom{Kind: StartNow}, AllVersionsAndDeletes, StartFrom{Kind: StartNow}},
		{"beginning stays", StartFrom{Kind: StartBeginning}, LatestVersion, StartFrom{Kind: StartBeginning}},
		{"a time stays", StartFrom{Kind: StartTime, Time: at}, LatestVersion, StartFrom{Kind: StartTime, Time: at}},
	} {
		if got := AnchorNow(tc.in, tc.mode, started); got != tc.want {
			t.Errorf("%s: AnchorNow(%+v, %s) = %+v, want %+v", tc.name, tc.in, tc.mode, got, tc.want)
		}
	}
}

func TestSentinelsMatchTypedErrors(t *testing.T) {
	t.Parallel()
	th := fmt.Errorf("read: %w", &ThrottledError{Status: 429, RetryAfter: time.Second})
	if !errors.Is(th, ErrThrottled) {
		t.Errorf("errors.Is(%v, ErrThrottled) = false", th)
	}
	mm := fmt.Errorf("bootstrap: %w", &ModeMismatchError{Lease: "0", LeaseMode: "Incremental Feed", ProcessorMode: "Full-Fidelity Feed"})
	if !errors.Is(mm, ErrModeMismatch) {
		t.Errorf("errors.Is(%v, ErrModeMismatch) = false", mm)
	}
	if errors.Is(th, ErrModeMismatch) || errors.Is(mm, ErrThrottled) {
		t.Error("a sentinel matches the other error type")
	}
}
