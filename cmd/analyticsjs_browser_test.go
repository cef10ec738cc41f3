package cmd

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/evfwd/evfwd/internal/syncbuf"
	"github.com/evfwd/evfwd/pkg/serve"
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/webhook"
	"github.com/google/go-cmp/cmp"
)

// Segment's Analytics.js 2.0 (@segment/analytics-next), unchanged, in a
// real Chromium, against `evfwd serve` in-process (issue 28): a page on
// one origin loads the library's UMD build, which reads its settings from
// serve (cdnURL) and posts to serve, another origin, so every request
// passes CORS as a deployed page's would. Each webhook is checked field by
// field against what the library sent, as the page saw it leave.
//
// The package is found through EVFWD_ANALYTICS_NEXT, its directory (the
// one holding package.json and dist/umd/index.js; .ci/run installs the
// pinned version with npm and sets it), or else in
// node_modules/@segment/analytics-next under the repository, under
// /tmp or one directory below /tmp (`npm install --prefix /tmp/ajs
// @segment/analytics-next@1.84.3`). Without it the tests skip, unless
// EVFWD_BROWSER=required: then they fail. node_modules is never committed.

// analyticsNextVersion is the version CI installs; another one found
// locally is used all the same, and the test says which.
const analyticsNextVersion = "1.84.3"

// deviceSkew is how wrong the page's clock is: Date in the page runs two
// hours behind the real time, as a device's clock may, so that serve's
// skew correction has something to correct.
const deviceSkew = -2 * time.Hour

// analyticsNext finds the package (see above) and returns its directory
// and version.
func analyticsNext(t *testing.T) (dir, version string) {
	t.Helper()
	usable := func(dir string) bool {
		_, err := os.Stat(filepath.Join(dir, "dist", "umd", "index.js"))
		return err == nil
	}
	dir = os.Getenv("EVFWD_ANALYTICS_NEXT")
	if dir != "" {
		if !usable(dir) {
			t.Fatalf("EVFWD_ANALYTICS_NEXT=%s: no dist/umd/index.js there; want the directory of @segment/analytics-next", dir)
		}
	} else {
		const pkg = "node_modules/@segment/analytics-next"
		// /tmp as the message below says, whatever TMPDIR the tests run
		// with (testmain's).
		candidates := []string{filepath.Join("..", pkg), filepath.Join("/tmp", pkg)}
		below, _ := filepath.Glob(filepath.Join("/tmp", "*", pkg))
		for _, c := range append(candidates, below...) {
			if usable(c) {
				dir = c
				break
			}
		}
	}
	if dir == "" {
		msg := "no @segment/analytics-next: set EVFWD_ANALYTICS_NEXT to its directory, or `npm install --prefix /tmp/ajs @segment/analytics-next@" + analyticsNextVersion + "`"
		if os.Getenv("EVFWD_BROWSER") == "required" {
			t.Fatal("EVFWD_BROWSER=required, but " + msg)
		}
		t.Skip(msg + " (EVFWD_BROWSER=required makes this a failure)")
	}
	var meta struct{ Version string }
	if b, err := os.ReadFile(filepath.Join(dir, "package.json")); err == nil {
		json.Unmarshal(b, &meta)
	}
	if meta.Version != analyticsNextVersion {
		t.Logf("@segment/analytics-next %s at %s (CI pins %s)", meta.Version, dir, analyticsNextVersion)
	} else {
		t.Logf("@segment/analytics-next %s at %s", meta.Version, dir)
	}
	return dir, meta.Version
}

// ajsPagePath is where the shop page is, with the query a campaign link
// gives it (Analytics.js reads utm_ parameters into context.campaign).
const ajsPagePath = "/shop/checkout?utm_source=newsletter&utm_campaign=spring"

