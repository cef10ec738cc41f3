package cmd

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/evfwd/evfwd/internal/cli"
	"github.com/evfwd/evfwd/pkg/signature"
)

// startListenUI runs listen --ui on free ports and returns it with the
// inspector's URL.
func startListenUI(t *testing.T, f *cli.Factory, args ...string) (*listening, string) {
	t.Helper()
	uiURL := make(chan string, 1)
	l := startListenTuned(t, f, func(o *ListenOptions) {
		o.uiReady = func(url string) { uiURL <- url }
	}, append([]string{"--ui", "--ui-addr", "127.0.0.1:0"}, args...)...)
	return l, <-uiURL
}

func uiRequests(t *testing.T, uiURL string) []map[string]any {
	t.Helper()
	resp, err := http.Get(uiURL + "api/requests")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct{ Requests []map[string]any }
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out.Requests
}

func TestListenUIShowsRequestsAndTheRecordFile(t *testing.T) {
	record := filepath.Join(t.TempDir(), "hooks.ndjson")
	f := testFactory(t, "", false, nil)
	l, uiURL := startListenUI(t, f, "--secret", listenSecret, "--record", record)
	if !strings.Contains(f.IO.ErrOut.(interface{ String() string }).String(), "inspector on "+uiURL) {
		t.Errorf("stderr does not say where the inspector is: %q", f.IO.ErrOut)
	}
	l.post(t, "/", trackMsg, signature.Sign([]byte(listenSecret), []byte(trackMsg)))
	l.post(t, "/", identifyMsg, "bad")
	rs := uiRequests(t, uiURL)
	if len(rs) != 2 || rs[0]["type"] != "identify" || rs[1]["type"] != "track" {
		t.Fatalf("inspector lists %v", rs)
	}
	if res := l.interrupt(t); res.Code != 0 {
		t.Fatalf("Ctrl-C: %+v", res)
	}

	// A restarted listen shows what the record file holds, then what comes.
	f = testFactory(t, "", false, nil)
	l, uiURL = startListenUI(t, f, "--secret", listenSecret, "--record", record)
	l.post(t, "/", badTrackMsg, signature.Sign([]byte(listenSecret), []byte(badTrackMsg)))
	rs = uiRequests(t, uiURL)
	if len(rs) != 3 || rs[0]["id"] != 3.0 || rs[0]["messageId"] != "m3" || rs[2]["messageId"] != "m1" {
		t.Errorf("after a restart the inspector lists %v", rs)
	}
	var s struct{ Listen struct{ URL, Record string } }
	resp, err := http.Get(uiURL + "api/session")
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(resp.Body).Decode(&s)
	resp.Body.Close()
	if s.Listen.URL != l.URL || s.Listen.Record != record {
		t.Errorf("session says %+v, want url %s record %s", s.Listen, l.URL, record)
	}
}

func TestListenUIAddrInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	f := testFactory(t, "", false, nil)
	cmd := NewCmdListen(f, nil)
	cmd.SetArgs([]string{"--addr", "127.0.0.1:0", "--ui", "--ui-addr", ln.Addr().String()})
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	err = cmd.Execute()
	if err == nil || !strings.Contains(err.Error(), "--ui-addr "+ln.Addr().String()+": port in use") || cli.ExitCode(err) != 1 {
		t.Errorf("listen --ui-addr on a taken port: %v (exit %d)", err, cli.ExitCode(err))
	}
}

