package inspector_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/evfwd/evfwd/internal/webhooktest"
	"github.com/evfwd/evfwd/pkg/admin"
	"github.com/evfwd/evfwd/pkg/forwarder"
	"github.com/evfwd/evfwd/pkg/inspector"
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/sqlite"
	"github.com/evfwd/evfwd/pkg/store/storetest"
	"github.com/evfwd/evfwd/pkg/webhook"
	"github.com/google/go-cmp/cmp"
)

// The serve inspector is an observer of the forwarder.
var (
	_ forwarder.Observer         = (*inspector.Serve)(nil)
	_ forwarder.EndpointObserver = (*inspector.Serve)(nil)
)

const adminToken = "adm1n-t0ken"

const (
	okURL   = "http://hooks.test/ok"
	deadURL = "http://hooks.test/dead"
)

// serveT0 is the clock's start in these tests: 10:00:30, mid-minute.
var serveT0 = time.Date(2026, 11, 23, 10, 0, 30, 0, time.UTC)

// serveBench is the serve inspector on a SQLite store, on loopback.
type serveBench struct {
	st     store.Store
	insp   *inspector.Serve
	ui     *httptest.Server
	clock  *webhooktest.Clock
	health []store.EndpointState // what Health answers; nil: Health unset

	mu    sync.Mutex
	woken []string
}

func newServeBench(t *testing.T, health []store.EndpointState) *serveBench {
	t.Helper()
	return newServeBenchWith(t, health, nil)
}

// newServeBenchWith is newServeBench with set changing the config first.
func newServeBenchWith(t *testing.T, health []store.EndpointState, set func(*inspector.ServeConfig)) *serveBench {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "evfwd.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b := &serveBench{st: st, clock: webhooktest.NewClock(serveT0), health: health}
	b.ui = httptest.NewUnstartedServer(nil)
	cfg := inspector.ServeConfig{
		Addr: b.ui.Listener.Addr().String(), Token: adminToken, Store: st, Now: b.clock.Now,
		URL: "http://127.0.0.1:8787", StoreName: "sqlite:///tmp/evfwd.db", Version: "test",
		Sources: []inspector.ServeSource{
			{Name: "web", Webhooks: true, Endpoints: []string{okURL, deadURL}},
			{Name: "app", Webhooks: true, Endpoints: []string{okURL}},
			{Name: "quiet"},
		},
		Wake: func(source string) {
			b.mu.Lock()
			b.woken = append(b.woken, source)
			b.mu.Unlock()
		},
	}
	if health != nil {
		cfg.Health = func() []store.EndpointState { return b.health }
	}
	if set != nil {
		set(&cfg)
	}
	if b.insp, err = inspector.NewServe(cfg); err != nil {
		t.Fatal(err)
	}
	b.ui.Config.Handler = b.insp
	b.ui.Start()
	t.Cleanup(func() {
		b.insp.Close()
		b.ui.Close()
		st.Close()
	})
	return b
}

func (b *serveBench) wakes() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.woken...)
}

// call makes a request to the inspector with headers (name, value, ...)
// through client (nil: one without cookies).
func (b *serveBench) call(t *testing.T, client *http.Client, method, path, body string, headers ...string) (int, []byte, *http.Response) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, b.ui.URL+path, rd)
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i] == "Host" {
			req.Host = headers[i+1]
			continue
		}
		req.Header.Set(headers[i], headers[i+1])
	}
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out, resp
}

