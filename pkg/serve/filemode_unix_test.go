//go:build unix

package serve

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
)

// TestFileModesUnderOpenUmask: what serve creates in its state directory,
// the dev source's keys, the store, its -wal, -shm and lock, is the
// owner's alone (0600, the directories 0700) even under umask 000. The
// umask is the process's: this test is not parallel, and the package's
// parallel tests wait until it is done.
func TestFileModesUnderOpenUmask(t *testing.T) {
	old := syscall.Umask(0)
	t.Cleanup(func() { syscall.Umask(old) })

	state := filepath.Join(t.TempDir(), "state", "evfwd")
	if _, err := DevSource(state); err != nil {
		t.Fatal(err)
	}
	storeDir := filepath.Join(t.TempDir(), "store")
	db := filepath.Join(storeDir, "evfwd.db")
	st, release, err := openLocked(context.Background(), "sqlite://"+db, time.Now, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if _, err := st.List(context.Background(), store.Filter{}); err != nil {
		t.Fatal(err)
	}
	want := map[string]fs.FileMode{
		filepath.Dir(state): 0o700, state: 0o700, DevSourcePath(state): 0o600,
		storeDir: 0o700, db: 0o600, db + "-wal": 0o600, db + "-shm": 0o600, db + ".lock": 0o600,
	}
	for name, mode := range want {
		fi, err := os.Stat(name)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if got := fi.Mode().Perm(); got != mode {
			t.Errorf("%s: mode %#o, want %#o", name, got, mode)
		}
	}
}
