package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/evfwd/evfwd/pkg/destination"
	"github.com/evfwd/evfwd/pkg/inspector"
	"github.com/evfwd/evfwd/pkg/serve"
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/webhook"
)

// A source's destinations on serve's page: their settings as serve runs
// them, pause and resume from the page, and the list filtered by
// destination.

// orderCompleted is the subscription of the destination "orders".
const orderCompleted = `type = "track" and event = "Order Completed"`

// destHooks are the receivers of three destinations: the webhooks block,
// "orders" (a subscription) and "archive" (a mapping, in batches of 10).
type destHooks struct{ web, orders, archive *flakyHook }

// startServeDestinationsUI serves three destinations, each to its own
// receiver, and the inspector: with oneSource all of source "web" (write
// key wk_web), else each of its own source, web (the webhooks block),
// shop (orders, wk_shop) and log (archive, wk_log).
func startServeDestinationsUI(t *testing.T, oneSource bool) (*servingUI, destHooks) {
	t.Helper()
	hooks := destHooks{newFlakyHook(t, http.StatusOK), newFlakyHook(t, http.StatusOK), newFlakyHook(t, http.StatusOK)}
	to := func(h *flakyHook) []webhook.Endpoint { return []webhook.Endpoint{{URL: h.URL}} }
	web := serve.Source{Name: "web", WriteKey: "wk_web",
		Webhooks: serve.Webhooks{Enabled: true, Destination: webhook.Destination{SharedSecret: "whsec_page", Endpoints: to(hooks.web)}}}
	orders := destination.Config{Name: "orders", Endpoints: to(hooks.orders), SharedSecret: "whsec_page", Subscribe: orderCompleted}
	archive := destination.Config{Name: "archive", Endpoints: to(hooks.archive), SharedSecret: "whsec_page",
		Mapping: []byte(`{"event_name": {"@path": "$.event"}}`), Batch: destination.BatchConfig{Size: 10}}
	sources := []serve.Source{web,
		{Name: "shop", WriteKey: "wk_shop", Destinations: []destination.Config{orders}},
		{Name: "log", WriteKey: "wk_log", Destinations: []destination.Config{archive}}}
	if oneSource {
		web.Destinations = []destination.Config{orders, archive}
		sources = []serve.Source{web}
	}
	cfg := serve.Config{
		Addr:       "127.0.0.1:0",
		Store:      "sqlite://" + filepath.Join(t.TempDir(), "evfwd.db"),
		Sources:    sources,
		AdminToken: serveUIToken,
	}
	opts := serve.Options{
		Logger: slog.New(slog.DiscardHandler), Version: "0.0.0-test",
		Policy: webhook.Policy{Initial: 10 * time.Millisecond, Max: 10 * time.Millisecond, Window: time.Second, Jitter: -1},
		Poll:   5 * time.Millisecond,
		UI:     true, UIAddr: "127.0.0.1:0",
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := serve.New(ctx, cfg, opts)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return &servingUI{srv: srv, url: srv.URL(), ui: srv.UIURL()}, hooks
}

// destinationsOf lists the destinations as GET /api/destinations answers
// a script.
func (s *servingUI) destinationsOf(t *testing.T) map[string]inspector.ServeDestination {
	t.Helper()
	req, _ := http.NewRequest("GET", s.ui+"api/destinations", nil)
	req.Header.Set("Authorization", "Bearer "+serveUIToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out struct{ Destinations []inspector.ServeDestination }
	if err := json.Unmarshal(b, &out); resp.StatusCode != 200 || err != nil {
		t.Fatalf("GET /api/destinations: %d %s", resp.StatusCode, b)
	}
	m := map[string]inspector.ServeDestination{}
	for _, d := range out.Destinations {
		m[d.Name] = d
	}
	return m
}

// destinationOf is the store's delivery of messageID to destination.
func (s *servingUI) destinationOf(t *testing.T, messageID, dest string) (store.Delivery, bool) {
	t.Helper()
	for _, d := range s.deliveries(t, "", "") {
		if d.MessageID == messageID && d.Destination == dest {
			return d, true
		}
	}
	return store.Delivery{}, false
}

// card selects the destination card of name.
func card(name string) string { return `#destinations .destination[data-name="` + name + `"]` }

// Each destination in its own source here, so that this test does not
// depend on the stores leasing by destination (store.LeaseRequest's
// Destination); TestBrowserServeFiltersByDestination has the three in one
// source.
func TestBrowserServeShowsAndPausesDestinations(t *testing.T) {
	t.Parallel()
	s, hooks := startServeDestinationsUI(t, false)
	p := newPage(t)
	p.do("open "+s.ui, chromedp.Navigate(s.ui))
	p.login(serveUIToken)
	p.waitFor("the destinations", `document.querySelectorAll('#destinations .destination').length === 3 && document.querySelector('#live')?.dataset.state === 'open'`)

	// What each takes and how it sends, as serve runs it.
	type shown struct {
		Source, Paused, Sub, Tags, Endpoints string
	}
	got := map[string]shown{}
	for _, name := range []string{"webhooks", "orders", "archive"} {
		got[name] = eval[shown](p, fmt.Sprintf(`(c => ({source: c.dataset.source, paused: c.dataset.paused,
			sub: c.querySelector('.dest-sub')?.textContent ?? '', tags: [...c.querySelectorAll('.dest-how .tag')].map(t => t.textContent).join(','),
			endpoints: c.querySelector('.dest-endpoints').textContent}))(document.querySelector(%s))`, jsString(card(name))))
	}
	want := map[string]shown{
		"webhooks": {"web", "false", "", "every message", hooks.web.URL},
		"orders":   {"shop", "false", orderCompleted, "", hooks.orders.URL},
		"archive":  {"log", "false", "", "every message,maps,batches of 10", hooks.archive.URL},
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s's card shows %+v, want %+v", name, got[name], w)
		}
	}
	options := eval[[]string](p, `[...document.querySelectorAll('#filter-destination option')].map(o => o.value)`)
	if !slices.Equal(options, []string{"", "webhooks", "orders", "archive"}) {
		t.Errorf("the destination filter offers %q", options)
	}

	// Pause orders: its deliveries wait in the store, the others go.
	p.click(card("orders") + " button.dest-toggle")
	p.waitFor("orders paused on the page", `document.querySelector(`+jsString(card("orders"))+`)?.dataset.paused === 'true'`)
	p.waitFor("the pause's toast", `document.querySelector('#toast')?.innerText.includes('orders of shop paused')`)
	if ds := s.destinationsOf(t); !ds["orders"].Paused || ds["webhooks"].Paused || ds["archive"].Paused {
		t.Fatalf("after pressing Pause on orders, serve runs %+v", ds)
	}
	for _, key := range []string{"wk_web", "wk_shop", "wk_log"} {
		s.track(t, key, "m1", "Order Completed")
	}
	defer func() {
		if t.Failed() {
			for _, d := range s.deliveries(t, "web", "") {
				t.Logf("delivery %+v", d)
			}
		}
	}()
	within(t, 10*time.Second, "m1 to webhooks and to archive", func() bool {
		a, ok := s.destinationOf(t, "m1", "archive")
		return hooks.web.delivered("m1") == 1 && ok && a.Status == store.Delivered
	})
	if d, ok := s.destinationOf(t, "m1", "orders"); !ok || d.Status != store.Pending || d.Attempts != 0 {
		t.Errorf("m1 to the paused orders: %+v (stored: %v), want pending and never tried", d, ok)
	}
	if n := hooks.orders.delivered("m1"); n != 0 {
		t.Errorf("the paused orders sent m1 %d times", n)
	}
	p.waitFor("the pending delivery to orders listed", `[...document.querySelectorAll('#deliveries tbody tr[data-id]')].some(r => r.dataset.destination === 'orders' && r.dataset.status === 'pending')`)

	// Resume: it goes.
	p.click(card("orders") + " button.dest-toggle")
	p.waitFor("orders running on the page", `document.querySelector(`+jsString(card("orders"))+`)?.dataset.paused === 'false'`)
	within(t, 10*time.Second, "m1 to orders once resumed", func() bool { return hooks.orders.delivered("m1") == 1 })
	if ds := s.destinationsOf(t); ds["orders"].Paused {
		t.Errorf("after pressing Resume, serve runs orders paused")
	}
	p.waitFor("every delivery delivered on the page", `(rows => rows.length === 3 && rows.every(r => r.dataset.status === 'delivered'))([...document.querySelectorAll('#deliveries tbody tr[data-id]')])`)
	// Each destination's chart counts its deliveries.
	p.waitFor("the destinations' charts", fmt.Sprintf(`[%s, %s, %s].every(s => document.querySelector(s + ' svg rect.bar-delivered'))`,
		jsString(card("webhooks")), jsString(card("orders")), jsString(card("archive"))))

	p.screenshot("inspector-serve-destinations.png")

	// The list and the detail name the destination.
	cells := eval[[]string](p, `[...document.querySelectorAll('#deliveries tbody tr[data-id] .c-destination')].map(c => c.textContent).sort()`)
	if !slices.Equal(cells, []string{"archive", "orders", "webhooks"}) {
		t.Errorf("the list's destination cells: %q", cells)
	}
	d, _ := s.destinationOf(t, "m1", "orders")
	p.click(delivery(d.ID))
	p.waitFor("the detail", `document.querySelector('#delivery:not([hidden]) .fields')`)
	if txt := p.text("#delivery .fields"); !strings.Contains(txt, "Destination\norders") && !strings.Contains(txt, "Destination\torders") {
		t.Errorf("the detail reads %q, want Destination orders", txt)
	}
	p.assertQuiet()
}

// TestBrowserServeFiltersByDestination needs the stores to honour
// store.Filter.Destination.
func TestBrowserServeFiltersByDestination(t *testing.T) {
	t.Parallel()
	s, hooks := startServeDestinationsUI(t, true)
	s.track(t, "wk_web", "m1", "Order Completed")
	s.track(t, "wk_web", "m2", "Order Completed")
	within(t, 10*time.Second, "m1 and m2 everywhere", func() bool {
		return hooks.orders.delivered("m1")+hooks.orders.delivered("m2") == 2 && len(s.deliveries(t, "web", store.Delivered)) == 6
	})
	p := newPage(t)
	p.do("open "+s.ui, chromedp.Navigate(s.ui))
	p.login(serveUIToken)
	p.waitFor("six deliveries", `document.querySelectorAll('#deliveries tbody tr[data-id]').length === 6`)
	for _, name := range []string{"orders", "archive", "webhooks"} {
		p.choose("#filter-destination", name)
		p.waitFor("only "+name+"'s", fmt.Sprintf(`(rows => rows.length === 2 && rows.every(r => r.dataset.destination === %s))([...document.querySelectorAll('#deliveries tbody tr[data-id]')])`, jsString(name)))
	}
	p.choose("#filter-destination", "")
	p.waitFor("all six", `document.querySelectorAll('#deliveries tbody tr[data-id]').length === 6`)
	p.assertQuiet()
}
