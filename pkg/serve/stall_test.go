package serve_test

import (
	"strings"
	"testing"
	"time"

	"github.com/evfwd/evfwd/internal/webhooktest"
	"github.com/evfwd/evfwd/pkg/forwarder"
	"github.com/evfwd/evfwd/pkg/serve"
)

// A forwarder with work it has not moved for 30 s (here: a delivery that
// never ends, on serve's clock) makes /readyz answer 503 with why and
// evfwd_forwarder_stalled 1, while /healthz stays 200: the node still
// commits what it collects. Once the delivery ends, both say so.
func TestReadyzStalledForwarder(t *testing.T) {
	t.Parallel()
	c := webhooktest.NewClock(t0)
	stuck := webhooktest.New(t, webhooktest.Script(webhooktest.Reply{Hang: true}), webhooktest.Notify(&changed))
	h := start(t, serve.Options{Now: c.Now}, stuck.URL)
	if code, body := h.post(t, "/v1/track", "wk_web", `{"userId":"u1","event":"e","messageId":"m1"}`); code != 200 {
		t.Fatalf("track: %d %s", code, body)
	}
	waitFor(t, "the delivery", func() bool { return stuck.Count() == 1 })
	if code, body := getz(h.url + "/readyz"); code != 200 {
		t.Fatalf("/readyz with a delivery just sent: %d %s", code, body)
	}
	c.Add(forwarder.StallAfter + time.Second)
	code, body := getz(h.url + "/readyz")
	if code != 503 || !strings.Contains(body, `"status":"stalled"`) || !strings.Contains(body, "web (1 held)") {
		t.Errorf("/readyz stalled: %d %s, want 503 naming the lane", code, body)
	}
	if code, body := getz(h.url + "/healthz"); code != 200 {
		t.Errorf("/healthz while the forwarder is stalled: %d %s, want 200", code, body)
	}
	if _, m := getz(h.url + "/metrics"); !strings.Contains(m, "\nevfwd_forwarder_stalled 1\n") {
		t.Errorf("/metrics while stalled has no evfwd_forwarder_stalled 1")
	}
	stuck.Release()
	waitFor(t, "/readyz 200 once the delivery is recorded", func() bool { code, _ := getz(h.url + "/readyz"); return code == 200 })
	if _, m := getz(h.url + "/metrics"); !strings.Contains(m, "\nevfwd_forwarder_stalled 0\n") {
		t.Errorf("/metrics once moving has no evfwd_forwarder_stalled 0")
	}
}
