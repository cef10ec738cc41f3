package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/evfwd/evfwd/pkg/forwarder"
	"github.com/evfwd/evfwd/pkg/serve"
	"github.com/evfwd/evfwd/pkg/signature"
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/webhook"
)

// The inspector in a real browser (issue 19): `evfwd listen --ui` and
// `evfwd serve --ui` run in-process, real webhooks reach them, and a
// headless Chromium drives the page through the hooks the page keeps
// stable (ids and data- attributes). See browser_helpers_test.go.

// row selects the list's row of request id.
func row(id int) string { return fmt.Sprintf(`#requests tbody tr[data-id="%d"]`, id) }

// rowsAre is a JavaScript test that the list shows exactly these ids, in
// this order.
func rowsAre(ids ...int) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = fmt.Sprint(id)
	}
	return fmt.Sprintf(`[...document.querySelectorAll('#requests tbody tr[data-id]')].map(r => r.dataset.id).join(',') === %s`, jsString(strings.Join(s, ",")))
}

// detailOpen is a JavaScript test that #detail shows request id with its
// check steps and its body loaded. The body comes later and pushes the
// sections below it down: a click aimed at a header's "show" button
// before then landed on the Headers summary and closed it.
func detailOpen(id int) string {
	return fmt.Sprintf(`(d => d && !d.hidden && d.dataset.id === '%d' && d.querySelector('#check-steps li') && !d.querySelector('#body[aria-busy]'))(document.querySelector('#detail'))`, id)
}

func TestBrowserListenShowsAWebhookWithinASecond(t *testing.T) {
	t.Parallel()
	l, ui := startListenUI(t, testFactory(t, "", false, nil), "--secret", listenSecret)
	p := newPage(t)
	p.open(ui)
	p.waitFor("the empty list", `document.querySelector('#empty') && !document.querySelector('#empty').hidden`)

	sends := []struct {
		name string
		send func()
		typ  string
	}{
		{"evfwd trigger track", func() {
			res := execute(t, testFactory(t, "", false, nil), "trigger", "track", "--url", l.URL, "--secret", listenSecret, "--event", "Order Completed")
			if res.Code != 0 {
				t.Fatalf("trigger: %+v", res)
			}
		}, "track"},
		{"a signed identify", func() { l.post(t, "/", identifyMsg, signHex(t, listenSecret, identifyMsg)) }, "identify"},
		{"evfwd trigger page", func() {
			if res := execute(t, testFactory(t, "", false, nil), "trigger", "page", "--url", l.URL, "--secret", listenSecret); res.Code != 0 {
				t.Fatalf("trigger: %+v", res)
			}
		}, "page"},
	}
	for i, s := range sends {
		id := i + 1
		s.send()
		answered := time.Now() // the request has been answered
		p.waitForWithin(s.name+" listed", fmt.Sprintf(`document.querySelector(%s)`, jsString(row(id))), time.Second)
		took := time.Since(answered)
		if took >= time.Second {
			t.Errorf("%s: listed %v after it was answered, want under 1s", s.name, took)
		}
		t.Logf("%s: listed %v after it was answered", s.name, took.Round(time.Millisecond))
		if got := eval[[]string](p, fmt.Sprintf(`(r => [r.dataset.verdict, r.dataset.type])(document.querySelector(%s))`, jsString(row(id)))); got[0] != "valid" || got[1] != s.typ {
			t.Errorf("%s: row has data-verdict, data-type %q, want valid, %s", s.name, got, s.typ)
		}
	}
	p.waitFor("newest first", rowsAre(3, 2, 1))
	p.assertQuiet()
}