// ajsPage is the page: it sets the device's (wrong) clock, records every
// fetch the page makes (URL, method, headers, body, and the answer as the
// page can read it) in window.evfwdSent, and loads the UMD build, which
// defines window.AnalyticsNext. Analytics.js fetches through whatever
// window.fetch is when it sends, so the recorder sees all it sends.
const ajsPage = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Checkout</title>
<link rel="icon" href="data:,">
<script>
(() => {
	const skew = %d, RealDate = Date;
	function DeviceDate(...args) {
		if (!new.target) return new RealDate(RealDate.now() + skew).toString();
		return args.length ? new RealDate(...args) : new RealDate(RealDate.now() + skew);
	}
	DeviceDate.prototype = RealDate.prototype;
	DeviceDate.now = () => RealDate.now() + skew;
	DeviceDate.parse = RealDate.parse;
	DeviceDate.UTC = RealDate.UTC;
	window.Date = DeviceDate;

	window.evfwdSent = [];
	const realFetch = window.fetch.bind(window);
	window.fetch = async (input, init = {}) => {
		const rec = {
			url: String(input instanceof Request ? input.url : input),
			method: String(init.method || 'GET').toUpperCase(),
			headers: Object.fromEntries(new Headers(init.headers || {})),
			body: typeof init.body === 'string' ? init.body : '',
			status: 0, response: '', error: '', answeredAt: 0,
		};
		window.evfwdSent.push(rec);
		try {
			const res = await realFetch(input, init);
			rec.response = await res.clone().text();
			rec.status = res.status;
			rec.answeredAt = RealDate.now();
			return res;
		} catch (e) {
			rec.error = String(e);
			throw e;
		}
	};
})();
</script>
<script src="/umd/index.js"></script>
</head><body><h1>Checkout</h1></body></html>
`

// sentRecord is one fetch the page made, as window.evfwdSent records it.
type sentRecord struct {
	URL      string            `json:"url"`
	Method   string            `json:"method"`
	Headers  map[string]string `json:"headers"`
	Body     string            `json:"body"`
	Status   int               `json:"status"`
	Response string            `json:"response"`
	Error    string            `json:"error"`
	// AnsweredAt is when the answer came, in Unix milliseconds on the
	// real clock (not the page's skewed one).
	AnsweredAt float64 `json:"answeredAt"`
}

// pageServer serves a page and the package's UMD files (dist/umd under
// /umd/), and notes every path asked for: a lazy chunk would show here.
type pageServer struct {
	*httptest.Server
	mu    sync.Mutex
	paths []string
}

func startPageServer(t *testing.T, pkg string) *pageServer {
	t.Helper()
	return startPageServerWith(t, pkg, fmt.Sprintf(ajsPage, deviceSkew.Milliseconds()))
}

// startPageServerWith serves page at ajsPagePath, and the UMD files.
func startPageServerWith(t *testing.T, pkg, page string) *pageServer {
	t.Helper()
	ps := &pageServer{}
	files := http.StripPrefix("/umd/", http.FileServer(http.Dir(filepath.Join(pkg, "dist", "umd"))))
	ps.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ps.mu.Lock()
		ps.paths = append(ps.paths, r.URL.Path)
		ps.mu.Unlock()
		switch {
		case r.URL.Path == "/shop/checkout":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			io.WriteString(w, page)
		case strings.HasPrefix(r.URL.Path, "/umd/"):
			files.ServeHTTP(w, r)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(ps.Close)
	return ps
}

func (ps *pageServer) served() []string {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return slices.Clone(ps.paths)
}

// wireListener keeps every byte serve reads from each connection, so the
// test sees the requests exactly as Chromium sent them, preflights
// included (a page cannot see those).
type wireListener struct {
	net.Listener
	mu    sync.Mutex
	conns []*bytes.Buffer
}

type wireConn struct {
	net.Conn
	l   *wireListener
	buf *bytes.Buffer
}

func (l *wireListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	buf := &bytes.Buffer{}
	l.mu.Lock()
	l.conns = append(l.conns, buf)
	l.mu.Unlock()
	return &wireConn{Conn: c, l: l, buf: buf}, nil
}

func (c *wireConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.l.mu.Lock()
		c.buf.Write(p[:n])
		c.l.mu.Unlock()
	}
	return n, err
}

// wireRequest is one request serve read.
type wireRequest struct {
	Method, Path string
	Header       http.Header
	Body         []byte
}

func (r wireRequest) String() string { return r.Method + " " + r.Path }

// requests parses what every connection has carried so far: the requests
// of each connection in order, a request still arriving left out.
func (l *wireListener) requests() []wireRequest {
	l.mu.Lock()
	var bufs [][]byte
	for _, b := range l.conns {
		bufs = append(bufs, bytes.Clone(b.Bytes()))
	}
	l.mu.Unlock()
	var out []wireRequest
	for _, b := range bufs {
		br := bufio.NewReader(bytes.NewReader(b))
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				break
			}
			body, err := io.ReadAll(req.Body)
			if err != nil {
				break
			}
			out = append(out, wireRequest{Method: req.Method, Path: req.URL.RequestURI(), Header: req.Header, Body: body})
		}
	}
	return out
}

// hookDelivery is one webhook the receiver got.
type hookDelivery struct {
	header http.Header
	body   []byte
	msg    map[string]any
}

// hookReceiver is the webhook endpoint of the test's sources.
type hookReceiver struct {
	*httptest.Server
	mu  sync.Mutex
	got []hookDelivery
}

func startHookReceiver(t *testing.T) *hookReceiver {
	t.Helper()
	h := &hookReceiver{}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var msg map[string]any
		if err := json.Unmarshal(body, &msg); err != nil {
			t.Errorf("webhook body is not a JSON object: %v: %s", err, body)
		}
		h.mu.Lock()
		h.got = append(h.got, hookDelivery{header: r.Header.Clone(), body: body, msg: msg})
		h.mu.Unlock()
	}))
	t.Cleanup(h.Close)
	return h
}

// byMessageID is every webhook received so far, by messageId.
func (h *hookReceiver) byMessageID() map[string][]hookDelivery {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string][]hookDelivery{}
	for _, d := range h.got {
		id, _ := d.msg["messageId"].(string)
		out[id] = append(out[id], d)
	}
	return out
}

// ajsServe is `evfwd serve` for these tests.
type ajsServe struct {
	srv  *serve.Server
	url  string
	wire *wireListener
	hook *hookReceiver
	logs *syncbuf.Buffer
}

const (
	ajsWriteKey    = "wk_web_shop"
	ajsLockedKey   = "wk_web_locked"
	ajsSecret      = "whsec_analytics_js"
	ajsLockedOwner = "https://shop.example.com"
)

// startAJSServe runs serve in-process with a web source (any origin) and
// a web source that allows only ajsLockedOwner, both forwarding to one
// receiver, on a SQLite store of its own.
func startAJSServe(t *testing.T) *ajsServe {
	t.Helper()
	hook := startHookReceiver(t)
	dest := serve.Webhooks{Enabled: true, Destination: webhook.Destination{SharedSecret: ajsSecret, Endpoints: []webhook.Endpoint{{URL: hook.URL}}}}
	s := startAJSServeWith(t, []serve.Source{
		{Name: "shop", WriteKey: ajsWriteKey, Kind: "web", Webhooks: dest},
		{Name: "locked", WriteKey: ajsLockedKey, Kind: "web", AllowedOrigins: []string{ajsLockedOwner}, Webhooks: dest},
	})
	s.hook = hook
	return s
}

// startAJSServeWith runs serve in-process with these sources, on a SQLite
// store of its own.
func startAJSServeWith(t *testing.T, sources []serve.Source) *ajsServe {
	t.Helper()
	cfg := serve.Config{
		Store:   "sqlite://" + filepath.Join(t.TempDir(), "evfwd.db"),
		Sources: sources,
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	wire := &wireListener{Listener: ln}
	logs := &syncbuf.Buffer{}
	opts := serve.Options{
		Logger: slog.New(slog.NewTextHandler(logs, nil)), Version: "0.0.0-test",
		Policy:   webhook.Policy{Initial: 10 * time.Millisecond, Max: 10 * time.Millisecond, Window: time.Second, Jitter: -1},
		Poll:     5 * time.Millisecond,
		Listener: wire,
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := serve.New(ctx, cfg, opts)
	if err != nil {
		cancel()
		ln.Close()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	s := &ajsServe{srv: srv, url: srv.URL(), wire: wire, logs: logs}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		if t.Failed() {
			t.Logf("serve's log:\n%s", logs.String())
		}
	})
	return s
}

// ajsCall is one call the page made, and the messageId Analytics.js gave
// its event.
type ajsCall struct {
	Name      string `json:"name"`
	MessageID string `json:"messageId"`
}

// ajsCalls is the script the page runs: load Analytics.js with its
// settings from serve, then make each call in turn, and return what the
// calls were. The Webhooks: false track is among them; "after" comes
// last.
const ajsCalls = `(async () => {
	const [analytics] = await AnalyticsNext.AnalyticsBrowser.load({writeKey: %s, cdnURL: %s}, %s);
	const out = [];
	const call = async (name, p) => { const ctx = await p; out.push({name, messageId: ctx.event.messageId}); };
	await call('identify', analytics.identify('u_1042', {email: 'ada@example.com', plan: 'pro', logins: 7, vip: true}));
	await call('track', analytics.track('Order Completed', {order_id: 'o_77', revenue: 42.5, currency: 'EUR', products: [{sku: 'sku_1', quantity: 2}], coupon: null}));
	await call('secret', analytics.track('Internal Audit', {note: 'must not be forwarded'}, {integrations: {Webhooks: false}}));
	await call('page', analytics.page('Shop', 'Checkout', {step: 2}));
	await call('screen', analytics.screen('Onboarding', 'Welcome', {variant: 'b'}));
	await call('group', analytics.group('g_acme', {name: 'Acme Inc', employees: 120}));
	await call('alias', analytics.alias('u_1042_new', 'u_1042'));
	await call('after', analytics.track('Checkout Finished', {took_ms: 1234}));
	return out;
})()`

// shortPath is the path Analytics.js posts each type to.
var shortPath = map[string]string{"identify": "/v1/i", "track": "/v1/t", "page": "/v1/p", "screen": "/v1/s", "group": "/v1/g", "alias": "/v1/a"}

// TestBrowserAnalyticsJSStandardDelivery: one request a call, to /v1/{i,t,p,s,g,a}.
func TestBrowserAnalyticsJSStandardDelivery(t *testing.T) {
	t.Parallel()
	testAnalyticsJS(t, false)
}

// TestBrowserAnalyticsJSBatching: deliveryStrategy batching, to /v1/b: the
// first 7 calls fill one batch (size 7), the last leaves alone on the
// timeout.
func TestBrowserAnalyticsJSBatching(t *testing.T) {
	t.Parallel()
	testAnalyticsJS(t, true)
}

func testAnalyticsJS(t *testing.T, batching bool) {
	pkg, version := analyticsNext(t)
	s := startAJSServe(t)
	ps := startPageServer(t, pkg)
	p := newPage(t)
	start := time.Now()

	p.do("open the shop page", chromedp.Navigate(ps.URL+ajsPagePath))
	p.waitFor("Analytics.js to load", `window.AnalyticsNext && AnalyticsNext.AnalyticsBrowser`)
	options := `{}`
	if batching {
		options = `{integrations: {'Segment.io': {deliveryStrategy: {strategy: 'batching', config: {size: 7, timeout: 1500}}}}}`
	}
	calls := eval[[]ajsCall](p, fmt.Sprintf(ajsCalls, jsString(ajsWriteKey), jsString(s.url), options))
	ids := map[string]string{} // call → messageId
	for _, c := range calls {
		ids[c.Name] = c.MessageID
	}
	if len(calls) != 8 || len(ids) != 8 {
		t.Fatalf("the page made the calls %+v, want 8 with their own names", calls)
	}

	// What the library sent, as the page saw it answered.
	posts := 8 // every call its own request, the Webhooks: false one too
	if batching {
		posts = 2 // the batch of 7, then "after" alone
	}
	p.waitForWithin("Analytics.js's posts answered", fmt.Sprintf(`window.evfwdSent.filter(r => r.method === 'POST' && (r.status || r.error)).length >= %d`, posts), stepTimeout)
	sent := eval[[]sentRecord](p, `window.evfwdSent`)
	settingsURL := s.url + "/v1/projects/" + ajsWriteKey + "/settings"
	wantAuth := "Basic " + base64.StdEncoding.EncodeToString([]byte(ajsWriteKey+":"))

	type event struct {
		msg    map[string]any
		sentAt string // the request's (batching) or the event's own
		path   string
	}
	events := map[string]event{} // by messageId
	var postPaths []string
	for _, r := range sent {
		t.Logf("the page fetched: %s %s → %d %s", r.Method, r.URL, r.Status, r.Error)
		if r.Error != "" || r.Status != http.StatusOK {
			t.Errorf("%s %s: status %d, error %q, answer %s", r.Method, r.URL, r.Status, r.Error, r.Response)
			continue
		}
		if r.Method == "GET" {
			if r.URL != settingsURL {
				t.Errorf("the page fetched %s; the only GET should be the settings, %s", r.URL, settingsURL)
			}
			var doc struct {
				Integrations map[string]struct{ APIKey, APIHost, Protocol string }
			}
			if err := json.Unmarshal([]byte(r.Response), &doc); err != nil {
				t.Errorf("settings: %v: %s", err, r.Response)
			}
			if got, want := doc.Integrations["Segment.io"], (struct{ APIKey, APIHost, Protocol string }{ajsWriteKey, strings.TrimPrefix(s.url, "http://") + "/v1", "http"}); got != want {
				t.Errorf("settings' integrations[\"Segment.io\"] = %+v, want %+v", got, want)
			}
			continue
		}
		path := strings.TrimPrefix(r.URL, s.url)
		postPaths = append(postPaths, path)
		if got := r.Headers["content-type"]; got != "text/plain" {
			t.Errorf("POST %s: Content-Type %q, want text/plain (what Analytics.js sends)", path, got)
		}
		if got := r.Headers["authorization"]; got != wantAuth {
			t.Errorf("POST %s: Authorization %q, want %q", path, got, wantAuth)
		}
		if rc, ok := r.Headers["x-retry-count"]; ok {
			t.Errorf("POST %s: X-Retry-Count %s: a retry, where every first attempt should have been taken", path, rc)
		}
		var body map[string]any
		if err := json.Unmarshal([]byte(r.Body), &body); err != nil {
			t.Fatalf("POST %s: body %v: %s", path, err, r.Body)
		}
		if batching {
			if path != "/v1/b" {
				t.Errorf("posted to %s, want /v1/b", path)
			}
			if body["writeKey"] != ajsWriteKey {
				t.Errorf("POST %s: writeKey %v", path, body["writeKey"])
			}
			sentAt, _ := body["sentAt"].(string)
			batch, _ := body["batch"].([]any)
			for _, e := range batch {
				m := e.(map[string]any)
				if _, ok := m["sentAt"]; ok {
					t.Errorf("a batched event has its own sentAt: %v", m)
				}
				events[m["messageId"].(string)] = event{m, sentAt, path}
			}
			continue
		}
		sentAt, _ := body["sentAt"].(string)
		if typ, _ := body["type"].(string); shortPath[typ] != path {
			t.Errorf("a %s posted to %s, want %s", typ, path, shortPath[typ])
		}
		events[body["messageId"].(string)] = event{body, sentAt, path}
	}
	if batching {
		sizes := []int{}
		for _, r := range sent {
			if r.Method == "POST" {
				var b struct{ Batch []any }
				json.Unmarshal([]byte(r.Body), &b)
				sizes = append(sizes, len(b.Batch))
			}
		}
		if !slices.Equal(sizes, []int{7, 1}) {
			t.Errorf("batch sizes %v, want [7 1] (size 7, then the timeout)", sizes)
		}
	}
	t.Logf("Analytics.js posted to %v", postPaths)
	for name, id := range ids {
		if _, ok := events[id]; !ok {
			t.Fatalf("the %s call's message %s is in no request the page made", name, id)
		}
	}

	// The library sent what a web page does, so the comparison below is
	// not of two empty things.
	track := events[ids["track"]].msg
	ctx, _ := track["context"].(map[string]any)
	lib, _ := ctx["library"].(map[string]any)
	pageCtx, _ := ctx["page"].(map[string]any)
	if lib["name"] != "analytics.js" || lib["version"] != "next-"+version ||
		pageCtx["url"] != ps.URL+ajsPagePath || ctx["userAgent"] == nil || ctx["ip"] != nil {
		t.Errorf("Analytics.js's track carries an unexpected context (library, page.url, userAgent, no ip): %v", ctx)
	}

	// Every call but the secret one is forwarded, signed, and is what the
	// browser sent, completed as serve completes a web source's message.
	forwarded := []string{"identify", "track", "page", "screen", "group", "alias", "after"}
	within(t, 10*time.Second, "the webhooks of "+strings.Join(forwarded, ", "), func() bool {
		got := s.hook.byMessageID()
		for _, name := range forwarded {
			if len(got[ids[name]]) == 0 {
				return false
			}
		}
		return true
	})
	end := time.Now()
	got := s.hook.byMessageID()
	for _, name := range forwarded {
		id := ids[name]
		ds := got[id]
		if len(ds) != 1 {
			t.Errorf("%s: %d webhooks, want 1", name, len(ds))
		}
		d := ds[0]
		mac := hmac.New(sha1.New, []byte(ajsSecret))
		mac.Write(d.body)
		if sig := d.header.Get("X-Signature"); sig != hex.EncodeToString(mac.Sum(nil)) {
			t.Errorf("%s: X-Signature %q does not verify with the shared secret", name, sig)
		}
		if typ, _ := d.msg["type"].(string); !bytes.HasPrefix(d.body, []byte(`{"type":"`+typ+`","version":1,`)) {
			t.Errorf("%s: the webhook body does not start with its type and version 1: %.60s", name, d.body)
		}
		ev := events[id]
		want := ajsWant(t, name, ev.msg, ev.sentAt, d.msg, start, end)
		if diff := cmp.Diff(want, d.msg); diff != "" {
			t.Errorf("%s: the webhook is not what the browser sent, completed (-want +got):\n%s\nbrowser sent: %s\nwebhook: %s", name, diff, mustJSON(ev.msg), d.body)
		}
	}
	if ds := got[ids["secret"]]; len(ds) != 0 {
		t.Errorf("the Webhooks: false track was forwarded: %s", ds[0].body)
	}
	ds, err := s.srv.Store().List(context.Background(), store.Filter{Source: "shop"})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		if d.MessageID == ids["secret"] {
			t.Errorf("the Webhooks: false track has a delivery: %+v", d)
		}
	}
	if len(ds) != len(forwarded) {
		t.Errorf("the store has %d deliveries for the shop, want %d", len(ds), len(forwarded))
	}

	ajsCheckWire(t, s, ps, batching, postPaths)
	p.assertQuiet()
}

// ajsWant is the webhook serve should make of ev, a message Analytics.js
// sent with sentAt: its own fields as they were, but writeKey, sentAt and
// _metadata (Segment's), then version 1, context.ip the page's address,
// originalTimestamp the device's time, timestamp that time moved by the
// device clock's skew, receivedAt serve's (taken from got, once it is
// seen to lie in [start, end]); alias's userId and previousId as the spec
// names them.
func ajsWant(t *testing.T, name string, ev map[string]any, sentAt string, got map[string]any, start, end time.Time) map[string]any {
	t.Helper()
	var want map[string]any
	if err := json.Unmarshal(mustJSON(ev), &want); err != nil {
		t.Fatal(err)
	}
	delete(want, "writeKey")
	delete(want, "sentAt")
	delete(want, "_metadata")
	want["version"] = 1.0
	if c, ok := want["context"].(map[string]any); ok {
		c["ip"] = "127.0.0.1"
	} else {
		t.Errorf("%s: Analytics.js sent no context", name)
	}
	received, err := time.Parse(time.RFC3339Nano, fmt.Sprint(got["receivedAt"]))
	if err != nil || received.Before(start.Truncate(time.Millisecond)) || received.After(end) {
		t.Errorf("%s: receivedAt %v, want serve's time during the test, %s to %s", name, got["receivedAt"], start.Format(time.RFC3339Nano), end.Format(time.RFC3339Nano))
	}
	want["receivedAt"] = got["receivedAt"]
	own, err1 := time.Parse(time.RFC3339Nano, fmt.Sprint(ev["timestamp"]))
	sent, err2 := time.Parse(time.RFC3339Nano, sentAt)
	if err1 != nil || err2 != nil {
		t.Fatalf("%s: Analytics.js's timestamp %v or sentAt %q does not parse", name, ev["timestamp"], sentAt)
	}
	if off := start.Sub(own) + deviceSkew; off > time.Minute || off < -time.Minute {
		t.Errorf("%s: the device's timestamp %s is not %v off the real time: the page's clock did not take", name, own.Format(time.RFC3339Nano), deviceSkew)
	}
	want["originalTimestamp"] = ev["timestamp"]
	corrected := received.Add(-sent.Sub(own))
	want["timestamp"] = corrected.UTC().Format("2006-01-02T15:04:05.000Z")
	if corrected.Before(start.Add(-time.Second)) || corrected.After(end) {
		t.Errorf("%s: the corrected timestamp %s is not in the real time of the test", name, corrected.Format(time.RFC3339Nano))
	}
	if name == "alias" {
		want["User ID"], want["Previous ID"] = want["userId"], want["previousId"]
		delete(want, "userId")
		delete(want, "previousId")
	}
	return want
}

// ajsCheckWire checks the requests as serve read them: the CORS
// preflights Chromium made before the posts, the settings, and no lazy
// chunk of the library asked for from serve or the page's server; and the
// posts the page saw (pagePosts), no more (a retry would show).
func ajsCheckWire(t *testing.T, s *ajsServe, ps *pageServer, batching bool, pagePosts []string) {
	t.Helper()
	origin := ps.URL
	var preflights, posts []string
	for _, r := range s.wire.requests() {
		t.Logf("serve read: %s (Origin %s, Content-Type %q, Access-Control-Request-Method %q, -Headers %q)", r, r.Header.Get("Origin"), r.Header.Get("Content-Type"),
			r.Header.Get("Access-Control-Request-Method"), r.Header.Get("Access-Control-Request-Headers"))
		if got := r.Header.Get("Origin"); got != origin && !(r.Method == "GET" && got == "") {
			t.Errorf("%s: Origin %q, want the page's, %s", r, got, origin)
		}
		switch {
		case r.Method == "OPTIONS":
			preflights = append(preflights, r.Path)
			if r.Header.Get("Access-Control-Request-Method") != "POST" || !strings.Contains(strings.ToLower(r.Header.Get("Access-Control-Request-Headers")), "authorization") {
				t.Errorf("preflight %s asks for method %q, headers %q", r.Path, r.Header.Get("Access-Control-Request-Method"), r.Header.Get("Access-Control-Request-Headers"))
			}
		case r.Method == "POST":
			posts = append(posts, r.Path)
		case r.Method == "GET" && r.Path == "/v1/projects/"+ajsWriteKey+"/settings":
		default:
			t.Errorf("serve read %s: not a request of Analytics.js's the test expects (a lazy chunk?)", r)
		}
	}
	slices.Sort(preflights)
	preflights = slices.Compact(preflights)
	want := []string{"/v1/b"}
	if !batching {
		want = []string{"/v1/a", "/v1/g", "/v1/i", "/v1/p", "/v1/s", "/v1/t"}
	}
	if !slices.Equal(preflights, want) {
		t.Errorf("preflights to %v, want one to each of %v", preflights, want)
	}
	t.Logf("preflights seen: %v; posts: %v", preflights, posts)
	slices.Sort(posts)
	pagePosts = slices.Sorted(slices.Values(pagePosts))
	if !slices.Equal(posts, pagePosts) {
		t.Errorf("serve read the posts %v, the page made %v", posts, pagePosts)
	}
	for _, path := range ps.served() {
		if path != "/shop/checkout" && path != "/umd/index.js" {
			t.Errorf("the page's server was asked for %s (a lazy chunk?)", path)
		}
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// TestBrowserAnalyticsJSRefusals: what a page reads when serve refuses
// it: a 403 naming its origin from a source whose allowed_origins leave it
// out, and a 401 for a write key serve does not know; neither stores or
// forwards anything, while the same page's post to a source open to
// every origin is forwarded.
func TestBrowserAnalyticsJSRefusals(t *testing.T) {
	t.Parallel()
	pkg, _ := analyticsNext(t)
	s := startAJSServe(t)
	ps := startPageServer(t, pkg)
	p := newPage(t)
	p.allow("status of 403 (Forbidden)")
	p.allow("status of 401 (Unauthorized)")
	p.do("open the shop page", chromedp.Navigate(ps.URL+ajsPagePath))
	p.waitFor("the page", `window.evfwdSent`)

	type answer struct {
		Status      int    `json:"status"`
		ContentType string `json:"contentType"`
		Body        string `json:"body"`
	}
	js := fmt.Sprintf(`(async () => {
		const serve = %s;
		const answer = async res => ({status: res.status, contentType: res.headers.get('content-type') || '', body: await res.text()});
		const post = (key, id) => fetch(serve + '/v1/t', {
			method: 'POST',
			headers: {'Content-Type': 'text/plain', 'Authorization': 'Basic ' + btoa(key + ':')},
			body: JSON.stringify({type: 'track', event: 'Cart Viewed', userId: 'u_1042', messageId: id, timestamp: new Date().toISOString(), sentAt: new Date().toISOString()}),
		}).then(answer);
		return {
			locked: await post(%s, 'm_locked'),
			lockedSettings: await fetch(serve + '/v1/projects/' + %s + '/settings').then(answer),
			unknown: await post('wk_nobody', 'm_unknown'),
			open: await post(%s, 'm_open'),
		};
	})()`, jsString(s.url), jsString(ajsLockedKey), jsString(ajsLockedKey), jsString(ajsWriteKey))
	got := eval[map[string]answer](p, js)
	for k, a := range got {
		t.Logf("%s: %d %s %s", k, a.Status, a.ContentType, strings.TrimSpace(a.Body))
	}

	readable := func(what string, a answer, status int, says ...string) {
		t.Helper()
		var body struct{ Error string }
		if a.Status != status || !strings.HasPrefix(a.ContentType, "application/json") || json.Unmarshal([]byte(a.Body), &body) != nil {
			t.Errorf("%s: the page read %d %q %s, want %d and a JSON error", what, a.Status, a.ContentType, a.Body, status)
			return
		}
		for _, s := range says {
			if !strings.Contains(body.Error, s) {
				t.Errorf("%s: the error %q does not say %q", what, body.Error, s)
			}
		}
	}
	readable("a post from an origin the source does not allow", got["locked"], http.StatusForbidden, ps.URL)
	readable("that source's settings from that origin", got["lockedSettings"], http.StatusForbidden, ps.URL)
	readable("a post with an unknown write key", got["unknown"], http.StatusUnauthorized)
	if got["open"].Status != http.StatusOK {
		t.Errorf("the post to the open source: %+v, want 200", got["open"])
	}
	// The unknown key shows in serve's log too, not only in the console.
	if want := `unknown write key **** from origin \"` + ps.URL + `\", client 127.0.0.1`; !strings.Contains(s.logs.String(), want) {
		t.Errorf("serve's log does not say %s:\n%s", want, s.logs.String())
	}

	within(t, 10*time.Second, "the open source's webhook", func() bool { return len(s.hook.byMessageID()["m_open"]) > 0 })
	for id, ds := range s.hook.byMessageID() {
		if id != "m_open" {
			t.Errorf("forwarded %s: %s", id, ds[0].body)
		}
	}
	for _, source := range []string{"locked", "shop"} {
		ds, err := s.srv.Store().List(context.Background(), store.Filter{Source: source})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			if d.MessageID != "m_open" {
				t.Errorf("source %s stored %s", source, d.MessageID)
			}
		}
	}
	p.assertQuiet()
}
