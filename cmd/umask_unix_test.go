//go:build unix

package cmd

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// The tests that set the umask, which only Unix has.

// TestListenRecordFileIsPrivate: a record file listen creates is the
// owner's alone (0600) even under umask 000: it holds whole requests,
// headers included. The umask is the process's: this test is not
// parallel, and restores it.
func TestListenRecordFileIsPrivate(t *testing.T) {
	old := syscall.Umask(0)
	t.Cleanup(func() { syscall.Umask(old) })
	record := filepath.Join(t.TempDir(), "hooks.ndjson")
	l := startListen(t, testFactory(t, "", false, nil), "--record", record)
	l.post(t, "/", trackMsg, "")
	l.interrupt(t)
	fi, err := os.Stat(record)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o600 {
		t.Errorf("record file mode %#o, want 0600", got)
	}
}

// The errors file holds events as read: 0600 whatever the umask.
func TestSendErrorsFileIsPrivate(t *testing.T) {
	old := syscall.Umask(0)
	t.Cleanup(func() { syscall.Umask(old) })
	errFile := filepath.Join(t.TempDir(), "rejected.ndjson")
	srv := newCollectServer(t, nil)
	res := execute(t, clientFactory(t, "", srv), "send", writeFile(t, "bad.ndjson", "not json\n"), "--errors-file", errFile)
	fi, err := os.Stat(errFile)
	if err != nil || res.Code != 1 {
		t.Fatalf("exit %d, %v", res.Code, err)
	}
	if got := fi.Mode().Perm(); got != 0o600 {
		t.Errorf("errors file mode %#o, want 0600", got)
	}
}