func TestBrowserListenShowsWhyASignatureFailed(t *testing.T) {
	t.Parallel()
	l, ui := startListenUI(t, testFactory(t, "", false, nil), "--secret", listenSecret)
	l.post(t, "/", trackMsg, signHex(t, listenSecret, trackMsg))
	p := newPage(t)
	p.open(ui)
	p.waitFor("the first request", `document.querySelector(`+jsString(row(1))+`)`)
	// Arriving while the page is open, and before it was opened, alike.
	l.post(t, "/", trackMsg, signHex(t, "not the secret", trackMsg)) // 2: mismatch
	l.post(t, "/", identifyMsg, "")                                  // 3: no signature

	api := map[int]string{} // id → the reason the API gives
	for _, r := range uiRequests(t, ui) {
		sig, _ := r["signature"].(map[string]any)
		api[int(r["id"].(float64))], _ = sig["reason"].(string)
	}
	if api[2] != "mismatch" {
		t.Fatalf("the API gives request 2 the reason %q, want mismatch", api[2])
	}
	for _, id := range []int{2, 3} {
		p.waitFor(fmt.Sprintf("request %d's verdict", id), fmt.Sprintf(`(r => r && r.dataset.verdict === 'invalid' && r.querySelector('.verdict').innerText.includes(%s))(document.querySelector(%s))`, jsString(api[id]), jsString(row(id))))
	}
	if v := p.text(row(1) + " .verdict"); strings.Contains(v, "mismatch") {
		t.Errorf("the valid request's verdict reads %q", v)
	}

	p.click(row(2))
	p.waitFor("request 2's check", detailOpen(2))
	failed := eval[[]string](p, `[...document.querySelectorAll('#check-steps li[data-ok="false"]')].map(li => li.innerText)`)
	if len(failed) == 0 || !strings.Contains(strings.Join(failed, "\n"), "mismatch") {
		t.Errorf("failed check steps %q, want one that says mismatch", failed)
	}
	if n := p.count(`#check-steps li[data-ok="true"]`); n == 0 {
		t.Errorf("no check step passed; the scheme and header steps should")
	}
	if steps := p.text("#check-steps"); strings.Contains(steps, listenSecret) {
		t.Errorf("the check steps show the secret: %q", steps)
	}
	p.assertQuiet()
}

func TestBrowserListenReplaysToASecondReceiver(t *testing.T) {
	t.Parallel()
	l, ui := startListenUI(t, testFactory(t, "", false, nil), "--secret", listenSecret)
	second, ui2 := startListenUI(t, testFactory(t, "", false, nil), "--secret", listenSecret)
	// Signed with another secret: only a re-signed replay is valid.
	if status := l.post(t, "/hooks", identifyMsg, signHex(t, "an old secret", identifyMsg)); status != http.StatusUnauthorized {
		t.Fatalf("listen answered %d", status)
	}
	p := newPage(t)
	p.open(ui)
	p.click(row(1))
	p.waitFor("the detail", detailOpen(1))

	p.typeInto("#replay-url", second.URL)
	p.click("#replay")
	p.waitFor("the replay's answer", `document.querySelector('#replay-result')?.dataset.status === '401'`)
	if got := p.text("#replay-result"); !strings.Contains(got, "401") || !strings.Contains(got, second.URL) {
		t.Errorf("#replay-result after a replay as captured: %q", got)
	}

	p.click("#replay-resign")
	p.click("#replay")
	p.waitFor("the re-signed replay's answer", `document.querySelector('#replay-result')?.dataset.status === '200'`)
	if got := p.text("#replay-result"); !strings.Contains(got, "200") {
		t.Errorf("#replay-result after a re-signed replay: %q", got)
	}

	got := uiRequests(t, ui2)
	if len(got) != 2 {
		t.Fatalf("the second receiver got %d requests, want 2: %v", len(got), got)
	}
	verdict := func(r map[string]any) string {
		s, _ := r["signature"].(map[string]any)
		v, _ := s["verdict"].(string)
		return v
	}
	if verdict(got[1]) != "invalid" || verdict(got[0]) != "valid" || got[0]["messageId"] != "m2" {
		t.Errorf("the second receiver got (newest first) %v", got)
	}
	// The page shows the replay's arrival at its own listen not at all:
	// it went to the second one.
	if n := p.count("#requests tbody tr[data-id]"); n != 1 {
		t.Errorf("the first listen's page lists %d requests, want 1", n)
	}
	p.assertQuiet()
}

