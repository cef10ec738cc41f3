package cmd

import (
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/evfwd/evfwd/internal/syncbuf"
)

// signInLine is the link serve --ui shows (showSignIn).
var signInLine = regexp.MustCompile(`(?m)^  (http://127\.0\.0\.1:\d+/#signin=[A-Za-z0-9_-]{43})$`)

// startServeUICmd runs `evfwd serve --ui` as a user does, at a terminal,
// with an admin token nobody sees (the README's EVFWD_ADMIN_TOKEN=$(openssl
// rand -hex 16)), and returns the inspector's URL, the sign-in link it
// showed on the terminal and its log (stderr).
func startServeUICmd(t *testing.T, token string) (ui, link string, stderr *syncbuf.Buffer) {
	t.Helper()
	env := map[string]string{"EVFWD_ADMIN_TOKEN": token, "XDG_STATE_HOME": t.TempDir()}
	f := testFactory(t, "", false, env)
	stderr, terminal := &syncbuf.Buffer{}, &syncbuf.Buffer{}
	f.IO.ErrOut = stderr
	f.IO.Terminal = func() (io.WriteCloser, error) { return nopCloser{terminal}, nil }
	uiURL := make(chan string, 1)
	runServe(t, f, func(o *ServeOptions) { o.uiReady = func(u string) { uiURL <- u } },
		"--addr", "127.0.0.1:0", "--ui", "--ui-addr", "127.0.0.1:0", "--store", filepath.Join(t.TempDir(), "evfwd.db"))
	ui = <-uiURL
	m := signInLine.FindStringSubmatch(terminal.String())
	if m == nil || !strings.HasPrefix(m[1], ui+"#signin=") {
		t.Fatalf("no sign-in link to %s on the terminal:\n%s", ui, terminal.String())
	}
	if strings.Contains(stderr.String()+terminal.String(), token) {
		t.Errorf("the admin token was printed:\n%s%s", stderr.String(), terminal.String())
	}
	return ui, m[1], stderr
}

// The README's line works as written: serve --ui prints a one-time link
// that signs the browser in, is gone from the address bar at once, and
// works only once; the session it opens stays on its port, as a login's
// does (issue 30, row 2).
func TestBrowserServeSignInLink(t *testing.T) {
	t.Parallel()
	ui, link, stderr := startServeUICmd(t, "4c0ffee-0123456789abcdef0123456789")
	code := strings.TrimPrefix(link, ui+"#signin=")

	p := newPage(t)
	p.do("open the sign-in link", chromedp.Navigate(link))
	p.waitFor("the delivery log, without a login", `document.querySelector('#deliveries') && !document.querySelector('#token') && document.querySelector('#live')?.dataset.state === 'open'`)
	if href := eval[string](p, `location.href`); href != ui {
		t.Errorf("the address bar shows %q, want %q: the code must leave it", href, ui)
	}
	if c := eval[string](p, `document.cookie`); c != "" {
		t.Errorf("cookies %q: the session must not be a cookie (cookies ignore ports)", c)
	}
	if s := eval[string](p, `sessionStorage.getItem('evfwd-session') || ''`); len(s) < 43 || strings.Contains(s, code) {
		t.Errorf("the tab's session %q", s)
	}
	within(t, stepTimeout, "the sign-in logged", func() bool {
		return strings.Contains(stderr.String(), `msg="inspector: logged in"`) && strings.Contains(stderr.String(), `with="sign-in link"`)
	})

	// Another local port, in the same tab: nothing opens the inspector.
	other := newRecordingServer(t)
	p.do("open the other server's page", chromedp.Navigate(other.URL+"/x"))
	p.waitFor("the other page's calls", `document.title === 'done'`)
	for _, h := range other.requests() {
		for _, name := range []string{"Cookie", "Authorization", "X-Evfwd-Session"} {
			if v := h.Get(name); v != "" {
				t.Errorf("%s: the browser sent %s: %s to another port", h.Get("X-Recorded-Path"), name, v)
			}
		}
		if code, body := replay(t, ui, "/api/deliveries", h); code != http.StatusUnauthorized {
			t.Errorf("replayed at the inspector: %d %s; want 401", code, body)
		}
	}
	p.assertQuiet()

	// The same link again, in a fresh profile: used, so the page asks for
	// the token and says why.
	again := newPage(t)
	again.allow("403")
	again.do("open the used link", chromedp.Navigate(link))
	again.waitFor("the login form, saying the link is used", `document.querySelector('#token') && document.querySelector('#login-help')?.innerText.includes('has been used or has expired')`)
	if href := eval[string](again, `location.href`); href != ui {
		t.Errorf("the address bar shows %q after a used link, want %q", href, ui)
	}
	again.assertQuiet()
}
