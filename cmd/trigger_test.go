package cmd

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/evfwd/evfwd/internal/cli"
	"github.com/evfwd/evfwd/pkg/signature"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestTriggerFlags(t *testing.T) {
	defaults := TriggerOptions{Scheme: "segment", From: "server", RetryWindow: 30 * time.Second, Timeout: 5 * time.Second, Count: 1, Concurrency: 1, RetryInitial: time.Second}
	with := func(change func(o *TriggerOptions)) TriggerOptions {
		o := defaults
		change(&o)
		return o
	}
	tests := []struct {
		args []string
		want TriggerOptions
	}{
		{[]string{"track", "--url", "http://a"}, with(func(o *TriggerOptions) { o.Type, o.URLs = "track", []string{"http://a"} })},
		{[]string{"identify", "--url", "http://a", "--url", "https://b", "-H", "Authorization: Bearer x", "--header", "X-A: 1",
			"--secret-file", "s", "--user-id", "u_1", "--data", "@m.json", "--ca-file", "ca.pem", "--retry-window", "30m", "--timeout", "2s"},
			with(func(o *TriggerOptions) {
				o.Type, o.URLs = "identify", []string{"http://a", "https://b"}
				o.Headers = []string{"Authorization: Bearer x", "X-A: 1"}
				o.Secret, o.UserID, o.Data, o.CAFile = cli.Secret{Files: []string{"s"}}, "u_1", "@m.json", "ca.pem"
				o.RetryWindow, o.Timeout = 30*time.Minute, 2*time.Second
			})},
		{[]string{"page", "--url", "http://a", "-n", "1000", "-c", "16", "--event", "E", "--secret", "k"},
			with(func(o *TriggerOptions) {
				o.Type, o.URLs, o.Count, o.Concurrency, o.Event, o.Secret = "page", []string{"http://a"}, 1000, 16, "E", cli.Secret{Values: []string{"k"}}
			})},
		{[]string{"track", "--url", "http://a", "--scheme", "stripe", "--secret", "k1", "--secret", "k2"},
			with(func(o *TriggerOptions) {
				o.Type, o.URLs, o.Scheme, o.Secret = "track", []string{"http://a"}, "stripe", cli.Secret{Values: []string{"k1", "k2"}}
			})},
	}
	for _, tt := range tests {
		f := testFactory(t, "", false, nil)
		var got *TriggerOptions
		cmd := NewCmdTrigger(f, func(o *TriggerOptions) error { got = o; return nil })
		cmd.SetArgs(tt.args)
		if err := cmd.Execute(); err != nil {
			t.Fatalf("%v: %v", tt.args, err)
		}
		if diff := cmp.Diff(&tt.want, got, cmpopts.IgnoreFields(TriggerOptions{}, "IO", "Format", "Now", "Version", "Context", "Config"), cmpopts.IgnoreUnexported(cli.Secret{})); diff != "" {
			t.Errorf("%v mismatch (-want +got):\n%s", tt.args, diff)
		}
	}
}

// endpoint answers from a script of statuses (the last repeats) and
// records what it received.
type endpoint struct {
	*httptest.Server
	mu     sync.Mutex
	got    []*http.Request
	bodies []string
	script []int
}

func newEndpoint(t *testing.T, script ...int) *endpoint {
	e := &endpoint{script: script}
	e.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		e.mu.Lock()
		n := len(e.got)
		e.got, e.bodies = append(e.got, r), append(e.bodies, string(b))
		e.mu.Unlock()
		code := e.script[min(n, len(e.script)-1)]
		w.WriteHeader(code)
		io.WriteString(w, http.StatusText(code))
	}))
	t.Cleanup(e.Close)
	return e
}

func (e *endpoint) requests() ([]*http.Request, []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]*http.Request(nil), e.got...), append([]string(nil), e.bodies...)
}

func triggerHMAC(secret, body string) string {
	m := hmac.New(sha1.New, []byte(secret))
	m.Write([]byte(body))
	return hex.EncodeToString(m.Sum(nil))
}

