package signature

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

var (
	at     = time.Unix(1_700_000_000, 0)
	atOpts = func(secrets ...string) Options {
		o := Options{Now: at}
		for _, s := range secrets {
			o.Secrets = append(o.Secrets, []byte(s))
		}
		return o
	}
	// secretFor is a usable secret for each scheme: Standard Webhooks'
	// must be whsec_ and base64.
	secretFor = map[Scheme][2]string{
		Segment:  {"s3cret", "n3w-s3cret"},
		GitHub:   {"s3cret", "n3w-s3cret"},
		Stripe:   {"whsec_stripe_old", "whsec_stripe_new"},
		Standard: {"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_c2Vjb25kLXNlY3JldC1rZXk="},
		Slack:    {"8f742231b10e8888abcd99yyyzzz85a5", "another-slack-secret"},
		Shopify:  {"shpss_old", "shpss_new"},
	}
)

func header(fs []Field) http.Header {
	h := http.Header{}
	for _, f := range fs {
		h.Add(f.Name, f.Value)
	}
	return h
}

func sign(t *testing.T, s Scheme, body string, secrets ...string) http.Header {
	t.Helper()
	var keys [][]byte
	for _, k := range secrets {
		keys = append(keys, []byte(k))
	}
	fs, err := SignFields(s, keys, []byte(body), Params{Timestamp: at, ID: "msg_test"})
	if err != nil {
		t.Fatal(err)
	}
	return header(fs)
}

