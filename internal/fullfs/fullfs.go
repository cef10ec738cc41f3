// Package fullfs gives tests a real file system that fills up: a small
// tmpfs of their own, and a way to fill it. The store's and serve's
// disk-full tests share it.
package fullfs

import (
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
)

// Mount mounts a tmpfs of size (as mount's size= takes it, "4m") on a new
// directory for t and unmounts it when t ends, or skips t where mounting
// is not permitted (CI runs as root, where it is).
func Mount(t testing.TB, size string) string {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("a full file system is made with a Linux tmpfs")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a %s tmpfs to fill (needs root): %v: %s", size, err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() { // before TempDir's cleanup, registered first
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
			exec.Command("umount", "-l", dir).Run()
		}
	})
	return dir
}

// Fill appends to path until the file system is full, then gives back
// keep bytes.
func Fill(t testing.TB, path string, keep int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			break
		}
	}
	for n := len(buf) / 2; n > 0; n /= 2 { // the last partial block
		f.Write(buf[:n])
	}
	if keep > 0 {
		fi, err := f.Stat()
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(max(fi.Size()-keep, 0)); err != nil {
			t.Fatal(err)
		}
	}
}