// bearerJSON GETs path with the admin token and decodes the answer.
func (b *serveBench) bearerJSON(t *testing.T, path string, v any) {
	t.Helper()
	code, body, _ := b.call(t, nil, "GET", path, "", "Authorization", "Bearer "+adminToken)
	if code != 200 {
		t.Fatalf("GET %s: %d %s", path, code, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: %v in %s", path, err, body)
	}
}

// retry POSTs body to /api/retry as a bearer caller.
func (b *serveBench) retry(t *testing.T, body string) (int, []byte) {
	t.Helper()
	code, out, _ := b.call(t, nil, "POST", "/api/retry", body, "Authorization", "Bearer "+adminToken, "Content-Type", "application/json")
	return code, out
}

// pause POSTs a pause of source's destination as a bearer caller.
func (b *serveBench) pause(t *testing.T, source, destination string) (int, []byte) {
	t.Helper()
	code, out, _ := b.call(t, nil, "POST", "/api/pause", `{"source":"`+source+`","destination":"`+destination+`"}`,
		"Authorization", "Bearer "+adminToken, "Content-Type", "application/json")
	return code, out
}

// login logs in with the admin token and returns the session id.
func (b *serveBench) login(t *testing.T) string {
	t.Helper()
	code, body, _ := b.call(t, nil, "POST", "/api/session", `{"token":"`+adminToken+`"}`, "Content-Type", "application/json")
	var s struct{ Session string }
	if err := json.Unmarshal(body, &s); code != 200 || err != nil || s.Session == "" {
		t.Fatalf("login: %d %s", code, body)
	}
	return s.Session
}

// authed says whether a GET of /api/deliveries with headers is let in
// (200) or not (401); anything else fails the test.
func (b *serveBench) authed(t *testing.T, headers ...string) bool {
	t.Helper()
	code, body, _ := b.call(t, nil, "GET", "/api/deliveries", "", headers...)
	if code != 200 && code != 401 {
		t.Fatalf("GET /api/deliveries: %d %s", code, body)
	}
	return code == 200
}

// fill stores deliveries m1..m6 and finishes them as the forwarder would
// have: m1 (web) delivered to ok; m2 (web) dead after dead then ok failed;
// m3 (app) delivered; m4 (web) failed (400 from ok); m5 (web) still
// pending, never tried; m6 (web) dead at dead. It returns the ids by
// message id.
func (b *serveBench) fill(t *testing.T) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	var msgs []store.Message
	for i, src := range []string{"web", "web", "app", "web", "web", "web"} {
		msgs = append(msgs, storetest.Msg(src, fmt.Sprintf("m%d", i+1), 0, true))
	}
	if err := b.st.Ingest(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	ids := map[string]int64{}
	at := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	var cs []store.Completion
	for _, src := range []string{"web", "app"} {
		ds, err := b.st.Lease(ctx, store.LeaseRequest{Owner: "t", Source: src, Limit: 10, Now: at, TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			ids[d.MessageID] = d.ID
			rec := func(i int, url string, status int, class, outcome string) store.Attempt {
				return store.Attempt{Delivery: 1, Endpoint: i, URL: url, Start: at, Latency: 3 * time.Millisecond,
					Status: status, Class: class, Outcome: outcome, Excerpt: []byte("answer")}
			}
			c := store.Completion{ID: d.ID, Owner: "t", Attempts: 1, FirstAttempt: at}
			switch d.MessageID {
			case "m1", "m3":
				c.Status, c.Records = store.Delivered, []store.Attempt{rec(0, okURL, 200, "http_2xx", "delivered")}
			case "m2":
				c.Status, c.LastError = store.Dead, okURL+": HTTP 503"
				c.Records = []store.Attempt{rec(1, deadURL, 500, "http_5xx", "retryable"), rec(0, okURL, 503, "http_5xx", "retryable")}
			case "m4":
				c.Status, c.LastError, c.Records = store.Failed, okURL+": HTTP 400", []store.Attempt{rec(0, okURL, 400, "http_4xx", "final")}
			case "m5":
				continue // stays leased until the lease ends; pending
			case "m6":
				c.Status, c.LastError, c.Records = store.Dead, deadURL+": HTTP 500", []store.Attempt{rec(1, deadURL, 500, "http_5xx", "retryable")}
			}
			cs = append(cs, c)
		}
	}
	if err := b.st.Complete(ctx, cs); err != nil {
		t.Fatal(err)
	}
	return ids
}

type deliveriesPage struct {
	Deliveries []admin.DeliveryView `json:"deliveries"`
	Next       int64                `json:"next"`
}

func messageIDs(p deliveriesPage) string {
	var out []string
	for _, d := range p.Deliveries {
		out = append(out, d.MessageID)
	}
	return strings.Join(out, " ")
}

func TestNewServeNeedsTheAdminToken(t *testing.T) {
	_, err := inspector.NewServe(inspector.ServeConfig{Addr: "127.0.0.1:8790"})
	if err == nil || !strings.Contains(err.Error(), "admin_token") || !strings.Contains(err.Error(), admin.TokenEnv) {
		t.Errorf("NewServe without a token: %v; want an error naming admin_token and %s", err, admin.TokenEnv)
	}
}

// Logging in: a wrong token is a 403; the right one answers a session id
// (32 random bytes) that the page sends back as a header, and sets no
// cookie: nothing the browser sends by itself opens the inspector.
func TestServeLogin(t *testing.T) {
	b := newServeBench(t, nil)
	jar, _ := cookiejar.New(nil)
	page := &http.Client{Jar: jar}

	code, body, _ := b.call(t, page, "GET", "/api/session", "")
	if code != 200 || strings.TrimSpace(string(body)) != `{"auth":false,"mode":"serve"}` {
		t.Errorf("session before login: %d %s", code, body)
	}
	code, body, resp := b.call(t, page, "POST", "/api/session", `{"token":"guess"}`, "Content-Type", "application/json")
	if code != 403 || len(resp.Cookies()) != 0 {
		t.Errorf("wrong token: %d %s, cookies %v; want 403 and none", code, body, resp.Cookies())
	}
	code, body, resp = b.call(t, page, "POST", "/api/session", `{"token":"`+adminToken+`"}`, "Content-Type", "application/json")
	if code != 200 || len(resp.Cookies()) != 0 || resp.Header.Get("Set-Cookie") != "" {
		t.Fatalf("login: %d %s, cookies %v; want 200 and no cookie", code, body, resp.Cookies())
	}
	var login struct {
		Session string
		IdleMs  int64
	}
	json.Unmarshal(body, &login)
	if raw, err := base64.RawURLEncoding.DecodeString(login.Session); err != nil || len(raw) != 32 || login.IdleMs != (12*time.Hour).Milliseconds() {
		t.Errorf("login answer %s: want a session of 32 bytes, base64url, and idleMs of 12h", body)
	}

	var s struct {
		Mode    string
		Auth    bool
		CSRF    string
		Version string
		Serve   struct {
			URL     string
			Store   string
			Sources []inspector.ServeSource
		}
	}
	// The cookie jar holds nothing: without the header, still signed out.
	if code, body, _ = b.call(t, page, "GET", "/api/session", ""); !strings.Contains(string(body), `"auth":false`) {
		t.Errorf("session without the header: %d %s", code, body)
	}
	code, body, _ = b.call(t, nil, "GET", "/api/session", "", inspector.SessionHeader, login.Session)
	if err := json.Unmarshal(body, &s); code != 200 || err != nil {
		t.Fatalf("session: %d %s", code, body)
	}
	if s.Mode != "serve" || !s.Auth || s.CSRF != "" || s.Version != "test" ||
		s.Serve.URL != "http://127.0.0.1:8787" || s.Serve.Store != "sqlite:///tmp/evfwd.db" || len(s.Serve.Sources) != 3 ||
		s.Serve.Sources[0].Name != "web" || !s.Serve.Sources[0].Webhooks || len(s.Serve.Sources[0].Endpoints) != 2 {
		t.Errorf("session after login: %s", body)
	}
	// Another login is another session.
	if other := b.login(t); other == login.Session || !b.authed(t, inspector.SessionHeader, other) || !b.authed(t, inspector.SessionHeader, login.Session) {
		t.Errorf("two logins: %q and %q, want two live sessions", login.Session, other)
	}
	// A session id is good only as the header: not as a cookie (the old
	// one's name or any), not as a Bearer token.
	for _, h := range [][]string{
		{"Cookie", "evfwd_ui=" + login.Session},
		{"Cookie", inspector.SessionHeader + "=" + login.Session},
		{"Authorization", "Bearer " + login.Session},
		{inspector.SessionHeader, login.Session + "x"},
		{inspector.SessionHeader, adminToken},
	} {
		if b.authed(t, h...) {
			t.Errorf("%s: %s opens the inspector", h[0], h[1])
		}
	}
	// A browser that still has the old cookie is told to drop it.
	_, _, resp = b.call(t, nil, "GET", "/", "", "Cookie", "evfwd_ui=old")
	if c := resp.Cookies(); len(c) != 1 || c[0].Name != "evfwd_ui" || c[0].MaxAge >= 0 {
		t.Errorf("page for a browser with the old cookie: Set-Cookie %v, want it expired", c)
	}
}

// Every API call but the session's needs a session or the admin token
// (401). No CSRF token: a POST with either is let in, the credential being
// a header that no other origin can make a browser send; a POST that names
// another Origin is refused (403), a body not sent as JSON too (415), and
// every request must name the address served as its Host (421).
func TestServeGuards(t *testing.T) {
	b := newServeBench(t, nil)
	b.fill(t)
	sess := b.login(t)
	port := b.ui.URL[strings.LastIndex(b.ui.URL, ":")+1:]
	ctJSON := "application/json"
	retry := `{"ids":[1]}`
	for _, tt := range []struct {
		name   string
		method string
		path   string
		hdr    []string
		want   int
	}{
		{"list without token", "GET", "/api/deliveries", nil, 401},
		{"detail without token", "GET", "/api/deliveries/1", nil, 401},
		{"stats without token", "GET", "/api/stats", nil, 401},
		{"events without token", "GET", "/api/events", nil, 401},
		{"unknown path without token", "GET", "/api/nothing", nil, 401},
		{"wrong bearer", "GET", "/api/deliveries", []string{"Authorization", "Bearer nope"}, 401},
		{"unknown session", "GET", "/api/deliveries", []string{inspector.SessionHeader, "nope"}, 401},
		{"retry without token", "POST", "/api/retry", []string{"Content-Type", ctJSON}, 401},
		{"retry with an old CSRF header only", "POST", "/api/retry", []string{"Content-Type", ctJSON, "X-CSRF-Token", "x"}, 401},
		{"page", "GET", "/", nil, 200},
		{"list with the session", "GET", "/api/deliveries", []string{inspector.SessionHeader, sess}, 200},
		{"list with bearer", "GET", "/api/deliveries", []string{"Authorization", "bearer " + adminToken}, 200},
		{"unknown path", "GET", "/api/nothing", []string{inspector.SessionHeader, sess}, 404},
		{"retry with the session", "POST", "/api/retry", []string{"Content-Type", ctJSON, inspector.SessionHeader, sess}, 200},
		{"retry with the session, from the page", "POST", "/api/retry", []string{"Content-Type", ctJSON, inspector.SessionHeader, sess, "Origin", "http://127.0.0.1:" + port}, 200},
		{"retry with bearer", "POST", "/api/retry", []string{"Content-Type", ctJSON, "Authorization", "Bearer " + adminToken}, 200},
		{"retry with bearer, an ignored CSRF header", "POST", "/api/retry", []string{"Content-Type", ctJSON, "Authorization", "Bearer " + adminToken, "X-CSRF-Token", "x"}, 200},
		{"retry from another origin", "POST", "/api/retry", []string{"Content-Type", ctJSON, inspector.SessionHeader, sess, "Origin", "http://127.0.0.1:8788"}, 403},
		{"retry from a null origin", "POST", "/api/retry", []string{"Content-Type", ctJSON, "Authorization", "Bearer " + adminToken, "Origin", "null"}, 403},
		{"list from another origin", "GET", "/api/deliveries", []string{inspector.SessionHeader, sess, "Origin", "http://evil.example"}, 403},
		{"login from another origin", "POST", "/api/session", []string{"Content-Type", ctJSON, "Origin", "http://127.0.0.1:8788"}, 403},
		{"retry as text", "POST", "/api/retry", []string{"Content-Type", "text/plain", inspector.SessionHeader, sess}, 415},
		{"login as text", "POST", "/api/session", []string{"Content-Type", "text/plain"}, 415},
		{"login as a form", "POST", "/api/session", []string{"Content-Type", "application/x-www-form-urlencoded"}, 415},
		{"another Host", "GET", "/api/deliveries", []string{inspector.SessionHeader, sess, "Host", "evil.example:" + port}, 421},
		{"another Host, login", "POST", "/api/session", []string{"Host", "evil.example", "Content-Type", ctJSON}, 421},
	} {
		body := retry
		if tt.method == "GET" {
			body = ""
		}
		code, out, resp := b.call(t, nil, tt.method, tt.path, body, tt.hdr...)
		if code != tt.want {
			t.Errorf("%s: %d %s, want %d", tt.name, code, out, tt.want)
		}
		if code >= 400 && !strings.HasPrefix(string(out), `{"error":`) {
			t.Errorf("%s: error body %s, want JSON", tt.name, out)
		}
		if code == 401 && resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("%s: 401 without WWW-Authenticate", tt.name)
		}
		// Framing refused, nothing sniffed, on every answer.
		if h := resp.Header; !strings.Contains(h.Get("Content-Security-Policy"), "frame-ancestors 'none'") || h.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: headers %v", tt.name, h)
		}
	}
}

