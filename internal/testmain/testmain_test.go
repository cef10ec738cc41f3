package testmain

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evfwd/evfwd/internal/testsize"
)

func TestMain(m *testing.M) { Run(m) }

// TestEveryPackageUsesRun: a test package added without Run would pay the
// race runtime's second at exit again, so each one calls it.
func TestEveryPackageUsesRun(t *testing.T) {
	root := filepath.Join("..", "..")
	self := filepath.Join(root, "internal", "testmain")
	tested := map[string]bool{} // directory → calls Run
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() && path != root {
			// A directory with a go.mod of its own is another module
			// (deploy/kubernetes/validate), not one of evfwd's packages.
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir
			}
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		dir := filepath.Dir(path)
		calls := strings.Contains(string(src), "testmain.Run(m") || dir == self
		tested[dir] = tested[dir] || calls
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(tested) < 10 {
		t.Fatalf("found %d test packages under %s; is the walk looking in the right place?", len(tested), root)
	}
	for dir, calls := range tested {
		if !calls {
			t.Errorf("%s: no TestMain calling testmain.Run(m)", dir)
		}
	}
}

// TestNoRaceExitSleep: under -race the binary runs with the exit sleep
// off, whether the runner set GORACE or Run started it again.
func TestNoRaceExitSleep(t *testing.T) {
	if !testsize.Race || !canReexec {
		t.Skip("only under -race, where a process can replace itself")
	}
	if g := os.Getenv("GORACE"); !strings.Contains(g, "atexit_sleep_ms") {
		t.Errorf("GORACE=%q: the race runtime sleeps a second at exit", g)
	}
}
