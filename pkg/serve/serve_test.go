package serve_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/evfwd/evfwd/internal/broadcast"
	"github.com/evfwd/evfwd/internal/webhooktest"

	"github.com/evfwd/evfwd/pkg/serve"
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/webhook"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

// How these tests wait. The service runs for real: its HTTP server and the
// webhook endpoints on loopback sockets, a SQLite file, its own goroutines.
// Real sockets rule out testing/synctest (a bubble whose goroutines wait
// on the network never advances its clock), so the tests are deterministic
// by construction instead:
//
//   - The service's clock is a fake one (webhooktest.Clock) that only the test moves,
//     and retry policies are chosen so that nothing becomes due unless the
//     test moves the clock there. The test moves it only when nothing is
//     in flight (no lease that a jump could expire, no retry that a jump
//     could release early), and then waits for what follows.
//   - Nothing sleeps. waitFor checks its condition again each time
//     something happens (changed): an endpoint got a request, or the
//     service logged, which it does for every delivery outcome it records,
//     after recording it.

const secret = "s3cret"

var t0 = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

// changed fires whenever something a test may wait for has happened: a
// test endpoint (newHook, newIDCounter) got a request, or a service started by
// run logged a record (the forwarder logs every delivery outcome once it
// is in the store and the metrics; the admin API, the pruner and the
// collector's refusals log too).
var changed broadcast.Signal

// announcer is a slog.Handler that fires changed for every record, and
// passes on the records its next handler wants.
type announcer struct{ next slog.Handler }

func (a announcer) Enabled(context.Context, slog.Level) bool { return true }

func (a announcer) Handle(ctx context.Context, r slog.Record) error {
	var err error
	if a.next.Enabled(ctx, r.Level) {
		err = a.next.Handle(ctx, r)
	}
	changed.Fire()
	return err
}

func (a announcer) WithAttrs(as []slog.Attr) slog.Handler { return announcer{a.next.WithAttrs(as)} }
func (a announcer) WithGroup(name string) slog.Handler    { return announcer{a.next.WithGroup(name)} }

// newHook is an endpoint that answers with the statuses of script, then
// 200, and fires changed at each request.
func newHook(t *testing.T, script ...int) *webhooktest.Receiver {
	t.Helper()
	return webhooktest.New(t, webhooktest.Statuses(append(script, 200)...), webhooktest.Notify(&changed))
}

type harness struct {
	srv  *serve.Server
	url  string
	stop func()
}

// start runs a service with one source "web" (write key wk_web) whose
// webhooks go to urls, and a source "quiet" without webhooks.
func start(t *testing.T, opts serve.Options, urls ...string) *harness {
	t.Helper()
	var eps []webhook.Endpoint
	for _, u := range urls {
		eps = append(eps, webhook.Endpoint{URL: u, Headers: map[string]string{"X-Env": "test"}})
	}
	cfg := serve.Config{
		Addr:  "127.0.0.1:0",
		Store: "sqlite://" + filepath.Join(t.TempDir(), "evfwd.db"),
		Sources: []serve.Source{
			{Name: "web", WriteKey: "wk_web", Webhooks: serve.Webhooks{Enabled: true, Destination: webhook.Destination{SharedSecret: secret, Endpoints: eps}}},
			{Name: "quiet", WriteKey: "wk_quiet"},
		},
	}
	if opts.Poll == 0 {
		opts.Poll = 5 * time.Millisecond
	}
	return run(t, cfg, opts)
}

// run starts a service on cfg and stops it when the test ends.
func run(t *testing.T, cfg serve.Config, opts serve.Options) *harness {
	t.Helper()
	opts.Version = "1.0.0"
	next := slog.DiscardHandler
	if opts.Logger != nil {
		next = opts.Logger.Handler()
	}
	opts.Logger = slog.New(announcer{next})
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := serve.New(ctx, cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	h := &harness{srv: srv, url: srv.URL()}
	var once sync.Once
	h.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(h.stop)
	return h
}

func (h *harness) post(t *testing.T, path, key, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, h.url+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(key+":")))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

const waitLimit = webhooktest.WaitLimit

// waitFor returns once cond holds, checking it now and after each change
// (see changed); it fails the test when waitLimit passes first.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	webhooktest.Await(t, &changed, what, cond)
}

