package serve_test

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/evfwd/evfwd/internal/broadcast"
	"github.com/evfwd/evfwd/internal/testmain"
	"github.com/evfwd/evfwd/internal/webhooktest"
)

// What the subprocess tests (crash, multi-node) share.

// buildEvfwd returns the evfwd binary, built once per test binary into a
// directory kept between runs (testmain.CacheDir): go build leaves a binary there
// that is up to date as it is, where a link into a new directory cost
// two CPU-seconds of each run of these tests.
func buildEvfwd(t *testing.T) string {
	t.Helper()
	bin, err := evfwdBin()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

var evfwdBin = sync.OnceValues(func() (string, error) {
	dir, err := testmain.CacheDir("serve")
	if err != nil {
		return "", err
	}
	// Another test process of this tree may be building it too.
	unlock, err := lockDir(dir)
	if err != nil {
		return "", err
	}
	defer unlock()
	bin := filepath.Join(dir, "evfwd")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/evfwd/evfwd").CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

// processLog is the stderr of `evfwd serve` processes (text logs, at
// least info), kept for the failure report and watched for their start.
type processLog struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	wrote broadcast.Signal
}

func (l *processLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	l.buf.Write(p)
	l.mu.Unlock()
	l.wrote.Fire()
	return len(p), nil
}

func (l *processLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// servingLine is what serve logs once it accepts connections.
const servingLine = "msg=serving "

// waitServing returns once the log says serving n times in all (a
// restarted process adds one), or fails t when limit passes first. The
// server is another process: its log is the only sign this one gets that
// it is up.
func (l *processLog) waitServing(t *testing.T, n int, limit time.Duration) {
	t.Helper()
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for {
		next := l.wrote.Next() // before the check: a write during it is not missed
		if strings.Count(l.String(), servingLine) >= n {
			return
		}
		select {
		case <-next:
		case <-timer.C:
			t.Fatalf("serve did not come up within %v:\n%s", limit, l.String())
		}
	}
}

// newIDCounter is a webhook receiver that counts deliveries per
// messageId and fires changed at each.
func newIDCounter(t *testing.T) *webhooktest.IDCounter {
	t.Helper()
	return webhooktest.NewIDCounter(t, webhooktest.Notify(&changed))
}