func TestBrowserListenKeyboardAndFilters(t *testing.T) {
	t.Parallel()
	l, ui := startListenUI(t, testFactory(t, "", false, nil), "--secret", listenSecret)
	l.post(t, "/", trackMsg, signHex(t, listenSecret, trackMsg))           // 1
	l.post(t, "/", identifyMsg, signHex(t, listenSecret, identifyMsg))     // 2
	l.post(t, "/", badTrackMsg, signHex(t, "not the secret", badTrackMsg)) // 3
	p := newPage(t)
	p.open(ui)
	p.waitFor("three requests", rowsAre(3, 2, 1))

	focused := func(id int) string {
		return fmt.Sprintf(`document.activeElement && document.activeElement.matches(%s)`, jsString(row(id)))
	}
	// j, from anywhere, lands on the list's first row.
	p.keys("j")
	p.waitFor("the newest row focused", focused(3))
	p.keys(kb.ArrowDown)
	p.waitFor("ArrowDown to the next row", focused(2))
	p.keys("j")
	p.waitFor("j to the next row", focused(1))
	p.keys("k")
	p.waitFor("k back up", focused(2))
	p.keys(kb.Enter)
	p.waitFor("Enter opens the focused request", detailOpen(2))
	// With the detail open, moving along the list follows in the detail.
	p.keys(kb.ArrowDown)
	p.waitFor("the detail following the focus", detailOpen(1))
	p.keys(kb.Escape)
	p.waitFor("Escape closes the detail", `document.querySelector('#detail').hidden`)
	p.waitFor("the focus back on the row", focused(1))

	p.keys("/")
	p.waitFor("/ focuses the text filter", `document.activeElement?.id === 'filter-text'`)
	p.keys("u_7")
	p.waitFor("the text filter narrowing the list", rowsAre(2))
	p.keys(kb.Escape)
	p.waitFor("Escape clearing the text filter", rowsAre(3, 2, 1))

	p.choose("#filter-verdict", "invalid")
	p.waitFor("the verdict filter narrowing the list", rowsAre(3))
	p.choose("#filter-verdict", "")
	p.choose("#filter-type", "identify")
	p.waitFor("the type filter narrowing the list", rowsAre(2))
	p.choose("#filter-type", "track")
	p.choose("#filter-verdict", "valid")
	p.waitFor("both filters", rowsAre(1))
	// A request that arrives while filtered shows only when it matches.
	l.post(t, "/", identifyMsg, signHex(t, listenSecret, identifyMsg)) // 4
	l.post(t, "/", trackMsg, signHex(t, listenSecret, trackMsg))       // 5
	p.waitFor("a matching arrival, and not the other", rowsAre(5, 1))
	p.assertQuiet()
}

func TestBrowserListenComparesTwoRequests(t *testing.T) {
	t.Parallel()
	l, ui := startListenUI(t, testFactory(t, "", false, nil), "--secret", listenSecret)
	other := strings.Replace(trackMsg, `"userId":"u_42"`, `"userId":"u_43"`, 1)
	l.post(t, "/", trackMsg, signHex(t, listenSecret, trackMsg))
	l.post(t, "/", other, signHex(t, listenSecret, other))
	p := newPage(t)
	p.open(ui)
	p.waitFor("two requests", rowsAre(2, 1))
	p.waitFor("Compare disabled until two are ticked", `document.querySelector('#compare').disabled`)
	p.click(row(1) + " input.compare")
	p.click(row(2) + " input.compare")
	p.waitFor("Compare enabled", `!document.querySelector('#compare').disabled`)
	p.click("#compare")
	p.waitFor("the diff", `(d => d && !d.hidden && d.querySelector('.paths li'))(document.querySelector('#diff'))`)
	// The body's paths, then the headers'.
	changed := eval[[][]string](p, `[...document.querySelectorAll('#diff .paths')].map(ul => [...ul.querySelectorAll('li.d-chg code')].map(c => c.innerText))`)
	if want := [][]string{{"userId"}, {"X-Signature"}}; fmt.Sprint(changed) != fmt.Sprint(want) {
		t.Errorf("the diff says changed: %q, want %q", changed, want)
	}
	if d := p.text("#diff"); !strings.Contains(d, "u_42") || !strings.Contains(d, "u_43") {
		t.Errorf("the diff does not show both values: %q", d)
	}
	p.keys(kb.Escape)
	p.waitFor("Escape closes the diff", `document.querySelector('#diff').hidden`)
	p.assertQuiet()
}