func deliveries(t *testing.T, h *harness, f store.Filter) []store.Delivery {
	t.Helper()
	ds, err := h.srv.Store().List(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		os.MkdirAll("testdata", 0o755)
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	if string(want) != string(got) {
		t.Errorf("%s mismatch:\nwant %s\ngot  %s", name, want, got)
	}
}

// sign is an independent HMAC-SHA1 (not pkg/signature).
func sign(body []byte) string {
	m := hmac.New(sha1.New, []byte(secret))
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

func TestEachTypeIngestToWebhook(t *testing.T) {
	t.Parallel()
	c := webhooktest.NewClock(t0)
	rcv := newHook(t)
	h := start(t, serve.Options{Now: c.Now}, rcv.URL)
	msgs := map[string]string{
		"identify": `{"userId":"u_42","traits":{"email":"ada@example.com","plan":"pro"},"messageId":"m-identify","timestamp":"2024-05-01T11:59:00Z"}`,
		"track":    `{"userId":"u_42","event":"Order Completed","properties":{"total":12345678901234567890.000000001,"currency":"EUR"},"messageId":"m-track","timestamp":"2024-05-01T11:59:00.5+02:00"}`,
		"page":     `{"anonymousId":"a_1","name":"Pricing","category":"Docs","properties":{"url":"https://example.com/pricing"},"messageId":"m-page","timestamp":"2024-05-01T11:59:00Z","context":{"ip":"1.2.3.4"}}`,
		"screen":   `{"userId":"u_42","name":"Home","messageId":"m-screen","timestamp":"2024-05-01T11:59:00Z"}`,
		"group":    `{"userId":"u_42","groupId":"g_7","traits":{"name":"Acme"},"messageId":"m-group","timestamp":"2024-05-01T11:59:00Z"}`,
		"alias":    `{"userId":"u_42","previousId":"a_1","messageId":"m-alias"}`,
	}
	for _, typ := range []string{"identify", "track", "page", "screen", "group", "alias"} {
		if code, body := h.post(t, "/v1/"+typ, "wk_web", msgs[typ]); code != 200 {
			t.Fatalf("%s: %d %s", typ, code, body)
		}
	}
	waitFor(t, "six webhooks", func() bool { return len(rcv.Requests()) == 6 })
	for _, r := range rcv.Requests() {
		if got, want := r.Header.Get("X-Signature"), sign(r.Body); got != want {
			t.Errorf("X-Signature %s, independent HMAC %s", got, want)
		}
		if r.Header.Get("X-Env") != "test" || r.Header.Get("User-Agent") != "evfwd-webhooks/1.0.0" {
			t.Errorf("headers %v", r.Header)
		}
		var typ string
		fmt.Sscanf(string(r.Body), `{"type":%q`, &typ)
		typ = strings.Trim(strings.SplitN(strings.TrimPrefix(string(r.Body), `{"type":"`), `"`, 2)[0], `"`)
		golden(t, typ+".golden", append(r.Body, '\n'))
	}
	waitFor(t, "deliveries delivered", func() bool { return len(deliveries(t, h, store.Filter{Status: store.Delivered})) == 6 })
}

func TestFirstSuccessOfFiveEndpoints(t *testing.T) {
	t.Parallel()
	e1, e2, e3, e4, e5 := newHook(t, 500), newHook(t, 404), newHook(t, 200), newHook(t), newHook(t)
	h := start(t, serve.Options{}, e1.URL, e2.URL, e3.URL, e4.URL, e5.URL)
	if code, body := h.post(t, "/v1/track", "wk_web", `{"userId":"u","event":"E"}`); code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	waitFor(t, "delivered", func() bool { return len(deliveries(t, h, store.Filter{Status: store.Delivered})) == 1 })
	for i, e := range []*webhooktest.Receiver{e1, e2, e3, e4, e5} {
		want := 1
		if i >= 3 {
			want = 0
		}
		if n := len(e.Requests()); n != want {
			t.Errorf("endpoint %d called %d times, want %d", i+1, n, want)
		}
	}
	d := deliveries(t, h, store.Filter{})[0]
	detail, err := h.srv.Store().Get(context.Background(), d.ID)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range detail.Records {
		got = append(got, fmt.Sprintf("%d:%d:%s", a.Endpoint, a.Status, a.Outcome))
	}
	if strings.Join(got, " ") != "0:500:retryable 1:404:final 2:200:delivered" {
		t.Errorf("attempts %v", got)
	}
}

// Each retry waits for its backoff on the service's clock: the test moves
// the clock to the next attempt only once the previous one is on record.
func TestRetriesAfter500sThenDelivered(t *testing.T) {
	t.Parallel()
	c := webhooktest.NewClock(t0)
	rcv := newHook(t, 500, 503, 500)
	h := start(t, serve.Options{Now: c.Now, Policy: webhook.Policy{Initial: time.Minute, Max: 3 * time.Minute, Jitter: -1}}, rcv.URL)
	if code, _ := h.post(t, "/v1/track", "wk_web", `{"userId":"u","event":"E","messageId":"m1"}`); code != 200 {
		t.Fatal(code)
	}
	// Deliveries start at t0, +1m, +3m (1m + 2m) and +6m (3m + the 3m cap).
	for n, at := range []time.Duration{time.Minute, 3 * time.Minute, 6 * time.Minute} {
		var d store.Delivery
		waitFor(t, fmt.Sprintf("delivery %d on record", n+1), func() bool {
			d = deliveries(t, h, store.Filter{})[0]
			return d.Attempts > n
		})
		if d.Status != store.Pending || d.Attempts != n+1 || !d.NextAttempt.Equal(t0.Add(at)) {
			t.Fatalf("after delivery %d: %s, attempts %d, next at t0+%v; want pending, %d, t0+%v",
				n+1, d.Status, d.Attempts, d.NextAttempt.Sub(t0), n+1, at)
		}
		c.Set(d.NextAttempt)
	}
	waitFor(t, "delivered", func() bool { return len(deliveries(t, h, store.Filter{Status: store.Delivered})) == 1 })
	d := deliveries(t, h, store.Filter{})[0]
	if d.Attempts != 4 {
		t.Errorf("attempts = %d, want 4", d.Attempts)
	}
	got := rcv.Requests()
	if len(got) != 4 || string(got[0].Body) != string(got[3].Body) {
		t.Errorf("receiver got %d requests; bodies must be equal across retries", len(got))
	}
}

func TestWindowExpiryToDead(t *testing.T) {
	t.Parallel()
	c := webhooktest.NewClock(t0)
	rcv := newHook(t, repeat(500, 1000)...)
	h := start(t, serve.Options{Now: c.Now, Policy: webhook.Policy{Jitter: -1}}, rcv.URL)
	if code, _ := h.post(t, "/v1/track", "wk_web", `{"userId":"u","event":"E"}`); code != 200 {
		t.Fatal(code)
	}
	seen := 0
	for i := 0; ; i++ {
		if i > 100 {
			t.Fatal("never dead")
		}
		var d store.Delivery
		waitFor(t, "next attempt", func() bool {
			d = deliveries(t, h, store.Filter{})[0]
			return d.Attempts > seen || d.Status != store.Pending
		})
		if d.Status == store.Dead {
			if last := d.UpdatedAt; last.After(t0.Add(webhook.DefaultWindow + webhook.DefaultMax)) {
				t.Errorf("dead at %v, after the window", last)
			}
			break
		}
		if d.Status != store.Pending {
			t.Fatalf("status %s", d.Status)
		}
		seen = d.Attempts
		c.Set(d.NextAttempt) // jump to the next attempt
	}
	d := deliveries(t, h, store.Filter{})[0]
	// 1+2+...+512 s, then 10 min steps, until 4 h: 10 + 22 deliveries.
	if d.Attempts < 25 || d.Attempts > 40 {
		t.Errorf("attempts = %d", d.Attempts)
	}
}

func repeat(v, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = v
	}
	return out
}

func TestIntegrationsOffAndQuietSource(t *testing.T) {
	t.Parallel()
	rcv := newHook(t)
	h := start(t, serve.Options{}, rcv.URL)
	batch := `{"batch":[
		{"type":"track","userId":"u","event":"off","integrations":{"Webhooks":false}},
		{"type":"track","userId":"u","event":"all off","integrations":{"All":false}},
		{"type":"track","userId":"u","event":"on","integrations":{"All":false,"Webhooks":true}}]}`
	if code, body := h.post(t, "/v1/batch", "wk_web", batch); code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	if code, _ := h.post(t, "/v1/track", "wk_quiet", `{"userId":"u","event":"quiet"}`); code != 200 {
		t.Fatal(code)
	}
	waitFor(t, "delivered", func() bool { return len(deliveries(t, h, store.Filter{Status: store.Delivered})) == 1 })
	h.stop()
	got := rcv.Requests()
	if len(got) != 1 || !strings.Contains(string(got[0].Body), `"event":"on"`) {
		t.Errorf("receiver got %d: %v", len(got), got)
	}
}

func TestErrorCodesHealthAndMetrics(t *testing.T) {
	t.Parallel()
	rcv := newHook(t)
	h := start(t, serve.Options{}, rcv.URL)
	for _, tt := range []struct {
		path, key, body string
		want            int
	}{
		{"/v1/track", "", `{"userId":"u","event":"E"}`, 401},
		{"/v1/track", "nope", `{"userId":"u","event":"E"}`, 401},
		{"/v1/track", "wk_web", `{"userId":"u"}`, 400},
		{"/v1/batch", "wk_web", `not json`, 400},
		{"/v1/track", "wk_web", `{"userId":"u","event":"` + strings.Repeat("x", 33<<10) + `"}`, 413},
		{"/v1/track", "wk_web", `{"userId":"u","event":"E"}`, 200},
	} {
		if code, body := h.post(t, tt.path, tt.key, tt.body); code != tt.want {
			t.Errorf("%s %q: %d %s, want %d", tt.path, tt.body[:min(len(tt.body), 30)], code, body, tt.want)
		}
	}
	waitFor(t, "delivered", func() bool { return len(rcv.Requests()) == 1 })
	resp, err := http.Get(h.url + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz: %v %v", resp, err)
	}
	waitFor(t, "metrics", func() bool {
		resp, err := http.Get(h.url + "/metrics")
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		m := string(b)
		return strings.Contains(m, `evfwd_ingested_total{source="web"} 1`) &&
			strings.Contains(m, `evfwd_delivered_total{source="web"} 1`) &&
			strings.Contains(m, `evfwd_attempt_duration_seconds_count{source="web"} 1`) &&
			strings.Contains(m, `evfwd_queue_depth{source="web"} 0`)
	})
}

func TestDeadEndpointDoesNotBlockOtherSources(t *testing.T) {
	t.Parallel()
	slow := webhooktest.New(t, webhooktest.Script(webhooktest.Reply{Hang: true}))
	fast := newHook(t)
	c := webhooktest.NewClock(t0) // a hung attempt is retried only when the test says so: never
	cfg := serve.Config{
		Addr:  "127.0.0.1:0",
		Store: filepath.Join(t.TempDir(), "evfwd.db"),
		Sources: []serve.Source{
			{Name: "slow", WriteKey: "wk_slow", Webhooks: serve.Webhooks{Enabled: true, Destination: webhook.Destination{Endpoints: []webhook.Endpoint{{URL: slow.URL}}}}},
			{Name: "fast", WriteKey: "wk_fast", Webhooks: serve.Webhooks{Enabled: true, Destination: webhook.Destination{Endpoints: []webhook.Endpoint{{URL: fast.URL}}}}},
		},
	}
	h := run(t, cfg, serve.Options{Now: c.Now, PerSource: 4, MaxInFlight: 8, Poll: 5 * time.Millisecond, Grace: 100 * time.Millisecond})
	var batch strings.Builder
	batch.WriteString(`{"batch":[`)
	for i := range 50 {
		if i > 0 {
			batch.WriteString(",")
		}
		batch.WriteString(`{"type":"track","userId":"u","event":"E"}`)
	}
	batch.WriteString(`]}`)
	if code, _ := h.post(t, "/v1/batch", "wk_slow", batch.String()); code != 200 {
		t.Fatal(code)
	}
	if code, _ := h.post(t, "/v1/batch", "wk_fast", batch.String()); code != 200 {
		t.Fatal(code)
	}
	waitFor(t, "fast source delivered while slow hangs", func() bool { return len(fast.Requests()) == 50 })
	h.stop() // with slow's deliveries in flight: the grace period interrupts them
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	cfg := serve.Config{Sources: []serve.Source{
		{Name: "web", WriteKey: "k", Webhooks: serve.Webhooks{Enabled: true, Destination: webhook.Destination{Endpoints: []webhook.Endpoint{{URL: "ftp://x"}}}}},
		{Name: "web", WriteKey: "k"},
		{WriteKey: ""},
	}}
	err := cfg.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{`source "web": webhooks:`, `ftp://x`, `source "web": name already used by sources[0]`, `write_key already used`, `sources[2]: name is required`, `sources[2]: write_key is required`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
}

func TestConfigValidationWebAndMobile(t *testing.T) {
	t.Parallel()
	cfg := serve.Config{
		PublicURL:      "collect.example.com",
		TrustedProxies: []string{"10.0.0.0/8", "proxy.internal"},
		Sources: []serve.Source{
			{Name: "site", WriteKey: "k1", Kind: "browser", AllowedOrigins: []string{"https://ok.example", "https://www.example.com/", "*.example.com"}},
			{Name: "app", WriteKey: "k2", Kind: "mobile"},
		},
	}
	err := cfg.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		`public_url "collect.example.com": want http(s)://host`,
		`trusted_proxies: "proxy.internal" is neither a CIDR`,
		`source "site": kind "browser": want server, web or mobile`,
		`source "site": allowed_origins: "https://www.example.com/" is not an origin`,
		`source "site": allowed_origins: "*.example.com" is not an origin`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
	for _, bad := range []string{"https://ok.example", `"app"`} {
		if strings.Contains(err.Error(), bad) {
			t.Errorf("error mentions %s, which is right:\n%v", bad, err)
		}
	}
}
