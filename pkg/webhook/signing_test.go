package webhook

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/evfwd/evfwd/internal/webhooktest"
	"github.com/evfwd/evfwd/pkg/signature"
)

// standardSecret is a Standard Webhooks secret as Svix shows one.
var standardSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("a standard webhooks test key!"))

// stepClock is a clock that moves on by step at each reading.
type stepClock struct {
	mu   sync.Mutex
	t    time.Time
	step time.Duration
}

func (c *stepClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.t
	c.t = c.t.Add(c.step)
	return t
}

// verify checks a received request under scheme s with secrets, judged at
// the attempt's start.
func verify(t *testing.T, s signature.Scheme, r webhooktest.Request, at time.Time, secrets ...string) {
	t.Helper()
	var keys [][]byte
	for _, k := range secrets {
		keys = append(keys, []byte(k))
	}
	res, err := signature.VerifyFields(s, r.Header, r.Body, signature.Options{Secrets: keys, Now: at})
	if err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	if !res.Valid {
		t.Errorf("%s: %s (%s); headers %v", s, res.Reason, res.Message(), r.Header)
	}
}

// TestStandardSigningBesideXSignature: an endpoint with signing standard
// gets X-Signature and the three Standard Webhooks headers, each valid; a
// retry carries the same webhook-id and its own timestamp, and the
// endpoint without signing gets X-Signature alone.
func TestStandardSigningBesideXSignature(t *testing.T) {
	plain := newHook(t, status(500))
	signed := newHook(t, status(503), status(200))
	clk := &stepClock{t: time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC), step: 90 * time.Second}
	s := newSender(t, Options{Now: clk.now})
	d := &Destination{SharedSecret: "s3cr3t", Endpoints: []Endpoint{
		{URL: plain.URL},
		{URL: signed.URL, Signing: SigningStandard, SigningSecret: standardSecret, Headers: map[string]string{"X-Tenant": "acme"}},
	}}
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	fast := Policy{Initial: time.Millisecond, Max: time.Millisecond, Jitter: -1}
	var starts []time.Time
	res, n := s.RetryMessage(context.Background(), d, []byte(testBody), "m-42", fast, func(a Attempt) {
		if a.Endpoint == 1 {
			starts = append(starts, a.Start)
		}
	})
	if !res.Delivered() || n != 2 {
		t.Fatalf("outcome %v after %d deliveries, want delivered after 2", res.Outcome, n)
	}
	for _, r := range plain.Requests() {
		if r.Header.Get(signature.Header) == "" {
			t.Errorf("plain endpoint: no X-Signature")
		}
		for _, name := range signature.Standard.Headers() {
			if _, ok := r.Header[name]; ok {
				t.Errorf("plain endpoint got %s", name)
			}
		}
	}
	got := signed.Requests()
	if len(got) != 2 || len(starts) != 2 {
		t.Fatalf("signed endpoint got %d requests, %d attempts seen; want 2", len(got), len(starts))
	}
	for i, r := range got {
		for _, name := range []string{"X-Signature", "Webhook-Id", "Webhook-Timestamp", "Webhook-Signature"} {
			if r.Header.Get(name) == "" {
				t.Errorf("attempt %d: no %s header", i+1, name)
			}
		}
		if r.Header.Get("X-Tenant") != "acme" {
			t.Errorf("attempt %d: static header lost: %v", i+1, r.Header)
		}
		verify(t, signature.Standard, r, starts[i], standardSecret)
		verify(t, signature.Segment, r, starts[i], "s3cr3t")
		if ts := r.Header.Get("Webhook-Timestamp"); ts != strconv.FormatInt(starts[i].Unix(), 10) {
			t.Errorf("attempt %d: webhook-timestamp %s, want the attempt's start %d", i+1, ts, starts[i].Unix())
		}
	}
	if a, b := got[0].Header.Get("Webhook-Id"), got[1].Header.Get("Webhook-Id"); a != "m-42" || b != a {
		t.Errorf("webhook-id %q then %q, want m-42 both times", a, b)
	}
	if a, b := got[0].Header.Get("Webhook-Timestamp"), got[1].Header.Get("Webhook-Timestamp"); a == b {
		t.Errorf("the retry has the first attempt's timestamp %s", a)
	}
}

