package serve_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/evfwd/evfwd/internal/faultproxy"
	"github.com/evfwd/evfwd/internal/webhooktest"
	"github.com/evfwd/evfwd/pkg/serve"
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/postgres/pgtest"
	"github.com/evfwd/evfwd/pkg/webhook"
)

// TestStopOnCutLink stops serve while its link to PostgreSQL is cut and
// deliveries are in flight to a slow receiver: outcomes on their way to the
// store, deliveries leased ahead to give back, requests waiting on a
// commit. Every store call has a deadline, at most the store's (5 s), and
// the forwarder's own end with the grace period: serve stops within its
// grace period and a second, never after a store deadline or two.
func TestStopOnCutLink(t *testing.T) {
	t.Parallel()
	const grace = 2 * time.Second
	dbURL, proxy := faultproxy.InFront(t, pgtest.URL(t))
	slow := webhooktest.New(t, webhooktest.Script(webhooktest.Reply{Delay: 200 * time.Millisecond}))
	var logs processLog
	h := run(t, serve.Config{
		Addr: "127.0.0.1:0", Store: dbURL,
		Sources: []serve.Source{{Name: "web", WriteKey: "wk_web", Webhooks: serve.Webhooks{Enabled: true,
			Destination: webhook.Destination{SharedSecret: secret, Endpoints: []webhook.Endpoint{{URL: slow.URL}}}}}},
	}, serve.Options{Poll: 50 * time.Millisecond, StoreTimeout: store.CallTimeout, Grace: grace,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	c := newFaultClients(h.url, 4)
	defer c.stop()
	// Enough for every slot to be busy at the slow receiver, and some
	// leased ahead.
	waitFor(t, "events acknowledged before the cut", func() bool { return c.acks() >= 300 })
	proxy.SetMode(faultproxy.Blackhole)
	stopping := time.Now()
	h.stop()
	took := time.Since(stopping)
	c.stop()
	t.Logf("stopped %v after the cut, grace %v", took.Round(time.Millisecond), grace)
	if took > grace+time.Second {
		t.Errorf("serve stopped %v after the cut, want within its grace period (%v) and a second", took, grace)
	}
}
