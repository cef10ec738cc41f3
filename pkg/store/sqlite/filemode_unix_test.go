//go:build unix

package sqlite_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/sqlite"
	"github.com/evfwd/evfwd/pkg/store/storetest"
)

// TestFileModesUnderOpenUmask: the store's files hold every collected
// event, so the database, its -wal and -shm, and the lock file are the
// owner's alone (0600) and a directory made for them 0700, even under
// umask 000. The umask is the process's: this test is not parallel, and
// the parallel tests of the package wait until it is done.
func TestFileModesUnderOpenUmask(t *testing.T) {
	old := syscall.Umask(0)
	t.Cleanup(func() { syscall.Umask(old) })

	dir := filepath.Join(t.TempDir(), "state")
	path := filepath.Join(dir, "evfwd.db")
	ctx := context.Background()
	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Ingest(ctx, []store.Message{storetest.Msg("web", "a", 0, true)}); err != nil {
		t.Fatal(err)
	}
	want := map[string]fs.FileMode{
		dir: 0o700, path: 0o600, path + "-wal": 0o600, path + "-shm": 0o600, path + ".lock": 0o600,
	}
	for name, mode := range want {
		fi, err := os.Stat(name)
		if err != nil {
			t.Errorf("%s: %v", filepath.Base(name), err)
			continue
		}
		if got := fi.Mode().Perm(); got != mode {
			t.Errorf("%s: mode %#o, want %#o", filepath.Base(name), got, mode)
		}
	}
}
