package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// The browser tests drive a real Chromium, headless, through chromedp.
// Without one they skip, unless EVFWD_BROWSER=required (as CI sets it):
// then a missing browser fails them. EVFWD_SCREENSHOTS=DIR saves the
// screenshots of docs/img there.

const (
	browserTimeout = 60 * time.Second // all of one test, browser start included
	stepTimeout    = 10 * time.Second // one wait for the page
)

// browserPath finds a Chromium-family browser on PATH, Debian's
// chromium-headless-shell first: the same engine without the browser
// around it, it takes a third of the CPU of a headless chromium here
// (13 rather than 34 CPU-seconds for these tests under -race).
func browserPath() string {
	for _, name := range []string{"chromium-headless-shell", "chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// page is one tab of a headless browser started for one test.
type page struct {
	t   *testing.T
	ctx context.Context // the tab, ending at the test's deadline

	mu       sync.Mutex
	messages []chromedp.ConsoleMessage
	marks    map[string]bool // console.debug markers seen, for flushing
	changed  chan struct{}   // closed and replaced whenever a message arrives
	allowed  []string        // see allow
}

// browser is the one headless Chromium the tests of this binary share:
// started by the first page, ended by TestMain. Starting one costs a
// second or more of CPU, which each of some fifteen tests used to pay;
// each page has a BrowserContext of its own instead, which keeps its
// cookies and storage from the other tests' pages as a fresh profile did.
var browser struct {
	once  sync.Once
	ctx   context.Context // the browser's first tab, for NewContext
	err   error
	close func()
}

// startBrowser starts the shared browser, once.
func startBrowser(path string) (context.Context, error) {
	browser.once.Do(func() {
		profile, err := os.MkdirTemp("", "evfwd-browser-")
		if err != nil {
			browser.err = err
			return
		}
		opts := append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(path),
			chromedp.Headless,
			chromedp.NoSandbox,
			chromedp.DisableGPU,
			chromedp.Flag("disable-dev-shm-usage", true),
			chromedp.UserDataDir(profile),
			chromedp.WindowSize(1280, 800),
		)
		actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
		bctx, bcancel := chromedp.NewContext(actx)
		browser.ctx = bctx
		browser.close = func() {
			bcancel()
			acancel() // ends the browser and waits for it
			os.RemoveAll(profile)
		}
		// No timeout here: the context of the first run is the browser's
		// lifetime.
		browser.err = chromedp.Do(bctx)
	})
	return browser.ctx, browser.err
}

// closeBrowser ends the shared browser, if a test started it.
func closeBrowser() {
	if browser.close != nil {
		browser.close()
	}
}

// newPage opens a tab with a 1280x800 viewport in a BrowserContext of its
// own (a fresh profile's cookies and storage) in the shared browser. It
// collects what the page writes to the console and what the browser logs
// (CSP violations, failed loads) for assertQuiet. The tab closes when the
// test ends or after browserTimeout, whichever comes first.
func newPage(t *testing.T) *page {
	t.Helper()
	path := browserPath()
	if path == "" {
		if os.Getenv("EVFWD_BROWSER") == "required" {
			t.Fatal("EVFWD_BROWSER=required, but there is no chromium-headless-shell, chromium, chromium-browser or google-chrome on PATH")
		}
		t.Skip("no chromium-headless-shell, chromium, chromium-browser or google-chrome on PATH (EVFWD_BROWSER=required makes this a failure)")
	}
	shared, err := startBrowser(path)
	if err != nil {
		t.Fatalf("start %s: %v", path, err)
	}
	ctx, cancel := context.WithTimeout(shared, browserTimeout)
	tctx, tcancel := chromedp.NewContext(ctx, chromedp.WithNewBrowserContext())
	p := &page{t: t, ctx: tctx, marks: map[string]bool{}, changed: make(chan struct{})}
	collected := make(chan struct{})
	t.Cleanup(func() {
		tcancel() // closes the tab and disposes of its BrowserContext
		cancel()
		<-collected
	})

	// Console opens the tab and subscribes before any page loads.
	msgs := chromedp.Console(tctx)
	go func() {
		defer close(collected)
		for m, err := range msgs {
			if err != nil {
				return
			}
			p.mu.Lock()
			if m.Type == chromedp.ConsoleDebug && strings.HasPrefix(m.Text, "evfwd-test-mark ") {
				p.marks[m.Text] = true
			} else {
				p.messages = append(p.messages, m)
			}
			close(p.changed)
			p.changed = make(chan struct{})
			p.mu.Unlock()
		}
	}()
	p.do("set the viewport", chromedp.EmulateViewport(1280, 800))
	return p
}

// do runs actions, failing the test with what when one fails or when
// they take longer than stepTimeout.
func (p *page) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, stepTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		p.t.Fatalf("%s: %v%s", what, err, p.consoleSoFar())
	}
}

