//go:build race

package sim

// raceEnabled: the race detector makes each seed several times slower; TestSim_CI runs fewer.
const raceEnabled = true
