package sqlite

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// PathError is a store path that cannot be the store's file for a reason
// of the path itself: a directory, no permission, no such directory. It
// is the user's to fix (a usage error), and says why in words, where
// SQLite would say "unable to open database file (14)". It wraps the
// system's error (fs.ErrNotExist, fs.ErrPermission, ...).
type PathError struct {
	Path   string
	Reason string
	Err    error
}

func (e *PathError) Error() string { return "store " + e.Path + ": " + e.Reason }

func (e *PathError) Unwrap() error { return e.Err }

// InputError says that the path given is at fault: commands exit 2.
func (e *PathError) InputError() bool { return true }

// CheckPath says, before anything is created beside it (the lock file, the
// WAL), whether path can be the store's file: an existing file evfwd can
// read and write, or a missing one (unless mustExist) in a directory that
// is there or can be made. It opens nothing for longer than the check.
func CheckPath(path string, mustExist bool) error {
	fi, err := os.Stat(path)
	switch {
	case err == nil && fi.IsDir():
		return &PathError{path, fmt.Sprintf("is a directory; name a file in it, such as %s", filepath.Join(path, "evfwd.db")), syscall.EISDIR}
	case err == nil:
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			return pathError(path, err)
		}
		return f.Close()
	case errors.Is(err, fs.ErrNotExist) && mustExist:
		if dir := missingDir(path); dir != "" {
			return &PathError{path, "no such directory " + dir, err}
		}
		return &PathError{path, "no such file", err}
	case errors.Is(err, fs.ErrNotExist):
		return nil // created, with its directory, by Lock or Open
	}
	return pathError(path, err)
}

// pathError puts err, met on path or beside it, in words.
func pathError(path string, err error) error {
	switch {
	case errors.Is(err, fs.ErrPermission):
		return &PathError{path, "permission denied: evfwd must read and write the file and create files beside it (" + filepath.Base(path) + "-wal, " + filepath.Base(path) + ".lock)", err}
	case errors.Is(err, syscall.EISDIR):
		return &PathError{path, "is a directory", err}
	case errors.Is(err, syscall.ENOTDIR):
		return &PathError{path, notDir(path) + " is not a directory", err}
	case errors.Is(err, syscall.EROFS):
		return &PathError{path, "read-only file system", err}
	case errors.Is(err, fs.ErrNotExist):
		if dir := missingDir(path); dir != "" {
			return &PathError{path, "no such directory " + dir, err}
		}
	}
	return fmt.Errorf("store %s: %w", path, err)
}

// missingDir is the first directory of path's that is not there, "" when
// its directory is.
func missingDir(path string) string {
	missing := ""
	for dir := filepath.Dir(path); ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(dir); err == nil {
			return missing
		}
		missing = dir
		if filepath.Dir(dir) == dir {
			return missing
		}
	}
}

// notDir is the first of path's directories that is a file.
func notDir(path string) string {
	var dirs []string
	for dir := filepath.Dir(path); filepath.Dir(dir) != dir; dir = filepath.Dir(dir) {
		dirs = append(dirs, dir)
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if fi, err := os.Stat(dirs[i]); err == nil && !fi.IsDir() {
			return dirs[i]
		}
	}
	return filepath.Dir(path)
}
