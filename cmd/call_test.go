package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/evfwd/evfwd/internal/cli"
	"github.com/evfwd/evfwd/pkg/analytics"
	"github.com/evfwd/evfwd/pkg/message"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestCallFlags(t *testing.T) {
	kind := func(typ message.Type) callKind {
		for _, k := range callKinds {
			if k.typ == typ {
				return k
			}
		}
		t.Fatalf("no kind %s", typ)
		return callKind{}
	}
	tests := []struct {
		typ  message.Type
		args []string
		want CallOptions
	}{
		{message.TypeTrack, []string{"--user-id", "u", "--event", "E", "--property", "a=1", "--property", "b:=[1]", "--properties", "{}", "--timestamp", "2024-05-01", "--message-id", "m", "--context", "@c.json", "--integrations", "-", "--stub", "--dry-run", "--write-key", "k", "--endpoint", "http://x"},
			CallOptions{Type: "track", UserID: "u", Fields: map[string]string{"event": "E"}, DataKey: "properties", Pairs: []string{"a=1", "b:=[1]"}, Data: "{}",
				Timestamp: "2024-05-01", MessageID: "m", ContextJSON: "@c.json", Integrations: "-", Stub: true, DryRun: true, Client: clientFlags{WriteKey: "k", Endpoint: "http://x"}}},
		{message.TypeIdentify, []string{"--anonymous-id", "a", "--trait", "x=y", "--traits", "{}"},
			CallOptions{Type: "identify", AnonymousID: "a", Fields: map[string]string{}, DataKey: "traits", Pairs: []string{"x=y"}, Data: "{}", Client: clientFlags{}}},
		{message.TypePage, []string{"--user-id", "u", "--name", "N", "--category", "C", "--property", "p=1"},
			CallOptions{Type: "page", UserID: "u", Fields: map[string]string{"name": "N", "category": "C"}, DataKey: "properties", Pairs: []string{"p=1"}, Client: clientFlags{}}},
		{message.TypeScreen, []string{"--user-id", "u", "--name", "N"},
			CallOptions{Type: "screen", UserID: "u", Fields: map[string]string{"name": "N"}, DataKey: "properties", Client: clientFlags{}}},
		{message.TypeGroup, []string{"--user-id", "u", "--group-id", "g", "--trait", "n=1"},
			CallOptions{Type: "group", UserID: "u", Fields: map[string]string{"groupId": "g"}, DataKey: "traits", Pairs: []string{"n=1"}, Client: clientFlags{}}},
		{message.TypeAlias, []string{"--user-id", "u", "--previous-id", "p"},
			CallOptions{Type: "alias", UserID: "u", Fields: map[string]string{"previousId": "p"}, Client: clientFlags{}}},
	}
	for _, tt := range tests {
		f := testFactory(t, "", false, nil)
		var got *CallOptions
		cmd := NewCmdCall(f, kind(tt.typ), func(o *CallOptions) error { got = o; return nil })
		cmd.SetArgs(tt.args)
		if err := cmd.Execute(); err != nil {
			t.Fatalf("%v: %v", tt.args, err)
		}
		if diff := cmp.Diff(&tt.want, got, cmpopts.IgnoreFields(CallOptions{}, "IO", "Format", "Now", "Version", "Context")); diff != "" {
			t.Errorf("%s %v mismatch (-want +got):\n%s", tt.typ, tt.args, diff)
		}
		if got.IO != f.IO || got.Format != f.Format || got.Now == nil || got.Version != f.Version {
			t.Errorf("%s: the factory's IO, format, clock and version not passed on: %+v", tt.typ, got)
		}
	}
	// Flags a type does not take are refused.
	for _, c := range []struct {
		typ  message.Type
		flag string
	}{{"alias", "--anonymous-id"}, {"alias", "--properties"}, {"identify", "--event"}, {"track", "--trait"}, {"page", "--group-id"}} {
		cmd := NewCmdCall(testFactory(t, "", false, nil), kind(c.typ), func(*CallOptions) error { return nil })
		cmd.SetArgs([]string{c.flag, "x"})
		cmd.SilenceErrors, cmd.SilenceUsage = true, true
		if err := cmd.Execute(); err == nil {
			t.Errorf("%s %s: accepted", c.typ, c.flag)
		}
	}
}

