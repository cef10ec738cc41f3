package inspector_test

import (
	"bufio"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/evfwd/evfwd/pkg/admin"
	"github.com/evfwd/evfwd/pkg/forwarder"
	"github.com/evfwd/evfwd/pkg/inspector"
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/storetest"
	"github.com/google/go-cmp/cmp"
)

var _ forwarder.DestinationObserver = (*inspector.Serve)(nil)

const ordersURL = "http://hooks.test/orders"

// fakeControl is serve's hold on its destinations, as the inspector sees
// it: web has the webhooks block and "orders" (a subscription, batches),
// app the webhooks block.
type fakeControl struct {
	mu    sync.Mutex
	dests []inspector.ServeDestination
}

func newFakeControl() *fakeControl {
	return &fakeControl{dests: []inspector.ServeDestination{
		{Source: "web", Name: "webhooks", Endpoints: []string{okURL, deadURL}},
		{Source: "web", Name: "orders", Endpoints: []string{ordersURL}, Subscribe: `type = "track" and event = "Order Completed"`,
			Maps: true, Batch: 10, PerSecond: 5, Holding: 2},
		{Source: "app", Name: "webhooks", Endpoints: []string{okURL}},
	}}
}

func (c *fakeControl) Destinations() []inspector.ServeDestination {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.dests)
}

func (c *fakeControl) set(source, name string, paused bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range c.dests {
		if c.dests[i].Source == source && c.dests[i].Name == name {
			c.dests[i].Paused = paused
			return true
		}
	}
	return false
}

func (c *fakeControl) Pause(source, name string) bool  { return c.set(source, name, true) }
func (c *fakeControl) Resume(source, name string) bool { return c.set(source, name, false) }

func (c *fakeControl) paused(source, name string) bool {
	for _, d := range c.Destinations() {
		if d.Source == source && d.Name == name {
			return d.Paused
		}
	}
	return false
}

func newDestinationsBench(t *testing.T) (*serveBench, *fakeControl) {
	t.Helper()
	ctl := newFakeControl()
	b := newServeBenchWith(t, nil, func(c *inspector.ServeConfig) { c.Destinations = ctl })
	return b, ctl
}

// GET /api/session lists each source's destinations as serve runs them
// now, and the endpoints of all of them; GET /api/destinations lists
// them all.
func TestServeSessionDestinations(t *testing.T) {
	b, ctl := newDestinationsBench(t)
	ctl.Pause("web", "orders")
	var s struct {
		Serve struct{ Sources []inspector.ServeSource }
	}
	b.bearerJSON(t, "/api/session", &s)
	all := ctl.Destinations()
	want := []inspector.ServeSource{
		{Name: "web", Webhooks: true, Endpoints: []string{okURL, deadURL, ordersURL}, Destinations: all[:2]},
		{Name: "app", Webhooks: true, Endpoints: []string{okURL}, Destinations: all[2:]},
		{Name: "quiet", Endpoints: []string{}, Destinations: []inspector.ServeDestination{}},
	}
	if diff := cmp.Diff(want, s.Serve.Sources); diff != "" {
		t.Errorf("sources mismatch (-want +got):\n%s", diff)
	}
	var d struct{ Destinations []inspector.ServeDestination }
	b.bearerJSON(t, "/api/destinations", &d)
	if diff := cmp.Diff(all, d.Destinations); diff != "" {
		t.Errorf("GET /api/destinations mismatch (-want +got):\n%s", diff)
	}
	_, body, _ := b.call(t, nil, "GET", "/api/destinations", "", "Authorization", "Bearer "+adminToken)
	for _, field := range []string{`"subscribe":"type = \"track\" and event = \"Order Completed\""`, `"maps":true`, `"batch":10`, `"perSecond":5`, `"paused":true`, `"holding":2`} {
		if !strings.Contains(string(body), field) {
			t.Errorf("GET /api/destinations: %s, want %s in it", body, field)
		}
	}

	// Without a DestinationControl, the sources' destinations as
	// configured, and no destination calls.
	b2 := newServeBenchWith(t, nil, func(c *inspector.ServeConfig) {
		c.Sources[0].Destinations = []inspector.ServeDestination{{Name: "webhooks", Endpoints: []string{okURL}}, {Name: "orders", Endpoints: []string{ordersURL}}}
	})
	b2.bearerJSON(t, "/api/session", &s)
	if got := s.Serve.Sources[0]; len(got.Destinations) != 2 || got.Destinations[1].Name != "orders" || !slices.Contains(got.Endpoints, ordersURL) {
		t.Errorf("configured destinations: %+v", got)
	}
	for _, c := range []struct{ method, path string }{{"GET", "/api/destinations"}, {"POST", "/api/pause"}, {"POST", "/api/resume"}} {
		if code, body, _ := b2.call(t, nil, c.method, c.path, `{"source":"web","destination":"orders"}`, "Authorization", "Bearer "+adminToken, "Content-Type", "application/json"); code != 404 {
			t.Errorf("%s %s without a DestinationControl: %d %s, want 404", c.method, c.path, code, body)
		}
	}
}

