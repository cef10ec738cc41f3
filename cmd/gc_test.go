package cmd

import (
	"math"
	"runtime/debug"
	"testing"
)

func TestSoftLimit(t *testing.T) {
	for _, tc := range []struct {
		live uint64
		want int64
	}{
		{0, serveMinLimit},
		{20 << 20, serveMinLimit},         // GOGC 400 under the limit
		{40 << 20, serveMinLimit},         // 2×40+16 = 96
		{100 << 20, 2*(100<<20) + 16<<20}, // never tighter than GOGC 100
	} {
		if got := softLimit(tc.live); got != tc.want {
			t.Errorf("softLimit(%d MiB) = %d MiB, want %d MiB", tc.live>>20, got>>20, tc.want>>20)
		}
	}
}

// tuneGC sets GOGC 400 and a soft limit unless GOGC is set, leaves a set
// GOMEMLIMIT alone, and restores what was there.
func TestTuneGC(t *testing.T) {
	gc, limit := debug.SetGCPercent(100), debug.SetMemoryLimit(math.MaxInt64)
	defer func() { debug.SetGCPercent(gc); debug.SetMemoryLimit(limit) }()
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	current := func() (int, int64) {
		g := debug.SetGCPercent(-1)
		debug.SetGCPercent(g)
		return g, debug.SetMemoryLimit(-1)
	}
	for _, tc := range []struct {
		name      string
		env       map[string]string
		gc        int
		limitSet  bool
		restoreGC int
	}{
		{"defaults", nil, serveGCPercent, true, 100},
		{"GOMEMLIMIT set", map[string]string{"GOMEMLIMIT": "1GiB"}, serveGCPercent, false, 100},
		{"GOGC set", map[string]string{"GOGC": "50"}, 100, false, 100},
	} {
		restore := tuneGC(env(tc.env))
		g, l := current()
		restore()
		if g != tc.gc || (l != math.MaxInt64) != tc.limitSet {
			t.Errorf("%s: GOGC %d, limit %d; want GOGC %d, limit set %v", tc.name, g, l, tc.gc, tc.limitSet)
		}
		if l >= 0 && tc.limitSet && l < serveMinLimit {
			t.Errorf("%s: limit %d under the least", tc.name, l)
		}
		if g, l := current(); g != tc.restoreGC || l != math.MaxInt64 {
			t.Errorf("%s: after restore GOGC %d, limit %d", tc.name, g, l)
		}
	}
}