// Deliveries come newest first, narrowed by status, source and endpoint,
// a page at a time; one shows its message and attempts.
func TestServeDeliveries(t *testing.T) {
	b := newServeBench(t, nil)
	ids := b.fill(t)
	for _, tt := range []struct {
		query string
		want  string
		next  string // the message whose id is next, "" for none
	}{
		{"", "m6 m5 m4 m3 m2 m1", ""},
		{"?status=dead", "m6 m2", ""},
		{"?source=app", "m3", ""},
		{"?status=delivered&source=web", "m1", ""},
		{"?endpoint=" + deadURL, "m6 m2", ""},
		{"?endpoint=" + okURL + "&source=web", "m4 m2 m1", ""},
		{"?limit=2", "m6 m5", "m5"},
		{fmt.Sprintf("?limit=2&before=%d", ids["m5"]), "m4 m3", "m3"},
		{fmt.Sprintf("?limit=2&before=%d", ids["m3"]), "m2 m1", ""},
		{fmt.Sprintf("?limit=1&source=web&before=%d", ids["m2"]), "m1", ""},
		{"?limit=5000", "m6 m5 m4 m3 m2 m1", ""},
		{"?status=cancelled", "", ""},
	} {
		var p deliveriesPage
		b.bearerJSON(t, "/api/deliveries"+tt.query, &p)
		if got := messageIDs(p); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.query, got, tt.want)
		}
		if want := ids[tt.next]; p.Next != want {
			t.Errorf("%s: next %d, want %d", tt.query, p.Next, want)
		}
	}
	for _, q := range []string{"?status=lost", "?limit=0", "?limit=x", "?before=-1"} {
		if code, body, _ := b.call(t, nil, "GET", "/api/deliveries"+q, "", "Authorization", "Bearer "+adminToken); code != 400 {
			t.Errorf("%s: %d %s, want 400", q, code, body)
		}
	}
	// Without next, the field is absent.
	_, body, _ := b.call(t, nil, "GET", "/api/deliveries?source=app", "", "Authorization", "Bearer "+adminToken)
	if strings.Contains(string(body), `"next"`) || strings.Contains(string(body), `"message"`) {
		t.Errorf("last page: %s, want no next and no message bodies", body)
	}

	// The detail is `evfwd deliveries show -o json`'s object.
	var d admin.DeliveryView
	b.bearerJSON(t, fmt.Sprintf("/api/deliveries/%d", ids["m2"]), &d)
	det, err := b.st.Get(context.Background(), ids["m2"])
	if err != nil {
		t.Fatal(err)
	}
	want := admin.ViewDetail(det)
	if diff := cmp.Diff(want, d); diff != "" {
		t.Errorf("detail mismatch (-want +got):\n%s", diff)
	}
	if d.Status != store.Dead || len(d.Records) != 2 || d.Records[0].URL != deadURL || d.Records[1].Status != 503 ||
		d.Records[0].Excerpt != "answer" || d.Records[0].LatencyMs != 3 || len(d.Message) == 0 {
		t.Errorf("detail: %+v", d)
	}
	for path, want := range map[string]int{"/api/deliveries/999": 404, "/api/deliveries/x": 400, "/api/deliveries/0": 400} {
		if code, body, _ := b.call(t, nil, "GET", path, "", "Authorization", "Bearer "+adminToken); code != want {
			t.Errorf("%s: %d %s, want %d", path, code, body, want)
		}
	}
}

