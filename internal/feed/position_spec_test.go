package feed

import (
	"strings"
	"testing"
	"time"
)

func TestParsePosition(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in      string
		want    PositionSpec
		wantErr string
	}{
		{in: "now", want: PositionSpec{Kind: PositionNow}},
		{in: " Now ", want: PositionSpec{Kind: PositionNow}},
		{in: "beginning", want: PositionSpec{Kind: PositionBeginning}},
		{in: "BEGINNING", want: PositionSpec{Kind: PositionBeginning}},
		{in: "2026-11-30T10:00:00Z", want: PositionSpec{Kind: PositionTime, Time: now.Add(-2 * time.Hour)}},
		{in: "2026-11-30T11:00:00+01:00", want: PositionSpec{Kind: PositionTime, Time: now.Add(-2 * time.Hour)}},
		{in: "2026-11-30T11:59:59.25Z", want: PositionSpec{Kind: PositionTime, Time: now.Add(-750 * time.Millisecond)}},
		{in: "2027-01-01T00:00:00Z", want: PositionSpec{Kind: PositionTime, Time: time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)}},
		{in: "-1h", want: PositionSpec{Kind: PositionTime, Time: now.Add(-time.Hour), Relative: true}},
		{in: "-2h30m", want: PositionSpec{Kind: PositionTime, Time: now.Add(-150 * time.Minute), Relative: true}},
		{in: "+5m", want: PositionSpec{Kind: PositionTime, Time: now.Add(5 * time.Minute), Relative: true}},
		{in: "-0s", want: PositionSpec{Kind: PositionTime, Time: now, Relative: true}},
		{in: "@pos.json", want: PositionSpec{Kind: PositionFile, File: "pos.json"}},
		{in: "@ dir/my state.json ", want: PositionSpec{Kind: PositionFile, File: "dir/my state.json"}},
		{in: "lsn:42", want: PositionSpec{Kind: PositionLSN, LSN: 42}},
		{in: " LSN: 7", want: PositionSpec{Kind: PositionLSN, LSN: 7}},
		{in: "lsn:0", wantErr: "positive LSN"},
		{in: "lsn:x", wantErr: "positive LSN"},

		{in: "", wantErr: "empty position"},
		{in: "   ", wantErr: "empty position"},
		{in: "@", wantErr: "missing file name"},
		{in: "1h", wantErr: `a duration needs a sign: -1h is that long ago`},
		{in: "90m", wantErr: "needs a sign"},
		{in: "-15", wantErr: "bad duration"},
		{in: "-", wantErr: "bad duration"},
		{in: "--15m", wantErr: "must be positive"},
		{in: "-+15m", wantErr: "must be positive"},
		{in: "+-15m", wantErr: "must be positive"},
		{in: "yesterday", wantErr: "want beginning, now, an RFC 3339 time, -<duration>, lsn:<N> or @<file>"},
		{in: "2026-11-30", wantErr: "RFC 3339"},
		{in: "end", wantErr: "RFC 3339"},
	}
	for _, tt := range tests {
		got, err := ParsePosition(tt.in, now)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParsePosition(%q) = %+v, %v; want error containing %q", tt.in, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParsePosition(%q): %v", tt.in, err)
			continue
		}
		if got.Kind != tt.want.Kind || !got.Time.Equal(tt.want.Time) || got.File != tt.want.File || got.Relative != tt.want.Relative || got.LSN != tt.want.LSN {
			t.Errorf("ParsePosition(%q) = %+v, want %+v", tt.in, got, tt.want)
		}
	}
}

func TestPosition_StartFrom(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		in      string
		want    StartFrom
		wantErr string
	}{
		{in: "now", want: StartFrom{Kind: StartNow}},
		{in: "beginning", want: StartFrom{Kind: StartBeginning}},
		{in: "-1h", want: StartFrom{Kind: StartTime, Time: now.Add(-time.Hour)}},
		{in: "+1s", wantErr: "in the future"},
		{in: "2027-01-01T00:00:00Z", wantErr: "in the future"},
		{in: "@f", wantErr: "a file is not accepted here"},
	} {
		p, err := ParsePosition(tt.in, now)
		if err != nil {
			t.Fatalf("ParsePosition(%q): %v", tt.in, err)
		}
		got, err := p.StartFrom(now)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%q: StartFrom = %+v, %v; want error containing %q", tt.in, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got.Kind != tt.want.Kind || !got.Time.Equal(tt.want.Time) {
			t.Errorf("%q: StartFrom = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
	}
}

// FuzzParsePosition checks that the parser never panics and that every position it accepts
// formats into text it reads back as the same position.
func FuzzParsePosition(f *testing.F) {
	for _, s := range []string{"now", "beginning", "2026-01-02T15:04:05Z", "2026-01-02T15:04:05.123456789+05:30",
		"-15m", "+2h30m", "-1.5h", "@state.json", "@", "1h", "--1h", "-", "+", "", " @ x ", "-9223372036854775807ns",
		"0000-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"} {
		f.Add(s)
	}
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePosition(s, now)
		if err != nil {
			if p != (PositionSpec{}) {
				t.Fatalf("ParsePosition(%q) failed with a position %+v", s, p)
			}
			return
		}
		text := FormatPosition(p)
		q, err := ParsePosition(text, now)
		if err != nil {
			t.Fatalf("ParsePosition(%q) = %+v, formatted %q, which does not parse: %v", s, p, text, err)
		}
		if q.Kind != p.Kind || !q.Time.Equal(p.Time) || q.File != p.File {
			t.Fatalf("ParsePosition(%q) = %+v, formatted %q, read back as %+v", s, p, text, q)
		}
	})
}
