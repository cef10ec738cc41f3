package serve_test

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/evfwd/evfwd/internal/webhooktest"
	"github.com/evfwd/evfwd/pkg/destination"
	"github.com/evfwd/evfwd/pkg/serve"
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/webhook"
)

// destConfig is a source "web" with the given destinations.
func destConfig(t *testing.T, ds ...destination.Config) serve.Config {
	return serve.Config{
		Addr: "127.0.0.1:0", Store: "sqlite://" + filepath.Join(t.TempDir(), "evfwd.db"), AdminToken: adminToken,
		Sources: []serve.Source{{Name: "web", WriteKey: "wk_web", Destinations: ds}},
	}
}

func to(name string, h *webhooktest.Receiver) destination.Config {
	return destination.Config{Name: name, SharedSecret: secret, Endpoints: endpoints(h)}
}

// A source's destinations each get the messages their subscription takes,
// in their mapping's shape; a message whose integrations turn Webhooks
// off goes to none of them.
func TestDestinationsSubscriptionsAndMappings(t *testing.T) {
	t.Parallel()
	orders, shaped := newHook(t), newHook(t)
	o := to("orders", orders)
	o.Subscribe = `type = "track" and event = "Order Completed"`
	s := to("shaped", shaped)
	s.Mapping = json.RawMessage(`{"name":{"@path":"$.event"},"user":{"@path":"$.userId"}}`)
	h := run(t, destConfig(t, o, s), serve.Options{})
	for _, body := range []string{
		`{"type":"track","event":"Order Completed","userId":"u1"}`,
		`{"type":"track","event":"Viewed","userId":"u2"}`,
		`{"type":"track","event":"Order Completed","userId":"u3","integrations":{"Webhooks":false}}`,
	} {
		if code, b := h.post(t, "/v1/track", "wk_web", body); code != 200 {
			t.Fatalf("track: %d %s", code, b)
		}
	}
	waitFor(t, "3 deliveries", func() bool {
		return len(deliveries(t, h, store.Filter{Status: store.Delivered})) == 3
	})
	if got := orders.Requests(); len(got) != 1 || !strings.Contains(string(got[0].Body), `"userId":"u1"`) || got[0].Header.Get("X-Signature") != sign(got[0].Body) {
		t.Errorf("orders got %d requests (want u1's Order Completed, signed)", len(got))
	}
	var bodies []string
	for _, r := range shaped.Requests() {
		if r.Header.Get("X-Signature") != sign(r.Body) {
			t.Errorf("shaped: signature not over the mapped body")
		}
		bodies = append(bodies, string(r.Body))
	}
	if want := []string{`{"name":"Order Completed","user":"u1"}`, `{"name":"Viewed","user":"u2"}`}; strings.Join(bodies, "\n") != strings.Join(want, "\n") &&
		strings.Join(bodies, "\n") != strings.Join([]string{want[1], want[0]}, "\n") {
		t.Errorf("shaped got %q, want %q", bodies, want)
	}
	if ds := deliveries(t, h, store.Filter{Destination: "orders"}); len(ds) != 1 {
		t.Errorf("%d deliveries to orders, want 1", len(ds))
	}
}

// Reload applies the file's destinations while serve runs: an added one
// starts, a removed one's pending deliveries are cancelled and counted,
// and a configuration that does not pass the checks is refused with the
// running one kept. The admin API pauses and resumes a destination.
func TestReloadAndPauseDestinations(t *testing.T) {
	t.Parallel()
	ha, hb := newHook(t), newHook(t)
	a, b := to("a", ha), to("b", hb)
	a.Paused = true // its deliveries wait, to be cancelled when it goes
	cfg := destConfig(t, a)
	var mu sync.Mutex
	next := cfg
	reload := func() (serve.Config, error) {
		mu.Lock()
		defer mu.Unlock()
		return next, nil
	}
	h := run(t, cfg, serve.Options{Reload: reload})
	if code, body := h.post(t, "/v1/track", "wk_web", `{"type":"track","event":"E","userId":"u1"}`); code != 200 {
		t.Fatalf("track: %d %s", code, body)
	}
	// A configuration with a broken destination is refused.
	mu.Lock()
	next = destConfig(t, destination.Config{Name: "broken"})
	next.Store = cfg.Store
	mu.Unlock()
	if _, err := h.srv.Reload(context.Background()); err == nil || !strings.Contains(err.Error(), `destination "broken"`) {
		t.Fatalf("Reload of a broken config: %v, want it refused naming the destination", err)
	}
	// b added, a removed.
	mu.Lock()
	next = destConfig(t, b)
	next.Store = cfg.Store
	mu.Unlock()
	res, err := h.srv.Reload(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Cancelled["web/a"] != 1 {
		t.Errorf("Reload %+v, want a's one pending delivery cancelled", res)
	}
	if ds := deliveries(t, h, store.Filter{Destination: "a"}); len(ds) != 1 || ds[0].Status != store.Cancelled {
		t.Errorf("a's deliveries %+v, want one, cancelled", ds)
	}
	// Pause b through the admin API: what arrives waits.
	if code := adminCall(t, h, http.MethodPost, "/admin/v1/destinations/web/b/pause"); code != 200 {
		t.Fatalf("pause: %d", code)
	}
	if code := adminCall(t, h, http.MethodPost, "/admin/v1/destinations/web/nope/pause"); code != 404 {
		t.Errorf("pause of an unknown destination: %d, want 404", code)
	}
	if code, body := h.post(t, "/v1/track", "wk_web", `{"type":"track","event":"E","userId":"u2"}`); code != 200 {
		t.Fatalf("track: %d %s", code, body)
	}
	if ds := deliveries(t, h, store.Filter{Destination: "b", Status: store.Pending}); len(ds) != 1 {
		t.Fatalf("b: %d pending, want 1", len(ds))
	}
	if n := len(hb.Requests()); n != 0 {
		t.Fatalf("paused b got %d requests", n)
	}
	if code := adminCall(t, h, http.MethodPost, "/admin/v1/destinations/web/b/resume"); code != 200 {
		t.Fatalf("resume: %d", code)
	}
	waitFor(t, "b's delivery after resume", func() bool { return len(hb.Requests()) == 1 })
}

func adminCall(t *testing.T, h *harness, method, path string) int {
	t.Helper()
	req, _ := http.NewRequest(method, h.url+path, nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func endpoints(hs ...*webhooktest.Receiver) []webhook.Endpoint {
	var eps []webhook.Endpoint
	for _, h := range hs {
		eps = append(eps, webhook.Endpoint{URL: h.URL})
	}
	return eps
}