// POST /api/pause and /api/resume pause and resume a destination, behind
// the same guard as every call: a session (or the token), JSON, the
// page's own origin.
func TestServePauseResume(t *testing.T) {
	b, ctl := newDestinationsBench(t)
	sess := b.login(t)
	post := func(path, body string, headers ...string) (int, string) {
		t.Helper()
		code, out, _ := b.call(t, nil, "POST", path, body, headers...)
		return code, string(out)
	}
	page := []string{inspector.SessionHeader, sess, "Content-Type", "application/json", "Origin", b.ui.URL}
	rd := b.streamOpen(t, inspector.SessionHeader, sess).(*bufio.Reader)

	code, body := post("/api/pause", `{"source":"web","destination":"orders"}`, page...)
	if code != 200 || !ctl.paused("web", "orders") {
		t.Fatalf("pause: %d %s; paused %v", code, body, ctl.paused("web", "orders"))
	}
	if !strings.Contains(body, `"name":"orders"`) || !strings.Contains(body, `"paused":true`) || !strings.Contains(body, `"batch":10`) {
		t.Errorf("pause answered %s, want the destination, paused", body)
	}
	ev, data := nextEvent(t, rd)
	if ev != "destination" || !strings.Contains(data, `"source":"web","name":"orders"`) || !strings.Contains(data, `"paused":true`) {
		t.Errorf("after a pause, the event %q %s", ev, data)
	}
	if ctl.paused("web", "webhooks") || ctl.paused("app", "webhooks") {
		t.Errorf("pausing web's orders paused another: %+v", ctl.Destinations())
	}
	code, body = post("/api/resume", `{"source":"web","destination":"orders"}`, page...)
	if code != 200 || ctl.paused("web", "orders") || !strings.Contains(body, `"paused":false`) {
		t.Errorf("resume: %d %s; paused %v", code, body, ctl.paused("web", "orders"))
	}
	if ev, data := nextEvent(t, rd); ev != "destination" || !strings.Contains(data, `"paused":false`) {
		t.Errorf("after a resume, the event %q %s", ev, data)
	}
	// A script, with the token.
	if code, body := post("/api/pause", `{"source":"app","destination":"webhooks"}`, "Authorization", "Bearer "+adminToken, "Content-Type", "application/json"); code != 200 || !ctl.paused("app", "webhooks") {
		t.Errorf("pause with the token: %d %s", code, body)
	}

	for _, c := range []struct {
		name, body string
		headers    []string
		want       int
	}{
		{"no session", `{"source":"web","destination":"orders"}`, []string{"Content-Type", "application/json"}, 401},
		{"another origin", `{"source":"web","destination":"orders"}`, []string{inspector.SessionHeader, sess, "Content-Type", "application/json", "Origin", "http://evil.test"}, 403},
		{"a form", `source=web&destination=orders`, []string{inspector.SessionHeader, sess, "Content-Type", "application/x-www-form-urlencoded"}, 415},
		{"no destination", `{"source":"web"}`, page, 400},
		{"an unknown field", `{"source":"web","destination":"orders","all":true}`, page, 400},
		{"an unknown destination", `{"source":"web","destination":"nope"}`, page, 404},
		{"another source's", `{"source":"quiet","destination":"orders"}`, page, 404},
	} {
		if code, body := post("/api/pause", c.body, c.headers...); code != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, code, body, c.want)
		}
	}
	if ctl.paused("web", "orders") {
		t.Error("a refused pause paused web's orders")
	}
}

// nextEvent reads the next event of a stream: its name and its data.
func nextEvent(t *testing.T, rd *bufio.Reader) (string, string) {
	t.Helper()
	var name, data string
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("events: %v", err)
		}
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimSpace(strings.TrimPrefix(line, "event: "))
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimSpace(strings.TrimPrefix(line, "data: "))
		case line == "\n" && name != "":
			return name, data
		}
	}
}

// filterSpy is a store that notes the filters it is asked to list and
// retry by.
type filterSpy struct {
	store.Store
	mu      sync.Mutex
	filters []store.Filter
}

func (s *filterSpy) List(ctx context.Context, f store.Filter) ([]store.Delivery, error) {
	s.mu.Lock()
	s.filters = append(s.filters, f)
	s.mu.Unlock()
	return s.Store.List(ctx, f)
}

func (s *filterSpy) Retry(ctx context.Context, ids []int64, f store.Filter, now time.Time) (int, error) {
	s.mu.Lock()
	s.filters = append(s.filters, f)
	s.mu.Unlock()
	return s.Store.Retry(ctx, ids, f, now)
}

func (s *filterSpy) last() store.Filter {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.filters[len(s.filters)-1]
}