// TestBrowserListenIsQuiet uses every part of the listen page and fails
// on any console error, uncaught exception or CSP violation; then it
// checks that a violation would have been seen.
func TestBrowserListenIsQuiet(t *testing.T) {
	t.Parallel()
	l, ui := startListenUI(t, testFactory(t, "", false, nil), "--secret", listenSecret)
	resp, err := http.Get(ui)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
		t.Fatalf("the page's Content-Security-Policy is %q", csp)
	}

	l.post(t, "/hooks", trackMsg, signHex(t, listenSecret, trackMsg))                                                                       // 1
	l.post(t, "/hooks", "not json\n", signHex(t, listenSecret, "not json\n"))                                                               // 2
	l.post(t, "/hooks", "\x00\x01\xfe binary", signHex(t, listenSecret, "\x00\x01\xfe binary"))                                             // 3
	l.post(t, "/hooks", identifyMsg, signHex(t, "not the secret", identifyMsg))                                                             // 4
	l.postFields(t, "/hooks", trackMsg, listenSigned(t, signature.Stripe, listenSecret, trackMsg, signature.Params{Timestamp: time.Now()})) // 5
	p := newPage(t)
	p.open(ui)
	p.waitFor("five requests", rowsAre(5, 4, 3, 2, 1))
	for id := 1; id <= 5; id++ {
		p.click(row(id))
		p.waitFor(fmt.Sprintf("request %d's detail", id), detailOpen(id))
		p.waitFor("the body", `document.querySelector('#body-note')?.innerText !== ''`)
		p.click("#show-raw")
		p.waitFor("the raw bytes", `document.querySelector('#show-raw').getAttribute('aria-pressed') === 'true'`)
	}
	// Copy as curl: to the clipboard, or into a box to copy from.
	p.click("#copy-curl")
	p.waitFor("the curl command", `document.querySelector('#toast')?.innerText.includes('copied') || document.querySelector('.copy-box')?.value.startsWith('printf ') || document.querySelector('.copy-box')?.value.includes('curl ')`)
	href := eval[string](p, `document.querySelector('#download-request').href`)
	resp, err = http.Get(href)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.HasPrefix(string(b), "POST /hooks HTTP/1.1") || !strings.Contains(resp.Header.Get("Content-Disposition"), "request-5.http") {
		t.Errorf("#download-request gives %q, %q", resp.Header.Get("Content-Disposition"), b)
	}
	// Replay to where it goes by default: listen itself.
	p.click("#replay")
	p.waitFor("the replay's answer", `document.querySelector('#replay-result')?.dataset.status`)
	p.waitFor("the replay listed", `document.querySelector(`+jsString(row(6))+`)`)
	p.click(row(1) + " input.compare")
	p.click(row(4) + " input.compare")
	p.click("#compare")
	p.waitFor("the diff", `(d => d && !d.hidden && d.querySelector('.paths'))(document.querySelector('#diff'))`)
	p.keys(kb.Escape)
	p.do("reload", chromedp.Reload())
	p.waitFor("the requests after a reload", rowsAre(6, 5, 4, 3, 2, 1))
	p.waitFor("the live stream after a reload", `document.querySelector('#live')?.dataset.state === 'open'`)
	p.assertQuiet()
	if t.Failed() {
		return
	}

	// Would a violation have shown? An inline script is one.
	eval[chromedp.Void](p, `document.head.append(Object.assign(document.createElement('script'), {textContent: 'window.evfwdInline = 1'}))`)
	p.flush()
	var seen bool
	for _, m := range p.problems() {
		seen = seen || strings.Contains(m.Text, "Content Security Policy")
	}
	if !seen || eval[bool](p, `window.evfwdInline === 1`) {
		t.Errorf("an inline script was not reported as a CSP violation; the console holds: %s", p.consoleSoFar())
	}
}

// startListenUINow is startListenUI on the wall clock, for pictures that
// show today's times.
func startListenUINow(t *testing.T, args ...string) (*listening, string) {
	t.Helper()
	uiURL := make(chan string, 1)
	l := startListenTuned(t, testFactory(t, "", false, nil), func(o *ListenOptions) {
		o.Now = time.Now
		o.uiReady = func(url string) { uiURL <- url }
	}, append([]string{"--ui", "--ui-addr", "127.0.0.1:0"}, args...)...)
	return l, <-uiURL
}