// records splits NDJSON output into decoded records.
func records(t *testing.T, out string) []map[string]any {
	t.Helper()
	var recs []map[string]any
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("not JSON: %q: %v", sc.Text(), err)
		}
		recs = append(recs, m)
	}
	return recs
}

func pick(recs []map[string]any, keys ...string) []map[string]any {
	var out []map[string]any
	for _, r := range recs {
		m := map[string]any{}
		for _, k := range keys {
			if v, ok := r[k]; ok {
				m[k] = v
			}
		}
		out = append(out, m)
	}
	return out
}

func TestTriggerDelivers(t *testing.T) {
	e := newEndpoint(t, 200)
	f := testFactory(t, "", false, map[string]string{"EVFWD_SECRET": "s3cret"})
	r := execute(t, f, "trigger", "group", "--url", e.URL+"/hooks", "-H", "X-Tenant: acme", "-o", "json")
	if r.Code != 0 {
		t.Fatalf("exit %d, stderr %q", r.Code, r.Stderr)
	}
	reqs, bodies := e.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	h := reqs[0].Header
	wantHeaders := map[string]string{
		"Content-Type": "application/json", "User-Agent": "evfwd-webhooks/0.0.0-test", "X-Tenant": "acme",
		"X-Signature": triggerHMAC("s3cret", bodies[0]),
	}
	gotHeaders := map[string]string{}
	for k := range wantHeaders {
		gotHeaders[k] = h.Get(k)
	}
	if diff := cmp.Diff(wantHeaders, gotHeaders); diff != "" {
		t.Errorf("headers mismatch (-want +got):\n%s", diff)
	}
	recs := records(t, r.Stdout)
	want := []map[string]any{
		{"record": "attempt", "status": 200.0, "class": "http_2xx", "outcome": "delivered", "then": "done", "delivery": 1.0},
		{"record": "summary", "outcome": "delivered", "type": "group", "deliveries": 1.0, "attempts": 1.0},
	}
	if diff := cmp.Diff(want, pick(recs, "record", "status", "class", "outcome", "then", "delivery", "type", "deliveries", "attempts")); diff != "" {
		t.Errorf("records mismatch (-want +got):\n%s", diff)
	}
	body, _ := json.Marshal(recs[1]["body"])
	var sent, summarized map[string]any
	json.Unmarshal([]byte(bodies[0]), &sent)
	json.Unmarshal(body, &summarized)
	if diff := cmp.Diff(sent, summarized); diff != "" || sent["groupId"] != "g_acme" || sent["version"] != 1.0 {
		t.Errorf("summary body vs sent body mismatch (-want +got):\n%s\nsent %s", diff, bodies[0])
	}
}

// --from web and --from mobile send the sample as those libraries and
// serve make it.
func TestTriggerFromDevices(t *testing.T) {
	for from, lib := range map[string]string{"web": "analytics.js", "mobile": "analytics-kotlin"} {
		e := newEndpoint(t, 200)
		r := execute(t, testFactory(t, "", false, nil), "trigger", "screen", "--from", from, "--url", e.URL, "--user-id", "u_7")
		if r.Code != 0 {
			t.Fatalf("%s: exit %d, stderr %q", from, r.Code, r.Stderr)
		}
		_, bodies := e.requests()
		var sent struct {
			UserID, OriginalTimestamp, Timestamp string
			Context                              struct {
				IP      string
				Library struct{ Name string }
			}
		}
		if len(bodies) != 1 || json.Unmarshal([]byte(bodies[0]), &sent) != nil {
			t.Fatalf("%s: bodies %q", from, bodies)
		}
		if sent.UserID != "u_7" || sent.Context.Library.Name != lib || sent.Context.IP == "" || sent.OriginalTimestamp <= sent.Timestamp {
			t.Errorf("%s: sent %s", from, bodies[0])
		}
	}
}

