package receiver

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/evfwd/evfwd/pkg/signature"
)

const trackBody = `{"type":"track","version":1,"userId":"u_42","event":"Order Completed","messageId":"m1","timestamp":"2024-05-01T12:00:00.123Z"}`

var secret = []byte("s3cret")

// serve starts a Handler on a real loopback server and collects reports.
type served struct {
	*httptest.Server
	h    *Handler
	mu   sync.Mutex
	reqs []*Request
}

func serve(t *testing.T, opts Options) *served {
	t.Helper()
	s := &served{}
	opts.OnRequest = func(r *Request) {
		s.mu.Lock()
		s.reqs = append(s.reqs, r)
		s.mu.Unlock()
	}
	h, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	s.h = h
	s.Server = httptest.NewServer(h)
	t.Cleanup(func() { s.Close(); h.Close() })
	return s
}

func (s *served) last() *Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reqs[len(s.reqs)-1]
}

// post sends body with the given X-Signature ("" for none) and returns
// the status; the report is in place when it returns.
func (s *served) post(t *testing.T, path, body, sig string) int {
	t.Helper()
	return post(t, http.DefaultClient, s.URL+path, body, sig)
}

// post sends body to url with the given X-Signature ("" for none) and
// returns the status.
func post(t *testing.T, client *http.Client, url, body, sig string) int {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if sig != "" {
		req.Header.Set(signature.Header, sig)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func TestSignatureVerdicts(t *testing.T) {
	good := signature.Sign(secret, []byte(trackBody))
	seg := signature.Segment
	tests := []struct {
		name          string
		secret        []byte
		acceptInvalid bool
		body, sig     string
		wantStatus    int
		want          Signature
	}{
		{"signed", secret, false, trackBody, good, 200, Signature{Verdict: SigValid, Scheme: seg, Reason: "ok"}},
		{"uppercase hex", secret, false, trackBody, strings.ToUpper(good), 200, Signature{Verdict: SigValid, Scheme: seg, Reason: "ok"}},
		{"unsigned", secret, false, trackBody, "", 401, Signature{Verdict: SigInvalid, Scheme: signature.Auto, Reason: "missing"}},
		{"tampered", secret, false, strings.Replace(trackBody, "u_42", "u_43", 1), good, 401, Signature{Verdict: SigInvalid, Scheme: seg, Reason: "mismatch"}},
		{"wrong secret", secret, false, trackBody, signature.Sign([]byte("other"), []byte(trackBody)), 401, Signature{Verdict: SigInvalid, Scheme: seg, Reason: "mismatch"}},
		{"malformed", secret, false, trackBody, "xyz", 401, Signature{Verdict: SigInvalid, Scheme: seg, Reason: "malformed"}},
		{"trailing newline", secret, false, trackBody + "\n", good, 401, Signature{Verdict: SigInvalid, Scheme: seg, Reason: "trailing_newline"}},
		{"accept invalid", secret, true, trackBody, "", 200, Signature{Verdict: SigInvalid, Scheme: signature.Auto, Reason: "missing"}},
		{"no secret", nil, false, trackBody, good, 200, Signature{Verdict: SigUnchecked}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := Options{AcceptInvalid: tt.acceptInvalid}
			if tt.secret != nil {
				opts.Secrets = [][]byte{tt.secret}
			}
			s := serve(t, opts)
			status := s.post(t, "/hooks", tt.body, tt.sig)
			if diff := cmp.Diff(tt.wantStatus, status); diff != "" {
				t.Errorf("status mismatch (-want +got):\n%s", diff)
			}
			r := s.last()
			if (r.Signature.Message != "") != (tt.want.Verdict == SigInvalid) {
				t.Errorf("message %q for a %s verdict", r.Signature.Message, r.Signature.Verdict)
			}
			if diff := cmp.Diff(tt.want, r.Signature, cmpopts.IgnoreFields(Signature{}, "Message")); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
			if r.Status != status {
				t.Errorf("reported status %d, answered %d", r.Status, status)
			}
		})
	}
}

func TestReportFields(t *testing.T) {
	clock := time.Date(2024, 5, 1, 12, 0, 5, 123e6, time.UTC)
	s := serve(t, Options{Now: func() time.Time { return clock }})
	s.post(t, "/hooks", trackBody, "")
	s.post(t, "/hooks", trackBody, "")
	s.post(t, "/hooks", `{"type":"track","version":1,"userId":"u"}`, "")
	type summary struct {
		Type, Event, UserID, MessageID string
		Shape                          Shape
		Duplicate                      bool
		Size                           int
	}
	var got []summary
	for _, r := range s.reqs {
		got = append(got, summary{r.Type, r.Event, r.UserID, r.MessageID, r.Shape, r.Duplicate, r.Size})
	}
	want := []summary{
		{"track", "Order Completed", "u_42", "m1", Shape{OK: true}, false, len(trackBody)},
		{"track", "Order Completed", "u_42", "m1", Shape{OK: true}, true, len(trackBody)},
		{"track", "", "u", "", Shape{Reason: "missing timestamp"}, false, 41},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

func TestDedupWindowIsBounded(t *testing.T) {
	d := newDedup[string](2)
	var got []bool
	for _, id := range []string{"a", "b", "a", "c", "a", "a"} {
		got = append(got, d.check(id))
	}
	// "a" is forgotten once two newer ids have arrived.
	want := []bool{false, false, true, false, false, true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
	if len(d.seen) > 2 {
		t.Errorf("remembers %d ids, want at most 2", len(d.seen))
	}
}

func TestSimulation(t *testing.T) {
	rolls := []float64{0.9, 0.1, 0.5, 0.29}
	tests := []struct {
		name string
		sim  Simulation
		want []int
	}{
		{"none", Simulation{}, []int{200, 200, 200, 200}},
		{"status", Simulation{Status: 503}, []int{503, 503, 503, 503}},
		{"respond", Simulation{Respond: []int{500, 500, 200}}, []int{500, 500, 200, 200}},
		{"fail rate", Simulation{FailRate: 0.3}, []int{200, 500, 200, 500}},
		{"fail rate status", Simulation{FailRate: 0.3, FailStatus: 429, Status: 202}, []int{202, 429, 202, 429}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			i := 0
			tt.sim.Rand = func() float64 { i++; return rolls[i-1] }
			s := serve(t, Options{Simulate: tt.sim})
			var got []int
			for range rolls {
				got = append(got, s.post(t, "/", trackBody, ""))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSimulatedDelay(t *testing.T) {
	const delay = 30 * time.Millisecond
	s := serve(t, Options{Simulate: Simulation{Delay: delay}})
	start := time.Now()
	s.post(t, "/", trackBody, "")
	if got := time.Since(start); got < delay {
		t.Errorf("answered after %v, want at least %v", got, delay)
	}
	if got := s.last().Latency; got < delay {
		t.Errorf("reported latency %v, want at least %v", got, delay)
	}
}

func TestPathFilter(t *testing.T) {
	s := serve(t, Options{Path: "hooks"})
	got := []int{s.post(t, "/hooks", trackBody, ""), s.post(t, "/other", trackBody, "")}
	if diff := cmp.Diff([]int{200, 404}, got); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

func TestBodyTooLarge(t *testing.T) {
	s := serve(t, Options{MaxBodyBytes: 10})
	if got := s.post(t, "/", trackBody, ""); got != 413 {
		t.Errorf("status %d, want 413", got)
	}
}

func TestForward(t *testing.T) {
	var got struct {
		method, path, sig, ua string
		body                  []byte
	}
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.method, got.path = r.Method, r.URL.Path
		got.sig, got.ua = r.Header.Get(signature.Header), r.Header.Get("User-Agent")
		got.body, _ = io.ReadAll(r.Body)
		w.Header().Set("X-App", "yes")
		w.WriteHeader(202)
		io.WriteString(w, `{"received":true}`)
	}))
	defer app.Close()
	s := serve(t, Options{Secrets: [][]byte{secret}, ForwardTo: app.URL + "/webhook"})
	sig := signature.Sign(secret, []byte(trackBody))
	req, _ := http.NewRequest("PUT", s.URL+"/hooks", strings.NewReader(trackBody))
	req.Header.Set(signature.Header, sig)
	req.Header.Set("User-Agent", "evfwd-webhooks/test")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()

	if got.method != "PUT" || got.path != "/webhook" || got.sig != sig || got.ua != "evfwd-webhooks/test" || !bytes.Equal(got.body, []byte(trackBody)) {
		t.Errorf("app got %+v", got)
	}
	if resp.StatusCode != 202 || string(answer) != `{"received":true}` || resp.Header.Get("X-App") != "yes" {
		t.Errorf("sender got %d %q %v, want the app's answer", resp.StatusCode, answer, resp.Header)
	}
	fw := s.last().Forward
	if fw == nil || fw.Status != 202 || string(fw.Body) != `{"received":true}` || fw.Error != "" {
		t.Errorf("forward report %+v", fw)
	}
}

func TestForwardUnreachable(t *testing.T) {
	app := httptest.NewServer(http.NotFoundHandler())
	url := app.URL
	app.Close()
	s := serve(t, Options{ForwardTo: url})
	if got := s.post(t, "/", trackBody, ""); got != 502 {
		t.Errorf("status %d, want 502", got)
	}
	if fw := s.last().Forward; fw == nil || fw.Error == "" {
		t.Errorf("forward report %+v, want an error", fw)
	}
}

func TestConfigErrors(t *testing.T) {
	for name, opts := range map[string]Options{
		"status and respond":  {Simulate: Simulation{Status: 500, Respond: []int{200}}},
		"bad status":          {Simulate: Simulation{Status: 42}},
		"fail rate":           {Simulate: Simulation{FailRate: 1.5}},
		"forward with status": {ForwardTo: "http://x", Simulate: Simulation{Status: 500}},
		"forward not a URL":   {ForwardTo: "localhost:3000"},
		"unknown scheme":      {Secrets: [][]byte{secret}, Scheme: "svix"},
		"unusable secret":     {Secrets: [][]byte{[]byte("not base64!")}, Scheme: signature.Standard},
		"empty secret":        {Secrets: [][]byte{secret, {}}},
	} {
		if _, err := New(opts); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
	}
}

// A batching destination's body, a JSON array of messages, is checked
// message by message and counted, not flagged as not an object.
func TestReportBatch(t *testing.T) {
	s := serve(t, Options{})
	bad := `{"type":"track","version":1,"userId":"u"}`
	for _, body := range []string{
		"[" + trackBody + "," + trackBody + "]",
		"[" + trackBody + "," + bad + "]",
		`[{"id":"u1"}]`, // a mapped batch: objects, not messages
		`[1,2]`,         // not a batch of objects
		`[]`,
	} {
		s.post(t, "/hooks", body, "")
	}
	type summary struct {
		Batch int
		Shape Shape
	}
	var got []summary
	for _, r := range s.reqs {
		got = append(got, summary{r.Batch, r.Shape})
	}
	want := []summary{
		{2, Shape{OK: true}},
		{2, Shape{Reason: "message 2 of the batch: missing timestamp"}},
		{1, Shape{Reason: "message 1 of the batch: missing type"}},
		{0, Shape{Reason: "not a JSON object"}},
		{0, Shape{Reason: "not a JSON object"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}