// TestBrowserListenColourSchemes shows a few requests, a bad signature
// selected with its check, in the light and the dark scheme, and checks
// that the page follows prefers-color-scheme. With EVFWD_SCREENSHOTS=DIR
// it saves them as DIR/inspector-listen.png and inspector-listen-dark.png.
func TestBrowserListenColourSchemes(t *testing.T) {
	t.Parallel()
	l, ui := startListenUINow(t, "--secret", listenSecret)
	at := time.Now().UTC()
	ts := func(d time.Duration) string { return at.Add(d).Format("2006-01-02T15:04:05.000Z") }
	bodies := []struct{ body, secret string }{
		{`{"type":"identify","userId":"u_1042","traits":{"email":"ada@example.com","plan":"pro"},"messageId":"a0c1","timestamp":"` + ts(0) + `"}`, listenSecret},
		{`{"type":"page","userId":"u_1042","name":"Pricing","properties":{"path":"/pricing"},"messageId":"a0c2","timestamp":"` + ts(time.Second) + `"}`, listenSecret},
		{`{"type":"track","userId":"u_1042","event":"Checkout Started","properties":{"cart":"c_77","total":129.9},"messageId":"a0c3","timestamp":"` + ts(2*time.Second) + `"}`, listenSecret},
		{`{"type":"track","userId":"u_1042","event":"Order Completed","properties":{"orderId":"o_5531","total":129.9,"currency":"EUR"},"messageId":"a0c4","timestamp":"` + ts(3*time.Second) + `"}`, "last year's secret"},
		{`{"type":"track","userId":"u_1042","event":"Order Completed","properties":{"orderId":"o_5531","total":129.9,"currency":"EUR"},"messageId":"a0c4","timestamp":"` + ts(3*time.Second) + `"}`, listenSecret},
		{`{"type":"group","userId":"u_1042","groupId":"acme","traits":{"name":"Acme Corp","seats":40},"messageId":"a0c5","timestamp":"` + ts(4*time.Second) + `"}`, listenSecret},
	}
	for _, b := range bodies {
		l.post(t, "/hooks", b.body, signHex(t, b.secret, b.body))
	}
	p := newPage(t)
	p.open(ui)
	p.waitFor("the requests", rowsAre(6, 5, 4, 3, 2, 1))
	p.click(row(4))
	p.waitFor("the bad signature's check", detailOpen(4)+` && document.querySelector('#check-steps li[data-ok="false"]')`)
	p.waitFor("the body", `document.querySelector('#body-note')?.innerText !== ''`)

	background := `getComputedStyle(document.body).backgroundColor`
	p.colorScheme("light")
	light := eval[string](p, background)
	p.screenshot("inspector-listen.png")
	p.colorScheme("dark")
	dark := eval[string](p, background)
	p.screenshot("inspector-listen-dark.png")
	if light == dark {
		t.Errorf("the page's background is %s in the light and in the dark scheme", light)
	}
	p.assertQuiet()
}

const serveUIToken = "adm1n-t0ken-for-the-page"

// flakyHook is a webhook endpoint that answers its status (a failure)
// until heal, and 200 after.
type flakyHook struct {
	*httptest.Server
	status atomic.Int32
	// signed counts the requests with a valid signature (secret
	// whsec_page) it answered 2xx, by message id.
	mu     sync.Mutex
	signed map[string]int
}

