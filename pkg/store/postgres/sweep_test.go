package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/evfwd/evfwd/internal/faultproxy"
	"github.com/evfwd/evfwd/pkg/store/postgres/pgtest"
)

// TestCloseDuringSweepOnCutLink (issue 43, row 4): the sync sweep runs
// every minute under the store's admission, which Close waits for. On a
// link that answers nothing (a cut cable, a black hole), a sweep in
// progress must not hold Close up: it took the whole wait of a statement
// with no deadline, until the kernel gave up on the connection.
func TestCloseDuringSweepOnCutLink(t *testing.T) {
	t.Parallel()
	url, proxy := faultproxy.InFront(t, pgtest.URL(t))
	s, err := Open(context.Background(), url, Options{NoRecover: true})
	if err != nil {
		t.Fatal(err)
	}
	proxy.SetMode(faultproxy.Blackhole)
	swept := make(chan bool, 1)
	go func() { swept <- s.sweepTick() }()
	// The sweep has its connection and waits on the link.
	for limit := time.Now().Add(10 * time.Second); s.pool.Stat().AcquiredConns() == 0; {
		if time.Now().After(limit) {
			t.Fatal("the sweep did not take a connection within 10 s")
		}
		time.Sleep(5 * time.Millisecond) // the pool has no signal for it
	}
	start := time.Now()
	closed := make(chan struct{})
	go func() { s.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		proxy.SetMode(faultproxy.Pass) // let it end
		<-closed
		t.Fatalf("Close waited %v for a sweep on a cut link", time.Since(start))
	}
	t.Logf("Close took %v with a sweep waiting on a cut link", time.Since(start).Round(time.Millisecond))
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("Close took %v, want under 3 s (a closed connection's cleanup, twice closeGrace)", took)
	}
	<-swept
}