// callMsg runs one call against a recording server and returns the one
// message it received, as its raw members.
func callMsg(t *testing.T, stdin string, args ...string) (map[string]json.RawMessage, result) {
	t.Helper()
	srv := newCollectServer(t, nil)
	res := execute(t, clientFactory(t, stdin, srv), args...)
	if res.Code != 0 {
		t.Fatalf("%v: exit %d: %s", args, res.Code, res.Stderr)
	}
	reqs := srv.requests()
	if len(reqs) != 1 || len(reqs[0].Msgs) != 1 {
		t.Fatalf("%v: want one request with one message, got %d requests", args, len(reqs))
	}
	return reqs[0].Msgs[0], res
}

func members(m map[string]json.RawMessage) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = string(v)
	}
	return out
}

const lib = `{"library":{"name":"evfwd","version":"0.0.0-test"}}`

func TestCallEachType(t *testing.T) {
	base := map[string]string{"messageId": `"m_1"`, "timestamp": `"2024-05-02T08:30:00.123Z"`, "context": lib}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	tests := []struct {
		args []string
		want map[string]string
	}{
		{[]string{"identify", "--user-id", "u_42", "--trait", "email=ada@example.com", "--trait", "seats=5", "--trait", "vip=true"},
			with("type", `"identify"`, "userId", `"u_42"`, "traits", `{"email":"ada@example.com","seats":5,"vip":true}`)},
		{[]string{"track", "--anonymous-id", "a_1", "--event", "Order Completed", "--property", "total=12.50", "--property", "n=007x"},
			with("type", `"track"`, "anonymousId", `"a_1"`, "event", `"Order Completed"`, "properties", `{"total":12.50,"n":"007x"}`)},
		{[]string{"page", "--user-id", "u", "--name", "Pricing", "--category", "Docs", "--properties", `{"url": "https://x"}`},
			with("type", `"page"`, "userId", `"u"`, "name", `"Pricing"`, "category", `"Docs"`, "properties", `{"url":"https://x"}`)},
		{[]string{"screen", "--user-id", "u", "--name", "Home"},
			with("type", `"screen"`, "userId", `"u"`, "name", `"Home"`)},
		{[]string{"group", "--user-id", "u", "--group-id", "acme", "--traits", `{"name":"Acme","employees":120}`, "--trait", "employees=121"},
			with("type", `"group"`, "userId", `"u"`, "groupId", `"acme"`, "traits", `{"name":"Acme","employees":121}`)},
		{[]string{"alias", "--user-id", "u_42", "--previous-id", "a_1"},
			with("type", `"alias"`, "userId", `"u_42"`, "previousId", `"a_1"`)},
		{[]string{"track", "--user-id", "u", "--event", "E", "--context", `{"ip":"203.0.113.7","library":{"name":"other"}}`, "--integrations", `{"All":false,"Webhooks":true}`},
			with("type", `"track"`, "userId", `"u"`, "event", `"E"`, "context", `{"ip":"203.0.113.7","library":{"name":"evfwd","version":"0.0.0-test"}}`, "integrations", `{"All":false,"Webhooks":true}`)},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args[:1], ""), func(t *testing.T) {
			m, res := callMsg(t, "", append(tt.args, "--message-id", "m_1")...)
			if diff := cmp.Diff(tt.want, members(m)); diff != "" {
				t.Errorf("%v mismatch (-want +got):\n%s", tt.args, diff)
			}
			if want := "✓ " + tt.args[0] + " m_1 accepted (200)\n"; res.Stdout != want {
				t.Errorf("stdout %q, want %q", res.Stdout, want)
			}
		})
	}
}

