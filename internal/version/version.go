// Package version is evfwd's build identity: set by the linker in release
// builds, read from the module's build info in `go install` builds.
package version

import "runtime/debug"

// Set by -ldflags "-X github.com/evfwd/evfwd/internal/version.version=..." and
// friends (see .goreleaser.yaml).
var (
	version = ""
	commit  = ""
	date    = ""
)

// Info is what `evfwd version` prints.
type Info struct{ Version, Commit, Date string }

// Get returns the build identity, falling back to the module's build info
// and then to "dev"/"unknown".
func Get() Info {
	info := Info{Version: version, Commit: commit, Date: date}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if info.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			info.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch {
			case s.Key == "vcs.revision" && info.Commit == "":
				info.Commit = s.Value
			case s.Key == "vcs.time" && info.Date == "":
				info.Date = s.Value
			}
		}
	}
	if info.Version == "" {
		info.Version = "dev"
	}
	if info.Commit == "" {
		info.Commit = "unknown"
	}
	if info.Date == "" {
		info.Date = "unknown"
	}
	return info
}

// Version is the short version string used in User-Agent headers.
func Version() string { return Get().Version }