// Retry is the store's Retry, as `evfwd deliveries retry`: by id, or every
// failed or dead one (of a source, with an attempt to an endpoint);
// delivered ones stay. The forwarder is
// woken for the sources concerned.
func TestServeRetry(t *testing.T) {
	b := newServeBench(t, nil)
	ids := b.fill(t)
	status := func(id string) store.Status {
		d, err := b.st.Get(context.Background(), ids[id])
		if err != nil {
			t.Fatal(err)
		}
		return d.Status
	}
	code, body := b.retry(t, fmt.Sprintf(`{"ids":[%d,%d]}`, ids["m6"], ids["m1"]))
	if code != 200 || strings.TrimSpace(string(body)) != `{"retried":1}` {
		t.Fatalf("retry ids: %d %s", code, body)
	}
	if status("m6") != store.Pending || status("m1") != store.Delivered {
		t.Errorf("after retry of m6 and m1: %s, %s; want pending, delivered", status("m6"), status("m1"))
	}
	if got := b.wakes(); fmt.Sprint(got) != "[web app]" {
		t.Errorf("woken %v, want the sources with webhooks", got)
	}
	code, body = b.retry(t, `{"status":"failed"}`)
	if code != 200 || strings.TrimSpace(string(body)) != `{"retried":1}` || status("m4") != store.Pending {
		t.Errorf("retry failed: %d %s, m4 %s", code, body, status("m4"))
	}
	code, body = b.retry(t, `{"status":"dead","source":"app"}`)
	if code != 200 || strings.TrimSpace(string(body)) != `{"retried":0}` || status("m2") != store.Dead {
		t.Errorf("retry dead of app: %d %s, m2 %s", code, body, status("m2"))
	}
	code, body = b.retry(t, `{"status":"dead","endpoint":"http://nowhere"}`)
	if code != 200 || strings.TrimSpace(string(body)) != `{"retried":0}` || status("m2") != store.Dead {
		t.Errorf("retry dead of an endpoint never tried: %d %s, m2 %s", code, body, status("m2"))
	}
	before := len(b.wakes())
	code, body = b.retry(t, `{"status":"dead","source":"web","endpoint":"`+okURL+`"}`)
	if code != 200 || strings.TrimSpace(string(body)) != `{"retried":1}` || status("m2") != store.Pending {
		t.Errorf("retry dead of web: %d %s, m2 %s", code, body, status("m2"))
	}
	if got := b.wakes()[before:]; fmt.Sprint(got) != "[web]" {
		t.Errorf("woken %v, want [web]", got)
	}
	for _, bad := range []string{`{}`, `{"ids":[1],"status":"failed"}`, `{"status":"delivered"}`, `{"status":"pending"}`,
		`{"ids":[0]}`, `{"ids":[1],"source":"web"}`, `{"ids":[1],"endpoint":"` + okURL + `"}`, `{"idz":[1]}`, `not json`,
		`{"ids":[1]} {"ids":[2]}`} {
		if code, body := b.retry(t, bad); code != 400 {
			t.Errorf("retry %s: %d %s, want 400", bad, code, body)
		}
	}
}

// Resend is the store's Resend, as `evfwd deliveries resend`: a delivered
// delivery becomes pending again with its attempts kept; pending and
// unknown ids are reported; the forwarder is woken for the sources
// concerned.
func TestServeResend(t *testing.T) {
	b := newServeBench(t, nil)
	ids := b.fill(t)
	code, out, _ := b.call(t, nil, "POST", "/api/resend", fmt.Sprintf(`{"ids":[%d,%d,999]}`, ids["m1"], ids["m5"]),
		"Authorization", "Bearer "+adminToken, "Content-Type", "application/json")
	want := fmt.Sprintf(`{"resent":1,"pending":[%d],"purged":[],"unknown":[999],"skipped":0}`, ids["m5"])
	if code != 200 || strings.TrimSpace(string(out)) != want {
		t.Fatalf("resend ids: %d %s, want 200 %s", code, out, want)
	}
	d, err := b.st.Get(context.Background(), ids["m1"])
	if err != nil || d.Status != store.Pending || len(d.Records) != 1 {
		t.Errorf("m1 after resend: %+v, %v; want pending with its attempt kept", d, err)
	}
	if got := b.wakes(); fmt.Sprint(got) != "[web app]" {
		t.Errorf("woken %v, want the sources with webhooks", got)
	}
	code, out, _ = b.call(t, nil, "POST", "/api/resend", `{"status":"delivered","source":"app"}`,
		"Authorization", "Bearer "+adminToken, "Content-Type", "application/json")
	if code != 200 || !strings.HasPrefix(string(out), `{"resent":1,`) {
		t.Errorf("resend delivered of app: %d %s, want 1 (m3)", code, out)
	}
	for _, bad := range []string{`{}`, `{"status":"pending"}`, `{"ids":[1],"source":"web"}`, `{"ids":[0]}`, `{"idz":[1]}`,
		`{"status":"delivered","limit":-1}`, `{"ids":[1],"limit":5}`} {
		code, out, _ := b.call(t, nil, "POST", "/api/resend", bad, "Authorization", "Bearer "+adminToken, "Content-Type", "application/json")
		if code != 400 {
			t.Errorf("resend %s: %d %s, want 400", bad, code, out)
		}
	}
}