// TestStandardSigningIDAcrossURLs: one delivery's URLs share a webhook-id,
// made up when the caller gives none, and a messageId a header cannot
// carry is sent as a stable digest.
func TestStandardSigningIDAcrossURLs(t *testing.T) {
	e1, e2 := newHook(t, status(500)), newHook(t, status(200))
	d := &Destination{Endpoints: []Endpoint{
		{URL: e1.URL, Signing: SigningStandard, SigningSecret: standardSecret},
		{URL: e2.URL, Signing: SigningStandard, SigningSecret: standardSecret},
	}}
	s := newSender(t, Options{})
	for _, tt := range []struct{ id, want string }{
		{"", ""},
		{"9a8b7c6d-5e4f", "9a8b7c6d-5e4f"},
		{"two words\n", signature.MessageID("two words\n")},
	} {
		before := len(e1.Requests())
		s.DeliverMessage(context.Background(), d, []byte(testBody), tt.id, nil)
		a, b := e1.Requests()[before].Header.Get("Webhook-Id"), e2.Requests()[before].Header.Get("Webhook-Id")
		switch {
		case a != b:
			t.Errorf("id %q: webhook-id %q at the first URL, %q at the second", tt.id, a, b)
		case tt.want == "" && !strings.HasPrefix(a, "msg_"):
			t.Errorf("no id: webhook-id %q, want a fresh msg_ one", a)
		case tt.want != "" && a != tt.want:
			t.Errorf("id %q: webhook-id %q, want %q", tt.id, a, tt.want)
		}
		verify(t, signature.Standard, e2.Requests()[before], time.Now(), standardSecret)
	}
	if got := signature.MessageID("two words\n"); !strings.HasPrefix(got, "msg_") || got != signature.MessageID("two words\n") || strings.ContainsAny(got, " \n") {
		t.Errorf("webhookID of an id with spaces = %q, want a stable msg_ token", got)
	}
	if a, b := signature.MessageID(""), signature.MessageID(""); a == b {
		t.Errorf("two fresh webhook-ids are both %q", a)
	}
}

// TestDestinationSchemes: trigger's Destination.Scheme signs each vendor's
// way, verified by pkg/signature, with every secret where the scheme
// carries several.
func TestDestinationSchemes(t *testing.T) {
	for _, tt := range []struct {
		scheme  signature.Scheme
		secrets []string
	}{
		{signature.Stripe, []string{"sk_one", "sk_two"}},
		{signature.GitHub, []string{"gh-secret"}},
		{signature.Slack, []string{"slack-secret"}},
		{signature.Shopify, []string{"shop-secret"}},
		{signature.Standard, []string{standardSecret, "whsec_" + base64.StdEncoding.EncodeToString([]byte("the next key"))}},
	} {
		t.Run(string(tt.scheme), func(t *testing.T) {
			h := newHook(t, status(500), status(200))
			d := &Destination{Scheme: tt.scheme, SharedSecret: tt.secrets[0], ExtraSecrets: tt.secrets[1:], Endpoints: []Endpoint{{URL: h.URL}}}
			if err := d.Validate(); err != nil {
				t.Fatal(err)
			}
			var starts []time.Time
			fast := Policy{Initial: time.Millisecond, Max: time.Millisecond, Jitter: -1}
			res, _ := newSender(t, Options{}).Retry(context.Background(), d, []byte(testBody), fast, func(a Attempt) { starts = append(starts, a.Start) })
			if !res.Delivered() {
				t.Fatalf("outcome %v", res.Outcome)
			}
			got := h.Requests()
			for i, r := range got {
				if r.Header.Get(signature.Header) != "" {
					t.Errorf("%s also sent X-Signature", tt.scheme)
				}
				for _, secret := range tt.secrets {
					verify(t, tt.scheme, r, starts[i], secret) // each secret alone verifies
				}
			}
			if tt.scheme == signature.Standard && got[0].Header.Get("Webhook-Id") != got[1].Header.Get("Webhook-Id") {
				t.Errorf("retry changed webhook-id: %q, %q", got[0].Header.Get("Webhook-Id"), got[1].Header.Get("Webhook-Id"))
			}
		})
	}
}

