package cmd

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/evfwd/evfwd/pkg/signature"
	"github.com/google/go-cmp/cmp"
)

// routeAt is the clock of the route tests: receivedAt, a missing
// timestamp, and the time signatures are made at.
var routeAt = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

const routeConfig = "testdata/route/evfwd.yaml"

// runRoute runs evfwd route with args, and parses -o json's records.
func runRoute(t *testing.T, stdin string, args ...string) (result, []routed, routeSummary) {
	t.Helper()
	f := testFactory(t, stdin, false, nil)
	f.Now = func() time.Time { return routeAt }
	res := execute(t, f, append([]string{"route"}, args...)...)
	var msgs []routed
	var sum routeSummary
	for _, line := range strings.Split(strings.TrimSpace(res.Stdout), "\n") {
		if line == "" || !strings.Contains(strings.Join(args, " "), "-o json") {
			continue
		}
		var rec struct{ Record string }
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("stdout line not JSON: %v\n%s", err, line)
		}
		switch rec.Record {
		case "message":
			var m routed
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatal(err)
			}
			msgs = append(msgs, m)
		case "summary":
			if err := json.Unmarshal([]byte(line), &sum); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("record %q: %s", rec.Record, line)
		}
	}
	return res, msgs, sum
}

func destOf(t *testing.T, m routed, name string) routedDest {
	t.Helper()
	for _, d := range m.Dests {
		if d.Name == name {
			return d
		}
	}
	t.Fatalf("line %d: no destination %s in %+v", m.Line, name, m.Dests)
	return routedDest{}
}

// checkSigned verifies the signature headers of every request of d over
// sent, with each of secrets alone.
func checkSigned(t *testing.T, d routedDest, scheme signature.Scheme, sent []byte, secrets ...string) {
	t.Helper()
	if len(d.Requests) == 0 {
		t.Fatalf("%s: no requests", d.Name)
	}
	for _, r := range d.Requests {
		h := http.Header{}
		for k, v := range r.Headers {
			h.Set(k, v)
		}
		for _, s := range secrets {
			res, err := signature.VerifyFields(scheme, h, sent, signature.Options{Secrets: [][]byte{[]byte(s)}, Now: routeAt})
			if err != nil {
				t.Fatalf("%s %s: %v", d.Name, r.URL, err)
			}
			if !res.Valid {
				t.Errorf("%s %s: %s signature not valid with %q: %s; headers %v", d.Name, r.URL, scheme, s, res.Reason, r.Headers)
			}
		}
	}
}

// TestRouteJSON: each line becomes the body serve stores; the webhooks
// block and a batching destination take every message its integrations
// leave on, with the headers and signatures they would send; a bad line
// is named and the others go on. (No condition or mapping decides here:
// TestRouteSubscriptionAndMapping has those.)
func TestRouteJSON(t *testing.T) {
	res, msgs, sum := runRoute(t, "", "--config", routeConfig, "--source", "web", "-o", "json", "testdata/route/events.ndjson")
	if res.Code != 1 {
		t.Fatalf("exit %d, want 1 (a line rejected); stderr:\n%s", res.Code, res.Stderr)
	}
	if want := "testdata/route/events.ndjson:5: track: userId or anonymousId is required\n"; !strings.Contains(res.Stderr, want) {
		t.Errorf("stderr lacks %q:\n%s", want, res.Stderr)
	}
	var lines []int64
	for _, m := range msgs {
		lines = append(lines, m.Line)
	}
	if diff := cmp.Diff([]int64{1, 2, 6, 7}, lines); diff != "" {
		t.Fatalf("lines routed mismatch (-want +got):\n%s", diff)
	}

	identify := msgs[0]
	wantBody := `{"type":"identify","version":1,"userId":"u_1","traits":{"plan":"pro"},"messageId":"m_1","timestamp":"2024-05-01T09:00:00.000Z","receivedAt":"2024-05-01T12:00:00.000Z"}`
	if string(identify.Body) != wantBody {
		t.Errorf("stored body:\n got %s\nwant %s", identify.Body, wantBody)
	}
	hooks := destOf(t, identify, "webhooks")
	if !hooks.Takes || hooks.Method != "POST" || hooks.WebhookID != "m_1" || string(hooks.Body) != wantBody {
		t.Errorf("webhooks: %+v", hooks)
	}
	if len(hooks.Requests) != 2 || hooks.Requests[0].URL != "https://hooks.example.com/a" || hooks.Requests[1].URL != "https://hooks.example.com/b" {
		t.Fatalf("webhooks requests: %+v", hooks.Requests)
	}
	wantHeaders := map[string]string{
		"Content-Type": "application/json", "User-Agent": "evfwd-webhooks/0.0.0-test", "X-Env": "****",
		"X-Signature": signature.Sign([]byte("hook-secret"), []byte(wantBody)),
	}
	if diff := cmp.Diff(wantHeaders, hooks.Requests[0].Headers); diff != "" {
		t.Errorf("headers mismatch (-want +got):\n%s", diff)
	}
	if _, masked := hooks.Requests[1].Headers["X-Env"]; masked {
		t.Errorf("the second endpoint has no static header: %v", hooks.Requests[1].Headers)
	}
	checkSigned(t, hooks, signature.Segment, []byte(wantBody), "hook-secret")

	wh := destOf(t, identify, "warehouse")
	if !wh.Takes || wh.Batch == nil || wh.Batch.Size != 50 || !strings.HasPrefix(wh.WebhookID, "batch_") {
		t.Errorf("warehouse: %+v", wh)
	}
	// Signed as a batch of this message alone, by both secrets (rotation).
	checkSigned(t, wh, signature.Stripe, []byte("["+string(wh.Body)+"]"), "whsec_new_one", "whsec_old_one")

	quiet := msgs[2]
	for _, d := range quiet.Dests {
		if d.Takes || d.Skipped != "integrations" {
			t.Errorf("line 6, integrations Webhooks false: %+v", d)
		}
	}

	page := msgs[3]
	if page.MessageID == "" || !strings.Contains(string(page.Body), `"timestamp":"2024-05-01T12:00:00.000Z"`) {
		t.Errorf("line 7: messageId and timestamp are filled: %s", page.Body)
	}
	// The bytes signed are the bytes shown: no HTML escaping.
	if !strings.Contains(string(page.Body), `"Home <&>"`) {
		t.Errorf("line 7 body re-encoded: %s", page.Body)
	}
	checkSigned(t, destOf(t, page, "webhooks"), signature.Segment, page.Body, "hook-secret")

	if sum.Source != "web" || sum.Lines != 7 || sum.Messages != 4 || sum.Rejected != 1 {
		t.Errorf("summary: %+v", sum)
	}
	for _, c := range sum.Destinations {
		if c.Name != "orders" && (c.Takes != 3 || c.Skips != 1 || c.MappingErrors != 0) {
			t.Errorf("summary of %s: %+v", c.Name, c)
		}
	}
}