func newFlakyHook(t *testing.T, status int) *flakyHook {
	h := &flakyHook{signed: map[string]int{}}
	h.status.Store(int32(status))
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		code := int(h.status.Load())
		var m struct{ MessageID string }
		if json.Unmarshal(body, &m) == nil && code < 300 && signature.Verify([]byte("whsec_page"), body, r.Header.Get(signature.Header)) == nil {
			h.mu.Lock()
			h.signed[m.MessageID]++
			h.mu.Unlock()
		}
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"answer":%d}`, code)
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *flakyHook) heal() { h.status.Store(http.StatusOK) }

// delivered is how many signed requests of messageID it answered 2xx.
func (h *flakyHook) delivered(messageID string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.signed[messageID]
}

// servingUI is `evfwd serve --ui` run in-process through pkg/serve, as
// cmd/serve.go runs it, with a retry policy in milliseconds.
type servingUI struct {
	srv     *serve.Server
	url, ui string
}

// startServeUI serves source "web" forwarding to web and "app" to app,
// with the admin token serveUIToken; now is its clock (nil: the wall's).
func startServeUI(t *testing.T, web, app *flakyHook, now func() time.Time) *servingUI {
	t.Helper()
	dest := func(h *flakyHook) serve.Webhooks {
		return serve.Webhooks{Enabled: true, Destination: webhook.Destination{SharedSecret: "whsec_page", Endpoints: []webhook.Endpoint{{URL: h.URL}}}}
	}
	cfg := serve.Config{
		Addr:  "127.0.0.1:0",
		Store: "sqlite://" + filepath.Join(t.TempDir(), "evfwd.db"),
		Sources: []serve.Source{
			{Name: "web", WriteKey: "wk_web", Webhooks: dest(web)},
			{Name: "app", WriteKey: "wk_app", Webhooks: dest(app)},
		},
		AdminToken: serveUIToken,
	}
	if now == nil {
		now = time.Now
	}
	opts := serve.Options{
		Logger: slog.New(slog.DiscardHandler), Version: "0.0.0-test", Now: now,
		// A failing delivery is retried every 10ms for 100ms, then dead.
		Policy:  webhook.Policy{Initial: 10 * time.Millisecond, Max: 10 * time.Millisecond, Window: 100 * time.Millisecond, Jitter: -1},
		Breaker: forwarder.BreakerConfig{Threshold: 3, ProbeInitial: 10 * time.Millisecond, ProbeMax: 20 * time.Millisecond, Jitter: -1},
		Poll:    5 * time.Millisecond,
		UI:      true, UIAddr: "127.0.0.1:0",
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
	return &servingUI{srv: srv, url: srv.URL(), ui: srv.UIURL()}
}

// track posts a track call to source key's collection endpoint.
func (s *servingUI) track(t *testing.T, key, messageID, event string) {
	t.Helper()
	body := fmt.Sprintf(`{"userId":"u_1042","event":%s,"messageId":%s,"properties":{"plan":"pro"}}`, jsString(event), jsString(messageID))
	req, _ := http.NewRequest(http.MethodPost, s.url+"/v1/track", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.SetBasicAuth(key, "")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("track %s: %d %s", messageID, resp.StatusCode, b)
	}
}

// deliveries lists the store's deliveries of a status ("" for all).
func (s *servingUI) deliveries(t *testing.T, source string, status store.Status) []store.Delivery {
	t.Helper()
	ds, err := s.srv.Store().List(context.Background(), store.Filter{Source: source, Status: status})
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

func (s *servingUI) statusOf(t *testing.T, id int64) store.Status {
	t.Helper()
	for _, d := range s.deliveries(t, "", "") {
		if d.ID == id {
			return d.Status
		}
	}
	t.Fatalf("no delivery %d", id)
	return ""
}

// delivery selects the list's row of delivery id.
func delivery(id int64) string { return fmt.Sprintf(`#deliveries tbody tr[data-id="%d"]`, id) }

// login signs in on the serve page with token.
func (p *page) login(token string) {
	p.t.Helper()
	p.typeInto("#token", token)
	p.click("#login")
}

