package webhook

import (
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/evfwd/evfwd/internal/webhooktest"
	"github.com/google/go-cmp/cmp"
)

// newHook is a receiver that answers with replies, one per request, the
// last repeating.
func newHook(t *testing.T, replies ...webhooktest.Reply) *webhooktest.Receiver {
	t.Helper()
	return webhooktest.New(t, webhooktest.Script(replies...))
}

// status is an answer with code, headers as name, value pairs, and the
// status text for a body.
func status(code int, hdr ...string) webhooktest.Reply {
	return webhooktest.Reply{Status: code, Header: hdr}
}

var (
	// stall answers only once the client gave up or the test ended: a
	// handler past the deadline without sleeping.
	stall = webhooktest.Reply{Hang: true}
	// reset drops the connection without answering.
	reset = webhooktest.Reply{Reset: true}
)

// refusedURL is an http URL on which nothing listens.
func refusedURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr + "/hook"
}

func newSender(t testing.TB, opts Options) *Sender {
	t.Helper()
	s, err := NewSender(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.CloseIdleConnections)
	return s
}

func dest(urls ...string) *Destination {
	d := &Destination{}
	for _, u := range urls {
		d.Endpoints = append(d.Endpoints, Endpoint{URL: u})
	}
	return d
}

const testBody = `{"type":"track","version":1,"userId":"u_42","event":"Order Completed","timestamp":"2024-05-01T12:00:03.000Z"}`

