package webhooktest

import (
	"testing"
	"time"

	"github.com/evfwd/evfwd/internal/broadcast"
)

// WaitLimit bounds every wait of a test that is going wrong; a test that
// passes never waits for it.
const WaitLimit = 30 * time.Second

// Await returns once cond holds, checking it now and each time s fires;
// it fails the test when WaitLimit passes first. Whatever cond reads must
// fire s when it changes (a Receiver made with Notify(s) does): nothing
// polls.
func Await(t testing.TB, s *broadcast.Signal, what string, cond func() bool) {
	t.Helper()
	limit := time.NewTimer(WaitLimit)
	defer limit.Stop()
	for {
		next := s.Next() // before cond: a change during cond is not missed
		if cond() {
			return
		}
		select {
		case <-next:
		case <-limit.C:
			t.Fatalf("%v passed waiting for %s", WaitLimit, what)
		}
	}
}