func TestBrowserServeRetriesFailedDeliveries(t *testing.T) {
	t.Parallel()
	web, app := newFlakyHook(t, http.StatusInternalServerError), newFlakyHook(t, http.StatusBadRequest)
	s := startServeUI(t, web, app, nil)
	p := newPage(t)
	p.do("open "+s.ui, chromedp.Navigate(s.ui))
	p.waitFor("the login form", `document.querySelector('#token') && document.activeElement?.id === 'token'`)

	p.allow("status of 403") // the browser's note of the wrong token's answer
	p.login("not the token")
	p.waitFor("a wrong token refused", `document.querySelector('#login-error')?.innerText.includes('not the admin token')`)
	p.login(serveUIToken)
	p.waitFor("the delivery log", `document.querySelector('#deliveries') && document.querySelector('#live')?.dataset.state === 'open'`)

	// Live: web's endpoint answers 500 until its retries run out (dead),
	// app's 400 (failed at once).
	s.track(t, "wk_web", "w1", "Order Completed")
	s.track(t, "wk_web", "w2", "Order Completed")
	s.track(t, "wk_app", "a1", "Signed Up")
	within(t, 20*time.Second, "two dead and one failed in the store", func() bool {
		return len(s.deliveries(t, "web", store.Dead)) == 2 && len(s.deliveries(t, "app", store.Failed)) == 1
	})
	dead, failed := s.deliveries(t, "web", store.Dead), s.deliveries(t, "app", store.Failed)
	w1, w2, a1 := dead[0].ID, dead[1].ID, failed[0].ID
	if w1 > w2 {
		w1, w2 = w2, w1
	}
	for id, status := range map[int64]string{w1: "dead", w2: "dead", a1: "failed"} {
		p.waitFor(fmt.Sprintf("delivery %d %s", id, status), fmt.Sprintf(`document.querySelector(%s)?.dataset.status === %s`, jsString(delivery(id)), jsString(status)))
	}
	p.waitFor("the chart's endpoints", `document.querySelectorAll('#chart .endpoint svg').length === 2`)

	// Filters.
	p.choose("#filter-status", "dead")
	p.waitFor("only the dead", fmt.Sprintf(`[...document.querySelectorAll('#deliveries tbody tr[data-id]')].map(r => r.dataset.id).sort().join() === %s`, jsString(fmt.Sprint(w1)+","+fmt.Sprint(w2))))
	p.choose("#filter-source", "app")
	p.waitFor("no dead of app", `document.querySelectorAll('#deliveries tbody tr[data-id]').length === 0 && !document.querySelector('#empty').hidden`)
	p.choose("#filter-status", "")
	p.choose("#filter-endpoint", app.URL)
	p.waitFor("app's only", fmt.Sprintf(`[...document.querySelectorAll('#deliveries tbody tr[data-id]')].map(r => r.dataset.id).join() === '%d'`, a1))
	p.choose("#filter-source", "")
	p.choose("#filter-endpoint", "")
	p.waitFor("all three", `document.querySelectorAll('#deliveries tbody tr[data-id]').length === 3`)

	// Why w1 failed, then retry it once the endpoint answers.
	p.click(delivery(w1))
	// As many attempts as the store holds (a busy machine may use up the
	// 100 ms retry window in one), each a 500.
	w1Attempts := dead[0].Attempts
	if dead[0].ID != w1 {
		w1Attempts = dead[1].Attempts
	}
	p.waitFor("w1's attempts", fmt.Sprintf(`document.querySelectorAll('#delivery:not([hidden]) #attempts li').length === %d`, w1Attempts))
	if got := eval[[]string](p, `[...document.querySelectorAll('#attempts li')].map(li => li.dataset.status)`); len(got) != w1Attempts || strings.Join(got, "") != strings.Repeat("500", w1Attempts) {
		t.Errorf("w1's attempts have the statuses %q, want %d 500s", got, w1Attempts)
	}
	web.heal()
	app.heal()

	// The page re-reads the list and the open delivery when the store has
	// a delivery's outcome (the "delivery" event), without a Refresh.
	isDelivered := func(id int64) string {
		return fmt.Sprintf(`document.querySelector(%s)?.dataset.status === 'delivered'`, jsString(delivery(id)))
	}

	p.click("#retry")
	p.waitFor("w1 delivered on the page", isDelivered(w1))
	within(t, 10*time.Second, "w1 delivered in the store", func() bool { return s.statusOf(t, w1) == store.Delivered })
	p.waitFor("w1's open detail with its 200", `[...document.querySelectorAll('#delivery:not([hidden]) #attempts li')].some(li => li.dataset.status === '200')`)
	if got := p.text(delivery(w2)); !strings.Contains(got, "dead") {
		t.Errorf("w2's row reads %q after retrying w1", got)
	}
	p.click("#retry-failed")
	p.waitFor("the toast", `document.querySelector('#toast')?.innerText.includes('1 retried')`)
	p.waitFor("a1 delivered on the page", isDelivered(a1))
	p.click("#retry-dead")
	p.waitFor("w2 delivered on the page", isDelivered(w2))
	within(t, 10*time.Second, "all three delivered in the store", func() bool { return len(s.deliveries(t, "", store.Delivered)) == 3 })

	// w1 is delivered: its detail offers Resend instead of Retry, which
	// sends it again as a new attempt, signed, its earlier attempts kept.
	p.waitFor("w1's Resend", `document.querySelector('#delivery:not([hidden]) #resend:not([disabled])') && !document.querySelector('#delivery #retry')`)
	before := eval[int](p, `document.querySelectorAll('#delivery #attempts li').length`)
	if n := web.delivered("w1"); n != 1 {
		t.Errorf("web's endpoint had w1 signed and answered 200 %d times before the resend, want 1", n)
	}
	p.click("#resend")
	p.waitFor("the resend's toast", `document.querySelector('#toast')?.innerText.includes('1 resent')`)
	p.waitFor("w1's new attempt", fmt.Sprintf(`document.querySelectorAll('#delivery:not([hidden]) #attempts li').length === %d && %s`, before+1, isDelivered(w1)))
	within(t, 10*time.Second, "w1 delivered again, signed", func() bool { return web.delivered("w1") == 2 && s.statusOf(t, w1) == store.Delivered })
	if d, err := s.srv.Store().Get(context.Background(), w1); err != nil || len(d.Records) != before+1 {
		t.Errorf("w1 in the store after its resend: %v, %v; want %d attempt records", d, err, before+1)
	}

	cards := eval[[]map[string]any](p, `[...document.querySelectorAll('#chart .endpoint')].map(e => ({url: e.dataset.url, state: e.dataset.state, svg: !!e.querySelector('svg')}))`)
	urls := map[string]bool{}
	for _, c := range cards {
		urls[fmt.Sprint(c["url"])] = true
		if c["svg"] != true || !slices.Contains([]any{"closed", "open", "half-open"}, c["state"]) {
			t.Errorf("chart card %v: want an svg and a breaker state", c)
		}
	}
	if len(cards) != 2 || !urls[web.URL] || !urls[app.URL] {
		t.Errorf("chart cards %v, want one per endpoint", cards)
	}
	p.assertQuiet()
}