func TestCallTimestamps(t *testing.T) {
	for in, want := range map[string]string{
		"2024-05-01T14:00:00.5+02:00":         "2024-05-01T12:00:00.500Z",
		"2024-05-01T12:00:00Z":                "2024-05-01T12:00:00.000Z",
		"2024-05-01":                          "2024-05-01T00:00:00.000Z",
		"1714564800":                          "2024-05-01T12:00:00.000Z",
		"1714564800123":                       "2024-05-01T12:00:00.123Z",
		"2024-05-01T12:00:00.123456789-00:30": "2024-05-01T12:30:00.123Z",
	} {
		m, _ := callMsg(t, "", "track", "--user-id", "u", "--event", "E", "--timestamp", in)
		if got := str(m, "timestamp"); got != want {
			t.Errorf("--timestamp %s: sent %s, want %s", in, got, want)
		}
	}
}

func TestCallJSONArguments(t *testing.T) {
	file := writeFile(t, "props.json", "{\n  \"amount\": 12345678901234567890.000000001,\n  \"tags\": [\"a\", \"b\"]\n}\n")
	m, _ := callMsg(t, "", "track", "--user-id", "u", "--event", "E", "--properties", "@"+file, "--property", "n:=1.10", "--property", "s=x=y")
	if got, want := string(m["properties"]), `{"amount":12345678901234567890.000000001,"tags":["a","b"],"n":1.10,"s":"x=y"}`; got != want {
		t.Errorf("properties %s, want %s", got, want)
	}
	m, _ = callMsg(t, `{"locale":"de-DE"}`, "identify", "--user-id", "u", "--context", "-")
	if got, want := string(m["context"]), `{"locale":"de-DE","library":{"name":"evfwd","version":"0.0.0-test"}}`; got != want {
		t.Errorf("context %s, want %s", got, want)
	}
	// The exact request body carries the digits byte for byte.
	srv := newCollectServer(t, nil)
	execute(t, clientFactory(t, "", srv), "track", "--user-id", "u", "--event", "E", "--property", "amount=12345678901234567890.000000001")
	if body := string(srv.requests()[0].Body); !strings.Contains(body, `"amount":12345678901234567890.000000001}`) {
		t.Errorf("digits changed: %s", body)
	}
}

func TestCallRequest(t *testing.T) {
	srv := newCollectServer(t, nil)
	f := clientFactory(t, "", nil)
	res := execute(t, f, "alias", "--user-id", "u", "--previous-id", "p", "--endpoint", srv.URL(), "--write-key", "flag_key")
	if res.Code != 0 {
		t.Fatal(res)
	}
	h := srv.requests()[0].Header
	want := map[string]string{"Authorization": "Basic ZmxhZ19rZXk6", "Content-Type": "application/json", "User-Agent": "evfwd/0.0.0-test"}
	for k, v := range want {
		if h.Get(k) != v {
			t.Errorf("%s = %q, want %q", k, h.Get(k), v)
		}
	}
}

// --dry-run prints exactly the body the client sends.
func TestCallDryRun(t *testing.T) {
	args := []string{"track", "--user-id", "u_42", "--event", "Order Completed", "--property", "total=12.50", "--property", "n=12345678901234567890.000000001",
		"--timestamp", "2024-05-01T14:00:00+02:00", "--message-id", "m_1", "--integrations", `{"Webhooks":true}`}
	dry := execute(t, clientFactory(t, "", nil), append(args, "--dry-run")...)
	if dry.Code != 0 || dry.Stderr != "" {
		t.Fatal(dry)
	}
	golden(t, "call/dry-run.golden", dry.Stdout)
	srv := newCollectServer(t, nil)
	execute(t, clientFactory(t, "", srv), args...)
	if got := string(srv.requests()[0].Body) + "\n"; got != dry.Stdout {
		t.Errorf("client sent\n%s\ndry run printed\n%s", got, dry.Stdout)
	}
	// No write key is needed to look.
	f := testFactory(t, "", false, nil)
	if res := execute(t, f, "alias", "--user-id", "u", "--previous-id", "p", "--dry-run"); res.Code != 0 {
		t.Errorf("dry run without write key: %+v", res)
	}
}

