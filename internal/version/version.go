// Package version is evfwd's build identity: set by the linker in release
// builds, read from the module's build info otherwise (`go install`, or
// `go build` in a clone, which stamps the VCS revision).
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
type Info struct {
	Version, Commit, Date string
	// Committed says Date is the commit's time from the VCS stamp, not
	// the build's: a clone build has no build date.
	Committed bool
}

// Get returns the build identity, falling back to the module's build info
// and then to "dev"/"unknown".
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	return resolve(Info{Version: version, Commit: commit, Date: date}, bi)
}

// resolve fills what the linker left empty from bi (nil when the binary has
// no build info), then the placeholders. Builds with -buildvcs=false carry
// no vcs.* settings, so their commit stays "unknown".
func resolve(info Info, bi *debug.BuildInfo) Info {
	if bi != nil {
		if info.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			info.Version = bi.Main.Version
		}
		var revision, modified string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				revision = s.Value
			case "vcs.time":
				if info.Date == "" {
					info.Date, info.Committed = s.Value, true
				}
			case "vcs.modified":
				modified = s.Value
			}
		}
		if info.Commit == "" && revision != "" {
			info.Commit = revision
			// The revision alone would claim a tree the binary was not built from.
			if modified == "true" {
				info.Commit += "+dirty"
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