// latency and clock fields vary; the rest of the text output is compared.
var varying = regexp.MustCompile(`\d+(\.\d+)?(ms|µs|s)\b|\d\d:\d\d:\d\d(\.\d\d\d)?|[0-9a-f-]{36}|127\.0\.0\.1:\d+`)

func TestTriggerRetriesText(t *testing.T) {
	e := newEndpoint(t, 500, 500, 200)
	f := testFactory(t, "", false, nil)
	r := execute(t, f, "trigger", "delete", "--user-id", "u_7", "--url", e.URL, "--retry-initial", "1ms")
	if r.Code != 0 {
		t.Fatalf("exit %d, stderr %q", r.Code, r.Stderr)
	}
	_, bodies := e.requests()
	if len(bodies) != 3 || !strings.HasPrefix(bodies[2], `{"type":"delete","userId":"u_7","timestamp":"`) {
		t.Fatalf("bodies %q", bodies)
	}
	got := varying.ReplaceAllString(r.Stdout, "X")
	want := "delete   " + "X bytes  unsigned\n" + varying.ReplaceAllString(bodies[0], "X") + "\n\n" +
		"X  #1  http://X  → 500 Internal Server Error  X  retryable, retry in X at X\n" +
		"    Internal Server Error\n" +
		"X  #2  http://X  → 500 Internal Server Error  X  retryable, retry in X at X\n" +
		"    Internal Server Error\n" +
		"X  #3  http://X  → 200 OK  X  delivered\n\n" +
		"✓ delivered to http://X (3 tries)\n"
	got = regexp.MustCompile(`delete  \S* `).ReplaceAllString(got, "delete   ")
	got = regexp.MustCompile(`\d+ bytes`).ReplaceAllString(got, "X bytes")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

func TestTriggerOutcomes(t *testing.T) {
	tests := []struct {
		name     string
		script   []int
		extra    []string
		code     int
		then     []any
		requests int
	}{
		{"500,500,200 retried", []int{500, 500, 200}, nil, 0, []any{"retry", "retry", "done"}, 3},
		{"404 not retried", []int{404, 200}, nil, 1, []any{"give_up"}, 1},
		{"429 retried", []int{429, 200}, nil, 0, []any{"retry", "done"}, 2},
		{"301 not followed", []int{301, 200}, nil, 1, []any{"give_up"}, 1},
		{"no retry window", []int{503, 200}, []string{"--retry-window", "0"}, 1, []any{"give_up"}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEndpoint(t, tt.script...)
			f := testFactory(t, "", false, nil)
			args := append([]string{"trigger", "track", "--url", e.URL, "--retry-initial", "1ms", "-o", "json"}, tt.extra...)
			r := execute(t, f, args...)
			if r.Code != tt.code {
				t.Errorf("exit %d, want %d (stderr %q)", r.Code, tt.code, r.Stderr)
			}
			recs := records(t, r.Stdout)
			var then []any
			for _, rec := range recs[:len(recs)-1] {
				then = append(then, rec["then"])
			}
			if diff := cmp.Diff(tt.then, then); diff != "" {
				t.Errorf("then mismatch (-want +got):\n%s", diff)
			}
			if reqs, _ := e.requests(); len(reqs) != tt.requests {
				t.Errorf("%d requests, want %d", len(reqs), tt.requests)
			}
		})
	}
}

