package receiver

import (
	"bytes"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/evfwd/evfwd/pkg/signature"
)

// signedAt is when the tests' requests are signed and, unless a test
// moves the clock, received.
var signedAt = time.Date(2024, 5, 1, 12, 0, 5, 0, time.UTC)

// schemeSecrets are a usable secret per scheme and another one: Standard
// Webhooks' are whsec_ and base64.
var schemeSecrets = map[signature.Scheme][2]string{
	signature.Segment:  {"s3cret", "0ld-s3cret"},
	signature.GitHub:   {"gh-s3cret", "gh-0ld"},
	signature.Stripe:   {"whsec_stripe", "whsec_stripe_old"},
	signature.Standard: {"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_c2Vjb25kLXNlY3JldC1rZXk="},
	signature.Slack:    {"8f742231b10e8888abcd99yyyzzz85a5", "slack-0ld"},
	signature.Shopify:  {"shpss_new", "shpss_old"},
}

func signed(t *testing.T, s signature.Scheme, secret, body string, p signature.Params) []signature.Field {
	t.Helper()
	if p.Timestamp.IsZero() {
		p.Timestamp = signedAt
	}
	fs, err := signature.SignFields(s, [][]byte{[]byte(secret)}, []byte(body), p)
	if err != nil {
		t.Fatal(err)
	}
	return fs
}

// postFields sends body with the header lines fs and returns the status
// and the answer's text.
func (s *served) postFields(t *testing.T, body string, fs []signature.Field) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", s.URL+"/hooks", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for _, f := range fs {
		req.Header.Add(f.Name, f.Value)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	text, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(text)
}

// svixNames renames Standard Webhooks' headers as Svix sends them.
func svixNames(fs []signature.Field) []signature.Field {
	out := slices.Clone(fs)
	for i := range out {
		out[i].Name = strings.Replace(out[i].Name, "Webhook-", "Svix-", 1)
	}
	return out
}

func at(tm time.Time) func() time.Time { return func() time.Time { return tm } }

func TestEveryScheme(t *testing.T) {
	tampered := strings.Replace(trackBody, "u_42", "u_43", 1)
	for _, sch := range signature.Schemes {
		sec := schemeSecrets[sch]
		fs := signed(t, sch, sec[0], trackBody, signature.Params{})
		for _, tt := range []struct {
			name       string
			scheme     signature.Scheme
			secrets    []string
			body       string
			wantStatus int
			want       Signature
		}{
			{"right secret", sch, sec[:1], trackBody, 200, Signature{Verdict: SigValid, Scheme: sch, Reason: "ok"}},
			{"second of two", sch, []string{sec[1], sec[0]}, trackBody, 200, Signature{Verdict: SigValid, Scheme: sch, Reason: "ok", Secret: 2}},
			{"auto", signature.Auto, sec[:1], trackBody, 200, Signature{Verdict: SigValid, Scheme: sch, Reason: "ok"}},
			{"default is auto", "", []string{sec[1], sec[0]}, trackBody, 200, Signature{Verdict: SigValid, Scheme: sch, Reason: "ok", Secret: 2}},
			{"tampered", sch, sec[:1], tampered, 401, Signature{Verdict: SigInvalid, Scheme: sch, Reason: "mismatch"}},
			{"tampered auto", signature.Auto, sec[:1], tampered, 401, Signature{Verdict: SigInvalid, Scheme: sch, Reason: "mismatch"}},
			{"trailing newline", sch, sec[:1], trackBody + "\n", 401, Signature{Verdict: SigInvalid, Scheme: sch, Reason: "trailing_newline"}},
			{"wrong secret", sch, sec[1:], trackBody, 401, Signature{Verdict: SigInvalid, Scheme: sch, Reason: "mismatch"}},
		} {
			t.Run(string(sch)+"/"+tt.name, func(t *testing.T) {
				opts := Options{Scheme: tt.scheme, Now: at(signedAt)}
				for _, k := range tt.secrets {
					opts.Secrets = append(opts.Secrets, []byte(k))
				}
				s := serve(t, opts)
				status, text := s.postFields(t, tt.body, fs)
				got := s.last().Signature
				if status != tt.wantStatus {
					t.Errorf("status %d (%q), want %d", status, text, tt.wantStatus)
				}
				if (got.Message != "") != (got.Verdict == SigInvalid) {
					t.Errorf("message %q for a %s verdict", got.Message, got.Verdict)
				}
				if status == 401 && !strings.Contains(text, string(tt.want.Reason)) {
					t.Errorf("401 answer %q does not give the reason", text)
				}
				got.Message = ""
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("mismatch (-want +got):\n%s", diff)
				}
			})
		}
	}
}