func TestCallOutcomes(t *testing.T) {
	tests := []struct {
		name    string
		status  int
		body    string
		args    []string
		want    result
		wantReq int
	}{
		{"json accepted", 200, `{"success":true}`, []string{"-o", "json"}, result{Stdout: `{"messageId":"m_1","status":"accepted","httpStatus":200}` + "\n"}, 1},
		{"rejected", 400, `{"error":"invalid message","details":[{"index":0,"field":"event"}]}`, nil,
			result{Stderr: `error: track m_1 rejected: analytics: server answered 400: invalid message [{"index":0,"field":"event"}]` + "\n", Code: 1}, 1},
		{"rejected json", 401, `{"error":"unknown write key"}`, []string{"-o", "json"},
			result{Stdout: `{"messageId":"m_1","status":"rejected","httpStatus":401,"error":"analytics: server answered 401: unknown write key"}` + "\n",
				Stderr: "error: track m_1 rejected: analytics: server answered 401: unknown write key\n", Code: 1}, 1},
		{"undeliverable after retries", 503, `down`, []string{"--retry-base", "1ms"},
			result{Stderr: "error: track m_1 failed: analytics: server answered 503: down\n", Code: 1}, 10},
		{"stub sends nothing", 500, ``, []string{"--stub"}, result{Stdout: "✓ track m_1 stub (stub: nothing sent)\n"}, 0},
		{"stub json", 500, ``, []string{"--stub", "-o", "json"}, result{Stdout: `{"messageId":"m_1","status":"stub"}` + "\n"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newCollectServer(t, func(_ int, _ []map[string]json.RawMessage, w http.ResponseWriter) {
				w.WriteHeader(tt.status)
				w.Write([]byte(tt.body))
			})
			args := append([]string{"track", "--user-id", "u", "--event", "E", "--message-id", "m_1"}, tt.args...)
			got := execute(t, clientFactory(t, "", srv), args...)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
			if n := len(srv.requests()); n != tt.wantReq {
				t.Errorf("%d requests, want %d", n, tt.wantReq)
			}
		})
	}
}

