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
		{"no build info", Info{}, nil, Info{"dev", "unknown", "unknown"}},
		{"no vcs stamp (-buildvcs=false)", Info{}, stamped("-buildvcs", "false"),
			Info{"dev", "unknown", "unknown"}},
		{"clean clone", Info{}, stamped("vcs", "git", "vcs.revision", rev, "vcs.time", "2025-01-02T03:04:05Z", "vcs.modified", "false"),
			Info{"dev", rev, "2025-01-02T03:04:05Z"}},
		{"dirty clone", Info{}, stamped("vcs.revision", rev, "vcs.time", "2025-01-02T03:04:05Z", "vcs.modified", "true"),
			Info{"dev", rev + "+dirty", "2025-01-02T03:04:05Z"}},
		{"go install of a tagged module", Info{},
			&debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}},
			Info{"v1.2.3", "unknown", "unknown"}},
		{"linker wins", Info{"1.0.0", "abc", "2024-01-01"},
			stamped("vcs.revision", rev, "vcs.time", "2025-01-02T03:04:05Z", "vcs.modified", "true"),
			Info{"1.0.0", "abc", "2024-01-01"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := resolve(tt.linker, tt.bi); got != tt.want {
				t.Errorf("resolve = %+v, want %+v", got, tt.want)
			}
		})
	}
}
