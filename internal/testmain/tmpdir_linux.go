package testmain

import (
	"os"
	"syscall"
)

// tmpfsMagic is the f_type statfs gives a tmpfs.
const tmpfsMagic = 0x01021994

// memoryTempDir is /dev/shm when it is a writable tmpfs with 4 GiB free
// (the full-size runs write hundreds of megabytes; a container's default
// 64 MB /dev/shm is left alone), else "".
func memoryTempDir() string {
	const dir = "/dev/shm"
	var st syscall.Statfs_t
	if syscall.Statfs(dir, &st) != nil || st.Type != tmpfsMagic || int64(st.Bavail)*st.Bsize < 4<<30 {
		return ""
	}
	probe, err := os.MkdirTemp(dir, "evfwd-test-")
	if err != nil {
		return ""
	}
	os.Remove(probe)
	return dir
}
