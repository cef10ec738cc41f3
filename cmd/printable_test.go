package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/storetest"
)

// steer is one string a terminal acts on, fed through text outputs.
type steer struct {
	name string
	s    string
}

// steering is every C0 control, DEL, every C1 control, the bidi controls
// and bytes that are not UTF-8: what no text output may pass on from data.
func steering() []steer {
	var ss []steer
	for c := 0; c < 0x20; c++ {
		ss = append(ss, steer{fmt.Sprintf("C0 %#02x", c), string(rune(c))})
	}
	ss = append(ss, steer{"DEL", "\x7f"})
	for r := rune(0x80); r <= 0x9f; r++ {
		ss = append(ss, steer{fmt.Sprintf("C1 %U", r), string(r)})
	}
	for _, r := range []rune{0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2066, 0x2067, 0x2068, 0x2069, 0x200e, 0x200f, 0x061c} {
		ss = append(ss, steer{fmt.Sprintf("bidi %U", r), string(r)})
	}
	ss = append(ss, steer{"OSC title", "\x1b]0;OWNED\a\x1b[2J"}, steer{"invalid UTF-8", "\xff\xc3"})
	return ss
}

// jsonString is s as a JSON string's content: controls as \u escapes (a
// raw one is not JSON), everything else raw, invalid bytes included.
func jsonString(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20:
			fmt.Fprintf(&b, `\u%04x`, c)
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// pathSegment is s escaped for a URL path: the receiver sees s decoded.
func pathSegment(s string) string { return url.PathEscape(s) }

// assertNoSteering fails when out holds a rune a terminal acts on: a
// control other than newline and tab, DEL, a C1 or bidi control, or a
// byte that is not UTF-8.
func assertNoSteering(t *testing.T, where, out string) {
	t.Helper()
	for i := 0; i < len(out); {
		r, n := utf8.DecodeRuneInString(out[i:])
		bad := false
		switch {
		case r == utf8.RuneError && n == 1:
			bad = true
		case r == '\n' || r == '\t':
		case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f,
			r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069,
			r == 0x200e, r == 0x200f, r == 0x061c:
			bad = true
		}
		if bad {
			lo, hi := max(0, i-40), min(len(out), i+40)
			t.Errorf("%s: raw %q reached the output at %d: %q", where, out[i:i+n], i, out[lo:hi])
			return
		}
		i += n
	}
}

// listen's line and --verbose details print a request's path, type,
// event, userId and body, chosen by whoever reaches the port: signed or
// not (the 401 line prints too), none of it steers the terminal.
func TestListenOutputPrintable(t *testing.T) {
	for _, verbose := range []bool{false, true} {
		t.Run(fmt.Sprintf("verbose=%v", verbose), func(t *testing.T) {
			f := testFactory(t, "", true, nil)
			args := []string{"--secret", listenSecret}
			if verbose {
				args = append(args, "--verbose")
			}
			l := startListen(t, f, args...)
			for _, c := range steering() {
				v := jsonString("x" + c.s + "y")
				body := `{"type":"` + v + `","userId":"` + v + `","event":"` + v + `","messageId":"` + v + `"}`
				l.post(t, "/hooks/"+pathSegment("p"+c.s+"q"), body, "")
				body = `{"type":"track","userId":"` + v + `","event":"e","messageId":"m` + v + `","timestamp":"2024-05-01T12:00:05.000Z"}`
				l.post(t, "/hooks", body, signHex(t, listenSecret, body))
			}
			res := l.interrupt(t)
			if n := strings.Count(res.Stdout, "\n"); n < 2*len(steering()) {
				t.Fatalf("%d lines printed, want one or more per request:\n%s", n, res.Stdout)
			}
			if !strings.Contains(res.Stdout, `user=x\x1b]0;OWNED\x07\x1b[2Jy`) {
				t.Errorf("the OSC userId is not shown escaped:\n%s", res.Stdout)
			}
			assertNoSteering(t, "stdout", res.Stdout)
			assertNoSteering(t, "stderr", res.Stderr)
		})
	}
}

// deliveries list, show and endpoints print what senders chose (type,
// message and user ids, the body) and what endpoints answered: a store
// holding every control shows none of them raw.
func TestDeliveriesOutputPrintable(t *testing.T) {
	t.Parallel()
	now := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	path := filepath.Join(t.TempDir(), "evfwd.db")
	ctx := context.Background()
	st := openStoreAt(t, path, now)
	ss := steering()
	var msgs []store.Message
	for i, c := range ss {
		v := "x" + c.s + "y"
		m := storetest.Msg("web", fmt.Sprintf("m%d%s", i, v), 0, true)
		m.UserID, m.Type = v, v
		m.Body = []byte(`{"type":"track","userId":"` + v + `","messageId":"` + jsonString(m.MessageID) + `"}`)
		msgs = append(msgs, m)
	}
	if err := st.Ingest(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	ds, err := st.Lease(ctx, store.LeaseRequest{Owner: "o", Source: "web", Limit: len(ss), Now: now, TTL: time.Minute})
	if err != nil || len(ds) != len(ss) {
		t.Fatalf("Lease: %v, %d", err, len(ds))
	}
	var done []store.Completion
	for i, d := range ds {
		v := "x" + ss[i].s + "y"
		done = append(done, store.Completion{ID: d.ID, Owner: "o", Status: store.Dead, Attempts: 1, LastError: "HTTP 500: " + v,
			Records: []store.Attempt{{Delivery: 1, URL: "http://x/" + v, Start: now, Status: 500, Error: v, Class: "http_5xx", Outcome: "retryable", Excerpt: []byte(v)}}})
	}
	if err := st.Complete(ctx, done); err != nil {
		t.Fatal(err)
	}
	for i := range ss {
		v := "x" + ss[i].s + "y"
		err = st.SaveEndpoint(ctx, store.EndpointState{Source: "web", URL: fmt.Sprintf("http://x/%d%s", i, v), State: store.EndpointOpen,
			Failures: 5, Since: now, LastError: v, Node: "n1", UpdatedAt: now})
		if err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	env := map[string]string{"EVFWD_STORE": "sqlite://" + path}
	runs := [][]string{{"list"}, {"endpoints"}}
	for _, d := range ds {
		runs = append(runs, []string{"show", strconv.FormatInt(d.ID, 10)})
	}
	for _, args := range runs {
		res := execute(t, testFactory(t, "", true, env), append([]string{"deliveries"}, args...)...)
		if res.Code != 0 {
			t.Fatalf("%v: exit %d, stderr %q", args, res.Code, res.Stderr)
		}
		assertNoSteering(t, fmt.Sprint(args, " stdout"), res.Stdout)
		assertNoSteering(t, fmt.Sprint(args, " stderr"), res.Stderr)
	}
}

// trigger prints the message it sends (its id, its body), each attempt's
// URL and the endpoint's answer, and errors about its --data: none raw.
func TestTriggerOutputPrintable(t *testing.T) {
	for _, c := range steering() {
		t.Run(c.name, func(t *testing.T) {
			v := "x" + c.s + "y"
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusBadRequest)
				io.WriteString(w, "refused "+v)
			}))
			defer ts.Close()
			data := `{"userId":"` + jsonString(v) + `","messageId":"` + jsonString(v) + `","event":"` + jsonString(v) + `"}`
			for _, args := range [][]string{
				{"trigger", "track", "--url", ts.URL + "/" + pathSegment(v), "--data", data, "--secret", "k"},
				{"trigger", "track", "--url", ts.URL, "--data", `{"userId":"` + v + `"`}, // not JSON: an error quoting it
				{"trigger", "track", "--url", ts.URL, "--data", `{"type":"` + jsonString(v) + `"}`},
			} {
				res := execute(t, testFactory(t, "", true, nil), args...)
				if res.Code == 0 {
					t.Errorf("%v: exit 0, want a failure", args[4:])
				}
				assertNoSteering(t, "stdout", res.Stdout)
				assertNoSteering(t, "stderr", res.Stderr)
			}
		})
	}
}