func TestDeliverHeaders(t *testing.T) {
	independentHMAC := func(secret, body string) string {
		m := hmac.New(sha1.New, []byte(secret))
		m.Write([]byte(body))
		return hex.EncodeToString(m.Sum(nil))
	}
	tests := []struct {
		name   string
		secret string
		static map[string]string
		want   http.Header
	}{
		{
			name:   "signed with static headers",
			secret: "s3cr3t",
			static: map[string]string{"authorization": "Bearer t0k", "X-Tenant": "acme"},
			want: http.Header{
				"Authorization":  {"Bearer t0k"},
				"X-Tenant":       {"acme"},
				"User-Agent":     {"evfwd-webhooks/1.2.3"},
				"Content-Type":   {"application/json"},
				"Content-Length": {strconv.Itoa(len(testBody))},
				"X-Signature":    {independentHMAC("s3cr3t", testBody)},
			},
		},
		{
			name: "no secret, no signature",
			want: http.Header{
				"User-Agent":     {"evfwd-webhooks/1.2.3"},
				"Content-Type":   {"application/json"},
				"Content-Length": {strconv.Itoa(len(testBody))},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHook(t, status(200))
			s := newSender(t, Options{UserAgent: UserAgent("1.2.3")})
			d := &Destination{SharedSecret: tt.secret, Endpoints: []Endpoint{{URL: h.URL + "/in", Headers: tt.static}}}
			res := s.Deliver(context.Background(), d, []byte(testBody))
			if !res.Delivered() {
				t.Fatalf("not delivered: %+v", res)
			}
			want := []webhooktest.Request{{Method: http.MethodPost, Path: "/in", Header: tt.want, Body: []byte(testBody)}}
			if diff := cmp.Diff(want, h.Requests()); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// summary is what the tests compare of an attempt: everything but times
// and error text.
type summary struct {
	Endpoint   int
	Status     int
	Class      Class
	Outcome    Outcome
	Then       Then
	Body       string
	RetryAfter time.Duration
}

func summarize(r Result) []summary {
	var out []summary
	for _, a := range r.Attempts {
		out = append(out, summary{a.Endpoint, a.Status, a.Class, a.Outcome, a.Then, string(a.Body), a.RetryAfter})
	}
	return out
}

func TestDeliverEndpointsInOrder(t *testing.T) {
	h := []*webhooktest.Receiver{newHook(t, status(500)), nil, newHook(t, status(200)), newHook(t, status(200)), newHook(t, status(200))}
	d := dest(h[0].URL, refusedURL(t), h[2].URL, h[3].URL, h[4].URL)
	var live []summary
	res := newSender(t, Options{}).DeliverFunc(context.Background(), d, []byte(testBody), func(a Attempt) {
		live = append(live, summarize(Result{Attempts: []Attempt{a}})...)
	})
	want := []summary{
		{Endpoint: 0, Status: 500, Class: ClassServerError, Outcome: Retryable, Then: ThenNextURL, Body: "Internal Server Error"},
		{Endpoint: 1, Class: ClassRefused, Outcome: Retryable, Then: ThenNextURL},
		{Endpoint: 2, Status: 200, Class: ClassOK, Outcome: Delivered, Then: ThenDone, Body: "OK"},
	}
	if diff := cmp.Diff(want, summarize(res)); diff != "" {
		t.Errorf("attempts mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, live); diff != "" {
		t.Errorf("live attempts mismatch (-want +got):\n%s", diff)
	}
	if res.Outcome != Delivered {
		t.Errorf("Outcome = %v, want delivered", res.Outcome)
	}
	if got := []int{h[0].Count(), h[2].Count(), h[3].Count(), h[4].Count()}; !cmp.Equal(got, []int{1, 1, 0, 0}) {
		t.Errorf("calls per endpoint = %v, want [1 1 0 0]", got)
	}
}

func TestDeliverClassifies(t *testing.T) {
	target := newHook(t, status(200))
	retryDate := time.Date(2024, 5, 1, 12, 2, 0, 0, time.UTC)
	now := func() time.Time { return time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC) }
	tests := []struct {
		name    string
		reply   webhooktest.Reply
		want    summary
		outcome Outcome
	}{
		{"200", status(200), summary{Status: 200, Class: ClassOK, Outcome: Delivered, Then: ThenDone, Body: "OK"}, Delivered},
		{"204", status(204), summary{Status: 204, Class: ClassOK, Outcome: Delivered, Then: ThenDone}, Delivered},
		{"redirect not followed", webhooktest.Reply{Handle: func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.URL, http.StatusFound)
		}}, summary{Status: 302, Class: ClassRedirect, Outcome: Final}, Final},
		{"404 final", status(404), summary{Status: 404, Class: ClassClientError, Outcome: Final, Body: "Not Found"}, Final},
		{"408 retryable", status(408), summary{Status: 408, Class: ClassRequestTimeout, Outcome: Retryable, Body: "Request Timeout"}, Retryable},
		{"429 with Retry-After seconds", status(429, "Retry-After", "30"), summary{Status: 429, Class: ClassTooManyRequests, Outcome: Retryable, Body: "Too Many Requests", RetryAfter: 30 * time.Second}, Retryable},
		{"503 with Retry-After date", status(503, "Retry-After", retryDate.Format(http.TimeFormat)), summary{Status: 503, Class: ClassServerError, Outcome: Retryable, Body: "Service Unavailable", RetryAfter: 2 * time.Minute}, Retryable},
		{"500 retryable", status(500), summary{Status: 500, Class: ClassServerError, Outcome: Retryable, Body: "Internal Server Error"}, Retryable},
		{"timeout", stall, summary{Class: ClassTimeout, Outcome: Retryable}, Retryable},
		{"connection reset", reset, summary{Class: ClassReset, Outcome: Retryable}, Retryable},
		{"long body excerpt", webhooktest.Reply{Handle: func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(400)
			w.Write(make([]byte, 5000))
		}}, summary{Status: 400, Class: ClassClientError, Outcome: Final, Body: string(make([]byte, ExcerptSize))}, Final},
	}
	s := newSender(t, Options{Timeout: 100 * time.Millisecond, Now: now})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHook(t, tt.reply)
			res := s.Deliver(context.Background(), dest(h.URL), []byte(testBody))
			if diff := cmp.Diff([]summary{tt.want}, summarize(res)); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
			if res.Outcome != tt.outcome {
				t.Errorf("Outcome = %v, want %v", res.Outcome, tt.outcome)
			}
		})
	}
	if n := target.Count(); n != 0 {
		t.Errorf("redirect target called %d times, want 0", n)
	}
}

func TestDefaultTimeout(t *testing.T) {
	if got := newSender(t, Options{}).Timeout(); got != 5*time.Second {
		t.Errorf("default Timeout = %v, want 5s", got)
	}
}

func TestDeliverInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	first := newHook(t, webhooktest.Reply{Handle: func(w http.ResponseWriter, r *http.Request) { cancel(); <-r.Context().Done() }})
	second := newHook(t, status(200))
	res := newSender(t, Options{}).Deliver(ctx, dest(first.URL, second.URL), []byte(testBody))
	want := []summary{{Class: ClassCanceled, Outcome: Interrupted, Then: ThenStop}}
	if diff := cmp.Diff(want, summarize(res)); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
	if res.Outcome != Interrupted || second.Count() != 0 {
		t.Errorf("Outcome = %v, second endpoint calls = %d; want interrupted, 0", res.Outcome, second.Count())
	}
}