// GET /api/deliveries?destination= and POST /api/retry's "destination"
// select by store.Filter.Destination.
func TestServeFilterByDestination(t *testing.T) {
	var spy *filterSpy
	b := newServeBenchWith(t, nil, func(c *inspector.ServeConfig) {
		spy = &filterSpy{Store: c.Store}
		c.Store = spy
	})
	var p deliveriesPage
	b.bearerJSON(t, "/api/deliveries?destination=orders&source=web&status=failed", &p)
	if f := spy.last(); f.Destination != "orders" || f.Source != "web" || f.Status != store.Failed {
		t.Errorf("GET /api/deliveries?destination=orders: the store listed by %+v", f)
	}
	if code, body := b.retry(t, `{"status":"dead","destination":"orders"}`); code != 200 {
		t.Errorf("retry by destination: %d %s", code, body)
	}
	if f := spy.last(); f.Destination != "orders" || f.Status != store.Dead {
		t.Errorf("POST /api/retry with a destination: the store retried by %+v", f)
	}
	if code, body := b.retry(t, `{"ids":[1],"destination":"orders"}`); code != 400 {
		t.Errorf("retry by ids and destination: %d %s, want 400", code, body)
	}
}

// Deliveries of two destinations of one message: the list filters by
// destination and names it, in the list and the detail. This needs the
// stores to honour store.Filter.Destination.
func TestServeDeliveriesByDestination(t *testing.T) {
	b := newServeBench(t, nil)
	ctx := context.Background()
	var msgs []store.Message
	for i := 1; i <= 3; i++ {
		m := storetest.Msg("web", fmt.Sprintf("m%d", i), 0, true)
		if i != 2 {
			m.Destinations = []string{store.DestinationWebhooks, "orders"}
		}
		msgs = append(msgs, m)
	}
	if err := b.st.Ingest(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	dests := func(p deliveriesPage) string {
		var out []string
		for _, d := range p.Deliveries {
			out = append(out, d.MessageID+"→"+d.Destination)
		}
		return strings.Join(out, " ")
	}
	for _, tt := range []struct{ query, want string }{
		{"?destination=orders", "m3→orders m1→orders"},
		{"?destination=webhooks", "m3→webhooks m2→webhooks m1→webhooks"},
		{"?destination=orders&source=app", ""},
		{"?destination=nope", ""},
	} {
		var p deliveriesPage
		b.bearerJSON(t, "/api/deliveries"+tt.query, &p)
		if got := dests(p); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.query, got, tt.want)
		}
	}
	var all deliveriesPage
	b.bearerJSON(t, "/api/deliveries", &all)
	if len(all.Deliveries) != 5 {
		t.Fatalf("%d deliveries, want 5: %s", len(all.Deliveries), dests(all))
	}
	var d admin.DeliveryView
	b.bearerJSON(t, fmt.Sprintf("/api/deliveries/%d", all.Deliveries[0].ID), &d)
	if d.Destination != all.Deliveries[0].Destination || d.Destination == "" {
		t.Errorf("the detail names the destination %q, the list %q", d.Destination, all.Deliveries[0].Destination)
	}
}

// GET /api/stats counts each destination's deliveries per minute, as the
// forwarder settles them: every destination in config order, then any
// other seen.
func TestServeDestinationStats(t *testing.T) {
	b, ctl := newDestinationsBench(t)
	ctl.Pause("web", "orders")
	b.insp.Settled("web", "orders", store.Delivered, false)
	b.insp.Settled("web", "orders", store.Pending, true)
	b.insp.Settled("web", "orders", store.Pending, false) // cut short: not counted
	b.clock.Add(time.Minute)
	b.insp.Settled("web", "orders", store.Dead, false)
	b.insp.Settled("web", "orders", store.Failed, false)
	b.insp.Settled("web", "webhooks", store.Delivered, false)
	b.insp.Settled("web", "webhooks", store.Cancelled, false) // not counted
	b.insp.Settled("gone", "old", store.Delivered, false)

	var s struct {
		Destinations []inspector.DestinationStats `json:"destinations"`
	}
	b.bearerJSON(t, "/api/stats", &s)
	var names []string
	for _, d := range s.Destinations {
		names = append(names, fmt.Sprintf("%s/%s paused=%v", d.Source, d.Name, d.Paused))
		if len(d.Minutes) != inspector.StatsMinutes {
			t.Errorf("%s/%s: %d minutes", d.Source, d.Name, len(d.Minutes))
		}
	}
	if want := []string{"web/webhooks paused=false", "web/orders paused=true", "app/webhooks paused=false", "gone/old paused=false"}; !cmp.Equal(want, names) {
		t.Fatalf("destinations %v, want %v", names, want)
	}
	last := inspector.StatsMinutes - 1
	orders, hooks, app := s.Destinations[1], s.Destinations[0], s.Destinations[2]
	for _, c := range []struct {
		what      string
		got, want inspector.Counts
	}{
		{"orders at 10:00", orders.Minutes[last-1], inspector.Counts{T: "2026-11-23T10:00:00.000Z", Delivered: 1, Retried: 1}},
		{"orders at 10:01", orders.Minutes[last], inspector.Counts{T: "2026-11-23T10:01:00.000Z", Failed: 2}},
		{"webhooks at 10:01", hooks.Minutes[last], inspector.Counts{T: "2026-11-23T10:01:00.000Z", Delivered: 1}},
		{"app at 10:01", app.Minutes[last], inspector.Counts{T: "2026-11-23T10:01:00.000Z"}},
	} {
		if c.got != c.want {
			t.Errorf("%s: %+v, want %+v", c.what, c.got, c.want)
		}
	}
}