// A replay to listen's own https address verifies listen's certificate.
func TestListenUIReplaysToItselfOverTLS(t *testing.T) {
	certFile, keyFile, pool := selfSigned(t)
	f := testFactory(t, "", false, nil)
	l, uiURL := startListenUI(t, f, "--tls-cert", certFile, "--tls-key", keyFile)
	l.client = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	if got := l.post(t, "/", trackMsg, ""); got != 200 {
		t.Fatalf("status %d", got)
	}
	var s struct{ CSRF string }
	resp, err := http.Get(uiURL + "api/session")
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(resp.Body).Decode(&s)
	resp.Body.Close()
	req, _ := http.NewRequest("POST", uiURL+"api/replay", strings.NewReader(`{"id":1}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-CSRF-Token", s.CSRF)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		URL    string
		Status int
		Error  string
	}
	json.NewDecoder(resp.Body).Decode(&res)
	resp.Body.Close()
	if res.Status != 200 || !strings.HasPrefix(res.URL, "https://") {
		t.Errorf("replay to itself: %+v", res)
	}
}

// TestListenUIStalledBody: a caller of the inspector that stops sending a
// body mid-way loses its connection once the read timeout passes (60 s,
// as serve's inspector), rather than holding it for as long as it likes.
// It runs in a bubble: the minute passes on its clock.
func TestListenUIStalledBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ln := newPipeListener()
		uiURL := make(chan string, 1)
		startListenInBubble(t, testFactory(t, "", false, nil), func(o *ListenOptions) {
			o.uiListener = ln
			o.uiReady = func(url string) { uiURL <- url }
		}, "--ui")
		<-uiURL
		c, err := ln.dial()
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		start := time.Now()
		io.WriteString(c, "POST /api/replay HTTP/1.1\r\nHost: 127.0.0.1:1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"id\":")
		c.SetReadDeadline(time.Now().Add(10 * time.Minute))
		if _, err := io.Copy(io.Discard, c); err != nil {
			t.Fatalf("the inspector kept a stalled connection open: %v", err)
		}
		if d := time.Since(start); d < 60*time.Second || d > 2*time.Minute {
			t.Errorf("closed after %v, want the 60 s read timeout", d)
		}
	})
}

// TestListenRedactHeader: --redact-header keeps a header's value out of
// the record file, -o json, the text output and the inspector, in any
// case of its name; the inspector hides the values of the other
// sensitive headers everywhere but GET /api/requests/ID/headers.
func TestListenRedactHeader(t *testing.T) {
	const cookie, auth = "evfwd_ui=COOKIE-SENTINEL", "Bearer AUTH-SENTINEL"
	record := filepath.Join(t.TempDir(), "hooks.ndjson")
	f := testFactory(t, "", false, nil)
	f.Format = cli.FormatJSON
	l, uiURL := startListenUI(t, f, "--record", record, "--redact-header", "cookie", "-v")
	l.postFields(t, "/", trackMsg, []signature.Field{{Name: "Cookie", Value: cookie}, {Name: "Authorization", Value: auth}})
	get := func(path string) string {
		resp, err := http.Get(uiURL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	for _, p := range []string{"api/requests", "api/requests/1"} {
		if got := get(p); strings.Contains(got, "SENTINEL") || !strings.Contains(got, `"Cookie":"[redacted]"`) {
			t.Errorf("%s: %s", p, got)
		}
	}
	if got := get("api/requests/1/headers"); strings.Contains(got, "COOKIE-SENTINEL") || !strings.Contains(got, auth) {
		t.Errorf("headers on request: %s", got)
	}
	res := l.interrupt(t)
	file, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	for what, s := range map[string]string{"record file": string(file), "stdout": res.Stdout, "stderr": res.Stderr} {
		if strings.Contains(s, "COOKIE-SENTINEL") {
			t.Errorf("%s holds the redacted Cookie: %s", what, s)
		}
	}
	recs := listenJSONLines(t, res.Stdout)
	if len(recs) != 1 || recs[0].Header("Cookie") != "[redacted]" || recs[0].Header("Authorization") != auth {
		t.Errorf("-o json: %+v", recs)
	}
}

// uiCall calls the inspector at uiURL with token as Bearer ("" none).
func uiCall(t *testing.T, method, url, token, body string, headers ...string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

var tokenRE = regexp.MustCompile(`#token=([A-Za-z0-9_-]+)`)

// TestListenUIBeyondLoopback: an inspector on 0.0.0.0 warns at start,
// prints the token it made up once, in its address, needs it for its API,
// and refuses replays to loopback but to listen itself, unless
// --allow-replay-local.
func TestListenUIBeyondLoopback(t *testing.T) {
	app := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer app.Close()
	for _, allow := range []bool{false, true} {
		f := testFactory(t, "", false, nil)
		args := []string{"--ui-addr", "0.0.0.0:0"}
		if allow {
			args = append(args, "--allow-replay-local")
		}
		l, uiURL := startListenUI(t, f, args...)
		stderr := f.IO.ErrOut.(interface{ String() string }).String()
		m := tokenRE.FindStringSubmatch(stderr)
		if m == nil || len(m[1]) < 40 || strings.Count(stderr, m[1]) != 1 {
			t.Fatalf("allow %v: no token printed once in %q", allow, stderr)
		}
		token := m[1]
		if !strings.Contains(stderr, "warning: the inspector listens on ") || !strings.Contains(stderr, "beyond loopback: its API needs the token") || !strings.Contains(stderr, "inspector on "+uiURL+"#token="+token) {
			t.Errorf("allow %v: stderr %q", allow, stderr)
		}
		if strings.Contains(stderr, "--allow-replay-local)") != allow || strings.Contains(stderr, "lifts that") == allow {
			t.Errorf("allow %v: the warning does not say what replays may reach: %q", allow, stderr)
		}
		l.post(t, "/", trackMsg, "")
		if code, body := uiCall(t, "GET", uiURL+"api/requests", "", ""); code != 401 {
			t.Errorf("allow %v: without the token: %d %s", allow, code, body)
		}
		code, body := uiCall(t, "GET", uiURL+"api/session", token, "")
		var s struct{ CSRF string }
		json.Unmarshal([]byte(body), &s)
		if code != 200 || s.CSRF == "" {
			t.Fatalf("allow %v: session with the token: %d %s", allow, code, body)
		}
		replay := func(target string) (int, string) {
			return uiCall(t, "POST", uiURL+"api/replay", token, fmt.Sprintf(`{"id":1,"url":%q}`, target),
				"Content-Type", "application/json", "X-CSRF-Token", s.CSRF)
		}
		code, body = replay(app.URL)
		if allow && (code != 200 || !strings.Contains(body, `"status":200`)) || !allow && (code != 400 || !strings.Contains(body, "--allow-replay-local")) {
			t.Errorf("allow %v: replay to another loopback port: %d %s", allow, code, body)
		}
		if code, body := replay(l.URL); code != 200 || !strings.Contains(body, `"status":200`) {
			t.Errorf("allow %v: replay to listen itself: %d %s", allow, code, body)
		}
		l.interrupt(t)
	}
}

// TestListenUIToken: --ui-token (or EVFWD_UI_TOKEN) guards a loopback
// inspector too, and is not printed.
func TestListenUIToken(t *testing.T) {
	const token = "a-token-of-24-characters"
	for _, env := range []bool{false, true} {
		var f *cli.Factory
		args := []string{}
		if env {
			f = testFactory(t, "", false, map[string]string{"EVFWD_UI_TOKEN": token})
		} else {
			f = testFactory(t, "", false, nil)
			args = append(args, "--ui-token", token)
		}
		l, uiURL := startListenUI(t, f, args...)
		if stderr := f.IO.ErrOut.(interface{ String() string }).String(); strings.Contains(stderr, token) || strings.Contains(stderr, "warning") {
			t.Errorf("env %v: stderr %q", env, stderr)
		}
		if code, _ := uiCall(t, "GET", uiURL+"api/requests", "", ""); code != 401 {
			t.Errorf("env %v: without the token: %d", env, code)
		}
		if code, _ := uiCall(t, "GET", uiURL+"api/requests", token, ""); code != 200 {
			t.Errorf("env %v: with the token: %d", env, code)
		}
		l.interrupt(t)
	}
}

// TestBrowserListenTokenAndSensitiveHeaders: the page of an inspector on
// 0.0.0.0 opens at the address listen printed, takes the token from it
// (and drops it from the address), lists and streams with it; a page
// without it asks for it. A request's Cookie and Authorization are on
// the page only once their "show" is clicked.
func TestBrowserListenTokenAndSensitiveHeaders(t *testing.T) {
	t.Parallel()
	const cookie, auth = "evfwd_ui=COOKIE-SENTINEL", "Bearer AUTH-SENTINEL"
	f := testFactory(t, "", false, nil)
	l, ui := startListenUI(t, f, "--ui-addr", "0.0.0.0:0")
	m := tokenRE.FindStringSubmatch(f.IO.ErrOut.(interface{ String() string }).String())
	if m == nil {
		t.Fatal("no token printed")
	}
	token := m[1]
	l.postFields(t, "/", trackMsg, []signature.Field{{Name: "Cookie", Value: cookie}, {Name: "Authorization", Value: auth}})

	p := newPage(t)
	p.open(ui + "#token=" + token)
	p.waitFor("the first request", `document.querySelector(`+jsString(row(1))+`)`)
	if hash := eval[string](p, `location.hash`); hash != "" {
		t.Errorf("the token stays in the address: %q", hash)
	}
	l.post(t, "/", identifyMsg, "")
	p.waitFor("the second request, streamed", `document.querySelector(`+jsString(row(2))+`)`)
	p.click(row(1))
	p.waitFor("request 1's detail", detailOpen(1))
	if n := p.count("#detail button.reveal"); n != 2 {
		t.Errorf("%d show buttons, want 2 (Authorization, Cookie)", n)
	}
	if body := eval[string](p, `document.body.innerText`); strings.Contains(body, "SENTINEL") {
		t.Errorf("a sensitive value is on the page before a click")
	}
	p.click(`#detail button.reveal[aria-label="Show the value of Cookie"]`)
	p.waitFor("the Cookie shown", `document.querySelector('#detail').innerText.includes(`+jsString(cookie)+`)`)
	if body := eval[string](p, `document.body.innerText`); strings.Contains(body, "AUTH-SENTINEL") {
		t.Errorf("Authorization shown with the Cookie")
	}
	p.assertQuiet()

	// Another tab, without the token: it asks, then shows the list.
	q := newPage(t)
	q.do("open without the token", chromedp.Navigate(ui))
	q.waitFor("the token form", `document.querySelector('#listen-token')`)
	q.typeInto("#listen-token", token)
	q.click("#login")
	q.waitFor("the list", `document.querySelector(`+jsString(row(2))+`)`)
	q.waitFor("the live stream", `document.querySelector('#live')?.dataset.state === 'open'`)
	q.assertQuiet()
}
