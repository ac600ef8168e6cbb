//go:build !race

package feed_test

// raceEnabled is true under the race detector, which slows hosts' timers unevenly.
const raceEnabled = false