type statsAnswer struct {
	Endpoints    []inspector.EndpointStats    `json:"endpoints"`
	Destinations []inspector.DestinationStats `json:"destinations"`
}

// Stats count the observed attempts per endpoint and minute on the
// inspector's clock, with each endpoint's health, live or as recorded.
func TestServeStats(t *testing.T) {
	since := serveT0.Add(-time.Minute)
	live := []store.EndpointState{
		{Source: "web", URL: okURL, State: store.EndpointClosed, Since: since},
		{Source: "web", URL: deadURL, State: store.EndpointOpen, Since: since, Failures: 5, NextProbe: serveT0.Add(time.Minute), LastError: "HTTP 500"},
	}
	b := newServeBench(t, live)
	att := func(url string, status int, o webhook.Outcome, then webhook.Then, ms int) webhook.Attempt {
		return webhook.Attempt{URL: url, Status: status, Outcome: o, Then: then, Latency: time.Duration(ms) * time.Millisecond, Start: b.clock.Now()}
	}
	b.insp.Attempt("web", 1, att(okURL, 200, webhook.Delivered, webhook.ThenDone, 2))
	b.insp.Attempt("web", 2, att(deadURL, 500, webhook.Retryable, webhook.ThenNextURL, 10))
	b.insp.Attempt("web", 2, att(okURL, 200, webhook.Delivered, webhook.ThenDone, 4))
	b.clock.Add(time.Minute)
	b.insp.Attempt("web", 3, att(deadURL, 500, webhook.Retryable, webhook.ThenGiveUp, 30))
	b.insp.Attempt("web", 4, att(okURL, 0, webhook.Interrupted, webhook.ThenStop, 1))
	b.insp.Attempt("gone", 5, att("http://elsewhere", 200, webhook.Delivered, webhook.ThenDone, 1))

	var s statsAnswer
	b.bearerJSON(t, "/api/stats", &s)
	var names []string
	for _, e := range s.Endpoints {
		names = append(names, e.Source+" "+e.URL)
		if len(e.Minutes) != inspector.StatsMinutes {
			t.Errorf("%s %s: %d minutes", e.Source, e.URL, len(e.Minutes))
		}
	}
	if want := []string{"web " + okURL, "web " + deadURL, "app " + okURL, "gone http://elsewhere"}; !cmp.Equal(want, names) {
		t.Fatalf("endpoints %v, want %v", names, want)
	}
	ok, dead, app := s.Endpoints[0], s.Endpoints[1], s.Endpoints[2]
	last := inspector.StatsMinutes - 1
	if want := (inspector.Minute{T: "2026-11-23T10:00:00.000Z", Delivered: 2, Latency: inspector.Latency{Avg: 3, Max: 4}}); ok.Minutes[last-1] != want {
		t.Errorf("ok at 10:00: %+v, want %+v", ok.Minutes[last-1], want)
	}
	if want := (inspector.Minute{T: "2026-11-23T10:01:00.000Z"}); ok.Minutes[last] != want {
		t.Errorf("ok at 10:01: %+v, want %+v (an interrupted attempt is not counted)", ok.Minutes[last], want)
	}
	if dead.Minutes[last-1].Retried != 1 || dead.Minutes[last].Failed != 1 || dead.Minutes[last].Latency.Max != 30 {
		t.Errorf("dead: 10:00 %+v, 10:01 %+v", dead.Minutes[last-1], dead.Minutes[last])
	}
	if ok.State != store.EndpointClosed || ok.Since != admin.WireTime(since) || ok.NextProbe != "" {
		t.Errorf("ok's health: %+v", ok)
	}
	if dead.State != store.EndpointOpen || dead.Failures != 5 || dead.NextProbe != "2026-11-23T10:01:30.000Z" || dead.LastError != "HTTP 500" {
		t.Errorf("dead's health: %+v", dead)
	}
	if app.State != "" || app.Minutes[last] != (inspector.Minute{T: app.Minutes[last].T}) {
		t.Errorf("app, never tried nor reported: %+v", app)
	}

	// Without the forwarder's live health, the store's record.
	b2 := newServeBench(t, nil)
	if err := b2.st.SaveEndpoint(context.Background(), store.EndpointState{Source: "web", URL: deadURL, State: store.EndpointHalfOpen,
		Since: since, Failures: 3, Node: "n1", UpdatedAt: since}); err != nil {
		t.Fatal(err)
	}
	var s2 statsAnswer
	b2.bearerJSON(t, "/api/stats", &s2)
	if e := s2.Endpoints; len(e) != 3 || e[1].State != store.EndpointHalfOpen || e[1].Failures != 3 || e[0].State != "" {
		for _, x := range e {
			t.Errorf("stats from the store: %s %s %q %d", x.Source, x.URL, x.State, x.Failures)
		}
	}
}

