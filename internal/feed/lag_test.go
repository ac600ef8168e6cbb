package feed

import "testing"

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
