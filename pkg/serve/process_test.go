package serve_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/evfwd/evfwd/pkg/message"
)

// What the subprocess tests (crash, multi-node) share.

// buildEvfwd builds the evfwd binary into a temporary directory.
func buildEvfwd(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "evfwd")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/evfwd/evfwd").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// idCounter is a webhook receiver that counts deliveries per messageId.
type idCounter struct {
	*httptest.Server
	mu  sync.Mutex
	got map[string]int
}

func newIDCounter(t *testing.T) *idCounter {
	c := &idCounter{got: map[string]int{}}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if obj, err := message.ParseObject(body); err == nil {
			id, _ := obj.GetString("messageId")
			c.mu.Lock()
			c.got[id]++
			c.mu.Unlock()
		}
	}))
	t.Cleanup(c.Close)
	return c
}

// waitAll polls until every acknowledged id has arrived or the deadline
// passes; it returns how many never arrived and how many deliveries were
// duplicates.
func (c *idCounter) waitAll(acked map[string]bool, deadline time.Time) (missing, dups int) {
	for {
		c.mu.Lock()
		missing, dups = 0, 0
		for id := range acked {
			if c.got[id] == 0 {
				missing++
			}
		}
		for _, n := range c.got {
			dups += n - 1
		}
		c.mu.Unlock()
		if missing == 0 || time.Now().After(deadline) {
			return missing, dups
		}
		time.Sleep(100 * time.Millisecond)
	}
}
