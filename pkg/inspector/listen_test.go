package inspector_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/evfwd/evfwd/internal/testmain"
	"github.com/evfwd/evfwd/internal/testsize"
	"github.com/evfwd/evfwd/pkg/inspector"
	"github.com/evfwd/evfwd/pkg/message"
	"github.com/evfwd/evfwd/pkg/receiver"
	"github.com/evfwd/evfwd/pkg/signature"
	"github.com/google/go-cmp/cmp"
)

const secret = "s3cret"

// bench is a listen receiver with its inspector, both on loopback.
type bench struct {
	insp     *inspector.Listen
	hook     *httptest.Server // the receiver, where webhooks go
	ui       *httptest.Server // the inspector
	csrf     string
	token    string // sent as Authorization: Bearer, when set
	received chan *receiver.Request
}

func newBench(t *testing.T, secrets ...string) *bench {
	t.Helper()
	return newBenchWith(t, inspector.ListenConfig{}, secrets...)
}

// newBenchWith is newBench with the inspector configured as cfg (its
// Secrets and Version set here).
func newBenchWith(t *testing.T, cfg inspector.ListenConfig, secrets ...string) *bench {
	t.Helper()
	var keys [][]byte
	for _, s := range secrets {
		keys = append(keys, []byte(s))
	}
	b := &bench{received: make(chan *receiver.Request, 100), token: cfg.Token}
	cfg.Secrets, cfg.Version = keys, "test"
	b.insp = inspector.NewListen(cfg)
	h, err := receiver.New(receiver.Options{Secrets: keys, OnRequest: func(r *receiver.Request) {
		b.insp.Add(r)
		b.received <- r
	}})
	if err != nil {
		t.Fatal(err)
	}
	b.hook = httptest.NewServer(h)
	b.insp.SetURL(b.hook.URL)
	b.ui = httptest.NewUnstartedServer(nil)
	b.ui.Config.Handler = b.insp.Handler(b.ui.Listener.Addr().String())
	b.ui.Start()
	t.Cleanup(func() {
		b.insp.Close()
		b.ui.Close()
		b.hook.Close()
		h.Close()
	})
	var s struct{ CSRF string }
	b.getJSON(t, "/api/session", &s)
	b.csrf = s.CSRF
	return b
}

