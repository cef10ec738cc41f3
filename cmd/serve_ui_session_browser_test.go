package cmd

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The serve inspector's session in a real browser (issue 29, finding 1):
// cookies ignore ports, so a cookie session of `serve --ui` would reach
// every other server on 127.0.0.1 (such as `evfwd listen`, which records
// what it receives). The page holds its session itself and sends it as a
// header to its own origin only.

// recordingServer is another local web server: it records the headers of
// every request it gets, and serves a page that loads more from itself.
type recordingServer struct {
	*httptest.Server
	mu   sync.Mutex
	seen []http.Header
}

func newRecordingServer(t *testing.T) *recordingServer {
	t.Helper()
	rs := &recordingServer{}
	rs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		h := r.Header.Clone()
		h.Set("X-Recorded-Path", r.Method+" "+r.URL.Path)
		rs.mu.Lock()
		rs.seen = append(rs.seen, h)
		rs.mu.Unlock()
		switch r.URL.Path {
		case "/x":
			// A page that, like any page a developer opens, loads an image
			// and calls its own API (with credentials: whatever the browser
			// would add, it adds here), then says so in its title.
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, `<!doctype html><title>other</title><img src="/pixel.svg" alt="">
<script>
fetch('/api/thing', {method: 'POST', credentials: 'include', headers: {'Content-Type': 'application/json'}, body: '{}'})
  .then(() => fetch('/api/thing', {credentials: 'include'}))
  .then(() => { document.title = 'done'; });
</script>`)
		case "/pixel.svg":
			w.Header().Set("Content-Type", "image/svg+xml")
			fmt.Fprint(w, `<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1"/>`)
		default:
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{}`)
		}
	}))
	t.Cleanup(rs.Close)
	return rs
}

func (rs *recordingServer) requests() []http.Header {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return append([]http.Header(nil), rs.seen...)
}

// replay sends hdr (a request another server got from the browser) to the
// inspector's API at ui, and returns the status: whatever credential it
// carries must not open the inspector. Origin, Referer and the Sec-Fetch
// headers name the other page; they go, so that only credentials decide.
func replay(t *testing.T, ui, path string, hdr http.Header) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", strings.TrimSuffix(ui, "/")+path, nil)
	for k, vs := range hdr {
		switch {
		case k == "Origin" || k == "Referer" || k == "X-Recorded-Path" || strings.HasPrefix(k, "Sec-Fetch-"):
			continue
		}
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Logged in at serve's UI, the browser visits a page on another local
// port: nothing it sends there (no cookie, no header) opens serve's UI
// when replayed against it. Back at the UI, the tab is still logged in;
// "Log out" ends the session on the server too.
func TestBrowserServeSessionStaysOnItsPort(t *testing.T) {
	t.Parallel()
	web, app := newFlakyHook(t, http.StatusOK), newFlakyHook(t, http.StatusOK)
	s := startServeUI(t, web, app, nil)
	other := newRecordingServer(t)
	if !strings.HasPrefix(s.ui, "http://127.0.0.1:") || !strings.HasPrefix(other.URL, "http://127.0.0.1:") {
		t.Fatalf("want both on 127.0.0.1, another port: %s and %s", s.ui, other.URL)
	}
	p := newPage(t)
	p.do("open "+s.ui, chromedp.Navigate(s.ui))
	p.waitFor("the login form", `document.querySelector('#token') && document.activeElement?.id === 'token'`)
	p.login(serveUIToken)
	p.waitFor("the delivery log", `document.querySelector('#deliveries') && document.querySelector('#live')?.dataset.state === 'open'`)

	// Another port of the same host, in the same tab.
	p.do("open the other server's page", chromedp.Navigate(other.URL+"/x"))
	p.waitFor("the other page's calls", `document.title === 'done'`)
	reqs := other.requests()
	if len(reqs) < 4 {
		t.Fatalf("the other server got %d requests, want the page, its image and two calls", len(reqs))
	}
	for _, h := range reqs {
		what := h.Get("X-Recorded-Path")
		for _, name := range []string{"Cookie", "Authorization", "X-Evfwd-Session"} {
			if v := h.Get(name); v != "" {
				t.Errorf("%s: the browser sent %s: %s to another port", what, name, v)
			}
		}
		// Replayed against the inspector: no way in.
		for _, path := range []string{"/api/deliveries", "/api/stats"} {
			if code, body := replay(t, s.ui, path, h); code != http.StatusUnauthorized {
				t.Errorf("%s, replayed as GET %s at the inspector: %d %s; want 401", what, path, code, body)
			}
		}
		if code, body := replay(t, s.ui, "/api/session", h); code != 200 || !strings.Contains(body, `"auth":false`) {
			t.Errorf("%s, replayed as GET /api/session at the inspector: %d %s; want auth false", what, code, body)
		}
	}

	// Back at the inspector: this tab's session still holds.
	p.open(s.ui)
	p.waitFor("the delivery log, without a login", `document.querySelector('#deliveries') && !document.querySelector('#token')`)
	p.waitFor("the Log out button", `document.querySelector('#logout') && !document.querySelector('#logout').hidden`)
	session := eval[string](p, `sessionStorage.getItem('evfwd-session') || ''`)
	if len(session) < 43 {
		t.Fatalf("the tab's session %q: want 32 bytes, base64url", session)
	}
	for _, h := range reqs {
		for name, vs := range h {
			for _, v := range vs {
				if strings.Contains(v, session) {
					t.Errorf("%s: header %s carries the session", h.Get("X-Recorded-Path"), name)
				}
			}
		}
	}
	if code, _ := replay(t, s.ui, "/api/deliveries", http.Header{"X-Evfwd-Session": {session}}); code != 200 {
		t.Fatalf("the tab's session, from outside the browser: %d; want 200 (the test's replay works)", code)
	}

	// Log out: the page asks for the token, and the session is dead.
	p.click("#logout")
	p.waitFor("the login form after Log out", `document.querySelector('#token') && document.querySelector('#login-help')?.innerText.includes('Logged out')`)
	if got := eval[string](p, `sessionStorage.getItem('evfwd-session') || ''`); got != "" {
		t.Errorf("after Log out the tab still holds %q", got)
	}
	if eval[bool](p, `!!document.querySelector('#logout') && !document.querySelector('#logout').hidden`) {
		t.Error("Log out still shown when logged out")
	}
	within(t, 5*time.Second, "the session refused after Log out", func() bool {
		code, _ := replay(t, s.ui, "/api/deliveries", http.Header{"X-Evfwd-Session": {session}})
		return code == http.StatusUnauthorized
	})
	p.waitFor("the live state signed out", `document.querySelector('#live')?.dataset.state === 'closed'`)
	p.assertQuiet()
}
