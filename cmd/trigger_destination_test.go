package cmd

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/evfwd/evfwd/pkg/signature"
)

// requestRecorder is an endpoint that keeps each request's method,
// headers and body.
type requestRecorder struct {
	mu   sync.Mutex
	reqs []recordedRequest
}

type recordedRequest struct {
	Method string
	Header http.Header
	Body   string
}

func (rr *requestRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	rr.mu.Lock()
	rr.reqs = append(rr.reqs, recordedRequest{Method: r.Method, Header: r.Header.Clone(), Body: string(b)})
	rr.mu.Unlock()
}

func (rr *requestRecorder) all() []recordedRequest {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	return append([]recordedRequest(nil), rr.reqs...)
}

// triggerDestinationConfig writes a serve config whose destinations send
// to url: plain (PUT, a static header, X-Signature), mapped (a condition
// and a mapping) and batched (Standard Webhooks, batches of 10).
func triggerDestinationConfig(t *testing.T, url string) string {
	return writeFile(t, "evfwd.yaml", `sources:
  - name: web
    write_key: wk_web_trigger
    destinations:
      - name: plain
        method: PUT
        shared_secret: plain-secret
        headers: { X-Env: prod }
        endpoints:
          - url: `+url+`/plain
      - name: mapped
        subscribe: type = "identify"
        shared_secret: mapped-secret
        mapping: {"event_name": {"@path": "$.event"}}
        endpoints:
          - url: `+url+`/mapped
      - name: batched
        scheme: standard
        shared_secret: whsec_`+"c2VjcmV0LWtleS1vZi10aGUtYmF0Y2hlcw=="+`
        batch: { size: 10 }
        endpoints:
          - url: `+url+`/batched
  - name: app
    write_key: wk_app_trigger
    destinations:
      - name: plain
        endpoints:
          - url: `+url+`/app
`)
}

// TestTriggerDestination: trigger sends as the destination does: its
// method, headers and secret, the body serve stores (receivedAt added),
// and for a batching destination a batch of one with the batch's id.
func TestTriggerDestination(t *testing.T) {
	rr := &requestRecorder{}
	srv := httptest.NewServer(rr)
	t.Cleanup(srv.Close)
	cfg := triggerDestinationConfig(t, srv.URL)

	res := execute(t, testFactory(t, "", false, nil), "trigger", "--config", cfg, "--destination", "plain", "--source", "web", "--event", "Order Completed")
	if res.Code != 0 || !strings.Contains(res.Stdout, "destination web/plain: PUT to 1 endpoint, signed segment") {
		t.Fatalf("trigger --destination plain: %+v", res)
	}
	got := rr.all()
	if len(got) != 1 {
		t.Fatalf("%d requests", len(got))
	}
	r := got[0]
	if r.Method != http.MethodPut || r.Header.Get("X-Env") != "prod" || !strings.Contains(r.Body, `"event":"Order Completed"`) || !strings.Contains(r.Body, `"receivedAt":"`) {
		t.Errorf("request: %s %v %s", r.Method, r.Header, r.Body)
	}
	if err := signature.Verify([]byte("plain-secret"), []byte(r.Body), r.Header.Get("X-Signature")); err != nil {
		t.Errorf("X-Signature: %v", err)
	}

	res = execute(t, testFactory(t, "", false, nil), "trigger", "identify", "--config", cfg, "--destination", "batched", "-o", "json")
	if res.Code != 0 || !strings.Contains(res.Stderr, "batches of up to 10: this is a batch of one") {
		t.Fatalf("trigger --destination batched: %+v", res)
	}
	b := rr.all()[1]
	if !strings.HasPrefix(b.Body, `[{"type":"identify"`) || !strings.HasSuffix(b.Body, "}]") || !strings.HasPrefix(b.Header.Get("Webhook-Id"), "batch_") {
		t.Errorf("batch: %v %s", b.Header, b.Body)
	}
	v, err := signature.VerifyFields(signature.Standard, b.Header, []byte(b.Body), signature.Options{Secrets: [][]byte{[]byte("whsec_c2VjcmV0LWtleS1vZi10aGUtYmF0Y2hlcw==")}})
	if err != nil || !v.Valid {
		t.Errorf("standard signature: %v %+v", err, v)
	}
}

// TestTriggerDestinationMapped: the body is the message mapped, signed
// over the mapped bytes, and trigger says when the destination's
// condition would not take the message. Needs Segment's engines
// (pkg/fql, pkg/mapping).
func TestTriggerDestinationMapped(t *testing.T) {
	rr := &requestRecorder{}
	srv := httptest.NewServer(rr)
	t.Cleanup(srv.Close)
	cfg := triggerDestinationConfig(t, srv.URL)
	res := execute(t, testFactory(t, "", false, nil), "trigger", "track", "--config", cfg, "--destination", "mapped", "--event", "X")
	if res.Code != 0 || !strings.Contains(res.Stderr, `its subscribe (type = "identify") does not take this message`) {
		t.Errorf("trigger --destination mapped: %+v", res)
	}
	got := rr.all()
	if len(got) != 1 || got[0].Body != `{"event_name":"X"}` {
		t.Fatalf("requests: %+v", got)
	}
	if err := signature.Verify([]byte("mapped-secret"), []byte(got[0].Body), got[0].Header.Get("X-Signature")); err != nil {
		t.Errorf("X-Signature: %v", err)
	}
}

// TestTriggerDestinationUsage: the flags a destination settles, an
// unknown or ambiguous name, and trigger without --url or --destination.
func TestTriggerDestinationUsage(t *testing.T) {
	cfg := triggerDestinationConfig(t, "http://127.0.0.1:9")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"track"}, `required flag(s) "url" not set`},
		{[]string{"--config", cfg, "--destination", "plain", "--url", "http://x"}, "[destination url] are set none of the others can be"},
		{[]string{"--config", cfg, "--destination", "plain", "--source", "web", "--secret", "s"}, "[destination secret]"},
		{[]string{"--config", cfg, "--destination", "plain"}, `--destination "plain": sources web, app each have one: say which with --source`},
		{[]string{"--config", cfg, "--destination", "nope"}, `--destination "nope": none in serve's config (there are web/plain, web/mapped, web/batched, app/plain)`},
		{[]string{"--config", cfg, "--destination", "plain", "--source", "nope"}, `--source "nope": no such source`},
		{[]string{"--config", cfg, "--destination", "plain", "--source", "web", "--count", "5"}, "--count is a load test of --url"},
		{[]string{"--destination", "plain"}, "no config file"},
	} {
		res := execute(t, testFactory(t, "", false, nil), append([]string{"trigger"}, tc.args...)...)
		if res.Code != 2 || !strings.Contains(res.Stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, res.Code, res.Stderr, tc.want)
		}
	}
}
