package serve_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/evfwd/evfwd/pkg/destination"
	"github.com/evfwd/evfwd/pkg/serve"
	"github.com/evfwd/evfwd/pkg/store/postgres/pgtest"
	"github.com/evfwd/evfwd/pkg/webhook"
)

// Two nodes on one PostgreSQL database hold a destination to its rate
// together: its schedule is the database's, not each node's. 60 requests at
// 20 a second take about 3 s whichever nodes send them (each node pacing
// alone: 1.5 s), and no second sees more than the rate but for the lag
// between a turn and its request's arrival.
func TestRateLimitAcrossNodes(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.URL(t)
	var mu sync.Mutex
	var at []time.Time
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		at = append(at, time.Now())
		mu.Unlock()
		changed.Fire()
	}))
	t.Cleanup(rcv.Close)
	cfg := serve.Config{Addr: "127.0.0.1:0", Store: dbURL, Sources: []serve.Source{{Name: "web", WriteKey: "wk_web",
		Destinations: []destination.Config{{Name: "slow", Endpoints: []webhook.Endpoint{{URL: rcv.URL}},
			RateLimit: destination.RateConfig{PerSecond: 20}}}}}}
	lg := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	nodes := []*harness{run(t, cfg, serve.Options{Logger: lg}), run(t, cfg, serve.Options{Logger: lg})}
	const n = 60
	for i := range n {
		body := fmt.Sprintf(`{"type":"track","event":"E","userId":"u%d"}`, i)
		if code, b := nodes[i%2].post(t, "/v1/track", "wk_web", body); code != 200 {
			t.Fatalf("track: %d %s", code, b)
		}
	}
	waitFor(t, "every request", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(at) >= n
	})
	mu.Lock()
	defer mu.Unlock()
	slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
	if span, least := at[len(at)-1].Sub(at[0]), time.Duration(n-1)*time.Second/20; span < least-100*time.Millisecond {
		t.Errorf("%d requests in %v from two nodes: faster than 20/s together (%v)", n, span, least)
	}
	for i := range at {
		j := i
		for j < len(at) && at[j].Sub(at[i]) < time.Second {
			j++
		}
		// The schedule is the database's, by its clock; a request's arrival
		// here lags its turn by the reservation's answer, the sender's
		// wake-up and the request's trip, each longer on a busy machine
		// (23 in one second seen in CI, beside the rest of the suite under
		// -race). Pacing by each node alone would let 40 through.
		if j-i > 26 {
			t.Fatalf("%d requests within 1 s from %v: over 20/s", j-i, at[i].Sub(at[0]))
		}
	}
}
