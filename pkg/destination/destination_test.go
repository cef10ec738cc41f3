package destination

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/evfwd/evfwd/pkg/signature"
	"github.com/evfwd/evfwd/pkg/webhook"
)

func eps(urls ...string) []webhook.Endpoint {
	var out []webhook.Endpoint
	for _, u := range urls {
		out = append(out, webhook.Endpoint{URL: u})
	}
	return out
}

func TestCompileRefusesWithReasons(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    Config
		want string
	}{
		{"no name", Config{Endpoints: eps("https://a.example")}, "destinations[3]: name: required"},
		{"bad name", Config{Name: "a b", Endpoints: eps("https://a.example")}, `name: "a b": use letters`},
		{"no endpoint", Config{Name: "x"}, `destination "x": endpoints: at least one webhook URL is required`},
		{"method", Config{Name: "x", Endpoints: eps("https://a.example"), Method: "get"}, `method "GET": want POST, PUT or PATCH`},
		{"batch size", Config{Name: "x", Endpoints: eps("https://a.example"), Batch: BatchConfig{Size: 5000}}, "batch.size: 5000"},
		{"max bytes alone", Config{Name: "x", Endpoints: eps("https://a.example"), Batch: BatchConfig{MaxBytes: 10}}, "batch.max_bytes: set without batch.size"},
		{"burst alone", Config{Name: "x", Endpoints: eps("https://a.example"), RateLimit: RateConfig{Burst: 3}}, "rate_limit.burst: set without rate_limit.per_second"},
		{"negative rate", Config{Name: "x", Endpoints: eps("https://a.example"), RateLimit: RateConfig{PerSecond: -1}}, "rate_limit.per_second"},
		{"two secrets", Config{Name: "x", Endpoints: eps("https://a.example"), SharedSecret: "a", SharedSecrets: []string{"b"}}, "give one of them"},
		{"scheme", Config{Name: "x", Endpoints: eps("https://a.example"), Scheme: "nope", SharedSecret: "s"}, "scheme"},
		{"metadata", Config{Name: "x", Endpoints: eps("http://169.254.169.254/")}, "169.254.169.254"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compile("web", 3, tc.c, false)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Compile: %v, want an error with %q", err, tc.want)
			}
			var de *Error
			if !errors.As(err, &de) || de.Index != 3 {
				t.Errorf("error %v is not an *Error for destinations[3]", err)
			}
		})
	}
}

func TestCompileDefaultsAndMerges(t *testing.T) {
	c := Config{Name: "x", Endpoints: []webhook.Endpoint{{URL: "https://a.example", Headers: map[string]string{"X-Team": "mine"}}, {URL: "https://b.example"}},
		Headers: map[string]string{"X-Team": "all", "Authorization": "Bearer t"}, Method: "patch",
		Batch: BatchConfig{Size: 10}, RateLimit: RateConfig{PerSecond: 5}}
	d, err := Compile("web", 0, c, false)
	if err != nil {
		t.Fatal(err)
	}
	if d.Webhook.Method != "PATCH" || d.Batch.MaxBytes != DefaultBatchBytes || d.Rate.Burst != 1 || !d.Batching() {
		t.Errorf("compiled %+v", d)
	}
	if h := d.Webhook.Endpoints[0].Headers; h["X-Team"] != "mine" || h["Authorization"] != "Bearer t" {
		t.Errorf("endpoint 0 headers %v: its own win, the destination's are added", h)
	}
	if h := d.Webhook.Endpoints[1].Headers; h["X-Team"] != "all" {
		t.Errorf("endpoint 1 headers %v", h)
	}
	if c.Endpoints[0].Headers["Authorization"] != "" {
		t.Error("Compile changed its config's endpoint headers")
	}
}

// During a rotation the first secret signs; a scheme that carries several
// signatures (Standard Webhooks) sends both, an X-Signature only the new.
func TestSecretRotation(t *testing.T) {
	std, err := Compile("web", 0, Config{Name: "x", Endpoints: eps("https://a.example"), Scheme: "standard",
		SharedSecrets: []string{"whsec_bmV3LXNlY3JldC1uZXctc2VjcmV0", "whsec_b2xkLXNlY3JldC1vbGQtc2VjcmV0"}}, false)
	if err != nil {
		t.Fatal(err)
	}
	if std.Webhook.Scheme != signature.Standard || std.Webhook.SharedSecret != "whsec_bmV3LXNlY3JldC1uZXctc2VjcmV0" ||
		!slices.Equal(std.Webhook.ExtraSecrets, []string{"whsec_b2xkLXNlY3JldC1vbGQtc2VjcmV0"}) {
		t.Errorf("standard: %+v", std.Webhook)
	}
	seg, err := Compile("web", 0, Config{Name: "x", Endpoints: eps("https://a.example"), SharedSecrets: []string{"new", "old"}}, false)
	if err != nil {
		t.Fatal(err)
	}
	if seg.Webhook.SharedSecret != "new" || len(seg.Webhook.ExtraSecrets) != 0 {
		t.Errorf("segment: %+v", seg.Webhook)
	}
}

func TestBatchIDStable(t *testing.T) {
	a, b := BatchID([]string{"m1", "m2"}), BatchID([]string{"m1", "m2"})
	if a != b || a == BatchID([]string{"m2", "m1"}) || a == BatchID([]string{"m1m2"}) || !strings.HasPrefix(a, "batch_") {
		t.Errorf("BatchID: %s %s", a, b)
	}
}

func TestSame(t *testing.T) {
	c := Config{Name: "x", Endpoints: eps("https://a.example"), Subscribe: `type = "track"`}
	d1, _ := Compile("web", 0, c, false)
	d2, _ := Compile("web", 0, c, false)
	c.Subscribe = `type = "page"`
	d3, _ := Compile("web", 0, c, false)
	if !d1.Same(d2) || d1.Same(d3) {
		t.Error("Same: want equal settings same, changed ones not")
	}
}