// open loads url and waits until the page's live stream is connected, so
// that whatever happens next reaches it as it happens.
func (p *page) open(url string) {
	p.t.Helper()
	p.do("open "+url, chromedp.Navigate(url))
	p.waitFor("the live stream to connect", `document.querySelector('#live')?.dataset.state === 'open'`)
}

// eval evaluates expr in the page (awaiting it, when it is a promise)
// and decodes its value into T.
func eval[T any](p *page, expr string) T {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, stepTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		p.t.Fatalf("evaluate %s: %v%s", expr, err, p.consoleSoFar())
	}
	return v
}

// waitFor waits until the JavaScript expression expr is truthy in the
// page: it is checked on every change of the DOM and every 50ms, for at
// most stepTimeout.
func (p *page) waitFor(what, expr string) {
	p.t.Helper()
	p.waitForWithin(what, expr, stepTimeout)
}

func (p *page) waitForWithin(what, expr string, d time.Duration) {
	p.t.Helper()
	if ok, err := p.became(expr, d); !ok {
		if err == nil {
			err = fmt.Errorf("not within %v", d)
		}
		p.t.Fatalf("waiting for %s (%s): %v\npage: %s%s", what, expr, err, p.snapshot(), p.consoleSoFar())
	}
}

// became reports whether the JavaScript expression expr became truthy in
// the page within d.
func (p *page) became(expr string, d time.Duration) (bool, error) {
	ctx, cancel := context.WithTimeout(p.ctx, d+5*time.Second)
	defer cancel()
	// chromedp.Poll builds its predicate with new Function, which the
	// page's Content-Security-Policy (no 'unsafe-eval') refuses; so the
	// expression is compiled here, by Runtime.evaluate, and checked on
	// every change of the DOM (at once) and every 50ms (for state the DOM
	// does not show, such as the focus).
	js := `new Promise(resolve => {
		const check = () => { try { return !!(` + expr + `); } catch (e) { return false; } };
		if (check()) { resolve(true); return; }
		const done = v => { mo.disconnect(); clearInterval(timer); clearTimeout(limit); resolve(v); };
		const mo = new MutationObserver(() => { if (check()) done(true); });
		const timer = setInterval(() => { if (check()) done(true); }, 50);
		const limit = setTimeout(() => done(false), ` + fmt.Sprint(d.Milliseconds()) + `);
		mo.observe(document, {subtree: true, childList: true, attributes: true, characterData: true});
	})`
	return chromedp.Run(ctx, chromedp.Evaluate[bool](js, chromedp.EvalAwaitPromise))
}