// The event stream carries each attempt, with its delivery, each change
// of an endpoint's health, and each batch stored.
func TestServeEvents(t *testing.T) {
	b := newServeBench(t, nil)
	req, _ := http.NewRequest("GET", b.ui.URL+"/api/events", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("events: %d %q", resp.StatusCode, ct)
	}
	rd := bufio.NewReader(resp.Body)
	// The first lines come once the stream is subscribed.
	if line, _ := rd.ReadString('\n'); line != "retry: 1000\n" {
		t.Fatalf("first line %q", line)
	}
	rd.ReadString('\n')
	next := func() (string, string) {
		ev, _ := rd.ReadString('\n')
		data, _ := rd.ReadString('\n')
		rd.ReadString('\n')
		return ev, data
	}
	start := serveT0
	b.insp.Attempt("web", 42, webhook.Attempt{URL: deadURL, Endpoint: 1, Start: start, Latency: 12500 * time.Microsecond,
		Status: 500, Class: webhook.ClassServerError, Outcome: webhook.Retryable, Then: webhook.ThenRetry, RetryAt: start.Add(time.Minute)})
	ev, data := next()
	want := `data: {"delivery":42,"source":"web","url":"` + deadURL + `","endpoint":1,"status":500,"class":"http_5xx","outcome":"retryable","then":"retry","retryAt":"2026-11-23T10:01:30.000Z","latencyMs":12.5,"start":"2026-11-23T10:00:30.000Z"}` + "\n"
	if ev != "event: attempt\n" || data != want {
		t.Errorf("attempt event:\n%q %q\nwant\n%q", ev, data, want)
	}
	b.insp.Attempt("web", 43, webhook.Attempt{URL: okURL, Start: start, Class: webhook.ClassRefused, Err: errors.New("connection refused"),
		Outcome: webhook.Retryable, Then: webhook.ThenGiveUp})
	if ev, data := next(); ev != "event: attempt\n" || !strings.Contains(data, `"error":"connection refused"`) || !strings.Contains(data, `"then":"give_up"`) {
		t.Errorf("attempt event: %q %q", ev, data)
	}
	b.insp.EndpointState("web", deadURL, store.EndpointOpen)
	if ev, data := next(); ev != "event: endpoint\n" || data != `data: {"source":"web","url":"`+deadURL+`","state":"open"}`+"\n" {
		t.Errorf("endpoint event: %q %q", ev, data)
	}
	b.insp.Stored("web", 100)
	if ev, data := next(); ev != "event: stored\n" || data != `data: {"messages":100,"source":"web"}`+"\n" {
		t.Errorf("stored event: %q %q", ev, data)
	}
	// Close ends the stream, so that a server shutting down does not wait.
	b.insp.Close()
	if _, err := io.ReadAll(rd); err != nil {
		t.Errorf("after Close: %v", err)
	}
}

// A session ends after 12 hours without a call, on the inspector's clock;
// each call starts the 12 hours again. Then the page is asked to log in.
func TestServeSessionExpiresWhenIdle(t *testing.T) {
	b := newServeBench(t, nil)
	sess := b.login(t)
	hdr := []string{inspector.SessionHeader, sess}
	b.clock.Add(12*time.Hour - time.Second)
	if !b.authed(t, hdr...) {
		t.Fatal("a session used 12h-1s after login: refused")
	}
	b.clock.Add(12*time.Hour - time.Second) // 24h after login, 12h-1s after its last use
	if !b.authed(t, hdr...) {
		t.Fatal("a session used 12h-1s after its last use: refused")
	}
	b.clock.Add(12 * time.Hour)
	if b.authed(t, hdr...) {
		t.Fatal("a session idle for 12h: still let in")
	}
	// Gone for good: a call after it does not bring it back.
	b.clock.Add(-time.Hour)
	if b.authed(t, hdr...) {
		t.Error("an expired session came back")
	}
	if _, body, _ := b.call(t, nil, "GET", "/api/session", "", hdr...); !strings.Contains(string(body), `"auth":false`) {
		t.Errorf("session of an expired session: %s, want auth false", body)
	}

	// Another idle time.
	b2 := newServeBenchWith(t, nil, func(c *inspector.ServeConfig) { c.SessionIdle = time.Minute })
	sess = b2.login(t)
	b2.clock.Add(time.Minute)
	if b2.authed(t, inspector.SessionHeader, sess) {
		t.Error("SessionIdle 1m: a session idle for a minute is let in")
	}
}

// streamOpen opens the event stream with headers and reads its first
// lines; the returned reader ends when the server ends the stream.
func (b *serveBench) streamOpen(t *testing.T, headers ...string) io.Reader {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", b.ui.URL+"/api/events", nil)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 {
		t.Fatalf("events: %d", resp.StatusCode)
	}
	rd := bufio.NewReader(resp.Body)
	if line, _ := rd.ReadString('\n'); line != "retry: 1000\n" {
		t.Fatalf("first line %q", line)
	}
	rd.ReadString('\n')
	return rd
}

// ended fails the test unless the stream rd ends cleanly (the test's
// deadline is the stream's).
func ended(t *testing.T, what string, rd io.Reader) {
	t.Helper()
	if _, err := io.ReadAll(rd); err != nil {
		t.Errorf("%s: the stream ended with %v, want its end", what, err)
	}
}

// DELETE /api/session ends the session at once, with its event streams;
// the other sessions and Bearer callers go on.
func TestServeLogout(t *testing.T) {
	b := newServeBench(t, nil)
	sess, other := b.login(t), b.login(t)
	stream := b.streamOpen(t, inspector.SessionHeader, sess)
	otherStream := b.streamOpen(t, inspector.SessionHeader, other)
	code, body, resp := b.call(t, nil, "DELETE", "/api/session", "", inspector.SessionHeader, sess)
	if code != 204 || len(body) != 0 || resp.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("logout: %d %q", code, body)
	}
	ended(t, "the logged-out session's stream", stream)
	if b.authed(t, inspector.SessionHeader, sess) {
		t.Error("a logged-out session is let in")
	}
	if !b.authed(t, inspector.SessionHeader, other) || !b.authed(t, "Authorization", "Bearer "+adminToken) {
		t.Error("another session, or the admin token, refused after a logout")
	}
	// The other session's stream still carries events.
	b.insp.Stored("web", 1)
	if line, _ := otherStream.(*bufio.Reader).ReadString('\n'); line != "event: stored\n" {
		t.Errorf("the other session's stream after a logout: %q", line)
	}
	// Again, or with no session: done either way.
	for _, hdr := range [][]string{{inspector.SessionHeader, sess}, nil, {"Origin", "http://127.0.0.1:8788"}} {
		code, body, _ := b.call(t, nil, "DELETE", "/api/session", "", hdr...)
		if want := 204 - 0; len(hdr) == 2 && hdr[0] == "Origin" {
			want = 403
			if code != want {
				t.Errorf("logout from another origin: %d %s, want 403", code, body)
			}
		} else if code != want {
			t.Errorf("logout %v: %d %s, want 204", hdr, code, body)
		}
	}
	// A session idle too long loses its stream too, at the next check.
	b2 := newServeBenchWith(t, nil, func(c *inspector.ServeConfig) { c.SessionCheck = 5 * time.Millisecond })
	sess = b2.login(t)
	stream = b2.streamOpen(t, inspector.SessionHeader, sess)
	bearer := b2.streamOpen(t, "Authorization", "Bearer "+adminToken)
	b2.clock.Add(inspector.DefaultSessionIdle)
	ended(t, "an idle session's stream", stream)
	b2.insp.Stored("web", 1)
	if line, _ := bearer.(*bufio.Reader).ReadString('\n'); line != "event: stored\n" {
		t.Errorf("a Bearer caller's stream after a session idled out: %q", line)
	}
}