// TestBrowserServeColourSchemes fills the serve page with an hour of
// deliveries (the service's clock runs from 50 minutes ago to now in
// steps, web's endpoint failing now and then and at the end), opens a
// dead delivery, and checks the page in the light and the dark scheme.
// With EVFWD_SCREENSHOTS=DIR it saves DIR/inspector-serve.png and
// inspector-serve-dark.png.
func TestBrowserServeColourSchemes(t *testing.T) {
	t.Parallel()
	var offset atomic.Int64
	offset.Store(int64(-50 * time.Minute))
	now := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	web, app := newFlakyHook(t, http.StatusOK), newFlakyHook(t, http.StatusOK)
	s := startServeUI(t, web, app, now)
	events := []string{"Order Completed", "Checkout Started", "Product Viewed", "Signed Up"}
	n := 0
	for k := 0; k <= 10; k++ {
		offset.Store(int64(-50*time.Minute + time.Duration(k)*5*time.Minute))
		if k == 3 || k == 4 || k == 10 {
			web.status.Store(http.StatusServiceUnavailable)
		} else {
			web.heal()
		}
		for i := 0; i < 2+k%3; i++ {
			n++
			s.track(t, "wk_web", fmt.Sprintf("w%d", n), events[n%len(events)])
		}
		for i := 0; i < 1+(k*7)%4; i++ {
			n++
			s.track(t, "wk_app", fmt.Sprintf("a%d", n), events[n%len(events)])
		}
		within(t, 20*time.Second, fmt.Sprintf("step %d's deliveries finished", k), func() bool {
			return len(s.deliveries(t, "", store.Pending)) == 0
		})
	}
	dead := s.deliveries(t, "web", store.Dead)
	if len(dead) == 0 {
		t.Fatal("no dead delivery")
	}
	newestDead := slices.MaxFunc(dead, func(a, b store.Delivery) int { return int(a.ID - b.ID) }).ID

	p := newPage(t)
	p.do("open "+s.ui, chromedp.Navigate(s.ui))
	p.login(serveUIToken)
	p.waitFor("the deliveries", fmt.Sprintf(`document.querySelectorAll('#deliveries tbody tr[data-id]').length === %d`, n))
	p.waitFor("the chart", `document.querySelectorAll('#chart .endpoint svg rect').length > 10`)
	p.click(delivery(newestDead))
	p.waitFor("the dead delivery's attempts", `document.querySelector('#delivery:not([hidden]) #attempts li')`)
	p.waitFor("the live stream", `document.querySelector('#live')?.dataset.state === 'open'`)
	if st := eval[string](p, fmt.Sprintf(`document.querySelector(%s)?.dataset.state ?? ''`, jsString(`#chart .endpoint[data-url=`+jsString(web.URL)+`]`))); st == "" {
		t.Errorf("web's endpoint has no breaker state on the chart")
	}

	background := `getComputedStyle(document.body).backgroundColor`
	p.colorScheme("light")
	light := eval[string](p, background)
	p.screenshot("inspector-serve.png")
	p.colorScheme("dark")
	dark := eval[string](p, background)
	p.screenshot("inspector-serve-dark.png")
	if light == dark {
		t.Errorf("the page's background is %s in the light and in the dark scheme", light)
	}
	p.assertQuiet()
}