// quiet keeps the TLS server's handshake-failure log out of test output.
func quiet(s *httptest.Server) *httptest.Server {
	s.Config.ErrorLog = log.New(io.Discard, "", 0)
	return s
}

func TestDeliverTLS(t *testing.T) {
	var served atomic.Int32
	ts := quiet(httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
	})))
	ts.StartTLS()
	t.Cleanup(ts.Close)

	caFile := filepath.Join(t.TempDir(), "ca.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw})
	if err := os.WriteFile(caFile, pemBytes, 0o600); err != nil {
		t.Fatal(err)
	}

	t.Run("self-signed is a TLS error and no request is written", func(t *testing.T) {
		plain := newHook(t, status(200))
		res := newSender(t, Options{}).Deliver(context.Background(), dest(ts.URL, plain.URL), []byte(testBody))
		want := []summary{
			{Class: ClassTLS, Outcome: TLSError, Then: ThenNextURL},
			{Endpoint: 1, Status: 200, Class: ClassOK, Outcome: Delivered, Then: ThenDone, Body: "OK"},
		}
		if diff := cmp.Diff(want, summarize(res)); diff != "" {
			t.Errorf("mismatch (-want +got):\n%s", diff)
		}
		if n := served.Load(); n != 0 {
			t.Errorf("TLS handler saw %d requests, want 0", n)
		}
		only := newSender(t, Options{}).Deliver(context.Background(), dest(ts.URL), []byte(testBody))
		if only.Outcome != TLSError || served.Load() != 0 {
			t.Errorf("Outcome = %v, served = %d; want tls_error, 0", only.Outcome, served.Load())
		}
	})
	t.Run("with the CA file it is delivered", func(t *testing.T) {
		s := newSender(t, Options{CAFile: caFile})
		res := s.Deliver(context.Background(), dest(ts.URL), []byte(testBody))
		if res.Outcome != Delivered || served.Load() != 1 {
			t.Errorf("Outcome = %v (%v), served = %d; want delivered, 1", res.Outcome, res.Last().Err, served.Load())
		}
	})
	t.Run("CA file errors", func(t *testing.T) {
		empty := filepath.Join(t.TempDir(), "empty.pem")
		os.WriteFile(empty, []byte("not pem"), 0o600)
		for _, f := range []string{empty, filepath.Join(t.TempDir(), "missing.pem")} {
			if _, err := NewSender(Options{CAFile: f}); err == nil {
				t.Errorf("NewSender(CAFile: %s) = nil error", f)
			}
		}
	})
}

func TestRetry(t *testing.T) {
	fast := Policy{Initial: time.Millisecond, Max: 4 * time.Millisecond, Jitter: -1}
	tests := []struct {
		name       string
		script     []webhooktest.Reply
		timeout    time.Duration
		wantThen   []Then
		wantClass  []Class
		outcome    Outcome
		deliveries int
	}{
		{"500,500,200", []webhooktest.Reply{status(500), status(500), status(200)}, 0,
			[]Then{ThenRetry, ThenRetry, ThenDone}, []Class{ClassServerError, ClassServerError, ClassOK}, Delivered, 3},
		{"404 not retried", []webhooktest.Reply{status(404), status(200)}, 0,
			[]Then{ThenGiveUp}, []Class{ClassClientError}, Final, 1},
		{"timeout then retried", []webhooktest.Reply{stall, status(200)}, 100 * time.Millisecond,
			[]Then{ThenRetry, ThenDone}, []Class{ClassTimeout, ClassOK}, Delivered, 2},
		{"reset then retried", []webhooktest.Reply{reset, status(201)}, 0,
			[]Then{ThenRetry, ThenDone}, []Class{ClassReset, ClassOK}, Delivered, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHook(t, tt.script...)
			s := newSender(t, Options{Timeout: tt.timeout})
			var then []Then
			var class []Class
			var deliveries []int
			res, n := s.Retry(context.Background(), dest(h.URL), []byte(testBody), fast, func(a Attempt) {
				then, class, deliveries = append(then, a.Then), append(class, a.Class), append(deliveries, a.Delivery)
			})
			if diff := cmp.Diff(tt.wantThen, then); diff != "" {
				t.Errorf("Then mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantClass, class); diff != "" {
				t.Errorf("Class mismatch (-want +got):\n%s", diff)
			}
			if res.Outcome != tt.outcome || n != tt.deliveries || h.Count() != tt.deliveries {
				t.Errorf("Outcome, deliveries, calls = %v, %d, %d; want %v, %d, %d", res.Outcome, n, h.Count(), tt.outcome, tt.deliveries, tt.deliveries)
			}
			if deliveries[len(deliveries)-1] != n {
				t.Errorf("last Attempt.Delivery = %d, want %d", deliveries[len(deliveries)-1], n)
			}
		})
	}
}

