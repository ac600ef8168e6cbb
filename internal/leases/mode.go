package leases

import "strings"

// Lease modes as .NET writes them in Mode; Java keeps INCREMENTAL / FULL_FIDELITY in its state.
const (
	ModeIncremental  = "Incremental Feed"
	ModeFullFidelity = "Full-Fidelity Feed"
)

// Java's names of the same modes, in the Mode of a Java EPK lease's state.
const (
	JavaModeIncremental  = "INCREMENTAL"
	JavaModeFullFidelity = "FULL_FIDELITY"
)

// The functions below are the one mode-name codec of cfp: the processor, the hygiene checks and
// the Java state encoder all map names through them.

// DotNetMode maps a mode name as either SDK writes it to .NET's name: ModeFullFidelity for
// "Full-Fidelity Feed" or "FULL_FIDELITY" (any case), ModeIncremental for anything else, ""
// included (a lease without a Mode is incremental).
func DotNetMode(m string) string {
	if strings.EqualFold(m, ModeFullFidelity) || strings.EqualFold(m, JavaModeFullFidelity) {
		return ModeFullFidelity
	}
	return ModeIncremental
}

// JavaMode maps a mode name as either SDK writes it to Java's name, by the same rule as
// DotNetMode.
func JavaMode(m string) string {
	if DotNetMode(m) == ModeFullFidelity {
		return JavaModeFullFidelity
	}
	return JavaModeIncremental
}

// ParseMode returns .NET's name of m when m is one of the four names the SDKs write (.NET's or
// Java's, any case); ok is false for anything else, "" included.
func ParseMode(m string) (dotnet string, ok bool) {
	for _, known := range []string{ModeIncremental, ModeFullFidelity, JavaModeIncremental, JavaModeFullFidelity} {
		if strings.EqualFold(m, known) {
			return DotNetMode(m), true
		}
	}
	return "", false
}
