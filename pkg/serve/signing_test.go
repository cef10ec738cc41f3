package serve_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/evfwd/evfwd/internal/cli"
	"github.com/evfwd/evfwd/internal/syncbuf"
	"github.com/evfwd/evfwd/internal/webhooktest"
	"github.com/evfwd/evfwd/pkg/admin"
	"github.com/evfwd/evfwd/pkg/serve"
	"github.com/evfwd/evfwd/pkg/signature"
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/webhook"
)

// signingSecret is a Standard Webhooks secret as Svix shows one.
var signingSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("serve's standard webhooks key"))

// TestStandardSigningEndToEnd: an endpoint with signing: standard gets
// the spec's X-Signature and valid Standard Webhooks headers; a retry
// carries the same webhook-id (the messageId) and its own timestamp; the
// endpoint beside it without signing gets X-Signature alone; and the
// signing secret shows nowhere the service prints or serves.
func TestStandardSigningEndToEnd(t *testing.T) {
	t.Parallel()
	c := webhooktest.NewClock(t0)
	signed, plain := newHook(t, 500, 200), newHook(t)
	var logs syncbuf.Buffer
	cfg := serve.Config{
		Addr:       "127.0.0.1:0",
		Store:      "sqlite://" + filepath.Join(t.TempDir(), "evfwd.db"),
		AdminToken: "admin-token-0123456789",
		Sources: []serve.Source{
			{Name: "web", WriteKey: "wk_web", Webhooks: serve.Webhooks{Enabled: true, Destination: webhook.Destination{
				SharedSecret: secret,
				Endpoints:    []webhook.Endpoint{{URL: signed.URL, Signing: webhook.SigningStandard, SigningSecret: signingSecret, Headers: map[string]string{"X-Env": "test"}}},
			}}},
			{Name: "app", WriteKey: "wk_app", Webhooks: serve.Webhooks{Enabled: true, Destination: webhook.Destination{
				SharedSecret: secret, Endpoints: []webhook.Endpoint{{URL: plain.URL}},
			}}},
		},
	}
	if err := cfg.Check(); err != nil {
		t.Fatal(err)
	}
	h := run(t, cfg, serve.Options{
		Now: c.Now, Poll: 5 * time.Millisecond, Policy: webhook.Policy{Initial: time.Minute, Jitter: -1},
		Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	for _, key := range []string{"wk_web", "wk_app"} {
		if code, body := h.post(t, "/v1/track", key, `{"userId":"u_42","event":"Signed","messageId":"m-standard-1"}`); code != 200 {
			t.Fatalf("%d %s", code, body)
		}
	}
	var d store.Delivery
	waitFor(t, "the first delivery on record", func() bool {
		ds := deliveries(t, h, store.Filter{Source: "web"})
		if len(ds) == 1 {
			d = ds[0]
		}
		return d.Attempts == 1
	})
	c.Set(d.NextAttempt)
	waitFor(t, "delivered", func() bool { return len(deliveries(t, h, store.Filter{Status: store.Delivered})) == 2 })

	got := signed.Requests()
	if len(got) != 2 {
		t.Fatalf("signed endpoint got %d requests, want 2", len(got))
	}
	for i, r := range got {
		at := t0.Add(time.Duration(i) * time.Minute)
		if r.Header.Get("X-Signature") != sign(r.Body) {
			t.Errorf("attempt %d: X-Signature %s, independent HMAC %s", i+1, r.Header.Get("X-Signature"), sign(r.Body))
		}
		res, err := signature.VerifyFields(signature.Standard, r.Header, r.Body, signature.Options{Secrets: [][]byte{[]byte(signingSecret)}, Now: at})
		if err != nil || !res.Valid {
			t.Errorf("attempt %d: standard webhooks: %v %s; headers %v", i+1, err, res.Message(), r.Header)
		}
		if id := r.Header.Get("Webhook-Id"); id != "m-standard-1" {
			t.Errorf("attempt %d: webhook-id %q, want the messageId", i+1, id)
		}
		if ts := r.Header.Get("Webhook-Timestamp"); ts != strconv.FormatInt(at.Unix(), 10) {
			t.Errorf("attempt %d: webhook-timestamp %s, want the attempt's %d", i+1, ts, at.Unix())
		}
		if r.Header.Get("X-Env") != "test" {
			t.Errorf("attempt %d: static header lost", i+1)
		}
	}
	for _, r := range plain.Requests() {
		if r.Header.Get("X-Signature") != sign(r.Body) || r.Header.Get("Webhook-Signature") != "" || r.Header.Get("Webhook-Id") != "" {
			t.Errorf("endpoint without signing: headers %v", r.Header)
		}
	}

	// Nothing printed or served shows the signing secret.
	key := strings.TrimPrefix(signingSecret, "whsec_")
	masked := cfg.Masked()
	js, _ := json.Marshal(masked)
	raw, _ := json.Marshal(cfg)
	outputs := map[string]string{
		"Masked as JSON": string(js), "Masked with %+v": fmt.Sprintf("%+v", masked), "Config as JSON": string(raw),
		"logs": logs.String(), "metrics": get(t, h.url+"/metrics"),
		"admin deletion": adminDeletion(t, h.url, cfg.AdminToken),
	}
	if !strings.Contains(string(js), `"signing":"standard"`) {
		t.Errorf("Masked JSON hides that the endpoint signs: %s", js)
	}
	for what, out := range outputs {
		if strings.Contains(out, key) {
			t.Errorf("%s shows the signing secret:\n%s", what, out)
		}
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// adminDeletion is what the admin API answers for a deletion request and
// its status, the views it has of a source's webhooks.
func adminDeletion(t *testing.T, url, token string) string {
	t.Helper()
	c := &admin.Client{Endpoint: url, Token: token}
	d, err := c.CreateDeletion(context.Background(), "u_gone", nil)
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.Deletion(context.Background(), d.ID)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal([]*admin.Deletion{d, again})
	return string(b)
}

// TestSigningConfigErrors: a wrong signing setting is a config error
// naming the source, the endpoint's index and its URL.
func TestSigningConfigErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		ep   webhook.Endpoint
		want string
	}{
		{"no secret", webhook.Endpoint{URL: "https://h.example/a", Signing: "standard"},
			`source "web": webhooks: endpoints[0] (https://h.example/a): signing: standard needs a signing_secret (whsec_ followed by base64)`},
		{"bad secret", webhook.Endpoint{URL: "https://h.example/a", Signing: "standard", SigningSecret: "whsec_!!!!!!!!!!!!"},
			`source "web": webhooks: endpoints[0] (https://h.example/a): signing_secret: a standard webhooks secret is whsec_ followed by base64 (as Svix shows it): got a secret of 18 characters (whsec_ and what follows is not base64)`},
		{"unknown", webhook.Endpoint{URL: "https://h.example/a", Signing: "hmac"},
			`source "web": webhooks: endpoints[0] (https://h.example/a): signing "hmac": only standard is supported (or leave it out for X-Signature alone)`},
		{"reserved header", webhook.Endpoint{URL: "https://h.example/a", Signing: "standard", SigningSecret: signingSecret, Headers: map[string]string{"Webhook-Timestamp": "0"}},
			`source "web": webhooks: endpoints[0] (https://h.example/a): header "Webhook-Timestamp": set by the sender, it cannot be configured`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := serve.Config{Sources: []serve.Source{{Name: "web", WriteKey: "k", Webhooks: serve.Webhooks{Enabled: true,
				Destination: webhook.Destination{SharedSecret: secret, Endpoints: []webhook.Endpoint{tt.ep}}}}}}
			err := cfg.Validate()
			if err == nil || err.Error() != tt.want {
				t.Errorf("got  %v\nwant %s", err, tt.want)
			}
			if err != nil && strings.Contains(err.Error(), "!!!!") {
				t.Errorf("the error shows the secret: %v", err)
			}
		})
	}
}

// TestInitConfigSigningExample: the commented signing example of `serve
// init`, uncommented, reads as an endpoint that signs and passes Check.
func TestInitConfigSigningExample(t *testing.T) {
	t.Parallel()
	_, config := serve.InitConfig()
	text := strings.Replace(string(config), "# signing: standard", "signing: standard", 1)
	text = strings.Replace(text, "# signing_secret:", "signing_secret:", 1)
	if text == string(config) {
		t.Fatal("no signing example in the init config")
	}
	path := filepath.Join(t.TempDir(), "evfwd.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	file, err := cli.LoadConfig(path, true)
	if err != nil {
		t.Fatal(err)
	}
	var cfg serve.Config
	if err := file.Viper().UnmarshalKey("sources", &cfg.Sources); err != nil {
		t.Fatal(err)
	}
	cfg.Store = "sqlite://" + filepath.Join(t.TempDir(), "evfwd.db")
	if err := cfg.Check(); err != nil {
		t.Fatal(err)
	}
	ep := cfg.Sources[0].Webhooks.Endpoints[0]
	if ep.Signing != webhook.SigningStandard || !strings.HasPrefix(ep.SigningSecret, "whsec_") {
		t.Errorf("endpoint %+v, want signing standard with a whsec_ secret", ep)
	}
}