func verifyT(t *testing.T, s Scheme, h http.Header, body string, opts Options) Result {
	t.Helper()
	r, err := VerifyFields(s, h, []byte(body), opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// The owners' published examples, and values their libraries made
// (testdata/vectors.json names the source of each).
func TestOwnersVectors(t *testing.T) {
	raw, err := os.ReadFile("testdata/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var vectors []struct {
		Scheme                   Scheme
		Source, Secret, ID, Body string
		Timestamp                int64
		Signature                string
	}
	if err := json.Unmarshal(raw, &vectors); err != nil {
		t.Fatal(err)
	}
	seen := map[Scheme]bool{}
	for _, v := range vectors {
		seen[v.Scheme] = true
		t.Run(string(v.Scheme)+" "+v.Source, func(t *testing.T) {
			h := HeaderOf(v.Scheme, v.Signature, strconv.FormatInt(v.Timestamp, 10), v.ID)
			r := verifyT(t, v.Scheme, h, v.Body, Options{Secrets: [][]byte{[]byte(v.Secret)}, Tolerance: -1})
			if !r.Valid {
				t.Fatalf("%s: %s", r.Reason, r.Message())
			}
			// Signing the same inputs gives the owner's value.
			fs, err := SignFields(v.Scheme, [][]byte{[]byte(v.Secret)}, []byte(v.Body), Params{Timestamp: time.Unix(v.Timestamp, 0), ID: v.ID})
			if err != nil {
				t.Fatal(err)
			}
			var signed []string
			for _, f := range fs {
				signed = append(signed, f.Value)
			}
			if !slices.Contains(signed, v.Signature) {
				t.Errorf("signed %q, the owner's value is %q", signed, v.Signature)
			}
		})
	}
	for _, s := range Schemes {
		if !seen[s] {
			t.Errorf("no vector for %s", s)
		}
	}
}

func TestRoundTripEveryScheme(t *testing.T) {
	bodies := []string{"", "{}", `{"type":"track","event":"Café ☕"}`, "line\n", strings.Repeat("x", 300<<10)}
	for _, s := range Schemes {
		sec := secretFor[s]
		for _, body := range bodies {
			h := sign(t, s, body, sec[0])
			if r := verifyT(t, s, h, body, atOpts(sec[0])); !r.Valid || r.Secret != 1 || r.Scheme != s {
				t.Errorf("%s, %d bytes: %+v %s", s, len(body), r, r.Message())
			}
			if r := verifyT(t, Auto, h, body, atOpts(sec[0])); !r.Valid || r.Scheme != s {
				t.Errorf("%s by auto: %+v", s, r)
			}
			if r := verifyT(t, s, h, body+"x", atOpts(sec[0])); r.Valid || r.Reason != ReasonMismatch {
				t.Errorf("%s, changed body: %+v", s, r)
			}
			// Streaming byte by byte gives the same verdicts.
			c, _ := NewCheck(s, h, atOpts(sec[0]))
			if _, err := bytes.NewReader(nil).WriteTo(c); err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(c, iotest.OneByteReader(strings.NewReader(body))); err != nil {
				t.Fatal(err)
			}
			if r := c.Result(); !r.Valid || r.Bytes != int64(len(body)) {
				t.Errorf("%s streamed: %+v", s, r)
			}
		}
	}
}

func TestSecretRotation(t *testing.T) {
	body := `{"type":"identify"}`
	for _, s := range Schemes {
		sec := secretFor[s]
		// Verifying: any configured secret verifies, and the verdict says which.
		h := sign(t, s, body, sec[1])
		r := verifyT(t, s, h, body, atOpts(sec[0], sec[1]))
		if !r.Valid || r.Secret != 2 || r.Secrets != 2 {
			t.Errorf("%s: %+v", s, r)
		}
		if !strings.Contains(r.Message(), "secret 2 of 2") {
			t.Errorf("%s: message %q does not say which secret", s, r.Message())
		}
		if strings.Contains(r.Message(), sec[1]) {
			t.Errorf("%s: message shows the secret", s)
		}
		// Signing with two: the schemes that carry several signatures
		// carry both, and each secret alone verifies.
		keys := [][]byte{[]byte(sec[0]), []byte(sec[1])}
		fs, err := SignFields(s, keys, []byte(body), Params{Timestamp: at})
		if !specs[s].multi {
			if err == nil {
				t.Errorf("%s signed with two secrets: %v", s, fs)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range sec {
			if r := verifyT(t, s, header(fs), body, atOpts(k)); !r.Valid {
				t.Errorf("%s two signatures, secret %q alone: %+v", s, k, r)
			}
		}
	}
}

func TestReasons(t *testing.T) {
	body := `{"type":"track"}`
	stripe := sign(t, Stripe, body, "k")
	standard := sign(t, Standard, body, secretFor[Standard][0])
	shopifyHex := func() http.Header {
		fs, _ := SignFields(Segment, [][]byte{[]byte("k")}, []byte(body), Params{})
		_ = fs
		raw := hex.EncodeToString(mac(t, Shopify, "k", body))
		return http.Header{HeaderShopify: {raw}}
	}()
	with := func(h http.Header, k, v string) http.Header {
		h = h.Clone()
		h.Set(k, v)
		return h
	}
	for _, tt := range []struct {
		name   string
		scheme Scheme
		h      http.Header
		body   string
		opts   Options
		want   Reason
		msg    string // a part of the message
	}{
		{"no header", Segment, http.Header{}, body, atOpts("k"), ReasonMissing, "the request has no X-Signature header"},
		{"empty header", Slack, http.Header{HeaderSlack: {""}}, body, atOpts("k"), ReasonMissing, "empty"},
		{"auto, nothing", Auto, http.Header{"X-Other": {"1"}}, body, atOpts("k"), ReasonMissing, "any known scheme"},
		{"another scheme's header", Segment, stripe, body, atOpts("k"), ReasonScheme, "signed with the stripe scheme"},
		{"stripe without t", Stripe, http.Header{HeaderStripe: {"v1=" + strings.Repeat("a", 64)}}, body, atOpts("k"), ReasonMalformed, "no t= timestamp"},
		{"stripe without v1", Stripe, http.Header{HeaderStripe: {"t=1,v0=" + strings.Repeat("a", 64)}}, body, atOpts("k"), ReasonMalformed, "no v1= signature"},
		{"stripe, short", Stripe, http.Header{HeaderStripe: {"t=1,v1=abc"}}, body, atOpts("k"), ReasonMalformed, "64 hex digits (got 3"},
		{"slack, no timestamp", Slack, http.Header{HeaderSlack: {"v0=" + strings.Repeat("a", 64)}}, body, atOpts("k"), ReasonMalformed, "X-Slack-Request-Timestamp: no timestamp"},
		{"standard, no id", Standard, with(standard, HeaderStandardID, ""), body, atOpts(secretFor[Standard][0]), ReasonMalformed, "no Webhook-Id header"},
		{"standard, other id", Standard, with(standard, HeaderStandardID, "msg_other"), body, atOpts(secretFor[Standard][0]), ReasonMismatch, "the timestamp or the id is not the one"},
		{"github without prefix", GitHub, http.Header{HeaderGitHub: {strings.Repeat("a", 64)}}, body, atOpts("k"), ReasonMalformed, `does not start with "sha256="`},
		{"segment, wrong length", Segment, http.Header{Header: {"abc"}}, body, atOpts("k"), ReasonMalformed, "not 40 hex digits (got 3 characters)"},
		{"hex where base64 is expected", Shopify, shopifyHex, body, atOpts("k"), ReasonEncoding, "hex where the shopify scheme sends base64 (read that way it matches"},
		{"trailing newline", Stripe, stripe, body + "\n", atOpts("k"), ReasonTrailingNewline, "ends with a newline"},
		{"trailing CRLF", Standard, standard, body + "\r\n", atOpts(secretFor[Standard][0]), ReasonTrailingNewline, "newline"},
		{"expired", Stripe, stripe, body, Options{Secrets: [][]byte{[]byte("k")}, Now: at.Add(5*time.Minute + time.Second)}, ReasonExpired, "signed 5 minutes ago, over the 5m0s tolerance"},
		{"future", Standard, standard, body, Options{Secrets: [][]byte{[]byte(secretFor[Standard][0])}, Now: at.Add(-10 * time.Minute), Tolerance: time.Minute}, ReasonFuture, "its timestamp is in 10 minutes, over the 1m0s tolerance"},
		// Stripe's and Slack's libraries accept a timestamp ahead of their clock.
		{"stripe ahead", Stripe, stripe, body, Options{Secrets: [][]byte{[]byte("k")}, Now: at.Add(-10 * time.Minute)}, ReasonOK, "valid"},
		{"slack ahead", Slack, sign(t, Slack, body, "k"), body, Options{Secrets: [][]byte{[]byte("k")}, Now: at.Add(-10 * time.Minute)}, ReasonOK, "valid"},
		{"svix header names", Standard, http.Header{"Svix-Id": standard[HeaderStandardID], "Svix-Timestamp": standard[HeaderStandardTime], "Svix-Signature": standard[HeaderStandard]},
			body, atOpts(secretFor[Standard][0]), ReasonOK, "valid"},
		{"svix header names, auto", Auto, http.Header{"Svix-Id": standard[HeaderStandardID], "Svix-Timestamp": standard[HeaderStandardTime], "Svix-Signature": standard[HeaderStandard]},
			body, atOpts(secretFor[Standard][0]), ReasonOK, "valid"},
		{"tolerance off", Stripe, stripe, body, Options{Secrets: [][]byte{[]byte("k")}, Now: at.Add(1000 * time.Hour), Tolerance: -1}, ReasonOK, "valid"},
		{"wrong secret of two", GitHub, sign(t, GitHub, body, "k"), body, atOpts("a", "b"), ReasonMismatch, "none of the 2 secrets"},
		{"github legacy sha1 only", GitHub, http.Header{HeaderGitHubSHA1: {sign(t, GitHub, body, "k").Get(HeaderGitHubSHA1)}}, body, atOpts("k"), ReasonOK, "valid"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := verifyT(t, tt.scheme, tt.h, tt.body, tt.opts)
			if r.Reason != tt.want || r.Valid != (tt.want == ReasonOK) {
				t.Fatalf("reason %s (valid %v), want %s: %s", r.Reason, r.Valid, tt.want, r.Message())
			}
			if !strings.Contains(r.Message(), tt.msg) {
				t.Errorf("message %q does not say %q", r.Message(), tt.msg)
			}
		})
	}
}

func mac(t *testing.T, s Scheme, secret, body string) []byte {
	t.Helper()
	g, err := NewSigner(s, [][]byte{[]byte(secret)}, Params{Timestamp: at, ID: "msg_test"})
	if err != nil {
		t.Fatal(err)
	}
	g.Write([]byte(body))
	return g.macs[0].Sum(nil)
}

func TestHeaderOfBareValues(t *testing.T) {
	body := "{}"
	for _, s := range Schemes {
		sec := secretFor[s][0]
		g, _ := NewSigner(s, [][]byte{[]byte(sec)}, Params{Timestamp: at, ID: "msg_1"})
		g.Write([]byte(body))
		bare := specs[s].enc.encode(g.macs[0].Sum(nil))
		h := HeaderOf(s, bare, strconv.FormatInt(at.Unix(), 10), "msg_1")
		if r := verifyT(t, s, h, body, atOpts(sec)); !r.Valid {
			t.Errorf("%s from a bare %q: %s (%v)", s, bare, r.Message(), h)
		}
	}
	legacy := sign(t, GitHub, body, "k").Get(HeaderGitHubSHA1)
	if r := verifyT(t, GitHub, HeaderOf(GitHub, strings.TrimPrefix(legacy, "sha1="), "", ""), body, atOpts("k")); !r.Valid {
		t.Errorf("github sha1 from a bare value: %s", r.Message())
	}
}

func TestKeyStandard(t *testing.T) {
	if _, err := Key(Standard, []byte("whsec_not base64!")); err == nil || strings.Contains(err.Error(), "base64!") {
		t.Errorf("bad secret: %v (it must be refused without its value)", err)
	}
	a, _ := Key(Standard, []byte("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"))
	b, _ := Key(Standard, []byte("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"))
	if !bytes.Equal(a, b) || len(a) != 24 {
		t.Errorf("the whsec_ prefix is optional: %x, %x", a, b)
	}
	if _, err := NewCheck(Standard, http.Header{}, atOpts("whsec_!!")); err == nil {
		t.Error("NewCheck took a secret it cannot use")
	}
	if _, err := NewCheck(Stripe, http.Header{}, Options{}); err != ErrNoSecret {
		t.Errorf("no secret: %v", err)
	}
}

func TestParseScheme(t *testing.T) {
	if s, err := ParseScheme(" Stripe ", false); s != Stripe || err != nil {
		t.Errorf("%q, %v", s, err)
	}
	if _, err := ParseScheme("auto", false); err == nil {
		t.Error("auto where it is not allowed")
	}
	if _, err := ParseScheme("svix", true); err == nil || !strings.Contains(err.Error(), "standard") {
		t.Errorf("unknown scheme: %v", err)
	}
}

func TestNewMessageID(t *testing.T) {
	a, b := NewMessageID(), NewMessageID()
	if a == b || !strings.HasPrefix(a, "msg_") || len(a) != 30 {
		t.Errorf("%q, %q", a, b)
	}
}

func TestAutoSkipsSecretsASchemeCannotUse(t *testing.T) {
	body := "{}"
	whsec := secretFor[Standard][0]
	h := sign(t, Standard, body, whsec)
	// The segment secret first: not base64, so standard skips it, and the
	// whsec_ one still counts as the second.
	r := verifyT(t, Auto, h, body, atOpts("plain secret!", whsec))
	if !r.Valid || r.Secret != 2 {
		t.Errorf("%+v %s", r, r.Message())
	}
	r = verifyT(t, Auto, h, body, atOpts("plain secret!"))
	if r.Valid || r.Reason != ReasonMismatch || !strings.Contains(r.Message(), "no secret given is a standard secret") {
		t.Errorf("%+v %s", r, r.Message())
	}
	// A request carrying two schemes (serve's X-Signature next to Standard
	// Webhooks): either secret verifies it.
	both := h.Clone()
	for _, f := range must(SignFields(Segment, [][]byte{[]byte("seg")}, []byte(body), Params{})) {
		both.Set(f.Name, f.Value)
	}
	if r := verifyT(t, Auto, both, body, atOpts("seg")); !r.Valid || r.Scheme != Segment {
		t.Errorf("segment secret on a request with both: %+v", r)
	}
	if r := verifyT(t, Auto, both, body, atOpts(whsec)); !r.Valid || r.Scheme != Standard {
		t.Errorf("whsec secret on a request with both: %+v", r)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestSchemeOfValue(t *testing.T) {
	for _, s := range Schemes {
		v := sign(t, s, "{}", secretFor[s][0]).Get(specs[s].header)
		if got, ok := SchemeOfValue(v); !ok || got != s {
			t.Errorf("%s value %q: %q, %v", s, v, got, ok)
		}
	}
	if s, ok := SchemeOfValue(strings.Repeat("a", 64)); ok {
		t.Errorf("bare SHA-256 hex told as %s", s)
	}
}

// Found in review: what the owners' libraries do with odd headers.
func TestOwnersEdges(t *testing.T) {
	body := `{"type":"track"}`
	stripe := sign(t, Stripe, body, "k")
	std := sign(t, Standard, body, secretFor[Standard][0])
	gh := sign(t, GitHub, body, "k")
	hexMAC := hex.EncodeToString(mac(t, Stripe, "k", body))
	b64 := strings.Repeat("A", 43) + "="
	stdOpts := atOpts(secretFor[Standard][0])
	for _, tt := range []struct {
		name   string
		scheme Scheme
		h      http.Header
		opts   Options
		want   Reason
	}{
		{"stripe: a bad v1 beside a good one", Stripe, http.Header{HeaderStripe: {stripe.Get(HeaderStripe) + ",v1=zzz"}}, atOpts("k"), ReasonOK},
		{"stripe: a base64 v1 beside a good one", Stripe, http.Header{HeaderStripe: {stripe.Get(HeaderStripe) + ",v1=" + b64}}, atOpts("k"), ReasonOK},
		{"stripe: ' v1' is another key", Stripe, http.Header{HeaderStripe: {"t=" + strconv.FormatInt(at.Unix(), 10) + ", v1=" + hexMAC}}, atOpts("k"), ReasonMalformed},
		{"standard: a short v1 beside a good one", Standard, func() http.Header {
			h := std.Clone()
			h.Set(HeaderStandard, "v1,abc "+std.Get(HeaderStandard)+" v1a,xyz")
			return h
		}(), stdOpts, ReasonOK},
		{"github: upper-case hex", GitHub, http.Header{HeaderGitHub: {"sha256=" + strings.ToUpper(strings.TrimPrefix(gh.Get(HeaderGitHub), "sha256="))}}, atOpts("k"), ReasonEncoding},
		{"segment: upper-case hex is the spec's", Segment, http.Header{Header: {strings.ToUpper(Sign([]byte("k"), []byte(body)))}}, atOpts("k"), ReasonOK},
		{"standard: 300 years ahead", Standard, func() http.Header {
			fs := must(SignFields(Standard, [][]byte{[]byte(secretFor[Standard][0])}, []byte(body), Params{Timestamp: at.AddDate(300, 0, 0), ID: "msg_1"}))
			return header(fs)
		}(), stdOpts, ReasonFuture},
		{"stripe: 30,000 years old", Stripe, func() http.Header {
			fs := must(SignFields(Stripe, [][]byte{[]byte("k")}, []byte(body), Params{Timestamp: time.Unix(1, 0)}))
			return header(fs)
		}(), Options{Secrets: [][]byte{[]byte("k")}, Now: time.Unix(MaxTimestamp, 0)}, ReasonExpired},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := verifyT(t, tt.scheme, tt.h, body, tt.opts)
			if r.Reason != tt.want {
				t.Errorf("%s, want %s: %s", r.Reason, tt.want, r.Message())
			}
			if r.Reason == ReasonEncoding && (!r.WouldMatch || !strings.Contains(r.Message(), "upper-case hex")) {
				t.Errorf("encoding verdict: %s", r.Message())
			}
		})
	}
}

func TestMessageOfAnyResult(t *testing.T) {
	for _, r := range []Result{{Reason: ReasonScheme}, {Scheme: Auto, Reason: ReasonMissing}, {Reason: ReasonEncoding}, {Scheme: Stripe, Reason: ReasonScheme, Other: "x"}, {}} {
		if r.Message() == "" {
			t.Errorf("%+v: empty message", r)
		}
	}
}

func TestSecretsNeverInErrors(t *testing.T) {
	for _, secret := range []string{"hunter2-topsecret-value", "whsec_hunter2!!"} {
		err := CheckSecrets(Standard, [][]byte{[]byte("whsec_b2xk"), []byte(secret)})
		if err == nil || strings.Contains(err.Error(), "hunter") || !strings.HasPrefix(err.Error(), "secret 2: ") {
			t.Errorf("%q: %v", secret, err)
		}
	}
}

func TestSignerLimits(t *testing.T) {
	k := [][]byte{[]byte(secretFor[Standard][0])}
	if _, err := NewSigner(Stripe, k, Params{Timestamp: time.Unix(MaxTimestamp+1, 0)}); err == nil {
		t.Error("a timestamp Check would call malformed")
	}
	if _, err := NewSigner(Standard, k, Params{ID: "a\nX-Evil: 1"}); err == nil {
		t.Error("an id that would inject a header line")
	}
	if id := MessageID("order 42"); !strings.HasPrefix(id, "msg_") || id != MessageID("order 42") || MessageID("ok_1") != "ok_1" {
		t.Errorf("MessageID: %q", id)
	}
}

func TestSignedPrefix(t *testing.T) {
	for _, tc := range []struct {
		s    Scheme
		want string
	}{
		{Segment, ""},
		{GitHub, ""},
		{Shopify, ""},
		{Stripe, "1700000000."},
		{Standard, "msg_1.1700000000."},
		{Slack, "v0:1700000000:"},
		{Auto, ""},
	} {
		if got := tc.s.SignedPrefix(1700000000, "msg_1"); got != tc.want {
			t.Errorf("%s: SignedPrefix = %q, want %q", tc.s, got, tc.want)
		}
	}
}
