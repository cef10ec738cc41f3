package serve_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/evfwd/evfwd/internal/syncbuf"
	"github.com/evfwd/evfwd/internal/webhooktest"
	"github.com/evfwd/evfwd/pkg/admin"
	"github.com/evfwd/evfwd/pkg/inspector"
	"github.com/evfwd/evfwd/pkg/serve"
	"github.com/evfwd/evfwd/pkg/store"
)

// recovering is an endpoint that refuses its first requests with 400 (a
// final failure) and, after those, holds each request until released and
// then accepts it.
func recovering(t *testing.T, refusals int) *webhooktest.Receiver {
	script := append(make([]webhooktest.Reply, refusals), webhooktest.Reply{Hang: true})
	for i := range refusals {
		script[i].Status = http.StatusBadRequest
	}
	return webhooktest.New(t, webhooktest.Script(script...), webhooktest.Notify(&changed))
}

// uiClient is the inspector's page: the session it holds once logged in,
// sent as a header (and a cookie jar, that must stay of no use).
type uiClient struct {
	base    string
	http    *http.Client
	session string
}

func (c *uiClient) do(t *testing.T, method, path, body string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, c.base+path, rd)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.session != "" {
		req.Header.Set(inspector.SessionHeader, c.session)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

func (c *uiClient) json(t *testing.T, method, path, body string, v any) {
	t.Helper()
	code, out := c.do(t, method, path, body)
	if code != 200 {
		t.Fatalf("%s %s: %d %s", method, path, code, out)
	}
	if err := json.Unmarshal(out, v); err != nil {
		t.Fatalf("%s %s: %v in %s", method, path, err, out)
	}
}

// serve --ui end to end: a real service, its inspector on its own
// listener, two endpoints. web's refuses two deliveries (failed), app's
// takes its one. The page logs in, finds the failed ones, retries one and
// then all failed, and each is pending until web's endpoint recovers and
// then delivered; the event stream saw every attempt, and the stats count
// them in the minute.
func TestUIRetriesFailedDeliveries(t *testing.T) {
	t.Parallel()
	c := webhooktest.NewClock(t0)
	web := recovering(t, 2)
	app := newHook(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h, _ := startAdminOpts(t, serve.Options{Now: c.Now, UIListener: ln}, adminToken, web, app)
	if want := "http://" + ln.Addr().String() + "/"; h.srv.UIURL() != want {
		t.Errorf("UIURL %q, want %q", h.srv.UIURL(), want)
	}
	jar, _ := cookiejar.New(nil)
	page := &uiClient{base: strings.TrimSuffix(h.srv.UIURL(), "/"), http: &http.Client{Jar: jar}}

	// The page is served without the token; the API is not.
	if code, body := page.do(t, "GET", "/", ""); code != 200 || !strings.Contains(string(body), "<") {
		t.Errorf("page: %d", code)
	}
	if code, body := page.do(t, "GET", "/api/deliveries", ""); code != 401 {
		t.Errorf("deliveries without the token: %d %s", code, body)
	}
	if code, body := page.do(t, "POST", "/api/session", `{"token":"nope"}`); code != 403 {
		t.Errorf("login with a wrong token: %d %s", code, body)
	}
	var login struct{ Session string }
	page.json(t, "POST", "/api/session", `{"token":"`+adminToken+`"}`, &login)
	page.session = login.Session
	var session struct {
		Auth  bool
		Serve struct {
			URL     string
			Sources []inspector.ServeSource
		}
	}
	page.json(t, "GET", "/api/session", "", &session)
	if !session.Auth || session.Serve.URL != h.url || len(session.Serve.Sources) != 3 || session.Serve.Sources[0].Endpoints[0] != web.URL {
		t.Errorf("session: %+v", session)
	}

	// The event stream, open before anything is sent.
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", page.base+"/api/events", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	stream, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	events := bufio.NewReader(stream.Body)
	if line, _ := events.ReadString('\n'); line != "retry: 1000\n" {
		t.Fatalf("stream starts %q", line)
	}
	events.ReadString('\n')

	for i, key := range []string{"wk_web", "wk_web", "wk_app"} {
		body := fmt.Sprintf(`{"userId":"u","event":"E","messageId":"m%d"}`, i+1)
		if code, out := h.post(t, "/v1/track", key, body); code != 200 {
			t.Fatalf("track: %d %s", code, out)
		}
	}
	waitFor(t, "two failed, one delivered", func() bool {
		return len(deliveries(t, h, store.Filter{Status: store.Failed})) == 2 && len(deliveries(t, h, store.Filter{Status: store.Delivered})) == 1
	})

	var failed struct {
		Deliveries []admin.DeliveryView
		Next       int64
	}
	page.json(t, "GET", "/api/deliveries?status=failed", "", &failed)
	if len(failed.Deliveries) != 2 || failed.Next != 0 || failed.Deliveries[0].ID < failed.Deliveries[1].ID {
		t.Fatalf("failed deliveries, newest first: %+v", failed)
	}
	newest, oldest := failed.Deliveries[0], failed.Deliveries[1]
	var d admin.DeliveryView
	page.json(t, "GET", fmt.Sprintf("/api/deliveries/%d", oldest.ID), "", &d)
	if len(d.Records) != 1 || d.Records[0].Status != 400 || d.Records[0].URL != web.URL || d.Records[0].Outcome != "final" || len(d.Message) == 0 {
		t.Errorf("failed delivery: %+v", d)
	}

	// Three attempts were streamed, one per delivery, then each
	// delivery's outcome once recorded, and the batches stored were told
	// (before or after their attempts: those start at ingest). The endpoints' states may come first: Run records them,
	// closed, as it starts.
	seen := map[int64]inspector.AttemptEvent{}
	stored, finished := 0, 0
	for n := 0; n < 3 || stored == 0 || finished < 3; {
		ev, _ := events.ReadString('\n')
		data, _ := events.ReadString('\n')
		events.ReadString('\n')
		data = strings.TrimPrefix(data, "data: ")
		if ev == "event: endpoint\n" {
			var e inspector.EndpointEvent
			if err := json.Unmarshal([]byte(data), &e); err != nil || e.State != store.EndpointClosed {
				t.Errorf("endpoint event %q: %v", data, err)
			}
			continue
		}
		if ev == "event: stored\n" {
			stored++
			continue
		}
		if ev == "event: delivery\n" {
			var d inspector.DeliveryEvent
			if err := json.Unmarshal([]byte(data), &d); err != nil || d.Status != store.Failed && d.Status != store.Delivered {
				t.Errorf("delivery event %q: %v", data, err)
			}
			finished++
			continue
		}
		var a inspector.AttemptEvent
		if err := json.Unmarshal([]byte(data), &a); ev != "event: attempt\n" || err != nil {
			t.Fatalf("event %q %q: %v", ev, data, err)
		}
		seen[a.Delivery] = a
		n++
	}
	if a := seen[oldest.ID]; a.Source != "web" || a.Status != 400 || a.Outcome != "final" || a.Then != "give_up" || a.URL != web.URL {
		t.Errorf("attempt event of %d: %+v", oldest.ID, a)
	}
	if len(seen) != 3 {
		t.Errorf("attempt events for %d deliveries, want 3", len(seen))
	}

	// Retry one: pending (web's endpoint holds it) until it recovers.
	var retried struct{ Retried int }
	page.json(t, "POST", "/api/retry", fmt.Sprintf(`{"ids":[%d]}`, oldest.ID), &retried)
	if retried.Retried != 1 {
		t.Fatalf("retried %d, want 1", retried.Retried)
	}
	page.json(t, "GET", fmt.Sprintf("/api/deliveries/%d", oldest.ID), "", &d)
	if d.Status != store.Pending || d.Attempts != 0 {
		t.Errorf("after retry: %s, %d attempts; want pending, 0", d.Status, d.Attempts)
	}
	web.Release()
	waitFor(t, "the retried delivery delivered", func() bool {
		return len(deliveries(t, h, store.Filter{Status: store.Delivered, Source: "web"})) == 1
	})
	// Then every failed one: the other.
	page.json(t, "POST", "/api/retry", `{"status":"failed"}`, &retried)
	if retried.Retried != 1 {
		t.Fatalf("retried %d, want 1", retried.Retried)
	}
	waitFor(t, "every delivery delivered", func() bool {
		return len(deliveries(t, h, store.Filter{Status: store.Delivered})) == 3
	})
	page.json(t, "GET", fmt.Sprintf("/api/deliveries/%d", newest.ID), "", &d)
	if d.Status != store.Delivered || len(d.Records) != 2 || d.Records[1].Status != 200 {
		t.Errorf("the other: %s, %+v", d.Status, d.Records)
	}

	// The stats count the attempts in the clock's minute; web's endpoint
	// is healthy (400 is the request's fault, not the endpoint's).
	var stats struct{ Endpoints []inspector.EndpointStats }
	page.json(t, "GET", "/api/stats", "", &stats)
	if len(stats.Endpoints) != 2 {
		t.Fatalf("stats of %d endpoints, want 2", len(stats.Endpoints))
	}
	w, a := stats.Endpoints[0], stats.Endpoints[1]
	now := w.Minutes[inspector.StatsMinutes-1]
	if w.Source != "web" || w.URL != web.URL || w.State != store.EndpointClosed || now.T != admin.WireTime(t0.Truncate(time.Minute)) ||
		now.Delivered != 2 || now.Failed != 2 || now.Retried != 0 {
		t.Errorf("web's stats: %s %s %s, this minute %+v", w.Source, w.URL, w.State, now)
	}
	if now := a.Minutes[inspector.StatsMinutes-1]; a.Source != "app" || now.Delivered != 1 {
		t.Errorf("app's stats: %s, this minute %+v", a.Source, now)
	}

	// A drain ends the open stream rather than waiting on it.
	h.stop()
	if _, err := io.ReadAll(events); err != nil {
		t.Errorf("stream after the drain: %v", err)
	}
}

// --ui without an admin token does not start: the page needs it.
func TestUINeedsTheAdminToken(t *testing.T) {
	t.Parallel()
	cfg := serve.Config{
		Addr: "127.0.0.1:0", Store: "sqlite://" + filepath.Join(t.TempDir(), "evfwd.db"),
		Sources: []serve.Source{{Name: "web", WriteKey: "wk_web"}},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, err = serve.New(context.Background(), cfg, serve.Options{UIListener: ln})
	if !errors.Is(err, serve.ErrUINeedsToken) || !strings.Contains(err.Error(), "admin_token") || !strings.Contains(err.Error(), admin.TokenEnv) {
		t.Errorf("New with --ui and no token: %v", err)
	}
	// The store was released: serve can start on it now.
	srv, err := serve.New(context.Background(), cfg, serve.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv.Close()
}

// Failed logins at the inspector are counted in /metrics, by reason, and
// logged without the token.
func TestUILoginFailuresInMetrics(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var logs syncbuf.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	h, _ := startAdminOpts(t, serve.Options{UIListener: ln, Logger: logger}, adminToken, newHook(t), newHook(t))
	failures := func() (wrong, limited float64) {
		mf := scrape(t, h.url)["evfwd_ui_login_failures_total"]
		if mf == nil {
			t.Fatal("no evfwd_ui_login_failures_total in /metrics")
		}
		for _, m := range mf.GetMetric() {
			switch m.GetLabel()[0].GetValue() {
			case inspector.LoginWrongToken:
				wrong = m.GetCounter().GetValue()
			case inspector.LoginRateLimited:
				limited = m.GetCounter().GetValue()
			}
		}
		return wrong, limited
	}
	if w, l := failures(); w != 0 || l != 0 {
		t.Errorf("before any login: %v wrong, %v refused; want both series at 0", w, l)
	}
	page := &uiClient{base: strings.TrimSuffix(h.srv.UIURL(), "/"), http: http.DefaultClient}
	const guess = "not-the-token-SENTINEL"
	for i := 1; i <= 6; i++ {
		code, body := page.do(t, "POST", "/api/session", `{"token":"`+guess+`"}`)
		if want := map[bool]int{true: 403, false: 429}[i <= 5]; code != want {
			t.Errorf("login %d with a wrong token: %d %s, want %d", i, code, body, want)
		}
	}
	if w, l := failures(); w != 5 || l != 1 {
		t.Errorf("after 5 wrong tokens and a 429: %v wrong, %v refused", w, l)
	}
	out := logs.String()
	if strings.Count(out, `msg="inspector: wrong admin token"`) != 5 || strings.Contains(out, guess) || strings.Contains(out, adminToken) {
		t.Errorf("log of the failed logins (5 lines, no token):\n%s", out)
	}
}