func TestCallUsageErrors(t *testing.T) {
	big := strings.Repeat("x", 33<<10)
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"no write key", map[string]string{}, []string{"track", "--user-id", "u", "--event", "E"}, "a write key is required: use --write-key or EVFWD_WRITE_KEY"},
		{"no identity", nil, []string{"track", "--event", "E"}, "track: --user-id or --anonymous-id is required"},
		{"no event", nil, []string{"track", "--user-id", "u"}, "track: --event is required"},
		{"category without name", nil, []string{"page", "--user-id", "u", "--category", "C"}, "page: --name is required when category is set"},
		{"no group id", nil, []string{"group", "--user-id", "u"}, "group: --group-id is required"},
		{"alias needs user", nil, []string{"alias", "--previous-id", "p"}, "alias: --user-id is required"},
		{"long message id", nil, []string{"alias", "--user-id", "u", "--previous-id", "p", "--message-id", strings.Repeat("m", 101)}, "alias: --message-id is longer than 100 characters"},
		{"bad timestamp", nil, []string{"alias", "--user-id", "u", "--previous-id", "p", "--timestamp", "yesterday"},
			`--timestamp: invalid timestamp "yesterday": want RFC 3339 (2024-05-01T12:00:00Z), a date (2024-05-01) or Unix seconds/milliseconds`},
		{"bad json", nil, []string{"identify", "--user-id", "u", "--traits", "{nope"}, "--traits: invalid JSON: invalid character 'n' looking for beginning of object key string"},
		{"json not object", nil, []string{"identify", "--user-id", "u", "--context", "[1]"}, "--context: want a JSON object: not a JSON object"},
		{"missing file", nil, []string{"identify", "--user-id", "u", "--traits", "@/nonexistent"}, "--traits: open /nonexistent: no such file or directory"},
		{"stdin twice", nil, []string{"identify", "--user-id", "u", "--traits", "-", "--context", "-"}, "--context -: stdin is already read by --traits"},
		{"bad pair", nil, []string{"track", "--user-id", "u", "--event", "E", "--property", "novalue"}, `--property "novalue": want key=value or key:=JSON`},
		{"bad raw pair", nil, []string{"track", "--user-id", "u", "--event", "E", "--property", "a:={"}, `--property "a:={": invalid JSON after :=: unexpected end of JSON input`},
		{"too large", nil, []string{"track", "--user-id", "u", "--event", "E", "--property", "big=" + big}, "track: message is 34009 bytes, over the 32768-byte limit"},
		{"bad endpoint", nil, []string{"track", "--user-id", "u", "--event", "E", "--endpoint", "ftp://x"}, `--endpoint must be an http or https URL, got "ftp://x"`},
		{"extra argument", nil, []string{"track", "extra"}, `unknown command "extra" for "evfwd track"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newCollectServer(t, nil)
			f := clientFactory(t, `{"a":1}`, srv)
			if tt.env != nil {
				f.Getenv = func(k string) string { return tt.env[k] }
			}
			got := execute(t, f, tt.args...)
			if diff := cmp.Diff(result{Stderr: "error: " + tt.want + "\n", Code: 2}, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
			if n := len(srv.requests()); n != 0 {
				t.Errorf("%d requests sent", n)
			}
		})
	}
}

func TestCallInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	release := make(chan struct{})
	defer close(release)
	// The request hangs until the test ends: only the interrupt can end it.
	srv := newCollectServer(t, func(int, []map[string]json.RawMessage, http.ResponseWriter) { cancel(); <-release })
	got := executeCtx(t, ctx, clientFactory(t, "", srv), "track", "--user-id", "u", "--event", "E")
	if got.Code != 130 {
		t.Errorf("exit %d, want 130: %s", got.Code, got.Stderr)
	}
}

// closedURL is the URL of a loopback port that was listened on and
// closed: a connection there is refused.
func closedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return "http://" + ln.Addr().String()
}

func TestCallDefaultEndpointRefusedFailsFast(t *testing.T) {
	closed := closedURL(t)
	for _, tty := range []bool{false, true} {
		f := testFactory(t, "", tty, nil)
		var track callKind
		for _, k := range callKinds {
			if k.typ == message.TypeTrack {
				track = k
			}
		}
		cmd := NewCmdCall(f, track, func(o *CallOptions) error {
			o.Client.Fallback = closed // the default endpoint, with nothing on it
			return callRun(o)
		})
		cmd.SetArgs([]string{"--write-key", "k", "--user-id", "u", "--event", "E", "--message-id", "m_1"})
		cmd.SilenceErrors, cmd.SilenceUsage = true, true
		err := cmd.Execute()
		msg := cli.Message(err)
		if code := cli.ExitCode(err); code != 1 || !strings.HasPrefix(msg, "track m_1 failed: ") || !strings.HasSuffix(msg, "connection refused\n"+serveHint) {
			t.Errorf("tty %v: exit %d %q, want 1 and the refusal with the hint", tty, code, msg)
		}
		if e := f.IO.ErrOut.(*bytes.Buffer).String(); e != "" {
			t.Errorf("tty %v: stderr %q, want nothing: no retry to show", tty, e)
		}
	}
}

func TestCallChosenEndpointRefusedRetries(t *testing.T) {
	closed := closedURL(t)
	wantErr := "error: track m_1 failed: Post \"" + closed + "/v1/batch\": dial tcp " + strings.TrimPrefix(closed, "http://") + ": connect: connection refused\n"
	t.Run("flag, not a terminal", func(t *testing.T) {
		got := execute(t, clientFactory(t, "", nil), "track", "--user-id", "u", "--event", "E", "--message-id", "m_1", "--endpoint", closed, "--retry-base", "1ms")
		if diff := cmp.Diff(result{Stderr: wantErr, Code: 1}, got); diff != "" {
			t.Errorf("mismatch (-want +got):\n%s", diff)
		}
	})
	t.Run("environment, terminal", func(t *testing.T) {
		f := testFactory(t, "", true, map[string]string{"EVFWD_WRITE_KEY": "wk", "EVFWD_ENDPOINT": closed})
		f.Now = func() time.Time { return fixedNow }
		got := execute(t, f, "track", "--user-id", "u", "--event", "E", "--message-id", "m_1", "--retry-base", "1ms")
		if got.Code != 1 || !strings.HasSuffix(got.Stderr, "\r\x1b[K"+wantErr) {
			t.Fatalf("exit %d, stderr %q: want 1 and the retry line cleared before the error", got.Code, got.Stderr)
		}
		for n := 2; n <= 10; n++ {
			if want := fmt.Sprintf("\r\x1b[Kretrying: attempt %d of 10 in ", n); !strings.Contains(got.Stderr, want) {
				t.Errorf("stderr lacks %q:\n%q", want, got.Stderr)
			}
		}
		if strings.Contains(got.Stderr, serveHint) {
			t.Error("the serve hint shown for an endpoint the user chose")
		}
	})
}

func TestRetryStatusLine(t *testing.T) {
	ios, _, _, errOut := cli.Test()
	ios.SetTTY(true)
	now := fixedNow
	var cfg analytics.Config
	stop := watchRetries(ios, func() time.Time { return now }, &cfg)
	err := &analytics.TransportError{Err: errors.New("dial tcp 127.0.0.1:1:\n connect: connection refused")}
	cfg.OnRetry(analytics.RetryEvent{Attempt: 2, MaxAttempts: 10, Delay: 1530 * time.Millisecond, Status: -1, Err: err})
	want := "\r\x1b[Kretrying: attempt 3 of 10 in 1.5s  dial tcp 127.0.0.1:1: connect: connection refused"
	if got := errOut.String(); got != want {
		t.Errorf("drawn %q, want %q", got, want)
	}
	now = now.Add(time.Second) // the countdown goes on between redraws
	if cfg.OnRetry(analytics.RetryEvent{Attempt: 3, MaxAttempts: 10, Delay: 0, Status: 503, Err: err}); !strings.Contains(errOut.String(), "attempt 4 of 10 in 0s") {
		t.Errorf("second event not drawn: %q", errOut.String())
	}
	stop()
	if !strings.HasSuffix(errOut.String(), "\r\x1b[K") {
		t.Errorf("the line is not cleared at the end: %q", errOut.String())
	}
	cfg.OnRetry(analytics.RetryEvent{Attempt: 4, MaxAttempts: 10, Err: err}) // after stop: nothing
	if strings.Contains(errOut.String(), "attempt 5") {
		t.Error("drawn after stop")
	}

	ios.SetTTY(false)
	cfg.OnRetry = nil
	watchRetries(ios, time.Now, &cfg)()
	if cfg.OnRetry != nil {
		t.Error("retries watched off a terminal")
	}
}

func TestOneLine(t *testing.T) {
	for in, want := range map[string]string{"a\n  b\tc": "a b c", strings.Repeat("é", 12): "ééééééééé…"} {
		if got := oneLine(in, 10); got != want {
			t.Errorf("oneLine(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestCallPairWithSpace: a --property or --trait value typed after a
// space is named as the pair it was meant to be (issue 41).
func TestCallPairWithSpace(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"track", "--user-id", "u", "--event", "E", "--property", "total", "129.95"}, "did you mean --property total=129.95? (key=value, no space)"},
		{[]string{"track", "--user-id", "u", "--event", "E", "--property", "a=1", "--property", "total", "129.95", "--property", "note", "two words"},
			"did you mean --property total=129.95 --property 'note=two words'? (key=value, no space)"},
		{[]string{"identify", "--user-id", "u", "--trait", "plan", "pro"}, "did you mean --trait plan=pro? (key=value, no space)"},
		{[]string{"track", "--user-id", "u", "--event", "E", "extra"}, `unknown command "extra" for "evfwd track"`},
	} {
		res := execute(t, testFactory(t, "", false, nil), tt.args...)
		if res.Code != cli.ExitUsage || !strings.Contains(res.Stderr, tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tt.args, res.Code, res.Stderr, cli.ExitUsage, tt.want)
		}
	}
}
