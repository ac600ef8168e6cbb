package feed

import (
	"fmt"
	"strings"
	"testing"
)

func TestEstimateLag(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		session  int64
		first    int64
		hasItems bool
		want     int64
	}{
		{"pending changes", 100, 91, true, 10},
		{"exactly one pending", 100, 100, true, 1},
		{"caught up: no items", 100, 0, false, 0},
		{"caught up on an empty partition", 0, 0, false, 0},
		{"missing _lsn is the sentinel 1", 100, 0, true, 1},
		{"unknown session LSN with items clamps to 0", 0, 5, true, 0},
		{"item newer than the session token clamps to 0", 10, 12, true, 0},
		{"first item at LSN 1", 7, 1, true, 7},
		{"negative session without items is the sentinel", -1, 0, false, 1},
	}
	for _, tt := range tests {
		if got := EstimateLag(tt.session, tt.first, tt.hasItems); got != tt.want {
			t.Errorf("%s: EstimateLag(%d, %d, %v) = %d, want %d", tt.name, tt.session, tt.first, tt.hasItems, got, tt.want)
		}
	}
}

func TestParseSessionLSN(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want int64
	}{
		{"0:-1#12345", 12345},
		{"0:1#12345#3=12000", 12345},
		{"0:12345", 12345},
		{"12:-1#7", 7},
		{"", 0},
		{"0:", 0},
		{"0:-1#", 0},
		{"0:-1#abc", 0},
		{"42", 42},
		{"0:-1#9223372036854775807", 9223372036854775807},
	}
	for _, tt := range tests {
		if got := ParseSessionLSN(tt.in); got != tt.want {
			t.Errorf("ParseSessionLSN(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

func FuzzParseSessionLSN(f *testing.F) {
	f.Add("0", int64(-1), int64(12), "")
	f.Add("17", int64(1), int64(5), "#3=4")
	f.Add("", int64(0), int64(0), "#2=1#3=9")
	f.Fuzz(func(t *testing.T, id string, version, lsn int64, regions string) {
		if strings.ContainsAny(id, ":#") || (regions != "" && regions[0] != '#') {
			t.Skip()
		}
		// The global LSN is the second '#' field after the first ':', whatever follows it.
		token := fmt.Sprintf("%s:%d#%d%s", id, version, lsn, regions)
		if got := ParseSessionLSN(token); got != lsn {
			t.Fatalf("ParseSessionLSN(%q) = %d, want %d", token, got, lsn)
		}
		// Without a '#', the single field is the LSN.
		token = fmt.Sprintf("%s:%d", id, lsn)
		if got := ParseSessionLSN(token); got != lsn {
			t.Fatalf("ParseSessionLSN(%q) = %d, want %d", token, got, lsn)
		}
	})
}