// verify's verdicts and diagnostics name what the checked request held
// (a record's path and type, a malformed signature header, an unreadable
// record line): none of it raw.
func TestVerifyOutputPrintable(t *testing.T) {
	var rec strings.Builder
	for _, c := range steering() {
		v := jsonString("x" + c.s + "y")
		fmt.Fprintf(&rec, `{"receivedAt":"2024-05-01T12:00:05Z","method":"POST","path":"/h/%s","headers":{"X-Signature":"%s"},"size":2,"type":"%s","status":401,"body":{}}`+"\n", v, v, v)
		rec.WriteString(`{"receivedAt":` + v + "\n") // unreadable
	}
	file := writeFile(t, "rec.ndjson", rec.String())
	body := writeFile(t, "body.json", "{}")
	runs := [][]string{{"verify", "--record", file, "--secret", "k"}}
	for _, c := range steering() {
		v := "x" + c.s + "y"
		runs = append(runs,
			[]string{"verify", "--secret", "k", "--header", "X-Signature: " + v, body},
			[]string{"verify", "--secret", "k", "--scheme", "stripe", "--header", "Stripe-Signature: t=" + v + ",v1=" + v, body},
			[]string{"verify", "--secret", "k", "--scheme", "standard", "--header", "webhook-id: " + v, "--header", "webhook-timestamp: " + v, "--header", "webhook-signature: v1," + v, body},
		)
	}
	for _, args := range runs {
		res := execute(t, testFactory(t, "", true, nil), args...)
		if res.Code == 0 {
			t.Errorf("%q: exit 0, want a failure", args)
		}
		assertNoSteering(t, fmt.Sprintf("%q stdout", args), res.Stdout)
		assertNoSteering(t, fmt.Sprintf("%q stderr", args), res.Stderr)
	}
}