func TestTriggerFailsOverInOrder(t *testing.T) {
	var eps []*endpoint
	for _, code := range []int{500, 404, 200, 200, 200} {
		eps = append(eps, newEndpoint(t, code))
	}
	args := []string{"trigger", "identify", "-o", "json"}
	for _, e := range eps {
		args = append(args, "--url", e.URL)
	}
	r := execute(t, testFactory(t, "", false, nil), args...)
	if r.Code != 0 {
		t.Fatalf("exit %d, stderr %q", r.Code, r.Stderr)
	}
	var calls []int
	for _, e := range eps {
		reqs, _ := e.requests()
		calls = append(calls, len(reqs))
	}
	if diff := cmp.Diff([]int{1, 1, 1, 0, 0}, calls); diff != "" {
		t.Errorf("calls mismatch (-want +got):\n%s", diff)
	}
	want := []map[string]any{{"endpoint": 0.0, "then": "next_url"}, {"endpoint": 1.0, "then": "next_url"}, {"endpoint": 2.0, "then": "done"}, {}}
	if diff := cmp.Diff(want, pick(records(t, r.Stdout), "endpoint", "then")); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

func TestTriggerData(t *testing.T) {
	const data = `{"type":"track","userId":"u_1","event":"Old","properties":{"n":1.50},"timestamp":"2024-05-01T14:00:00+02:00","writeKey":"wk"}`
	file := writeFile(t, "msg.json", data)
	tests := []struct {
		name  string
		args  []string
		stdin string
		want  string
	}{
		{"inline with overrides", []string{"--data", data, "--user-id", "u_2", "--event", "Order Refunded"}, "",
			`{"type":"track","version":1,"userId":"u_2","event":"Order Refunded","properties":{"n":1.50},"timestamp":"2024-05-01T12:00:00.000Z","messageId":"X"}`},
		{"@file", []string{"--data", "@" + file}, "",
			`{"type":"track","version":1,"userId":"u_1","event":"Old","properties":{"n":1.50},"timestamp":"2024-05-01T12:00:00.000Z","messageId":"X"}`},
		{"stdin, type and messageId filled in", []string{"--data", "-"}, `{"messageId":"m1","event":"E","timestamp":"2024-05-01T12:00:00Z"}`,
			`{"type":"track","version":1,"messageId":"m1","event":"E","timestamp":"2024-05-01T12:00:00.000Z"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEndpoint(t, 200)
			r := execute(t, testFactory(t, tt.stdin, false, nil), append([]string{"trigger", "track", "--url", e.URL, "-o", "json"}, tt.args...)...)
			if r.Code != 0 {
				t.Fatalf("exit %d, stderr %q", r.Code, r.Stderr)
			}
			_, bodies := e.requests()
			for i := range bodies {
				bodies[i] = uuidRE.ReplaceAllString(bodies[i], "X")
			}
			if diff := cmp.Diff([]string{tt.want}, bodies); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

var uuidRE = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f-]{27}`)

func TestTriggerUsageErrors(t *testing.T) {
	six := []string{}
	for range 6 {
		six = append(six, "--url", "http://a.example")
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown type", []string{"merge", "--url", "http://a.example"}, `unknown type "merge": want one of page, screen, identify, track, alias, group, delete`},
		{"no url", []string{"track"}, `required flag(s) "url" not set (or --destination NAME of serve's config)`},
		{"six urls", append([]string{"track"}, six...), "--url: 6 URLs, at most 5 are allowed"},
		{"no type", []string{"--url", "http://a.example"}, "give the TYPE of message to send: page, screen, identify, track, alias, group or delete\n  e.g. evfwd trigger track --url http://localhost:8080/hooks"},
		{"no type, no url", nil, "give the TYPE of message to send: page, screen, identify, track, alias, group or delete\n  e.g. evfwd trigger track --url http://localhost:8080/hooks"},
		{"two types", []string{"track", "page", "--url", "http://a.example"}, "one TYPE at a time (page, screen, identify, track, alias, group or delete), got 2 arguments: track page"},
		{"url without scheme", []string{"track", "--url", "127.0.0.1:9100/x"}, "--url 127.0.0.1:9100/x: no scheme; did you mean http://127.0.0.1:9100/x?"},
		{"host:port url", []string{"track", "--url", "http://a.example", "--url", "localhost:9100/x"}, "--url localhost:9100/x: no scheme; did you mean http://localhost:9100/x?"},
		{"relative url", []string{"track", "--url", "hooks.example/in"}, "--url hooks.example/in: no scheme; did you mean https://hooks.example/in?"},
		{"url without //", []string{"track", "--url", "http:hooks.example/in"}, "--url http:hooks.example/in: the // after http: is missing; did you mean http://hooks.example/in?"},
		{"bad header", []string{"track", "--url", "http://a.example", "-H", "NoColon"}, `--header "NoColon": want 'Name: value'`},
		{"reserved header", []string{"track", "--url", "http://a.example", "--url", "http://b.example", "-H", "x-signature: 1"}, `--header "x-signature": set by the sender, it cannot be configured`},
		{"header twice", []string{"track", "--url", "http://a.example", "-H", "X-A: 1", "-H", "x-a: 2"}, `--header "x-a: 2": X-A given twice`},
		{"event on page", []string{"page", "--url", "http://a.example", "--event", "E"}, "--event applies to track messages, not page"},
		{"data type mismatch", []string{"track", "--url", "http://a.example", "--data", `{"type":"page"}`}, `--data argument has type "page" but TYPE is "track"`},
		{"data not JSON", []string{"track", "--url", "http://a.example", "--data", `{"type":`}, `--data argument: unexpected end of JSON input`},
		{"data missing file", []string{"track", "--url", "http://a.example", "--data", "@/nonexistent/m.json"}, `--data: open /nonexistent/m.json: no such file or directory`},
		{"alias data without previousId", []string{"alias", "--url", "http://a.example", "--data", `{"userId":"u"}`}, `--data: previousId is required for alias`},
		{"missing ca file", []string{"track", "--url", "https://a.example", "--ca-file", "/nonexistent/ca.pem"}, `--ca-file: CA file: open /nonexistent/ca.pem: no such file or directory`},
		{"bad count", []string{"track", "--url", "http://a.example", "--count", "0"}, "--count must be at least 1"},
		{"unknown --from", []string{"track", "--url", "http://a.example", "--from", "tv"}, `--from "tv": want server, web or mobile`},
		{"--from with --data", []string{"track", "--url", "http://a.example", "--from", "web", "--data", "{}"}, "--from picks a sample; --data is your own message: give one"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := execute(t, testFactory(t, "", false, nil), append([]string{"trigger"}, tt.args...)...)
			if diff := cmp.Diff(result{Stderr: "error: " + tt.want + "\n", Code: 2}, r); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTriggerTLS(t *testing.T) {
	var mu sync.Mutex
	served := 0
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		served++
		mu.Unlock()
	}))
	ts.Config.ErrorLog = log.New(io.Discard, "", 0)
	ts.StartTLS()
	t.Cleanup(ts.Close)
	count := func() int { mu.Lock(); defer mu.Unlock(); return served }

	r := execute(t, testFactory(t, "", false, nil), "trigger", "track", "--url", ts.URL, "-o", "json")
	recs := records(t, r.Stdout)
	if r.Code != 1 || recs[0]["class"] != "tls" || recs[0]["outcome"] != "tls_error" || count() != 0 {
		t.Errorf("self-signed: exit %d, record %v, served %d; want 1, tls, 0", r.Code, recs[0], count())
	}

	ca := writeFile(t, "ca.pem", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw})))
	r = execute(t, testFactory(t, "", false, nil), "trigger", "track", "--url", ts.URL, "--ca-file", ca)
	if r.Code != 0 || count() != 1 {
		t.Errorf("with --ca-file: exit %d, served %d, stdout %q; want 0, 1", r.Code, count(), r.Stdout)
	}
}

func TestTriggerInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	release := make(chan struct{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cancel() // Ctrl-C while the endpoint is answering
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(ts.Close)
	t.Cleanup(func() { close(release) })
	r := executeCtx(t, ctx, testFactory(t, "", false, nil), "trigger", "track", "--url", ts.URL)
	if r.Code != 130 || !strings.Contains(r.Stdout, "interrupted, not delivered (1 try)") {
		t.Errorf("exit %d, stdout %q; want 130 and an interrupted report", r.Code, r.Stdout)
	}
}

func TestTriggerLoad(t *testing.T) {
	e := newEndpoint(t, 200)
	r := execute(t, testFactory(t, "", false, nil), "trigger", "page", "--url", e.URL, "--count", "50", "--concurrency", "4", "--secret", "k", "-o", "json")
	if r.Code != 0 {
		t.Fatalf("exit %d, stderr %q", r.Code, r.Stderr)
	}
	recs := records(t, r.Stdout)
	if len(recs) != 51 {
		t.Fatalf("%d records, want 50 attempts and a summary", len(recs))
	}
	sum := recs[50]
	want := map[string]any{"record": "summary", "count": 50.0, "sent": 50.0, "delivered": 50.0, "failed": 0.0, "concurrency": 4.0, "status": map[string]any{"200": 50.0}}
	if diff := cmp.Diff(want, pick(recs[50:], "record", "count", "sent", "delivered", "failed", "concurrency", "status")[0]); diff != "" {
		t.Errorf("summary mismatch (-want +got):\n%s", diff)
	}
	for _, k := range []string{"p50", "p90", "p99", "max"} {
		if _, ok := sum["latencyMs"].(map[string]any)[k]; !ok {
			t.Errorf("summary latencyMs has no %s", k)
		}
	}
	reqs, bodies := e.requests()
	ids := map[string]bool{}
	for i, b := range bodies {
		var m map[string]any
		json.Unmarshal([]byte(b), &m)
		ids[m["messageId"].(string)] = true
		if reqs[i].Header.Get("X-Signature") != triggerHMAC("k", b) {
			t.Errorf("request %d: bad signature", i)
		}
	}
	if len(ids) != 50 {
		t.Errorf("%d distinct messageIds, want 50", len(ids))
	}

	failing := newEndpoint(t, 200, 503)
	r = execute(t, testFactory(t, "", false, nil), "trigger", "track", "--url", failing.URL, "-n", "5")
	if r.Code != 1 || !strings.Contains(r.Stdout, "delivered 1  failed 4") || !strings.Contains(r.Stdout, "200 ×1  503 ×4") {
		t.Errorf("exit %d, stdout:\n%s", r.Code, r.Stdout)
	}
}

// On a TTY a load test leaves stderr clean: the progress line is cleared.
func TestTriggerLoadTTY(t *testing.T) {
	e := newEndpoint(t, 200)
	f := testFactory(t, "", true, nil)
	r := execute(t, f, "trigger", "page", "--url", e.URL, "-n", "20", "-c", "2")
	if r.Code != 0 || r.Stderr != "" && !strings.HasSuffix(r.Stderr, "\r\x1b[K") || !strings.Contains(r.Stdout, "delivered 20") {
		t.Errorf("exit %d, stderr %q, stdout:\n%s", r.Code, r.Stderr, r.Stdout)
	}
}

func FuzzParseHeader(f *testing.F) {
	for _, s := range []string{"Authorization: Bearer x", "X-A:1", ":v", "NoColon", "  X : a:b  ", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		name, value, err := parseHeader(s)
		if err != nil {
			return
		}
		if name == "" || strings.TrimSpace(name) != name || strings.Trim(value, " \t") != value {
			t.Errorf("parseHeader(%q) = %q, %q", s, name, value)
		}
		if !strings.Contains(s, name) || !strings.Contains(s, value) {
			t.Errorf("parseHeader(%q) = %q, %q: not from the input", s, name, value)
		}
	})
}

