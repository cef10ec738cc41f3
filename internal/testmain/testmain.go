// Package testmain is the TestMain of every test binary in evfwd, and the
// directory they keep between runs (CacheDir).
//
// Under -race the runtime sleeps a second before the process exits, so
// that a goroutine still running can report a race first: a second paid
// by each of some forty test binaries. The testing package already fails
// the test during which a race happens, so the tests run with
// GORACE=atexit_sleep_ms=0: .ci/run and scripts/test-under-load.sh set it,
// and when it is not set (a plain `go test -race ./...`) Run starts the
// binary again with it (raceNoExitSleep), as the race runtime reads GORACE
// only as the process starts. The exit is otherwise the usual one: a race
// reported after the tests still fails the binary.
//
// Run also points TMPDIR at Linux's shared-memory tmpfs when the user has
// not set it (see memoryTempDir): the tests' SQLite stores commit with an
// fsync each, and on a disk shared with other work those waits left both
// cores idle for a quarter of some runs. A tmpfs is a real file system:
// files, modes, sizes, locks and a SIGKILLed process behave as on a disk;
// only a crash of the machine, which no test makes, would differ.
package testmain

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// Run runs the tests, then each of after (what the tests of the binary
// share, to stop), and exits with the tests' status. Call it from TestMain:
//
//	func TestMain(m *testing.M) { testmain.Run(m) }
func Run(m *testing.M, after ...func()) {
	raceNoExitSleep()
	if os.Getenv("TMPDIR") == "" {
		if dir := memoryTempDir(); dir != "" {
			// Children (serve, a killed sync) inherit it.
			os.Setenv("TMPDIR", dir)
		}
	}
	code := m.Run()
	for _, f := range after {
		f()
	}
	os.Exit(code)
}

// Parallel lets n tests of the binary run at once (t.Parallel), when the
// command line does not say how many (-parallel): for a package whose
// tests spend seconds waiting on real time, as for a lease to run out or a
// cut link to be noticed, which with the default of one test per core
// left both cores idle while its waiting tests held every place. Call it
// from TestMain, before Run.
func Parallel(n int) {
	if !flag.Parsed() {
		flag.Parse()
	}
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		flag.Set("test.parallel", strconv.Itoa(n))
	}
}

// CacheDir returns a directory that the tests of the source tree holding
// the working directory keep between runs (a binary go build leaves alone
// when it is up to date), one per tree, so that two clones never share
// one: in the user's cache directory, named after the tree's root, found
// from the working directory up to go.mod.
func CacheDir(name string) (string, error) {
	root, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(root)
		if parent == root {
			return "", errors.New("no go.mod above the working directory")
		}
		root = parent
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	sum := sha256.Sum256([]byte(root))
	dir := filepath.Join(cache, "evfwd-test", hex.EncodeToString(sum[:8]), name)
	return dir, os.MkdirAll(dir, 0o700)
}
