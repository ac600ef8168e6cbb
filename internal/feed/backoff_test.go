package feed

import (
	"testing"
	"time"
)

func TestBackoff_Wait(t *testing.T) {
	t.Parallel()
	b := Backoff{Min: time.Second, Max: 30 * time.Second}
	for _, tc := range []struct {
		n    int
		want time.Duration
	}{
		{0, time.Second},
		{1, time.Second},
		{2, 2 * time.Second},
		{3, 4 * time.Second},
		{5, 16 * time.Second},
		{6, 30 * time.Second}, // 32s, capped
		{1000, 30 * time.Second},
	} {
		if got := b.Wait(tc.n); got != tc.want {
			t.Errorf("Wait(%d) = %s, want %s", tc.n, got, tc.want)
		}
	}
	// A cap below the first wait wins, as a cap.
	if got := (Backoff{Min: time.Second, Max: 300 * time.Millisecond}).Wait(1); got != 300*time.Millisecond {
		t.Errorf("Wait(1) with Max < Min = %s, want 300ms", got)
	}
}
