package sqlite_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/sqlite"
)

// checkLocked fails t unless opening path fails at once with ErrLocked,
// in words that name the file and what holds it.
func checkLocked(t *testing.T, path string) {
	t.Helper()
	s, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	if err == nil {
		s.Close()
	}
	want := "lock " + path + ": store is in use by another evfwd serve (or process)"
	if !errors.Is(err, sqlite.ErrLocked) || err.Error() != want {
		t.Errorf("Open of a locked file: %v, want %q (ErrLocked)", err, want)
	}
}

// A Store holds its file's lock until Close: a second Open in the same
// process is refused, a tool's (NoRecover) opens beside it, and once the
// first is closed the file opens again.
func TestLockTwoOpens(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "evfwd.db")
	first, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !first.Locked() {
		t.Error("Locked() = false for a Store opened without NoRecover")
	}
	checkLocked(t, path)
	tool, err := sqlite.Open(ctx, path, sqlite.Options{NoRecover: true, MustExist: true})
	if err != nil {
		t.Fatalf("a tool's Open beside the Store: %v", err)
	}
	if tool.Locked() {
		t.Error("Locked() = true for a NoRecover Store")
	}
	if _, err := tool.List(ctx, store.Filter{}); err != nil {
		t.Error(err)
	}
	if err := tool.Close(); err != nil {
		t.Error(err)
	}
	checkLocked(t, path) // the tool's Close left the lock alone
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	again.Close()
}

// An Open that fails after it took the lock gives it back: a file that is
// no database is refused, and refused again the same way, not as locked.
func TestLockFailedOpenReleases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "evfwd.db")
	if err := os.WriteFile(path, []byte("not a database, but long enough to be read as one's header......"), 0o600); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := sqlite.Open(ctx, path, sqlite.Options{}); err == nil || errors.Is(err, sqlite.ErrLocked) {
			t.Fatalf("Open of a file that is no database: %v, want its own error", err)
		}
	}
}

// Another process holding the file's lock: Open is refused while it runs,
// and the lock dies with it (a kill leaves nothing behind).
func TestLockOtherProcess(t *testing.T) {
	if path := os.Getenv("EVFWD_LOCK_CHILD"); path != "" {
		if _, err := sqlite.Open(context.Background(), path, sqlite.Options{}); err != nil {
			t.Fatal(err)
		}
		fmt.Println("locked")
		io.Copy(io.Discard, os.Stdin) // until the parent kills it
		return
	}
	if testing.Short() {
		t.Skip("starts a process")
	}
	t.Parallel()
	path := filepath.Join(t.TempDir(), "evfwd.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockOtherProcess$")
	cmd.Env = append(os.Environ(), "EVFWD_LOCK_CHILD="+path)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(out)
	if !lines.Scan() || lines.Text() != "locked" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the child did not lock the store: %q, %v", lines.Text(), lines.Err())
	}
	checkLocked(t, path)
	cmd.Process.Kill()
	cmd.Wait()
	s, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	if err != nil {
		t.Fatalf("Open once the holder was killed: %v", err)
	}
	s.Close()
}