// snapshot describes the page for a failure message: its main part's
// text, cut short.
func (p *page) snapshot() string {
	ctx, cancel := context.WithTimeout(p.ctx, 3*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(document.querySelector('#app') || document.body || {innerText: ''}).innerText`))
	if err != nil {
		return "(unreadable: " + err.Error() + ")"
	}
	if len(s) > 3000 {
		s = s[:3000] + "…"
	}
	return s
}

// text is the visible text of the first element sel matches ("" if none).
func (p *page) text(sel string) string {
	p.t.Helper()
	return eval[string](p, fmt.Sprintf(`document.querySelector(%s)?.innerText ?? ''`, jsString(sel)))
}

// count is how many elements sel matches.
func (p *page) count(sel string) int {
	p.t.Helper()
	return eval[int](p, fmt.Sprintf(`document.querySelectorAll(%s).length`, jsString(sel)))
}

// click clicks the element sel matches with the mouse, once it is shown
// and nothing covers its middle. The point is taken from the page as it
// is then, not from a node found earlier (chromedp.Click fails with "Could
// not find node with given id" on a row the page has redrawn since). And
// the page redraws its lists as events arrive: when that happens between
// the press and the release, the browser sends the click to no row (a
// user's click is lost as well), so a click whose event did not reach
// sel is made again, at most 5 times.
func (p *page) click(sel string) {
	p.t.Helper()
	at := fmt.Sprintf(`(() => {
		const el = document.querySelector(%s);
		if (!el) return null;
		el.scrollIntoView({block: 'nearest', inline: 'nearest'});
		const r = el.getBoundingClientRect();
		if (!r.width || !r.height) return null;
		const x = r.left + r.width / 2, y = r.top + r.height / 2;
		const hit = document.elementFromPoint(x, y);
		return hit && (hit === el || el.contains(hit)) ? [x, y] : null;
	})()`, jsString(sel))
	arm := fmt.Sprintf(`(() => {
		window.evfwdClickHit = false;
		document.addEventListener('click', ev => { window.evfwdClickHit = !!ev.target.closest?.(%s); }, {capture: true, once: true});
	})()`, jsString(sel))
	for try := 1; ; try++ {
		p.waitFor(sel+" to be clickable", at+` !== null`)
		xy := eval[[]float64](p, at)
		if len(xy) != 2 {
			continue // gone again since: wait for it anew
		}
		eval[chromedp.Void](p, arm)
		p.do("click "+sel, chromedp.MouseClickXY(xy[0], xy[1]))
		if eval[bool](p, `window.evfwdClickHit`) {
			return
		}
		if try == 5 {
			p.t.Fatalf("click %s: 5 clicks did not reach it%s", sel, p.consoleSoFar())
		}
		p.t.Logf("click %s: the click reached another element (the page redrew it mid-click?); again", sel)
	}
}

// keys presses keys (runes, or the names in chromedp/kb) on whatever has
// the focus, one at a time, as a keyboard does: a keydown that carries the
// character, then a keyup. (chromedp.KeyEvent sends the character as a
// separate char event, which types it even when the page's keydown
// handler prevented that, as the page does for "/".)
func (p *page) keys(keys string) {
	p.t.Helper()
	p.do(fmt.Sprintf("press %q", keys), chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		for _, r := range keys {
			var down, up input.DispatchKeyEventParams
			for _, e := range kb.Encode(r) {
				switch e.Type {
				case kb.KeyDown:
					down = *e
				case kb.KeyUp:
					up = *e
				case kb.KeyChar:
					down.Text, down.UnmodifiedText = e.Text, e.UnmodifiedText
				}
			}
			for _, e := range []input.DispatchKeyEventParams{down, up} {
				if _, err := cdp.Call(ctx, tg, input.DispatchKeyEvent, e); err != nil {
					return err
				}
			}
		}
		return nil
	}))
}

// focus gives sel the focus, once it is on the page.
func (p *page) focus(sel string) {
	p.t.Helper()
	q := fmt.Sprintf(`document.querySelector(%s)`, jsString(sel))
	p.waitFor(sel+" on the page", q)
	eval[chromedp.Void](p, q+`.focus()`)
	p.waitFor(sel+" focused", q+` === document.activeElement`)
}

// typeInto replaces the value of the input sel with what typing s gives.
func (p *page) typeInto(sel, s string) {
	p.t.Helper()
	p.focus(sel)
	eval[chromedp.Void](p, fmt.Sprintf(`document.querySelector(%s).select()`, jsString(sel)))
	p.keys(s)
}

// choose selects value in the <select> sel, as a user does: the value
// changes and a change event follows.
func (p *page) choose(sel, value string) {
	p.t.Helper()
	p.focus(sel)
	eval[chromedp.Void](p, fmt.Sprintf(`(() => { const s = document.querySelector(%s); s.value = %s; s.dispatchEvent(new Event('input', {bubbles: true})); s.dispatchEvent(new Event('change', {bubbles: true})); })()`, jsString(sel), jsString(value)))
}

// colorScheme emulates prefers-color-scheme ("light" or "dark").
func (p *page) colorScheme(scheme string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, stepTimeout)
	defer cancel()
	_, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}},
	})
	if err != nil {
		p.t.Fatalf("emulate prefers-color-scheme: %s: %v", scheme, err)
	}
	p.waitFor("the "+scheme+" scheme to apply", fmt.Sprintf(`matchMedia('(prefers-color-scheme: %s)').matches`, scheme))
}

// screenshot saves a full-page PNG as DIR/name when EVFWD_SCREENSHOTS=DIR.
func (p *page) screenshot(name string) {
	p.t.Helper()
	dir := os.Getenv("EVFWD_SCREENSHOTS")
	if dir == "" {
		return
	}
	// Nothing mid-transition: wait for two frames after the last change.
	eval[chromedp.Void](p, `new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r())))`)
	ctx, cancel := context.WithTimeout(p.ctx, stepTimeout)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		p.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		p.t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		p.t.Fatal(err)
	}
	p.t.Logf("screenshot %s (%d bytes)", path, len(png))
}

// problems are the console messages that mean something went wrong: an
// error or a warning (the page warns when it reports an error), an
// uncaught exception, and the browser's own errors and warnings, such as
// a Content-Security-Policy violation or a load that failed.
func (p *page) problems() []chromedp.ConsoleMessage {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []chromedp.ConsoleMessage
next:
	for _, m := range p.messages {
		for _, a := range p.allowed {
			if strings.Contains(m.Text, a) {
				continue next
			}
		}
		switch m.Type {
		case chromedp.ConsoleError, chromedp.ConsoleWarning, chromedp.ConsoleException, "assert":
			out = append(out, m)
		}
	}
	return out
}

// flush waits until every console message the page wrote so far has been
// collected: it writes a marker and waits for it to arrive.
func (p *page) flush() {
	p.t.Helper()
	mark := fmt.Sprintf("evfwd-test-mark %d", time.Now().UnixNano())
	eval[chromedp.Void](p, fmt.Sprintf(`console.debug(%s)`, jsString(mark)))
	deadline := time.After(stepTimeout)
	for {
		p.mu.Lock()
		seen, changed := p.marks[mark], p.changed
		p.mu.Unlock()
		if seen {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			p.t.Fatalf("the console marker %q never arrived", mark)
		case <-p.ctx.Done():
			p.t.Fatalf("the console marker %q never arrived: %v", mark, p.ctx.Err())
		}
	}
}

// assertQuiet fails the test if the page has logged a problem (see
// problems) so far.
func (p *page) assertQuiet() {
	p.t.Helper()
	p.flush()
	for _, m := range p.problems() {
		p.t.Errorf("console %s (source %q) at %s:%d: %s", m.Type, m.Source, m.URL, m.Line, m.Text)
	}
}

// consoleSoFar lists what the console holds, for a failure message.
func (p *page) consoleSoFar() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.messages) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\nconsole:")
	for _, m := range p.messages {
		fmt.Fprintf(&b, "\n  %s", m)
	}
	return b.String()
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// within calls cond until it is true, or fails the test after d; for
// state outside the browser (a store, a server's log).
func within(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// allow makes assertQuiet pass over console messages that contain s: the
// browser's own note of an answer the test asked for (a 403 to a wrong
// token is one).
func (p *page) allow(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.allowed = append(p.allowed, s)
}