// send's error lines quote input lines and the collection API's answer,
// and its summary names the files: none of it raw.
func TestSendOutputPrintable(t *testing.T) {
	for _, c := range steering() {
		t.Run(c.name, func(t *testing.T) {
			v := "x" + c.s + "y"
			srv := newCollectServer(t, func(i int, _ []map[string]json.RawMessage, w http.ResponseWriter) {
				w.WriteHeader(400)
				w.Write([]byte(`{"error":"` + jsonString(v) + `"}`))
			})
			name := "in" + strings.ReplaceAll(v, "\x00", "") + ".ndjson"
			in := `{"type":"track","userId":"u1","event":"` + jsonString(v) + `"}` + "\n" +
				`{"type":"` + jsonString(v) + `","userId":"u2"}` + "\n" +
				`{"type":"page","userId":"u3","timestamp":"` + jsonString(v) + `"}` + "\n" +
				`{"type":"track","userId":"` + v + "\n"
			file := writeFile(t, name, in)
			res := execute(t, clientFactory(t, "", srv), "send", file, "--batch-size", "1")
			if res.Code != 1 {
				t.Errorf("exit %d, want 1; stderr %q", res.Code, res.Stderr)
			}
			assertNoSteering(t, "stdout", res.Stdout)
			assertNoSteering(t, "stderr", res.Stderr)
		})
	}
}

// serve's text log quotes a value that is not plain printable text (the
// slog TextHandler does, with strconv.Quote), so an error naming a
// sender's data steers nothing; this pins it should the handler change.
func TestServeTextLogPrintable(t *testing.T) {
	var b strings.Builder
	log, err := newLogger(&b, "text", "debug")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range steering() {
		v := "x" + c.s + "y"
		log.Error("delivery failed: "+v, "userId", v, "messageId", []byte(v), "err", errors.New("HTTP 500: "+v),
			slog.Group("req", "path", "/"+v), slog.Any("headers", map[string]string{v: v}))
	}
	if n := strings.Count(b.String(), "\n"); n != len(steering()) {
		t.Errorf("%d log lines, want %d:\n%s", n, len(steering()), b.String())
	}
	assertNoSteering(t, "log", b.String())
}

// serve --check prints the config's own strings: a source's name comes
// out printable too, as does the error for an endpoint's.
func TestServeCheckPrintable(t *testing.T) {
	t.Parallel()
	yamlEscaped := func(s string) string {
		var b strings.Builder
		for _, r := range s {
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		return b.String()
	}
	for _, c := range steering() {
		if !utf8.ValidString(c.s) {
			continue // YAML cannot hold it
		}
		name := yamlEscaped("s" + c.s)
		cfg := writeFile(t, "evfwd.yaml", fmt.Sprintf(`sources:
  - name: "%s"
    write_key: wk_0123456789abcdef
    webhooks:
      enabled: true
      endpoints:
        - url: https://hooks.example.com/a
          name: "%s"
`, name, name))
		// An endpoint's name may not hold controls: the error naming it
		// is printable as well.
		res := execute(t, testFactory(t, "", false, nil), "serve", "--check", "--config", cfg)
		if res.Code != 0 && res.Code != 2 {
			t.Fatalf("%s: exit %d: %s", c.name, res.Code, res.Stderr)
		}
		assertNoSteering(t, c.name, res.Stdout+res.Stderr)
		res = execute(t, testFactory(t, "", false, nil), "serve", "--check", "--config",
			writeFile(t, "evfwd.yaml", fmt.Sprintf("sources:\n  - name: \"%s\"\n    write_key: wk_0123456789abcdef\n", name)))
		if res.Code != 0 || !strings.Contains(res.Stdout, "source s") {
			t.Fatalf("%s: exit %d: %s", c.name, res.Code, res.Stderr)
		}
		assertNoSteering(t, c.name, res.Stdout+res.Stderr)
	}
}