// steppingClock returns a clock that moves on by step at each reading, so
// a retry window passes in a few attempts without waiting it out.
func steppingClock(step time.Duration) func() time.Time {
	var mu sync.Mutex
	now := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(step)
		return now
	}
}

func TestTriggerGivesUpWithAHint(t *testing.T) {
	closed := closedURL(t)
	failing := newEndpoint(t, 503)
	missing := newEndpoint(t, 404)
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(func() { close(release); slow.Close() })
	nothing := "nothing listens at " + closed + " (connection refused): is your endpoint running, on that port?\n"
	tests := []struct {
		name   string
		url    string
		extra  []string
		retry  bool // some attempt was retried: the window is not zero
		stderr string
	}{
		{"closed port, default window", closed, nil, false, nothing}, // refused: not retried
		{"closed port, one pass", closed, []string{"--retry-window", "0"}, false, nothing},
		{"503, one pass", failing.URL, []string{"--retry-window", "0"}, false,
			"no success from " + failing.URL + " within the retry window (--retry-window to keep trying)\n"},
		{"404 is final: no hint", missing.URL, nil, false, ""},
		{"too slow, one pass", slow.URL, []string{"--retry-window", "0", "--timeout", "20ms"}, false,
			"no answer from " + slow.URL + " within --timeout (--timeout to wait longer, --retry-window to keep trying)\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := testFactory(t, "", false, nil)
			f.Now = steppingClock(5 * time.Second)
			args := append([]string{"trigger", "track", "--url", tt.url, "--retry-initial", "1ms", "-o", "json"}, tt.extra...)
			r := execute(t, f, args...)
			if r.Code != 1 || r.Stderr != tt.stderr {
				t.Errorf("exit %d, stderr %q; want 1, %q", r.Code, r.Stderr, tt.stderr)
			}
			recs := records(t, r.Stdout)
			attempts := recs[:len(recs)-1]
			if last := attempts[len(attempts)-1]["then"]; last != "give_up" {
				t.Errorf("last attempt then %v, want give_up", last)
			}
			if retried := len(attempts) > 1; retried != tt.retry || len(attempts) > 10 {
				t.Errorf("%d attempts, want retries %v within the 30s window", len(attempts), tt.retry)
			}
		})
	}
}