// send posts body to the receiver with headers and waits until it is
// answered (and so in the inspector).
func (b *bench) send(t *testing.T, body string, headers ...string) {
	t.Helper()
	req, _ := http.NewRequest("POST", b.hook.URL+"/hooks", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	<-b.received
}

func (b *bench) get(t *testing.T, path string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", b.ui.URL+path, nil)
	if b.token != "" {
		req.Header.Set("Authorization", "Bearer "+b.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

func (b *bench) getJSON(t *testing.T, path string, v any) {
	t.Helper()
	code, body := b.get(t, path)
	if code != 200 {
		t.Fatalf("GET %s: %d %s", path, code, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: %v in %s", path, err, body)
	}
}

func (b *bench) post(t *testing.T, path, body string, headers ...string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", b.ui.URL+path, strings.NewReader(body))
	if b.token != "" {
		req.Header.Set("Authorization", "Bearer "+b.token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

func (b *bench) replay(t *testing.T, body string) (int, inspector.ReplayResult) {
	t.Helper()
	code, out := b.post(t, "/api/replay", body, "Content-Type", "application/json", inspector.CSRFHeader, b.csrf)
	var res inspector.ReplayResult
	if code == 200 {
		if err := json.Unmarshal(out, &res); err != nil {
			t.Fatal(err)
		}
	} else {
		res.Error = string(out)
	}
	return code, res
}

type listed struct {
	ID        int64  `json:"id"`
	Type      string `json:"type"`
	Signature struct {
		Verdict string `json:"verdict"`
		Reason  string `json:"reason"`
	} `json:"signature"`
	BodyOmitted bool            `json:"bodyOmitted"`
	Body        json.RawMessage `json:"body"`
}

func (b *bench) list(t *testing.T, query string) []listed {
	t.Helper()
	var out struct{ Requests []listed }
	b.getJSON(t, "/api/requests"+query, &out)
	return out.Requests
}

func ids(rs []listed) []int64 {
	var out []int64
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return out
}

const (
	track    = `{"type":"track","version":1,"userId":"u1","event":"Order Completed","messageId":"m1","timestamp":"2026-11-23T10:00:00.000Z"}`
	identify = `{"type":"identify","version":1,"userId":"u2","traits":{"plan":"pro"},"messageId":"m2","timestamp":"2026-11-23T10:00:00.000Z"}`
)

func TestListNewestFirstAndFilters(t *testing.T) {
	b := newBench(t, secret)
	b.send(t, track, signature.Header, signature.Sign([]byte(secret), []byte(track)))
	b.send(t, identify, signature.Header, signature.Sign([]byte("wrong"), []byte(identify)))
	b.send(t, "not json")

	for _, tc := range []struct {
		query string
		want  []int64
	}{
		{"", []int64{3, 2, 1}},
		{"?type=track", []int64{1}},
		{"?type=none", []int64{3}},
		{"?verdict=invalid", []int64{3, 2}},
		{"?verdict=valid", []int64{1}},
		{"?q=PRO", []int64{2}},
		{"?q=order+completed&verdict=valid", []int64{1}},
		{"?limit=2", []int64{3, 2}},
		{"?limit=0", nil},
		{"?after=1", []int64{3, 2}},
		{"?after=2&type=track", nil},
	} {
		if diff := cmp.Diff(tc.want, ids(b.list(t, tc.query))); diff != "" {
			t.Errorf("GET /api/requests%s (-want +got):\n%s", tc.query, diff)
		}
	}
	rs := b.list(t, "?type=identify")
	if rs[0].Signature.Verdict != "invalid" || rs[0].Signature.Reason != "mismatch" {
		t.Errorf("identify listed with signature %+v, want invalid mismatch", rs[0].Signature)
	}
	if code, body := b.get(t, "/api/requests?limit=x"); code != 400 || !bytes.Contains(body, []byte("limit")) {
		t.Errorf("bad limit: %d %s", code, body)
	}
}

func TestDetailExplainsTheCheck(t *testing.T) {
	b := newBench(t, secret, "whsec_"+"c2VjcmV0LXR3by10d28tdHdv")
	// A stripe signature made ten minutes before it arrives: expired.
	old := time.Now().Add(-10 * time.Minute)
	fields, err := signature.SignFields(signature.Stripe, [][]byte{[]byte(secret)}, []byte(track), signature.Params{Timestamp: old})
	if err != nil {
		t.Fatal(err)
	}
	b.send(t, track, fields[0].Name, fields[0].Value)
	b.send(t, identify, signature.Header, signature.Sign([]byte("wrong"), []byte(identify)))
	b.send(t, track+"\n", signature.Header, signature.Sign([]byte(secret), []byte(track)))

	type step struct {
		Step string
		OK   *bool
	}
	var d struct {
		Request struct {
			ID   int64
			Body json.RawMessage
		}
		Check struct {
			Verdict, Scheme, Reason string
			Steps                   []struct {
				Step string
				OK   *bool
				Text string
			}
		}
	}
	yes, no := new(true), new(false)
	for _, tc := range []struct {
		id      int
		scheme  string
		reason  string
		steps   []step
		mention string
	}{
		{1, "stripe", "expired", []step{{"scheme", yes}, {"header", yes}, {"signed", nil}, {"secrets", yes}, {"timestamp", no}, {"verdict", no}},
			`HMAC-SHA256 of "` + fmt.Sprint(old.Unix()) + `." then the body`},
		{2, "segment", "mismatch", []step{{"scheme", yes}, {"header", yes}, {"signed", nil}, {"secrets", no}, {"verdict", no}},
			"2 secrets tried; none gives"},
		{3, "segment", "trailing_newline", []step{{"scheme", yes}, {"header", yes}, {"signed", nil}, {"secrets", no}, {"verdict", no}},
			"without the body's final newline"},
	} {
		b.getJSON(t, fmt.Sprintf("/api/requests/%d", tc.id), &d)
		if d.Request.ID != int64(tc.id) || d.Check.Scheme != tc.scheme || d.Check.Reason != tc.reason || d.Check.Verdict != "invalid" {
			t.Errorf("request %d: id %d check %s %s %s, want invalid %s %s", tc.id, d.Request.ID, d.Check.Verdict, d.Check.Scheme, d.Check.Reason, tc.scheme, tc.reason)
		}
		var got []step
		var text strings.Builder
		for _, s := range d.Check.Steps {
			got = append(got, step{s.Step, s.OK})
			text.WriteString(s.Text + "\n")
		}
		if diff := cmp.Diff(tc.steps, got); diff != "" {
			t.Errorf("request %d steps (-want +got):\n%s", tc.id, diff)
		}
		if !strings.Contains(text.String(), tc.mention) {
			t.Errorf("request %d: steps do not say %q:\n%s", tc.id, tc.mention, text.String())
		}
		if strings.Contains(text.String(), secret) {
			t.Errorf("request %d: steps show the secret:\n%s", tc.id, text.String())
		}
	}
	if code, _ := b.get(t, "/api/requests/99"); code != 404 {
		t.Errorf("unknown id: %d, want 404", code)
	}
	if code, _ := b.get(t, "/api/requests/x"); code != 400 {
		t.Errorf("bad id: %d, want 400", code)
	}

	// Without a secret nothing is checked, and the check says why.
	nb := newBench(t)
	nb.send(t, track)
	nb.getJSON(t, "/api/requests/1", &d)
	if d.Check.Verdict != "unchecked" || len(d.Check.Steps) != 1 || !strings.Contains(d.Check.Steps[0].Text, "--secret") {
		t.Errorf("no secret: check %+v", d.Check)
	}
}

func TestBodyIsExact(t *testing.T) {
	b := newBench(t)
	body := "{\"a\": 1}\n"
	b.send(t, body)
	code, got := b.get(t, "/api/requests/1/body")
	if code != 200 || string(got) != body {
		t.Errorf("body: %d %q, want %q", code, got, body)
	}
}

func TestEventsStreamEachRequest(t *testing.T) {
	b := newBench(t, secret)
	resp, err := http.Get(b.ui.URL + "/api/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	rd := bufio.NewReader(resp.Body)
	// The stream's first lines come once the page is subscribed.
	if line, _ := rd.ReadString('\n'); line != "retry: 1000\n" {
		t.Fatalf("first line %q", line)
	}
	rd.ReadString('\n')
	b.send(t, track, signature.Header, signature.Sign([]byte(secret), []byte(track)))
	ev, _ := rd.ReadString('\n')
	data, _ := rd.ReadString('\n')
	if ev != "event: request\n" || !strings.HasPrefix(data, `data: {"id":1,`) || !strings.Contains(data, `"verdict":"valid"`) {
		t.Errorf("event %q %q", ev, data)
	}

	// Close ends the stream (as listen does before its server shuts down).
	b.insp.Close()
	if _, err := io.ReadAll(rd); err != nil {
		t.Errorf("after Close: %v", err)
	}
}

func TestGuard(t *testing.T) {
	b := newBench(t, secret)
	b.send(t, track)
	req, _ := http.NewRequest("GET", b.ui.URL+"/api/session", nil)
	req.Host = "evil.example:" + b.ui.URL[strings.LastIndex(b.ui.URL, ":")+1:]
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("rebound Host: %d, want 421", resp.StatusCode)
	}
	req.Host = "localhost" + req.Host[len("evil.example"):]
	if resp, err = http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Errorf("localhost Host: %v %v", resp.StatusCode, err)
	}
	resp.Body.Close()

	for _, tc := range []struct {
		name    string
		headers []string
		want    int
	}{
		{"no token", []string{"Content-Type", "application/json"}, 403},
		{"wrong token", []string{"Content-Type", "application/json", inspector.CSRFHeader, otherToken(b.csrf)}, 403},
		{"a form", []string{"Content-Type", "application/x-www-form-urlencoded", inspector.CSRFHeader, b.csrf}, 415},
	} {
		if code, body := b.post(t, "/api/replay", `{"id":1}`, tc.headers...); code != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.name, code, body, tc.want)
		}
	}
	if code, _ := b.get(t, "/"); code != 200 {
		t.Errorf("page: %d", code)
	}
	if code, _ := b.get(t, "/etc/passwd"); code != 404 {
		t.Errorf("other path: %d", code)
	}
}

// otherToken is tok with its last character changed.
func otherToken(tok string) string {
	if strings.HasSuffix(tok, "A") {
		return tok[:len(tok)-1] + "B"
	}
	return tok[:len(tok)-1] + "A"
}

func TestReplay(t *testing.T) {
	b := newBench(t, secret)
	b.send(t, track, signature.Header, signature.Sign([]byte("wrong"), []byte(track)))

	// A second receiver that checks the secret, as the app would.
	second := make(chan *receiver.Request, 10)
	h, _ := receiver.New(receiver.Options{Secrets: [][]byte{[]byte(secret)}, OnRequest: func(r *receiver.Request) { second <- r }})
	app := httptest.NewServer(h)
	defer app.Close()

	code, res := b.replay(t, fmt.Sprintf(`{"id":1,"url":%q,"resign":true}`, app.URL+"/in"))
	if code != 200 || res.Status != 200 || res.Signed != signature.Segment || res.Body != "OK\n" {
		t.Fatalf("resigned replay: %d %+v", code, res)
	}
	got := <-second
	if got.Signature.Verdict != receiver.SigValid || string(got.Body) != track || got.Path != "/in" {
		t.Errorf("second receiver got %s %q at %s", got.Signature.Verdict, got.Body, got.Path)
	}

	// As captured: the wrong signature goes as it came.
	code, res = b.replay(t, fmt.Sprintf(`{"id":1,"url":%q}`, app.URL))
	if code != 200 || res.Status != 401 {
		t.Fatalf("captured replay: %d %+v", code, res)
	}
	if got := <-second; got.Header.Get(signature.Header) != signature.Sign([]byte("wrong"), []byte(track)) {
		t.Errorf("captured replay changed X-Signature: %q", got.Header.Get(signature.Header))
	}

	// By default it goes back to listen itself, at the path it came to.
	code, res = b.replay(t, `{"id":1,"resign":true}`)
	if code != 200 || res.Status != 200 || res.URL != b.hook.URL+"/hooks" {
		t.Errorf("default replay: %d %+v", code, res)
	}
	if r := <-b.received; r.Signature.Verdict != receiver.SigValid {
		t.Errorf("listen got its replay %s", r.Signature.Verdict)
	}

	// A dead endpoint is an answer, not a failed call.
	dead := httptest.NewServer(nil)
	dead.Close()
	if code, res = b.replay(t, fmt.Sprintf(`{"id":1,"url":%q}`, dead.URL)); code != 200 || res.Status != 0 || res.Error == "" {
		t.Errorf("dead endpoint: %d %+v", code, res)
	}
	for _, tc := range []struct{ body, want string }{
		{`{"id":1,"url":"ftp://x"}`, "http(s) URL"},
		{`{"id":7}`, "no request 7"},
		{`{"id":1,"resgn":true}`, "unknown field"},
	} {
		if code, res := b.replay(t, tc.body); code == 200 || !strings.Contains(res.Error, tc.want) {
			t.Errorf("%s: %d %s, want an error saying %q", tc.body, code, res.Error, tc.want)
		}
	}

	nb := newBench(t)
	nb.send(t, track)
	if code, res := nb.replay(t, `{"id":1,"resign":true}`); code != 400 || !strings.Contains(res.Error, "no secret") {
		t.Errorf("resign without a secret: %d %s", code, res.Error)
	}
}

// TestCopiesVerify checks the request file with the verifier and runs the
// curl command in a real shell against a real receiver.
func TestCopiesVerify(t *testing.T) {
	b := newBench(t, secret)
	bodies := []string{track, "it's \"quoted\"\nand ends in a newline\n", "\x00\xff binary"}
	for _, body := range bodies {
		b.send(t, body, signature.Header, signature.Sign([]byte(secret), []byte(body)))
	}
	for i, body := range bodies {
		code, file := b.get(t, fmt.Sprintf("/api/requests/%d/request", i+1))
		if code != 200 {
			t.Fatalf("request file %d: %d %s", i+1, code, file)
		}
		req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(file)))
		if err != nil {
			t.Fatalf("request file %d: %v\n%s", i+1, err, file)
		}
		got, _ := io.ReadAll(req.Body)
		if string(got) != body || req.URL.Path != "/hooks" {
			t.Errorf("request file %d: body %q path %s", i+1, got, req.URL.Path)
		}
		if err := signature.Verify([]byte(secret), got, req.Header.Get(signature.Header)); err != nil {
			t.Errorf("request file %d does not verify: %v", i+1, err)
		}
	}

	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("no curl")
	}
	for i, body := range bodies {
		_, cmd := b.get(t, fmt.Sprintf("/api/requests/%d/curl", i+1))
		out, err := exec.Command("sh", "-c", string(cmd)).CombinedOutput()
		if err != nil || string(out) != "OK\n" {
			t.Fatalf("curl %d: %v %s\n%s", i+1, err, out, cmd)
		}
		got := <-b.received
		if got.Signature.Verdict != receiver.SigValid || string(got.Body) != body {
			t.Errorf("curl %d: %s %q, want valid %q", i+1, got.Signature.Verdict, got.Body, body)
		}
	}
}

// Loading a record file holds no more than the inspector keeps: the last
// records within KeepBytes; a file an older evfwd wrote (snake_case keys)
// reads as today's.
func TestLoadIsBounded(t *testing.T) {
	// A bound of 8 MB shows the rule as well as the default 64 MB, with a
	// file a fifth the size (loading 80 MB took a minute under -race);
	// under -race half that again, the eight records just over ListBytes
	// to a bound that holds three.
	keep := testsize.Pick(8<<20, 4<<20)
	var file bytes.Buffer
	big := strings.Repeat("z", testsize.Pick(2<<20, inspector.ListBytes+64<<10)) // over ListBytes: kept beside its record
	for i := range 8 {
		r := &receiver.Request{ReceivedAt: time.Unix(int64(i), 0), Method: "POST", Path: "/", Header: http.Header{},
			Body: []byte(big), Signature: receiver.Signature{Verdict: receiver.SigUnchecked}, Status: 200}
		file.Write(r.AppendJSON(nil))
	}
	insp := inspector.NewListen(inspector.ListenConfig{KeepBytes: keep})
	defer insp.Close()
	if err := insp.Load(&file); err != nil {
		t.Fatal(err)
	}
	b := serveOnly(t, insp)
	rs := b.list(t, "")
	if len(rs) == 0 || len(rs)*len(big) > keep || rs[0].ID != int64(len(rs)) {
		t.Errorf("kept %d records of %d bytes each, newest id %d; want the newest within %d bytes", len(rs), len(big), rs[0].ID, keep)
	}

	var old bytes.Buffer
	old.WriteString(`{"received_at":"2024-05-01T12:00:05.123Z","method":"POST","path":"/old","headers":{},"size":2,"signature":{"verdict":"unchecked"},"shape":{"ok":false},"duplicate":false,"status":200,"latency_ms":1.5,"body":{}}` + "\n")
	insp = inspector.NewListen(inspector.ListenConfig{})
	defer insp.Close()
	if err := insp.Load(&old); err != nil {
		t.Fatal(err)
	}
	var d struct {
		Request struct {
			ReceivedAt time.Time
			LatencyMs  float64
		}
	}
	serveOnly(t, insp).getJSON(t, "/api/requests/1", &d)
	if d.Request.ReceivedAt.IsZero() || d.Request.LatencyMs != 1.5 {
		t.Errorf("an older record reads as %+v", d.Request)
	}
}

// serveOnly serves insp's API alone.
func serveOnly(t *testing.T, insp *inspector.Listen) *bench {
	srv := httptest.NewUnstartedServer(nil)
	srv.Config.Handler = insp.Handler(srv.Listener.Addr().String())
	srv.Start()
	t.Cleanup(srv.Close)
	return &bench{ui: srv}
}

func TestLoadKeepsTheLastRecords(t *testing.T) {
	var file bytes.Buffer
	for i := range inspector.Keep + 5 {
		r := &receiver.Request{ReceivedAt: time.Unix(int64(i), 0), Method: "POST", Path: "/", Header: http.Header{},
			Body: []byte(track), Type: "track", Signature: receiver.Signature{Verdict: receiver.SigUnchecked}, Status: 200}
		file.Write(r.AppendJSON(nil))
		if i == 3 {
			file.WriteString("{torn line\n\n")
		}
	}
	insp := inspector.NewListen(inspector.ListenConfig{})
	defer insp.Close()
	if err := insp.Load(&file); err != nil {
		t.Fatal(err)
	}
	b := serveOnly(t, insp)
	rs := b.list(t, "")
	if len(rs) != inspector.Keep || rs[0].ID != inspector.Keep {
		t.Fatalf("loaded %d, newest id %d; want %d", len(rs), rs[0].ID, inspector.Keep)
	}
	var d struct {
		Request struct{ ReceivedAt time.Time }
	}
	b.getJSON(t, "/api/requests/1", &d)
	if d.Request.ReceivedAt.Unix() != 5 {
		t.Errorf("id 1 is the record received at %d, want the sixth (5)", d.Request.ReceivedAt.Unix())
	}
}

func TestLargeBodiesListedWithout(t *testing.T) {
	b := newBench(t, secret)
	large := `{"pad":"` + strings.Repeat("x", inspector.ListBytes) + `"}`
	b.send(t, large)
	b.send(t, track)
	rs := b.list(t, "")
	if !rs[1].BodyOmitted || rs[1].Body != nil || rs[0].BodyOmitted {
		t.Errorf("listed: large omitted=%v body=%d bytes; small omitted=%v", rs[1].BodyOmitted, len(rs[1].Body), rs[0].BodyOmitted)
	}
	if code, body := b.get(t, "/api/requests/1/body"); code != 200 || len(body) != len(large) {
		t.Errorf("large body: %d, %d bytes", code, len(body))
	}

	// A body just under the receiver's 5 MB whose record is far larger
	// (each < and & is six bytes in it): kept, and it replays exactly.
	// Under -race, 256 KB (its record still six times the body): copying
	// and escaping 5 MB there took 5 of this test's 6 CPU-seconds.
	xml := strings.Repeat("<a>&amp;</a>", testsize.Pick(receiver.DefaultMaxBodyBytes-1000, 256<<10)/12)
	b.send(t, xml, signature.Header, signature.Sign([]byte(secret), []byte(xml)))
	if code, body := b.get(t, "/api/requests/3/body"); code != 200 || string(body) != xml {
		t.Errorf("xml body: %d, %d bytes of %d", code, len(body), len(xml))
	}
	if code, res := b.replay(t, `{"id":3}`); code != 200 || res.Status != 200 {
		t.Errorf("replaying the xml body: %d %+v", code, res)
	}
	if r := <-b.received; string(r.Body) != xml || r.Signature.Verdict != receiver.SigValid {
		t.Errorf("the xml body replayed as %d bytes, %s", len(r.Body), r.Signature.Verdict)
	}
}

// What a page searches for is found as it was sent, not as the record
// escapes it; and a path with escapes is written escaped in the request
// file.
func TestSearchAndPathsAsSent(t *testing.T) {
	b := newBench(t)
	req, _ := http.NewRequest("POST", b.hook.URL+"/hooks/my%20app?source=shop&env=<test>", strings.NewReader(track))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	<-b.received
	b.send(t, identify)
	if got := ids(b.list(t, "?q="+url.QueryEscape("shop&env=<TEST>"))); len(got) != 1 || got[0] != 1 {
		t.Errorf("q with & and <: %v, want [1]", got)
	}
	_, file := b.get(t, "/api/requests/1/request")
	if line, _, _ := strings.Cut(string(file), "\r\n"); line != "POST /hooks/my%20app?source=shop&env=<test> HTTP/1.1" {
		t.Errorf("request line %q", line)
	}
	if _, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(file))); err != nil {
		t.Errorf("request file: %v", err)
	}
}

