package serve_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// TestPostgresStopStart is TestPostgresFault with a real PostgreSQL server
// of the test's own stopped (`pg_ctl stop -m fast`: sessions end with
// 57P01 admin_shutdown, then connections are refused) and started again.
// It runs where initdb and pg_ctl are on PATH (as root, through runuser
// and the postgres user, since the server refuses to run as root).
func TestPostgresStopStart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a PostgreSQL server: runs without -short")
	}
	t.Parallel()
	pg := newPrivateCluster(t)
	var startTook time.Duration
	pgFault(t, pg.url, func() { pg.ctl(t, "stop", "-m", "fast") }, func() {
		start := time.Now()
		pg.ctl(t, "start")
		startTook = time.Since(start)
	})
	t.Logf("pg_ctl start took %v (the recovery times count from its end)", startTook.Round(time.Millisecond))
}

// privateCluster is a PostgreSQL server in a temporary directory, on a
// loopback port of its own, stopped when the test ends.
type privateCluster struct {
	dir, url string
	port     int
	runAs    []string // runuser prefix when the test runs as root
}

func newPrivateCluster(t *testing.T) *privateCluster {
	t.Helper()
	pg := newClusterDir(t, "initdb", "pg_ctl")
	pg.run(t, "initdb", "-D", pg.data(), "-A", "trust", "-U", "evfwd", "-E", "UTF8", "--no-sync")
	pg.start(t)
	return pg
}

// newClusterDir is a privateCluster with nothing in its directory yet,
// after skipping the test unless tools are on PATH.
func newClusterDir(t *testing.T, tools ...string) *privateCluster {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s on PATH: %v", tool, err)
		}
	}
	pg := &privateCluster{}
	// Not t.TempDir: its parents are closed to the postgres user.
	dir, err := os.MkdirTemp("", "evfwd-pg-")
	if err != nil {
		t.Fatal(err)
	}
	pg.dir = dir
	t.Cleanup(func() { os.RemoveAll(dir) })
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Skipf("running as root without a postgres user: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		pg.runAs = []string{"runuser", "-u", "postgres", "--"}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pg.port = ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	pg.url = fmt.Sprintf("postgres://evfwd@127.0.0.1:%d/postgres?sslmode=disable", pg.port)
	return pg
}

// start starts the server and stops it when the test ends.
func (pg *privateCluster) start(t *testing.T) {
	t.Helper()
	pg.ctl(t, "start")
	t.Cleanup(func() {
		// A test may have stopped it for good (a failover's old primary).
		if _, err := pg.command("pg_ctl", "-D", pg.data(), "status").CombinedOutput(); err == nil {
			pg.run(t, "pg_ctl", "-D", pg.data(), "-m", "immediate", "-w", "stop")
		}
	})
}

func (pg *privateCluster) data() string { return filepath.Join(pg.dir, "data") }

// ctl runs pg_ctl action (start, stop, restart) and waits for it to finish.
func (pg *privateCluster) ctl(t *testing.T, action string, args ...string) {
	t.Helper()
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off", pg.port, pg.dir)
	pg.run(t, "pg_ctl", append([]string{"-D", pg.data(), "-o", opts, "-l", filepath.Join(pg.dir, "log"), "-w", action}, args...)...)
}

func (pg *privateCluster) run(t *testing.T, name string, args ...string) {
	t.Helper()
	cmd := pg.command(name, args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		log, _ := os.ReadFile(filepath.Join(pg.dir, "log"))
		t.Fatalf("%v: %v\n%s\nserver log:\n%s", cmd.Args, err, out, log)
	}
}

// command is name run as the server's user, in its directory.
func (pg *privateCluster) command(name string, args ...string) *exec.Cmd {
	argv := append(append([]string{}, pg.runAs...), append([]string{name}, args...)...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = pg.dir
	return cmd
}
