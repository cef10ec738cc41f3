package cmd

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/evfwd/evfwd/pkg/receiver"
)

// The README's <script> form of Analytics.js (issue 41), run as the README
// gives it: the block is read from the README, and only what a reader
// changes is changed (the write key, serve's address), and the CDN's URL,
// for the same file served by the test (no network). The page's anonymous
// visitor sends "userId": null, which listen's shape check must take.

// readmeScriptSrc is the CDN URL the README's <script> tag loads.
const readmeScriptSrc = "https://cdn.jsdelivr.net/npm/@segment/analytics-next@" + analyticsNextVersion + "/dist/umd/index.js"

// analyticsJSFixture is where -update keeps what Analytics.js sent, the
// messages pkg/receiver's shape test checks.
var analyticsJSFixture = filepath.Join("..", "pkg", "receiver", "testdata", "analyticsjs-anonymous.json")

// readmeScriptBlock is the html block of the README's Analytics.js section.
func readmeScriptBlock(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n### A web page with Analytics.js\n")
	section, _, _ = strings.Cut(section, "\n## ")
	_, block, found := strings.Cut(section, "\n```html\n")
	block, _, closed := strings.Cut(block, "\n```")
	if !ok || !found || !closed {
		t.Fatal("README: no html block in the section \"A web page with Analytics.js\"")
	}
	return block
}

func TestBrowserAnalyticsJSScriptTag(t *testing.T) {
	t.Parallel()
	pkg, _ := analyticsNext(t)
	s := startAJSServe(t)
	block := readmeScriptBlock(t)
	snippet := block
	for _, r := range []struct{ doc, test string }{
		{readmeScriptSrc, "/umd/index.js"},
		{"'wk_dev_...'", jsString(ajsWriteKey)},
		{"'http://127.0.0.1:8787'", jsString(s.url)},
	} {
		if n := strings.Count(snippet, r.doc); n != 1 {
			t.Fatalf("README's <script> block has %s %d times, want once:\n%s", r.doc, n, block)
		}
		snippet = strings.Replace(snippet, r.doc, r.test, 1)
	}
	page := "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Sign up</title>\n<link rel=\"icon\" href=\"data:,\">\n" +
		snippet + "\n</head><body><h1>Sign up</h1></body></html>\n"
	ps := startPageServerWith(t, pkg, page)
	p := newPage(t)
	p.do("open the page", chromedp.Navigate(ps.URL+ajsPagePath))
	p.waitFor("the snippet's analytics", `window.analytics && typeof window.analytics.track === 'function'`)
	trackID := eval[string](p, `analytics.track('Signed Up', {plan: 'pro'}).then(ctx => ctx.event.messageId)`)

	var page_, track hookDelivery
	within(t, 10*time.Second, "the page and track webhooks", func() bool {
		s.hook.mu.Lock()
		defer s.hook.mu.Unlock()
		for _, d := range s.hook.got {
			switch {
			case d.msg["type"] == "page":
				page_ = d
			case d.msg["messageId"] == trackID:
				track = d
			}
		}
		return page_.body != nil && track.body != nil
	})
	if ctx, _ := page_.msg["context"].(map[string]any); ctx == nil || ctx["page"].(map[string]any)["url"] != ps.URL+ajsPagePath {
		t.Errorf("the page webhook's context.page is not the page's: %s", page_.body)
	}
	if track.msg["event"] != "Signed Up" {
		t.Errorf("the track webhook's event is %v: %s", track.msg["event"], track.body)
	}
	for _, d := range []hookDelivery{page_, track} {
		if uid, ok := d.msg["userId"]; !ok || uid != nil {
			t.Errorf("an anonymous visitor's %v: userId %v (present %v), want null as Analytics.js sends it", d.msg["type"], uid, ok)
		}
		if aid, _ := d.msg["anonymousId"].(string); aid == "" {
			t.Errorf("%v: no anonymousId: %s", d.msg["type"], d.body)
		}
		if err := receiver.CheckShape(d.body); err != nil {
			t.Errorf("listen would mark the %v webhook shape ✗ %v: %s", d.msg["type"], err, d.body)
		}
	}
	if *update {
		writeAnalyticsJSFixture(t, s)
	}
	p.assertQuiet()
}

// writeAnalyticsJSFixture keeps the messages Analytics.js posted, as serve
// read them, as one batch.
func writeAnalyticsJSFixture(t *testing.T, s *ajsServe) {
	t.Helper()
	var msgs [][]byte
	for _, r := range s.wire.requests() {
		if r.Method == "POST" {
			msgs = append(msgs, r.Body)
		}
	}
	out := append([]byte(`{"batch":[`), bytes.Join(msgs, []byte(",\n"))...)
	out = append(out, "]}\n"...)
	if !json.Valid(out) {
		t.Fatalf("the posts are not JSON: %s", out)
	}
	if err := os.WriteFile(analyticsJSFixture, out, 0o644); err != nil {
		t.Fatal(err)
	}
}