// TestRouteSubscriptionAndMapping: a destination takes only the messages
// its condition matches, and sends them mapped, signed over the mapped
// bytes, with its method. Needs Segment's engines (pkg/fql, pkg/mapping).
func TestRouteSubscriptionAndMapping(t *testing.T) {
	_, msgs, sum := runRoute(t, "", "--config", routeConfig, "--source", "web", "-o", "json", "testdata/route/events.ndjson")
	if len(msgs) != 4 {
		t.Fatalf("%d messages routed, want 4", len(msgs))
	}
	if d := destOf(t, msgs[0], "orders"); d.Takes || d.Skipped != "subscribe" || d.Subscribe != `type = "track"` {
		t.Errorf("orders and an identify: %+v", d)
	}
	if d := destOf(t, msgs[3], "orders"); d.Takes {
		t.Errorf("orders and a page: %+v", d)
	}
	orders := destOf(t, msgs[1], "orders")
	if !orders.Takes || orders.Method != "PUT" || string(orders.Body) != `{"event_name":"Order Completed"}` {
		t.Fatalf("orders and a track: %+v (body %s)", orders, orders.Body)
	}
	checkSigned(t, orders, signature.Segment, orders.Body, "orders-secret")
	for _, c := range sum.Destinations {
		if c.Name == "orders" && (c.Takes != 1 || c.Skips != 3) {
			t.Errorf("summary of orders: %+v", c)
		}
	}
}

// TestRouteText: the text form, one block per message and a table of
// counts.
func TestRouteText(t *testing.T) {
	in := `{"type":"track","userId":"u_1","event":"Signed Up","messageId":"m_9","timestamp":"2024-05-01T09:00:00Z"}` + "\n"
	res, _, _ := runRoute(t, in, "--config", routeConfig, "--source", "app")
	if res.Code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", res.Code, res.Stderr)
	}
	golden(t, "route/app.txt", res.Stdout)
}

// TestRouteUsageErrors: what is wrong with the flags or the config
// exits 2 with a message that says what to do.
func TestRouteUsageErrors(t *testing.T) {
	noSources := writeFile(t, "evfwd.yaml", "addr: 127.0.0.1:8787\n")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"several sources", []string{"--config", routeConfig}, "the config has 2 sources: say which with --source (web, app)"},
		{"unknown source", []string{"--config", routeConfig, "--source", "nope"}, `--source "nope": no such source (the config has web, app)`},
		{"no config", nil, "no config file: give serve's with --config FILE"},
		{"no sources", []string{"--config", noSources}, "has no sources"},
		{"missing file", []string{"--config", routeConfig, "--source", "app", filepath.Join(t.TempDir(), "none.ndjson")}, "none.ndjson: no such file or directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, _, _ := runRoute(t, "", tc.args...)
			if res.Code != 2 || !strings.Contains(res.Stderr, tc.want) {
				t.Errorf("exit %d, stderr:\n%s\nwant 2 and %q", res.Code, res.Stderr, tc.want)
			}
		})
	}
}

// TestRouteBadCondition: a condition that does not parse is a config
// error shown with a caret under the place. Needs Segment's engine
// (pkg/fql).
func TestRouteBadCondition(t *testing.T) {
	cfg := writeFile(t, "evfwd.yaml", `sources:
  - name: web
    write_key: wk_web_route_1
    destinations:
      - name: orders
        subscribe: type = = "track"
        endpoints:
          - url: https://orders.example.com/in
`)
	res, _, _ := runRoute(t, "", "--config", cfg)
	if res.Code != 2 || !strings.Contains(res.Stderr, `destination "orders": subscribe:`) || !strings.Contains(res.Stderr, "^") {
		t.Errorf("exit %d, stderr:\n%s\nwant 2, the destination and a caret", res.Code, res.Stderr)
	}
}

// TestRouteFlags: flags into options.
func TestRouteFlags(t *testing.T) {
	f := testFactory(t, "", false, nil)
	var got *RouteOptions
	cmd := NewCmdRoute(f, func(o *RouteOptions) error { got = o; return nil })
	cmd.SetArgs([]string{"--source", "web", "a.ndjson", "-"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got.Source != "web" || !cmp.Equal(got.Files, []string{"a.ndjson", "-"}) {
		t.Errorf("options: %+v", got)
	}
}