func TestMain(m *testing.M) {
	// Replays go to loopback: keep a proxy in the environment out of it.
	os.Unsetenv("HTTP_PROXY")
	os.Unsetenv("http_proxy")
	testmain.Run(m)
}

// TestSensitiveHeadersHidden: the values of Cookie, Authorization and the
// like never appear in the list, the event stream, a search, or a
// request's detail (which names them in "sensitive"), whether the request
// arrived now, has a large body, or was loaded from a record file; GET
// /api/requests/ID/headers shows them, and a replay sends them.
func TestSensitiveHeadersHidden(t *testing.T) {
	const cookie, auth, key = "evfwd_ui=COOKIE-SENTINEL", "Bearer AUTH-SENTINEL", "KEY-SENTINEL"
	b := newBench(t)
	resp, err := http.Get(b.ui.URL + "/api/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	rd.ReadString('\n')
	rd.ReadString('\n')
	b.send(t, track, "Cookie", cookie, "Authorization", auth, "X-Api-Key", key)
	b.send(t, `{"pad":"`+strings.Repeat("x", inspector.ListBytes)+`"}`, "Cookie", cookie)
	b.send(t, identify)
	var file bytes.Buffer
	r := &receiver.Request{ReceivedAt: time.Unix(1, 0), Method: "POST", Path: "/", Body: []byte(track), Type: "track",
		Header: http.Header{"Cookie": {cookie}, "Proxy-Authorization": {auth}}, Signature: receiver.Signature{Verdict: receiver.SigUnchecked}, Status: 200}
	file.Write(r.AppendJSON(nil))
	loaded := inspector.NewListen(inspector.ListenConfig{})
	defer loaded.Close()
	if err := loaded.Load(&file); err != nil {
		t.Fatal(err)
	}
	lb := serveOnly(t, loaded)

	var shown []string
	for range 3 {
		rd.ReadString('\n')
		data, _ := rd.ReadString('\n')
		rd.ReadString('\n')
		shown = append(shown, "event "+data)
	}
	for _, p := range []string{"/api/requests", "/api/requests/1", "/api/requests/2", "/api/requests/3"} {
		_, body := b.get(t, p)
		shown = append(shown, p+" "+string(body))
	}
	for _, p := range []string{"/api/requests", "/api/requests/1"} {
		_, body := lb.get(t, p)
		shown = append(shown, "loaded "+p+" "+string(body))
	}
	for _, s := range shown {
		if strings.Contains(s, "SENTINEL") {
			t.Errorf("a sensitive value is shown: %.300s", s)
		}
	}
	var d struct {
		Request struct {
			Sensitive []string
			Headers   map[string]string
		}
	}
	b.getJSON(t, "/api/requests/1", &d)
	if want := []string{"Authorization", "Cookie", "X-Api-Key"}; !cmp.Equal(d.Request.Sensitive, want) || d.Request.Headers["Cookie"] != inspector.Hidden {
		t.Errorf("detail: sensitive %v, Cookie %q; want %v, %q", d.Request.Sensitive, d.Request.Headers["Cookie"], want, inspector.Hidden)
	}
	lb.getJSON(t, "/api/requests/1", &d)
	if want := []string{"Cookie", "Proxy-Authorization"}; !cmp.Equal(d.Request.Sensitive, want) {
		t.Errorf("loaded detail: sensitive %v, want %v", d.Request.Sensitive, want)
	}
	if got := ids(b.list(t, "?q=cookie-sentinel")); len(got) != 0 {
		t.Errorf("a search for a hidden value finds %v", got)
	}

	var hs struct{ Headers map[string]string }
	b.getJSON(t, "/api/requests/1/headers", &hs)
	if hs.Headers["Cookie"] != cookie || hs.Headers["Authorization"] != auth || hs.Headers["X-Api-Key"] != key {
		t.Errorf("headers on request: %v", hs.Headers)
	}
	lb.getJSON(t, "/api/requests/1/headers", &hs)
	if hs.Headers["Proxy-Authorization"] != auth {
		t.Errorf("loaded headers on request: %v", hs.Headers)
	}
	if code, res := b.replay(t, `{"id":1}`); code != 200 || res.Status != 200 {
		t.Fatalf("replay: %d %+v", code, res)
	}
	if r := <-b.received; r.Header.Get("Cookie") != cookie || r.Header.Get("Authorization") != auth {
		t.Errorf("replayed with Cookie %q, Authorization %q", r.Header.Get("Cookie"), r.Header.Get("Authorization"))
	}
}

// TestToken: with a Token, every API call but GET /api/session needs it
// as a Bearer header (401 without, also for a POST; never in the URL);
// the page itself loads without it.
func TestToken(t *testing.T) {
	const token = "0123456789abcdef0123456789abcdef"
	b := newBenchWith(t, inspector.ListenConfig{Token: token})
	b.send(t, track)
	anon := &bench{ui: b.ui}
	wrong := &bench{ui: b.ui, token: otherToken(token)}
	for _, c := range []*bench{anon, wrong} {
		for _, p := range []string{"/api/requests", "/api/requests/1", "/api/requests/1/headers", "/api/requests/1/curl", "/api/events", "/api/events?token=" + otherToken(token)} {
			if code, body := c.get(t, p); code != 401 {
				t.Errorf("GET %s with token %q: %d %s, want 401", p, c.token, code, body)
			}
		}
		if code, body := c.post(t, "/api/replay", `{"id":1}`, "Content-Type", "application/json", inspector.CSRFHeader, b.csrf); code != 401 {
			t.Errorf("POST /api/replay with token %q: %d %s, want 401", c.token, code, body)
		}
		var s map[string]any
		c.getJSON(t, "/api/session", &s)
		if s["auth"] != false || s["csrf"] != nil || s["listen"] != nil {
			t.Errorf("session with token %q: %v", c.token, s)
		}
	}
	if code, _ := anon.get(t, "/"); code != 200 {
		t.Errorf("page without the token: %d", code)
	}
	if b.csrf == "" {
		t.Fatal("no CSRF token with the token")
	}
	if rs := b.list(t, ""); len(rs) != 1 {
		t.Errorf("with the token: %v", rs)
	}
	if code, res := b.replay(t, `{"id":1}`); code != 200 || res.Status != 200 {
		t.Errorf("replay with the token: %d %+v", code, res)
	}
	<-b.received
	if code, _ := anon.get(t, "/api/events?token="+token); code != 401 {
		t.Errorf("events with ?token=: %d, want 401", code)
	}
	req, _ := http.NewRequest("GET", b.ui.URL+"/api/events", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("events with the token: %d", resp.StatusCode)
	}
}

// TestNoLoopbackReplay: an inspector reachable beyond loopback replays to
// listen's own URL and --forward-to, but not to another loopback address,
// by IP or by name.
func TestNoLoopbackReplay(t *testing.T) {
	app := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer app.Close()
	fwd := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer fwd.Close()
	b := newBenchWith(t, inspector.ListenConfig{NoLoopbackReplay: true, ForwardTo: fwd.URL + "/in"})
	b.send(t, track)
	port := app.URL[strings.LastIndex(app.URL, ":")+1:]
	for _, target := range []string{app.URL, "http://localhost:" + port, "http://LocalHost.:" + port, "http://app.localhost:" + port,
		"http://[::1]:" + port, "http://[::ffff:127.0.0.1]:" + port, "http://127.1.2.3:" + port, "http://0.0.0.0:" + port} {
		code, res := b.replay(t, fmt.Sprintf(`{"id":1,"url":%q}`, target))
		if code != 400 || !strings.Contains(res.Error, "--allow-replay-local") {
			t.Errorf("replay to %s: %d %+v, want 400 naming --allow-replay-local", target, code, res)
		}
	}
	if code, res := b.replay(t, fmt.Sprintf(`{"id":1,"url":%q}`, fwd.URL+"/other")); code != 200 || res.Status != 200 {
		t.Errorf("replay to --forward-to's origin: %d %+v", code, res)
	}
	b.insp.SetURL(b.hook.URL)
	if code, res := b.replay(t, fmt.Sprintf(`{"id":1,"url":%q}`, b.hook.URL+"/again")); code != 200 || res.Status != 200 {
		t.Errorf("replay to listen itself: %d %+v", code, res)
	}
	<-b.received

	// Without NoLoopbackReplay, loopback is fine.
	open := newBench(t)
	open.send(t, track)
	if code, res := open.replay(t, fmt.Sprintf(`{"id":1,"url":%q}`, "http://localhost:"+port)); code != 200 || res.Status != 200 {
		t.Errorf("replay to localhost on loopback: %d %+v", code, res)
	}
}

// TestHostBeyondLoopback: an inspector listening beyond loopback takes
// as Host only the IP addresses it answers on (and localhost), not any
// IP; one on loopback keeps taking any IP (a rebinding page cannot send
// one).
func TestHostBeyondLoopback(t *testing.T) {
	insp := inspector.NewListen(inspector.ListenConfig{})
	defer insp.Close()
	for _, tc := range []struct {
		addr, host string
		want       int
	}{
		{"127.0.0.1:8789", "10.255.255.254:8789", 200},
		{"127.0.0.1:8789", "evil.example:8789", 421},
		{"0.0.0.0:8789", "127.0.0.1:8789", 200}, // lo is one of the interfaces
		{"0.0.0.0:8789", "localhost:8789", 200},
		{"0.0.0.0:8789", "192.0.2.7:8789", 421}, // TEST-NET-1: on no interface
		{"0.0.0.0:8789", "evil.example:8789", 421},
		{"192.0.2.7:8789", "192.0.2.7:8789", 200},
		{"192.0.2.7:8789", "127.0.0.1:8789", 421},
		{"192.0.2.7:8789", "10.0.0.1:8789", 421},
		{"192.0.2.7:8789", "localhost:8789", 200},
		{"192.0.2.7:8789", "192.0.2.7:8790", 421},
	} {
		req := httptest.NewRequest("GET", "/api/session", nil)
		req.Host = tc.host
		w := httptest.NewRecorder()
		insp.Handler(tc.addr).ServeHTTP(w, req)
		if w.Code != tc.want {
			t.Errorf("listening on %s, Host %s: %d, want %d", tc.addr, tc.host, w.Code, tc.want)
		}
	}
}

// The lists the page filters by come from the server (GET /api/session's
// "meta"), and they are the ones GET /api/requests goes by.
func TestListenSessionMeta(t *testing.T) {
	b := newBench(t, secret)
	b.send(t, track, signature.Header, signature.Sign([]byte(secret), []byte(track)))
	b.send(t, identify, signature.Header, signature.Sign([]byte("wrong"), []byte(identify)))
	b.send(t, "not json")
	var s struct {
		Meta struct {
			Verdicts []receiver.SigVerdict
			Types    []message.Type
			NoType   string
			Events   []string
		}
	}
	b.getJSON(t, "/api/session", &s)
	m := s.Meta
	if diff := cmp.Diff([]receiver.SigVerdict{receiver.SigValid, receiver.SigInvalid, receiver.SigUnchecked}, m.Verdicts); diff != "" {
		t.Errorf("verdicts:\n%s", diff)
	}
	if diff := cmp.Diff(message.Types, m.Types); diff != "" {
		t.Errorf("types, -message.Types +served:\n%s", diff)
	}
	// Each verdict finds its requests: unchecked where listen has no secret.
	unchecked := newBench(t)
	unchecked.send(t, track)
	found := map[receiver.SigVerdict]int{}
	for _, v := range m.Verdicts {
		found[v] = len(b.list(t, "?verdict="+string(v))) + len(unchecked.list(t, "?verdict="+string(v)))
	}
	if diff := cmp.Diff(map[receiver.SigVerdict]int{receiver.SigValid: 1, receiver.SigInvalid: 2, receiver.SigUnchecked: 1}, found); diff != "" {
		t.Errorf("requests found by each verdict served:\n%s", diff)
	}
	if got := ids(b.list(t, "?type="+m.NoType)); m.NoType == "" || len(got) != 1 || got[0] != 3 {
		t.Errorf("?type=%s (noType): %v, want the request without a type, [3]", m.NoType, got)
	}
	if diff := cmp.Diff([]string{"request"}, m.Events); diff != "" {
		t.Errorf("events (TestEventsStreamEachRequest reads them):\n%s", diff)
	}
}