func TestRetryWindowGivesUp(t *testing.T) {
	h := newHook(t, status(503))
	// A window far longer than one attempt, even on a loaded machine.
	p := Policy{Initial: time.Millisecond, Window: 200 * time.Millisecond, Jitter: -1}
	res, n := newSender(t, Options{}).Retry(context.Background(), dest(h.URL), []byte(testBody), p, nil)
	if res.Outcome != Retryable || res.Last().Then != ThenGiveUp || n < 2 {
		t.Errorf("Outcome %v, Then %v after %d deliveries; want retryable, give_up, >= 2", res.Outcome, res.Last().Then, n)
	}
}

func TestDeliverConcurrent(t *testing.T) {
	h := newHook(t)
	s := newSender(t, Options{})
	d := &Destination{SharedSecret: "k", Endpoints: []Endpoint{{URL: h.URL}}}
	var wg sync.WaitGroup
	var failed atomic.Int64
	for range 16 {
		wg.Go(func() {
			for range 20 {
				if res := s.Deliver(context.Background(), d, []byte(testBody)); !res.Delivered() {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if failed.Load() != 0 || h.Count() != 320 {
		t.Errorf("failed %d, served %d; want 0, 320", failed.Load(), h.Count())
	}
}

func TestAttemptJSON(t *testing.T) {
	start := time.Date(2024, 5, 1, 12, 0, 0, 123_000_000, time.UTC)
	a := Attempt{
		Delivery: 2, Endpoint: 1, URL: "https://hooks.example/in", Start: start,
		Latency: 1234567 * time.Nanosecond, Status: 429, Class: ClassTooManyRequests,
		Body: []byte("slow down"), Outcome: Retryable, RetryAfter: 30 * time.Second,
		Then: ThenRetry, RetryAt: start.Add(30 * time.Second),
	}
	got, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"delivery":2,"endpoint":1,"url":"https://hooks.example/in","start":"2024-05-01T12:00:00.123Z","latencyMs":1.234,"status":429,"class":"http_429","body":"slow down","outcome":"retryable","retryAfterMs":30000,"then":"retry","retryAt":"2024-05-01T12:00:30.123Z"}`
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

func BenchmarkDeliver(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
	}))
	defer srv.Close()
	s := newSender(b, Options{})
	d := &Destination{SharedSecret: "s3cr3t", Endpoints: []Endpoint{{URL: srv.URL + "/hook", Headers: map[string]string{"X-Tenant": "acme"}}}}
	body := []byte(testBody)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if res := s.Deliver(context.Background(), d, body); !res.Delivered() {
				b.Errorf("not delivered: %v", res.Last().Err)
			}
		}
	})
}

// countingConn counts the writes made on a connection.
type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// TestDeliverWritesOnce: a webhook's request line, headers and body leave
// in one write, so in one TCP segment when they fit: a body net/http does
// not know to be in memory makes it flush the headers first.
func TestDeliverWritesOnce(t *testing.T) {
	h := newHook(t, status(200))
	s := newSender(t, Options{})
	var writes atomic.Int64
	dial := s.transport.DialContext
	s.transport.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countingConn{c, &writes}, nil
	}
	for i := range 3 {
		if res := s.Deliver(context.Background(), dest(h.URL), []byte(testBody)); !res.Delivered() {
			t.Fatalf("delivery %d: %+v", i, res)
		}
		if got := writes.Swap(0); got != 1 {
			t.Errorf("delivery %d: %d writes, want 1", i, got)
		}
	}
	for _, r := range h.Requests() {
		if string(r.Body) != testBody {
			t.Errorf("body %q, want %q", r.Body, testBody)
		}
	}
}