// TestTriggerSchemeStripeTwoSecrets: --scheme stripe signs with every
// secret, so a receiver holding either one verifies; the timestamp is the
// attempt's, and -o json names the scheme.
func TestTriggerSchemeStripeTwoSecrets(t *testing.T) {
	e := newEndpoint(t, 500, 200)
	f := testFactory(t, "", false, nil)
	at := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	f.Now = func() time.Time { return at }
	r := execute(t, f, "trigger", "track", "--url", e.URL, "--scheme", "stripe", "--secret", "a", "--secret", "b", "--retry-initial", "1ms", "-o", "json")
	if r.Code != 0 {
		t.Fatalf("exit %d, stderr %q", r.Code, r.Stderr)
	}
	reqs, bodies := e.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	for i, req := range reqs {
		if req.Header.Get("X-Signature") != "" {
			t.Errorf("request %d: X-Signature sent with --scheme stripe", i+1)
		}
		if !strings.HasPrefix(req.Header.Get("Stripe-Signature"), "t=1714564800,v1=") {
			t.Errorf("request %d: Stripe-Signature %q, want t= the attempt's time", i+1, req.Header.Get("Stripe-Signature"))
		}
		for _, secret := range []string{"a", "b"} {
			res, err := signature.VerifyFields(signature.Stripe, req.Header, []byte(bodies[i]), signature.Options{Secrets: [][]byte{[]byte(secret)}, Now: at})
			if err != nil || !res.Valid {
				t.Errorf("request %d, secret %s: %v %s", i+1, secret, err, res.Message())
			}
		}
	}
	recs := records(t, r.Stdout)
	if got := recs[len(recs)-1]["scheme"]; got != "stripe" {
		t.Errorf("summary scheme %v, want stripe", got)
	}
}