// Sessions live in the process: another inspector (serve restarted) knows
// none of them. At most 64 are kept; a login beyond ends the oldest.
func TestServeRestartLogsOut(t *testing.T) {
	b := newServeBench(t, nil)
	first := b.login(t)
	restarted, err := inspector.NewServe(inspector.ServeConfig{Addr: b.ui.Listener.Addr().String(), Token: adminToken, Store: b.st, Now: b.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer restarted.Close()
	req := httptest.NewRequest("GET", "http://"+b.ui.Listener.Addr().String()+"/api/session", nil)
	req.Header.Set(inspector.SessionHeader, first)
	w := httptest.NewRecorder()
	restarted.ServeHTTP(w, req)
	if w.Code != 200 || strings.TrimSpace(w.Body.String()) != `{"auth":false,"mode":"serve"}` {
		t.Errorf("a session of the process before, after a restart: %d %s", w.Code, w.Body)
	}

	for range 63 {
		b.login(t)
	}
	if !b.authed(t, inspector.SessionHeader, first) {
		t.Fatal("the first of 64 sessions refused")
	}
	last := b.login(t)
	if b.authed(t, inspector.SessionHeader, first) || !b.authed(t, inspector.SessionHeader, last) {
		t.Error("the 65th login: want the oldest session ended, the newest live")
	}
}

// loginFrom POSTs a login with token as if from the client address addr,
// and returns the status and Retry-After.
func (b *serveBench) loginFrom(t *testing.T, addr, token string) (int, string) {
	t.Helper()
	req := httptest.NewRequest("POST", "http://"+b.ui.Listener.Addr().String()+"/api/session", strings.NewReader(`{"token":`+strconv.Quote(token)+`}`))
	req.RemoteAddr = addr
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	b.insp.ServeHTTP(w, req)
	if w.Code == 429 && !strings.Contains(w.Body.String(), "try again in "+w.Header().Get("Retry-After")+"s") {
		t.Errorf("429 %s, Retry-After %s: want the error to say when", w.Body, w.Header().Get("Retry-After"))
	}
	return w.Code, w.Header().Get("Retry-After")
}

// bearerFrom GETs the deliveries with a Bearer token from addr.
func (b *serveBench) bearerFrom(addr, token string) (int, string) {
	req := httptest.NewRequest("GET", "http://"+b.ui.Listener.Addr().String()+"/api/deliveries", nil)
	req.RemoteAddr = addr
	req.Header.Set("Authorization", "Bearer "+token)
	w := httptest.NewRecorder()
	b.insp.ServeHTTP(w, req)
	return w.Code, w.Header().Get("Retry-After")
}

// After 5 wrong tokens from one address, its logins are refused with 429
// and Retry-After, for 1 s, then 2, 4, ... up to 5 minutes after each
// further failure, the right token too; other addresses go on. A success
// forgets the failures, and so does a day without any. Wrong Bearer tokens
// count the same. Each failure is logged, without the token, and counted.
func TestServeLoginRateLimit(t *testing.T) {
	var logs strings.Builder
	var mu sync.Mutex
	counts := map[string]int{}
	b := newServeBenchWith(t, nil, func(c *inspector.ServeConfig) {
		c.Logger = slog.New(slog.NewTextHandler(&lockedWriter{mu: &mu, w: &logs}, nil))
		c.LoginFailure = func(reason string) { mu.Lock(); counts[reason]++; mu.Unlock() }
	})
	const a, other = "192.0.2.1:4000", "192.0.2.2:4000"
	guess := func(i int) string { return fmt.Sprintf("GUESS-%d-sentinel", i) }
	n, wrongs, refused := 0, 0, 0
	tally := func(code int, retry string) (int, string) {
		switch code {
		case 401, 403:
			wrongs++
		case 429:
			refused++
		}
		return code, retry
	}
	login := func(addr, token string) (int, string) { return tally(b.loginFrom(t, addr, token)) }
	bearer := func(addr, token string) (int, string) { return tally(b.bearerFrom(addr, token)) }
	wrong := func(addr string) (int, string) { n++; return login(addr, guess(n)) }
	expect := func(what string, code int, retry string, want int, wantRetry string) {
		t.Helper()
		if code != want || retry != wantRetry {
			t.Errorf("%s: %d, Retry-After %q; want %d, %q", what, code, retry, want, wantRetry)
		}
	}
	for i := 1; i <= 5; i++ {
		code, retry := wrong(a)
		expect(fmt.Sprintf("wrong token %d", i), code, retry, 403, "")
	}
	code, retry := wrong(a)
	expect("a 6th wrong token at once", code, retry, 429, "1")
	code, retry = login(a, adminToken)
	expect("the right token while locked out", code, retry, 429, "1")
	code, retry = bearer(a, adminToken)
	expect("the admin token as Bearer while locked out", code, retry, 429, "1")
	code, retry = login(other, adminToken)
	expect("another address", code, retry, 200, "")

	// Growing delays: each failure after the lock-out doubles it.
	b.clock.Add(time.Second)
	code, retry = wrong(a)
	expect("a wrong token once the lock-out is over", code, retry, 403, "")
	code, retry = wrong(a)
	expect("at once after the 6th failure", code, retry, 429, "2")
	b.clock.Add(time.Second)
	code, retry = wrong(a)
	expect("a second later", code, retry, 429, "1")
	b.clock.Add(time.Second)
	wrong(a) // the 7th failure: 4 s
	code, retry = wrong(a)
	expect("after the 7th failure", code, retry, 429, "4")
	b.clock.Add(500 * time.Millisecond)
	code, retry = wrong(a)
	expect("3.5 s before the end", code, retry, 429, "4") // rounded up
	for i, want := range []string{"8", "16", "32", "64", "128", "256", "300", "300"} {
		b.clock.Add(5 * time.Minute)
		wrong(a)
		code, retry = wrong(a)
		expect(fmt.Sprintf("after failure %d", 8+i), code, retry, 429, want)
	}
	b.clock.Add(5 * time.Minute)
	code, retry = login(a, adminToken)
	expect("the right token after the lock-out", code, retry, 200, "")
	for i := 1; i <= 5; i++ {
		code, retry = wrong(a)
		expect(fmt.Sprintf("after a success, wrong token %d", i), code, retry, 403, "")
	}
	code, retry = wrong(a)
	expect("after a success, a 6th", code, retry, 429, "1")

	// A day without failures forgets them.
	b.clock.Add(24 * time.Hour)
	for i := 1; i <= 5; i++ {
		code, retry = wrong(a)
		expect(fmt.Sprintf("a day later, wrong token %d", i), code, retry, 403, "")
	}

	// Wrong Bearer tokens count as failures too.
	const c = "[2001:db8::1]:4000"
	for i := 1; i <= 5; i++ {
		n++
		code, retry = bearer(c, guess(n))
		expect(fmt.Sprintf("wrong Bearer %d", i), code, retry, 401, "")
	}
	code, retry = bearer(c, adminToken)
	expect("the admin token as Bearer after 5 wrong", code, retry, 429, "1")
	code, retry = login(c, adminToken)
	expect("a login after 5 wrong Bearer tokens", code, retry, 429, "1")

	mu.Lock()
	defer mu.Unlock()
	out := logs.String()
	if counts[inspector.LoginWrongToken] != wrongs || counts[inspector.LoginRateLimited] != refused || refused == 0 {
		t.Errorf("LoginFailure heard %v; want %d wrong tokens and %d refusals", counts, wrongs, refused)
	}
	if got := strings.Count(out, "wrong admin token\" remote="); got != wrongs {
		t.Errorf("%d log lines of a wrong admin token, want %d:\n%s", got, wrongs, out)
	}
	if strings.Contains(out, "GUESS-") || strings.Contains(out, adminToken) {
		t.Errorf("a token in the log:\n%s", out)
	}
	if !strings.Contains(out, "too many wrong admin tokens") || !strings.Contains(out, "lockedFor=") {
		t.Errorf("the log does not say an address is locked out:\n%s", out)
	}
}

// The addresses remembered are bounded.
func TestServeLoginRateLimitBounded(t *testing.T) {
	b := newServeBench(t, nil)
	for i := range inspector.MaxLoginAddrs + 100 {
		b.loginFrom(t, fmt.Sprintf("10.%d.%d.1:1", i/256, i%256), "wrong")
	}
	if n := inspector.LoginAddrs(b.insp); n > inspector.MaxLoginAddrs {
		t.Errorf("%d addresses kept, want at most %d", n, inspector.MaxLoginAddrs)
	}
}

// lockedWriter serializes writes to w.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// The lists the page shows come from the server (GET /api/session's
// "meta"), and they are the ones the API goes by: the statuses of
// ?status=, the statuses POST /api/retry takes, the counts of a minute of
// GET /api/stats.
func TestServeSessionMeta(t *testing.T) {
	b, _ := newDestinationsBench(t)
	var s struct {
		Meta struct {
			Statuses, Retryable, Resendable []store.Status
			Series, Events                  []string
		}
	}
	b.bearerJSON(t, "/api/session", &s)
	m := s.Meta
	if diff := cmp.Diff(store.Statuses, m.Statuses); diff != "" {
		t.Errorf("statuses, -store.Statuses +served:\n%s", diff)
	}
	for _, st := range m.Statuses {
		if code, body, _ := b.call(t, nil, "GET", "/api/deliveries?status="+string(st), "", "Authorization", "Bearer "+adminToken); code != 200 {
			t.Errorf("GET /api/deliveries?status=%s: %d %s", st, code, body)
		}
		code, body := b.retry(t, `{"status":"`+string(st)+`"}`)
		if retries := slices.Contains(m.Retryable, st); retries != (code == 200) {
			t.Errorf("POST /api/retry status %s: %d %s; served as retryable: %v", st, code, body, retries)
		}
	}
	if len(m.Retryable) == 0 {
		t.Error("no retryable status served")
	}
	if diff := cmp.Diff(admin.Resendable(), m.Resendable); diff != "" {
		t.Errorf("resendable, -admin.Resendable +served:\n%s", diff)
	}

	var stats struct {
		Endpoints []struct{ Minutes []map[string]any }
	}
	b.bearerJSON(t, "/api/stats", &stats)
	minute := stats.Endpoints[0].Minutes[0]
	counts := []string{}
	for k, v := range minute {
		if _, ok := v.(float64); ok {
			counts = append(counts, k)
		}
	}
	slices.Sort(counts)
	if diff := cmp.Diff(counts, slices.Sorted(slices.Values(m.Series))); diff != "" {
		t.Errorf("series, -a minute's counts +served:\n%s", diff)
	}
	// The events are those the observer's calls send.
	rd := b.streamOpen(t, "Authorization", "Bearer "+adminToken).(*bufio.Reader)
	b.insp.Attempt("web", 1, webhook.Attempt{URL: okURL, Start: serveT0, Status: 200, Outcome: webhook.Delivered})
	b.insp.Finished("web", 1, store.Delivered, false)
	b.insp.EndpointState("web", okURL, store.EndpointClosed)
	b.insp.Stored("web", 1)
	if code, body := b.pause(t, "web", "orders"); code != 200 {
		t.Fatalf("pause: %d %s", code, body)
	}
	var sent []string
	for len(sent) < 5 {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("events: %v after %q", err, sent)
		}
		if name, ok := strings.CutPrefix(line, "event: "); ok {
			sent = append(sent, strings.TrimSpace(name))
		}
	}
	if diff := cmp.Diff(sent, m.Events); diff != "" {
		t.Errorf("events, -sent +served:\n%s", diff)
	}

	// Without a session or the token, no meta: the page asks for the
	// token first.
	if _, body, _ := b.call(t, nil, "GET", "/api/session", ""); strings.Contains(string(body), "meta") {
		t.Errorf("session signed out: %s", body)
	}
}