// Another scheme's signature under a fixed scheme says so.
func TestSchemeMismatch(t *testing.T) {
	s := serve(t, Options{Secrets: [][]byte{[]byte("whsec_stripe")}, Scheme: signature.Stripe, Now: at(signedAt)})
	status, _ := s.postFields(t, trackBody, signed(t, signature.GitHub, "whsec_stripe", trackBody, signature.Params{}))
	if got := s.last().Signature; status != 401 || got.Reason != signature.ReasonScheme || got.Scheme != signature.Stripe {
		t.Errorf("%d %+v, want 401 scheme", status, got)
	}
}

// Timestamps are judged at the request's arrival, by the Handler's clock.
func TestSignatureTolerance(t *testing.T) {
	for _, tt := range []struct {
		name      string
		arrival   time.Time
		tolerance time.Duration
		status    int
		reason    signature.Reason
	}{
		{"within", signedAt.Add(4 * time.Minute), 0, 200, "ok"},
		{"expired", signedAt.Add(6 * time.Minute), 0, 401, "expired"},
		{"future", signedAt.Add(-6 * time.Minute), 0, 401, "future"},
		{"wider tolerance", signedAt.Add(6 * time.Minute), 10 * time.Minute, 200, "ok"},
		{"no limit", signedAt.Add(1000 * time.Hour), -1, 200, "ok"},
	} {
		for _, sch := range []signature.Scheme{signature.Stripe, signature.Standard, signature.Slack} {
			if tt.reason == signature.ReasonFuture && sch != signature.Standard {
				continue // Stripe's and Slack's owners refuse only old timestamps: pkg/signature's call
			}
			t.Run(tt.name+"/"+string(sch), func(t *testing.T) {
				sec := schemeSecrets[sch][0]
				s := serve(t, Options{Secrets: [][]byte{[]byte(sec)}, Tolerance: tt.tolerance, Now: at(tt.arrival)})
				status, _ := s.postFields(t, trackBody, signed(t, sch, sec, trackBody, signature.Params{}))
				if got := s.last().Signature; status != tt.status || got.Reason != tt.reason || got.Scheme != sch {
					t.Errorf("%d %+v, want %d %s", status, got, tt.status, tt.reason)
				}
			})
		}
	}
	// A scheme that signs no timestamp has no tolerance.
	s := serve(t, Options{Secrets: [][]byte{secret}, Now: at(signedAt.Add(1000 * time.Hour))})
	if got := s.post(t, "/hooks", trackBody, signature.Sign(secret, []byte(trackBody))); got != 200 {
		t.Errorf("segment: status %d", got)
	}
}