func TestDestinationValidateSigning(t *testing.T) {
	const u = "https://h.example"
	ep := func(signing, secret string, headers ...string) Endpoint {
		e := Endpoint{URL: u, Signing: signing, SigningSecret: secret}
		for i := 0; i+1 < len(headers); i += 2 {
			if e.Headers == nil {
				e.Headers = map[string]string{}
			}
			e.Headers[headers[i]] = headers[i+1]
		}
		return e
	}
	one := func(e Endpoint) []Endpoint { return []Endpoint{e} }
	tests := []struct {
		name string
		dest Destination
		want string
	}{
		{"standard", Destination{SharedSecret: "s", Endpoints: one(ep("standard", standardSecret))}, ""},
		{"standard without shared secret", Destination{Endpoints: one(ep("standard", standardSecret))}, ""},
		{"webhook headers free without signing", Destination{Endpoints: one(ep("", "", "Webhook-Id", "x"))}, ""},
		{"no secret", Destination{Endpoints: one(ep("standard", ""))},
			"endpoints[0] (https://h.example): signing: standard needs a signing_secret (whsec_ followed by base64)"},
		{"bad secret", Destination{Endpoints: one(ep("standard", "whsec_not base64!"))},
			`endpoints[0] (https://h.example): signing_secret: a standard webhooks secret is whsec_ followed by base64 (as Svix shows it): got a secret of 17 characters (whsec_ and what follows is not base64)`},
		{"secret without signing", Destination{Endpoints: one(ep("", standardSecret))},
			"endpoints[0] (https://h.example): signing_secret is set but signing is not: add signing: standard"},
		{"unknown signing", Destination{Endpoints: []Endpoint{{URL: "http://a.example"}, ep("stripe", "x")}},
			`endpoints[1] (https://h.example): signing "stripe": only standard is supported (or leave it out for X-Signature alone)`},
		{"reserved headers", Destination{Endpoints: one(ep("standard", standardSecret, "webhook-id", "1", "Webhook-Timestamp", "2", "WEBHOOK-SIGNATURE", "3", "X-Ok", "4"))},
			strings.Join([]string{
				`endpoints[0] (https://h.example): header "WEBHOOK-SIGNATURE": set by the sender, it cannot be configured`,
				`endpoints[0] (https://h.example): header "Webhook-Timestamp": set by the sender, it cannot be configured`,
				`endpoints[0] (https://h.example): header "webhook-id": set by the sender, it cannot be configured`,
			}, "\n")},
		{"svix names reserved", Destination{Endpoints: one(ep("standard", standardSecret, "svix-id", "1"))},
			`endpoints[0] (https://h.example): header "svix-id": set by the sender, it cannot be configured`},
		{"scheme headers reserved", Destination{Scheme: signature.Stripe, SharedSecret: "s", Endpoints: one(ep("", "", "stripe-signature", "x"))},
			`endpoints[0] (https://h.example): header "stripe-signature": set by the sender, it cannot be configured`},
		{"scheme and signing both standard", Destination{Scheme: signature.Standard, SharedSecret: standardSecret, Endpoints: one(ep("standard", standardSecret))},
			"endpoints[0] (https://h.example): signing: standard: the destination's scheme already sends Standard Webhooks headers"},
		{"scheme without secret", Destination{Scheme: signature.GitHub, Endpoints: one(ep("", ""))},
			"endpoints: scheme github signs with a shared secret: none is set"},
		{"one-signature scheme, two secrets", Destination{Scheme: signature.GitHub, SharedSecret: "a", ExtraSecrets: []string{"b"}, Endpoints: one(ep("", ""))},
			"endpoints: a github signature carries one MAC: give one secret, not 2"},
		{"segment, two secrets", Destination{SharedSecret: "a", ExtraSecrets: []string{"b"}, Endpoints: one(ep("", ""))},
			"endpoints: an X-Signature carries one signature: give one shared secret, not 2"},
		{"unknown scheme", Destination{Scheme: "svix", SharedSecret: "a", Endpoints: one(ep("", ""))},
			`endpoints: unknown signature scheme "svix" (one of standard, stripe, slack, github, shopify, segment)`},
		{"bad standard scheme secret", Destination{Scheme: signature.Standard, SharedSecret: "plain", Endpoints: one(ep("", ""))},
			`endpoints: a standard webhooks secret is whsec_ followed by base64 (as Svix shows it): got a secret of 5 characters (no whsec_ prefix)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ""
			if err := tt.dest.Validate(); err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

// TestSigningSecretNeverMarshaled: the signing secret, like the shared
// one, stays out of JSON.
func TestSigningSecretNeverMarshaled(t *testing.T) {
	d := Destination{SharedSecret: "s3cr3t", Endpoints: []Endpoint{{URL: "https://h.example", Signing: SigningStandard, SigningSecret: standardSecret}}}
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "whsec_") || strings.Contains(string(b), "s3cr3t") || !strings.Contains(string(b), `"signing":"standard"`) {
		t.Errorf("JSON %s", b)
	}
}

// BenchmarkDeliverStandard is BenchmarkDeliver with signing: standard on
// the endpoint: what the Standard Webhooks headers cost an attempt.
func BenchmarkDeliverStandard(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
	}))
	defer srv.Close()
	s := newSender(b, Options{})
	d := &Destination{SharedSecret: "s3cr3t", Endpoints: []Endpoint{{URL: srv.URL + "/hook", Headers: map[string]string{"X-Tenant": "acme"},
		Signing: SigningStandard, SigningSecret: standardSecret}}}
	body := []byte(testBody)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if res := s.DeliverMessage(context.Background(), d, body, "m-42", nil); !res.Delivered() {
				b.Errorf("not delivered: %v", res.Last().Err)
			}
		}
	})
}