// TestTriggerSchemeText: the intro shows the scheme's header lines, one a
// line; the default is X-Signature's line as before.
func TestTriggerSchemeText(t *testing.T) {
	e := newEndpoint(t, 200)
	secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("trigger test key"))
	f := testFactory(t, "", false, nil)
	at := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	f.Now = func() time.Time { return at }
	r := execute(t, f, "trigger", "track", "--url", e.URL, "--scheme", "standard", "--secret", secret)
	if r.Code != 0 {
		t.Fatalf("exit %d, stderr %q", r.Code, r.Stderr)
	}
	reqs, bodies := e.requests()
	h := reqs[0].Header
	res, err := signature.VerifyFields(signature.Standard, h, []byte(bodies[0]), signature.Options{Secrets: [][]byte{[]byte(secret)}, Now: at})
	if err != nil || !res.Valid {
		t.Fatalf("standard: %v %s", err, res.Message())
	}
	var id struct{ MessageID string }
	json.Unmarshal([]byte(bodies[0]), &id)
	if h.Get("Webhook-Id") != id.MessageID {
		t.Errorf("webhook-id %q, want the messageId %q", h.Get("Webhook-Id"), id.MessageID)
	}
	want := "signed Webhook-Id: " + id.MessageID + "\n  Webhook-Timestamp: 1714564800\n  Webhook-Signature: " + h.Get("Webhook-Signature") + "\n"
	if !strings.Contains(r.Stdout, want) {
		t.Errorf("intro lacks %q:\n%s", want, r.Stdout)
	}

	e = newEndpoint(t, 200)
	r = execute(t, testFactory(t, "", false, nil), "trigger", "track", "--url", e.URL, "--secret", "k")
	_, bodies = e.requests()
	if want := "signed X-Signature: " + triggerHMAC("k", bodies[0]) + "\n"; r.Code != 0 || !strings.Contains(r.Stdout, want) {
		t.Errorf("exit %d; default intro lacks %q:\n%s", r.Code, want, r.Stdout)
	}
}

func TestTriggerSchemeUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"github, two secrets", []string{"--scheme", "github", "--secret", "a", "--secret", "b"}, "2 secrets given: a github signature carries one, give one secret (stripe and standard sign with several)"},
		{"segment, two secrets", []string{"--secret", "a", "--secret", "b"}, "2 secrets given: a segment signature carries one, give one secret (stripe and standard sign with several)"},
		{"no secret", []string{"--scheme", "slack"}, "--scheme slack signs with a secret: give --secret-file FILE, EVFWD_SECRET or --secret"},
		{"unknown", []string{"--scheme", "svix", "--secret", "a"}, `--scheme: unknown signature scheme "svix" (one of standard, stripe, slack, github, shopify, segment)`},
		{"standard secret", []string{"--scheme", "standard", "--secret", "plain"}, `--secret: a standard webhooks secret is whsec_ followed by base64 (as Svix shows it): got a secret of 5 characters (no whsec_ prefix)`},
		{"scheme header", []string{"--scheme", "shopify", "--secret", "a", "-H", "X-Shopify-Hmac-Sha256: x"}, `--header "X-Shopify-Hmac-Sha256": set by the sender, it cannot be configured`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"trigger", "track", "--url", "http://a.example"}, tt.args...)
			r := execute(t, testFactory(t, "", false, nil), args...)
			if diff := cmp.Diff(result{Stderr: "error: " + tt.want + "\n", Code: 2}, r); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// trigger calls the URLs its user typed, link-local ones too: serve's
// refusal of link-local and metadata addresses guards a service, not a
// developer's own command (fe80::1 on the loopback interface: nothing
// answers there, and nothing leaves the machine).
func TestTriggerCallsLinkLocal(t *testing.T) {
	e := newEndpoint(t, 200)
	r := execute(t, testFactory(t, "", false, nil), "trigger", "track", "--url", "http://[fe80::1%25lo]:1/hook", "--url", e.URL, "-o", "json")
	recs := records(t, r.Stdout)
	if r.Code != 0 || len(recs) < 2 || recs[0]["class"] == "blocked_address" || recs[1]["class"] != "http_2xx" {
		t.Errorf("exit %d, records %v, stderr %q; want the link-local URL attempted, then the endpoint's 2xx", r.Code, recs, r.Stderr)
	}
}
