package sqlite_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/evfwd/evfwd/pkg/store/sqlite"
)

// A path that cannot be the store is refused in words by Open, and nothing
// is made beside it, not even the lock file (issue 30, row 7).
func TestPathInWords(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, path string
		mustExist  bool
		want       string
	}{
		{"a directory", dir, false, "store " + dir + ": is a directory; name a file in it, such as " + filepath.Join(dir, "evfwd.db")},
		{"under a file", filepath.Join(file, "evfwd.db"), false, "store " + filepath.Join(file, "evfwd.db") + ": " + file + " is not a directory"},
		{"no such directory", filepath.Join(dir, "a", "b", "evfwd.db"), true, "store " + filepath.Join(dir, "a", "b", "evfwd.db") + ": no such directory " + filepath.Join(dir, "a")},
		{"no such file", filepath.Join(dir, "none.db"), true, "store " + filepath.Join(dir, "none.db") + ": no such file"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := sqlite.Open(context.Background(), tt.path, sqlite.Options{MustExist: tt.mustExist})
			checkPathError(t, "Open", err, tt.want)
			if tt.mustExist && !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%v does not match fs.ErrNotExist", err)
			}
		})
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("left behind in %s: %v", dir, entries)
	}
}

// A file evfwd may not read and write: as root every file is, so the
// check is skipped there (TestPathInWords runs always).
func TestPathPermissionDenied(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads and writes every file")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "evfwd.db")
	if err := os.WriteFile(path, nil, 0o000); err != nil {
		t.Fatal(err)
	}
	want := "store " + path + ": permission denied: evfwd must read and write the file and create files beside it (evfwd.db-wal, evfwd.db.lock)"
	_, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	checkPathError(t, "Open", err, want)
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("left behind: %v", entries)
	}
}

func checkPathError(t *testing.T, call string, err error, want string) {
	t.Helper()
	var pe *sqlite.PathError
	if !errors.As(err, &pe) || err.Error() != want || !pe.InputError() {
		t.Errorf("%s: %v (%T), want the PathError %q", call, err, err, want)
	}
}
