package feed

import (
	"testing"
	"time"
)

// TestCommonPeriod: the renew interval of a host is read from the gaps between its renewals
// that the listings saw, which are whole multiples of it when it renews more often than this
// host lists.
func TestCommonPeriod(t *testing.T) {
	s := time.Second
	for _, tc := range []struct {
		gaps []time.Duration
		want time.Duration
	}{
		{nil, 0},
		{[]time.Duration{17 * s, 34 * s, 17 * s}, 17 * s},
		{[]time.Duration{17*s + 20*time.Millisecond, 34*s + 30*time.Millisecond}, 17*s + 20*time.Millisecond},
		{[]time.Duration{10 * s, 15 * s, 10 * s}, 5 * s}, // renewals every 5s, listings every 13s
		{[]time.Duration{10 * s, 10 * s}, 10 * s},        // nothing shows a shorter period yet
		{[]time.Duration{14 * s, 21 * s}, 7 * s},
		// One renewal 0.9s late (a retried write) is still a 17s host, not one that renews
		// every 2s; irregular gaps fall back to the shortest (found by review: a keep-alive of
		// 0, every held lease rewritten at every look of the renewer).
		{[]time.Duration{17 * s, 17 * s, 17*s + 900*time.Millisecond}, 17 * s},
		{[]time.Duration{17 * s, 19 * s}, 17 * s},
	} {
		if got := commonPeriod(tc.gaps); got != tc.want {
			t.Errorf("commonPeriod(%v) = %s, want %s", tc.gaps, got, tc.want)
		}
	}
}
