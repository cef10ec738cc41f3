package cmd

import (
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

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
