package version

import (
	"runtime/debug"
	"testing"
)

func TestResolve(t *testing.T) {
	stamped := func(settings ...string) *debug.BuildInfo {
		bi := &debug.BuildInfo{Main: debug.Module{Path: "github.com/evfwd/evfwd", Version: "(devel)"}}
		for i := 0; i < len(settings); i += 2 {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
		}
		return bi
	}
	const rev = "0123456789abcdef0123456789abcdef01234567"
	tests := []struct {
		name   string
		linker Info
		bi     *debug.BuildInfo
		want   Info
	}{
		{"no build info", Info{}, nil, Info{Version: "dev", Commit: "unknown", Date: "unknown"}},
		{"no vcs stamp (-buildvcs=false)", Info{}, stamped("-buildvcs", "false"),
			Info{Version: "dev", Commit: "unknown", Date: "unknown"}},
		{"clean clone", Info{}, stamped("vcs", "git", "vcs.revision", rev, "vcs.time", "2025-01-02T03:04:05Z", "vcs.modified", "false"),
			Info{Version: "dev", Commit: rev, Date: "2025-01-02T03:04:05Z", Committed: true}},
		{"dirty clone", Info{}, stamped("vcs.revision", rev, "vcs.time", "2025-01-02T03:04:05Z", "vcs.modified", "true"),
			Info{Version: "dev", Commit: rev + "+dirty", Date: "2025-01-02T03:04:05Z", Committed: true}},
		{"go install of a tagged module", Info{},
			&debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}},
			Info{Version: "v1.2.3", Commit: "unknown", Date: "unknown"}},
		{"linker wins", Info{Version: "1.0.0", Commit: "abc", Date: "2024-01-01"},
			stamped("vcs.revision", rev, "vcs.time", "2025-01-02T03:04:05Z", "vcs.modified", "true"),
			Info{Version: "1.0.0", Commit: "abc", Date: "2024-01-01"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := resolve(tt.linker, tt.bi); got != tt.want {
				t.Errorf("resolve = %+v, want %+v", got, tt.want)
			}
		})
	}
}