func TestReplay(t *testing.T) {
	type step struct {
		fields     []signature.Field
		body       string
		wantStatus int
		wantReplay bool
	}
	std, stripe, seg := schemeSecrets[signature.Standard][0], schemeSecrets[signature.Stripe][0], schemeSecrets[signature.Segment][0]
	stdFirst := signed(t, signature.Standard, std, trackBody, signature.Params{ID: "msg_1"})
	stripeFirst := signed(t, signature.Stripe, stripe, trackBody, signature.Params{})
	segFirst := signed(t, signature.Segment, seg, trackBody, signature.Params{})
	tests := []struct {
		name  string
		steps []step
	}{
		{"standard webhooks id", []step{
			{stdFirst, trackBody, 200, false},
			{stdFirst, trackBody, 200, true},
			// The same id signed again a second later (a retry): still a replay.
			{signed(t, signature.Standard, std, trackBody, signature.Params{ID: "msg_1", Timestamp: signedAt.Add(time.Second)}), trackBody, 200, true},
			{signed(t, signature.Standard, std, trackBody, signature.Params{ID: "msg_2"}), trackBody, 200, false},
		}},
		{"stripe timestamp and signature", []step{
			{stripeFirst, trackBody, 200, false},
			{stripeFirst, trackBody, 200, true},
			{signed(t, signature.Stripe, stripe, trackBody, signature.Params{Timestamp: signedAt.Add(time.Second)}), trackBody, 200, false},
		}},
		{"segment signature", []step{
			{segFirst, trackBody, 200, false},
			{segFirst, trackBody, 200, true},
			// The same MAC in capitals is the same message.
			{[]signature.Field{{Name: signature.Header, Value: strings.ToUpper(segFirst[0].Value)}}, trackBody, 200, true},
		}},
		{"stripe with an item added", []step{
			{stripeFirst, trackBody, 200, false},
			{[]signature.Field{{Name: signature.HeaderStripe, Value: stripeFirst[0].Value + ",v0=x"}}, trackBody, 200, true},
		}},
		{"svix header names", []step{
			{svixNames(stdFirst), trackBody, 200, false},
			{svixNames(signed(t, signature.Standard, std, trackBody, signature.Params{ID: "msg_2"})), trackBody, 200, false},
			{svixNames(stdFirst), trackBody, 200, true},
		}},
		{"forged ones are not", []step{
			{stdFirst, "{}", 401, false},
			{stdFirst, "{}", 401, false},
			{stdFirst, trackBody, 200, false},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var file bytes.Buffer
			s := serve(t, Options{Secrets: [][]byte{[]byte(std), []byte(stripe), []byte(seg)}, Now: at(signedAt), Record: &file})
			for i, st := range tt.steps {
				status, _ := s.postFields(t, st.body, st.fields)
				if r := s.last(); status != st.wantStatus || r.Replay != st.wantReplay {
					t.Errorf("request %d: %d replay=%v (%+v), want %d replay=%v", i+1, status, r.Replay, r.Signature, st.wantStatus, st.wantReplay)
				}
			}
			if err := s.h.Flush(); err != nil {
				t.Fatal(err)
			}
			// Records carry the verdict and the replay flag, and read back.
			i := 0
			for rec, err := range ReadRecords(&file) {
				if err != nil {
					t.Fatal(err)
				}
				r := s.reqs[i]
				if rec.Replay != r.Replay || rec.Signature != r.Signature {
					t.Errorf("record %d: %+v replay=%v, reported %+v replay=%v", i+1, rec.Signature, rec.Replay, r.Signature, r.Replay)
				}
				i++
			}
			if i != len(tt.steps) {
				t.Errorf("%d records, want %d", i, len(tt.steps))
			}
		})
	}
}

// The replay memory is bounded by DedupWindow, as the messageId one is.
func TestReplayWindow(t *testing.T) {
	s := serve(t, Options{Secrets: [][]byte{secret}, DedupWindow: 1})
	a, b := `{"a":1}`, `{"b":1}`
	var got []bool
	for _, body := range []string{a, a, b, a} {
		s.post(t, "/hooks", body, signature.Sign(secret, []byte(body)))
		got = append(got, s.last().Replay)
	}
	if diff := cmp.Diff([]bool{false, true, false, false}, got); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

// fastSegment's verdict is VerifyFields's, secret position included.
func TestFastSegmentAgrees(t *testing.T) {
	secrets := [][]byte{[]byte("a"), secret}
	for _, scheme := range []signature.Scheme{signature.Segment, signature.Auto} {
		h, err := New(Options{Secrets: secrets, Scheme: scheme})
		if err != nil {
			t.Fatal(err)
		}
		for _, body := range []string{"", trackBody, trackBody + "\n"} {
			hdr := http.Header{signature.Header: {strings.ToUpper(signature.Sign(secret, []byte(body)))}}
			fast, ok := h.fastSegment(hdr, []byte(body), 0)
			if !ok {
				t.Fatalf("%s, %q: fast path not taken", scheme, body)
			}
			want, err := signature.VerifyFields(scheme, hdr, []byte(body), signature.Options{Secrets: secrets})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, fast); diff != "" {
				t.Errorf("%s, %q: mismatch (-VerifyFields +fast):\n%s", scheme, body, diff)
			}
		}
		// Another scheme's signature beside it: Auto's to sort out.
		for _, other := range signature.Schemes {
			if other == signature.Segment {
				continue
			}
			hdr := http.Header{signature.Header: {signature.Sign(secret, nil)}}
			for _, f := range signed(t, other, schemeSecrets[other][0], "", signature.Params{}) {
				hdr.Add(f.Name, f.Value)
			}
			if other == signature.Standard { // under Svix's names too
				for _, n := range []string{"Id", "Timestamp", "Signature"} {
					hdr["Svix-"+n] = hdr["Webhook-"+n]
				}
			}
			for name := range hdr {
				only := http.Header{signature.Header: hdr[signature.Header], name: hdr[name]}
				if len(signature.Detect(only)) < 2 {
					continue // not a signature header
				}
				if _, ok := h.fastSegment(only, nil, 0); ok == (scheme == signature.Auto) {
					t.Errorf("%s: fast path taken=%v beside %s", scheme, ok, name)
				}
			}
		}
		h.Close()
	}
}
