// Package buildinfo holds cfp's version, commit and build date, set with -X at release time and
// read from the module's build info for `go install`.
package buildinfo

import "runtime/debug"

// Set by the release build with -ldflags "-X github.com/cfp-dev/cfp/internal/buildinfo.Version=…".
var (
	Version = "dev"
	Commit  = ""
	Date    = ""
)

// Info returns version, commit and date, falling back to the Go build info.
func Info() (version, commit, date string) {
	version, commit, date = Version, Commit, Date
	if bi, ok := debug.ReadBuildInfo(); ok {
		if version == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if commit == "" {
					commit = s.Value
				}
			case "vcs.time":
				if date == "" {
					date = s.Value
				}
			}
		}
	}
	return version, commit, date
}
