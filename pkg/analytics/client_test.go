package analytics_test

import (
	"context"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/evfwd/evfwd/pkg/analytics"
	"github.com/evfwd/evfwd/pkg/message"
	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

var fixedNow = time.Date(2024, 5, 1, 12, 0, 0, 123_000_000, time.UTC)

// seqIDs returns an id maker giving id-1, id-2, ... safely across goroutines.
func seqIDs() func() string {
	var n atomic.Int64
	return func() string { return fmt.Sprintf("id-%d", n.Add(1)) }
}

// testConfig is a config for the recorder's server with a fixed clock,
// sequential ids and retries that do not wait.
func testConfig(rec *recorder, s *noSleep) analytics.Config {
	if s == nil {
		s = &noSleep{}
	}
	cfg := analytics.Config{
		WriteKey: "wk_test",
		Now:      func() time.Time { return fixedNow },
		NewID:    seqIDs(),
		Retry:    analytics.RetryPolicy{MaxAttempts: 4},
	}
	if rec != nil {
		cfg.Endpoint = rec.srv.URL
	}
	return analytics.WithSleep(cfg, s.sleep)
}

func newClient(t *testing.T, cfg analytics.Config) *analytics.Client {
	t.Helper()
	c, err := analytics.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c.Close(ctx)
	})
	return c
}

func track(i int) message.Track {
	return message.Track{UserId: fmt.Sprintf("u%d", i), Event: "Order Completed", Properties: map[string]any{"n": i}}
}

func TestGoldenBatch(t *testing.T) {
	g := newGate()
	rec := newRecorder(t, holdFirst(g))
	c := newClient(t, testConfig(rec, nil))

	must(t, c.Identify(message.Identify{UserId: "u1", Traits: map[string]any{"email": "ada@example.com", "plan": "pro"}}))
	rec.waitArrival(0) // the first message goes alone, at once
	must(t, c.Track(message.Track{UserId: "u1", Event: "Order Completed", Timestamp: time.Date(2024, 4, 30, 8, 0, 0, 0, time.FixedZone("", -5*3600)),
		Properties: map[string]any{"total": 12.5, "currency": "EUR", "items": []any{map[string]any{"sku": "A1", "qty": 2}}},
		Context:    map[string]any{"ip": "203.0.113.7"}}))
	must(t, c.Page(message.Page{AnonymousId: "a1", Name: "Pricing", Category: "Docs", MessageId: "given-id"}))
	must(t, c.Screen(message.Screen{UserId: "u1", Name: "Home"}))
	must(t, c.Group(message.Group{UserId: "u1", GroupId: "g1", Traits: map[string]any{"name": "Acme"}, Integrations: map[string]any{"All": false, "Webhooks": true}}))
	must(t, c.Alias(message.Alias{UserId: "u1", PreviousId: "a1"}))
	raw, err := message.ParseRaw([]byte(`{"type":"track","anonymousId":"a2","event":"Imported","properties":{"amount":12345678901234567890.000000001},"unknown":{"kept":[1.0]}}`))
	must(t, err)
	must(t, c.Enqueue(raw))
	g.open()
	flush(t, c)

	reqs := rec.requests()
	if len(reqs) != 2 {
		t.Fatalf("want 2 requests (first message alone, then the rest), got %d", len(reqs))
	}
	var got strings.Builder
	for _, r := range reqs {
		got.Write(r.Body)
		got.WriteByte('\n')
	}
	golden := filepath.Join("testdata", "batch.golden")
	if *update {
		must(t, os.MkdirAll("testdata", 0o755))
		must(t, os.WriteFile(golden, []byte(got.String()), 0o644))
	}
	want, err := os.ReadFile(golden)
	must(t, err)
	if diff := cmp.Diff(string(want), got.String()); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

func TestRequestHeaders(t *testing.T) {
	rec := newRecorder(t, nil)
	cfg := testConfig(rec, nil)
	cfg.Version = "1.2.3"
	c := newClient(t, cfg)
	must(t, c.Track(track(1)))
	flush(t, c)
	r := rec.requests()[0]
	got := map[string]string{
		"method":        r.Method,
		"path":          r.Path,
		"Authorization": r.Header.Get("Authorization"),
		"Content-Type":  r.Header.Get("Content-Type"),
		"User-Agent":    r.Header.Get("User-Agent"),
	}
	want := map[string]string{
		"method":        "POST",
		"path":          "/v1/batch",
		"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte("wk_test:")),
		"Content-Type":  "application/json",
		"User-Agent":    "evfwd/1.2.3",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

func TestEndpointWithPathPrefix(t *testing.T) {
	rec := newRecorder(t, nil)
	cfg := testConfig(rec, nil)
	cfg.Endpoint = rec.srv.URL + "/segment/"
	c := newClient(t, cfg)
	must(t, c.Track(track(1)))
	flush(t, c)
	if diff := cmp.Diff("/segment/v1/batch", rec.requests()[0].Path); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

func TestSplitByCount(t *testing.T) {
	g := newGate()
	rec := newRecorder(t, holdFirst(g))
	cfg := testConfig(rec, nil)
	cfg.BatchSize = 3
	c := newClient(t, cfg)
	must(t, c.Track(track(0)))
	rec.waitArrival(0)
	for i := 1; i <= 10; i++ {
		must(t, c.Track(track(i)))
	}
	g.open()
	flush(t, c)
	var got []int
	for _, r := range rec.requests() {
		got = append(got, len(r.decode(t).Batch))
	}
	if diff := cmp.Diff([]int{1, 3, 3, 3, 1}, got); diff != "" {
		t.Errorf("batch sizes mismatch (-want +got):\n%s", diff)
	}
}

func TestSplitByBytes(t *testing.T) {
	g := newGate()
	rec := newRecorder(t, holdFirst(g))
	cfg := testConfig(rec, nil)
	cfg.BatchSize = 1000
	c := newClient(t, cfg)
	big := strings.Repeat("x", 30_000)
	const n = 40
	for i := range n {
		must(t, c.Track(message.Track{UserId: "u", Event: "e", Properties: map[string]any{"blob": big, "i": i}}))
		if i == 0 {
			rec.waitArrival(0)
		}
	}
	g.open()
	flush(t, c)

	reqs := rec.requests()
	var ids []string
	for i, r := range reqs {
		if len(r.Body) > analytics.MaxBatchBytes {
			t.Errorf("request %d body is %d bytes, over %d", i, len(r.Body), analytics.MaxBatchBytes)
		}
		// Greedy: the next message would not have fitted.
		if i > 0 && i < len(reqs)-1 {
			msgLen := len(reqs[i+1].decode(t).Batch[0]["properties"]) + 100
			if len(r.Body)+msgLen <= analytics.MaxBatchBytes {
				t.Errorf("request %d (%d bytes) had room for another message", i, len(r.Body))
			}
		}
		ids = append(ids, r.ids(t)...)
	}
	if len(reqs) < 4 {
		t.Errorf("want at least 4 requests for %d 30 KB messages, got %d", n, len(reqs))
	}
	if diff := cmp.Diff(seqStrings(n), ids); diff != "" {
		t.Errorf("ids mismatch (-want +got):\n%s", diff)
	}
}

func seqStrings(n int) []string {
	s := make([]string, n)
	for i := range s {
		s[i] = fmt.Sprintf("id-%d", i+1)
	}
	return s
}

func TestFirstMessageSendsAtOnce(t *testing.T) {
	rec := newRecorder(t, nil)
	c := newClient(t, testConfig(rec, nil))
	must(t, c.Track(track(1)))
	rec.waitArrival(0) // no Flush, no timer: the consumer sent it by itself
	if diff := cmp.Diff([]string{"id-1"}, rec.requests()[0].ids(t)); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

// Many goroutines, small batches: the server asserts no overlap, and every
// message arrives exactly once.
func TestOneRequestInFlight(t *testing.T) {
	rec := newRecorder(t, nil)
	cfg := testConfig(rec, nil)
	cfg.BatchSize = 7
	c := newClient(t, cfg)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 250 {
				if err := c.Track(track(g*1000 + i)); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	flush(t, c)
	seen := map[string]int{}
	for _, r := range rec.requests() {
		if n := len(r.decode(t).Batch); n > 7 {
			t.Errorf("batch of %d, over BatchSize 7", n)
		}
		for _, id := range r.ids(t) {
			seen[id]++
		}
	}
	if len(seen) != 2000 {
		t.Errorf("want 2000 distinct messages, got %d", len(seen))
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("%s arrived %d times", id, n)
		}
	}
}

func TestQueueFull(t *testing.T) {
	g := newGate()
	rec := newRecorder(t, holdFirst(g))
	cfg := testConfig(rec, nil)
	cfg.MaxQueueSize = 5
	c := newClient(t, cfg)
	must(t, c.Track(track(0)))
	rec.waitArrival(0) // message 0 is in flight; the queue is empty
	for i := 1; i <= 5; i++ {
		must(t, c.Track(track(i)))
	}
	if err := c.Track(track(6)); !errors.Is(err, analytics.ErrQueueFull) {
		t.Fatalf("want ErrQueueFull, got %v", err)
	}
	raw, _ := message.ParseRaw([]byte(`{"type":"identify","userId":"u"}`))
	if err := c.Enqueue(raw); !errors.Is(err, analytics.ErrQueueFull) {
		t.Fatalf("raw: want ErrQueueFull, got %v", err)
	}
	g.open()
	flush(t, c)
	var ids []string
	for _, r := range rec.requests() {
		ids = append(ids, r.ids(t)...)
	}
	// id-7 and id-8 went to the refused messages.
	if diff := cmp.Diff(seqStrings(6), ids); diff != "" {
		t.Errorf("ids mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(analytics.Stats{Queued: 6, Sent: 6, Refused: 2, Batches: 2}, c.Stats()); diff != "" {
		t.Errorf("stats mismatch (-want +got):\n%s", diff)
	}
}

func TestEnqueueWaitBlocksForRoom(t *testing.T) {
	g := newGate()
	rec := newRecorder(t, holdFirst(g))
	cfg := testConfig(rec, nil)
	cfg.MaxQueueSize = 2
	c := newClient(t, cfg)
	raw := func() *message.Raw { return identify(t) }
	must(t, c.Enqueue(raw()))
	rec.waitArrival(0)
	must(t, c.Enqueue(raw()))
	must(t, c.Enqueue(raw()))

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.EnqueueWait(ctx, raw()); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: want context.Canceled, got %v", err)
	}

	done := make(chan error)
	go func() { done <- c.EnqueueWait(context.Background(), raw()) }()
	select {
	case err := <-done:
		t.Fatalf("EnqueueWait returned %v with the queue full", err)
	default:
	}
	g.open() // the consumer takes the waiting two: room for one more
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	flush(t, c)
	if diff := cmp.Diff(analytics.Stats{Queued: 4, Sent: 4, Refused: 1, Batches: 3}, c.Stats(), cmpBatchesLoose); diff != "" {
		t.Errorf("stats mismatch (-want +got):\n%s", diff)
	}
}

// Close answers a sender waiting for room at once, not when the request in
// flight ends.
func TestCloseReleasesAWaitingSender(t *testing.T) {
	g := newGate()
	rec := newRecorder(t, holdFirst(g))
	cfg := testConfig(rec, nil)
	cfg.MaxQueueSize = 1
	c := newClient(t, cfg)
	raw := func() *message.Raw { return identify(t) }
	must(t, c.Enqueue(raw()))
	rec.waitArrival(0) // held in flight until g opens
	must(t, c.Enqueue(raw()))
	waiting := make(chan error)
	go func() { waiting <- c.EnqueueWait(context.Background(), raw()) }()
	select {
	case err := <-waiting:
		t.Fatalf("EnqueueWait returned %v with the queue full", err)
	case <-time.After(50 * time.Millisecond): // blocked, as it should be
	}
	closed := make(chan error)
	go func() { closed <- c.Close(context.Background()) }()
	select {
	case err := <-waiting:
		if !errors.Is(err, analytics.ErrClosed) {
			t.Errorf("waiting sender: want ErrClosed, got %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting sender was not released by Close")
	}
	g.open()
	must(t, <-closed)
}

// identify is a minimal raw message.
func identify(t *testing.T) *message.Raw {
	t.Helper()
	r, err := message.ParseRaw([]byte(`{"type":"identify","userId":"u"}`))
	must(t, err)
	return r
}

// The batches count depends on when the waiting message joined.
var cmpBatchesLoose = cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".Batches" }, cmp.Ignore())

func TestFlushWaitsForRetries(t *testing.T) {
	rec := newRecorder(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n < 2 {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
	})
	s := &noSleep{}
	c := newClient(t, testConfig(rec, s))
	for i := range 3 {
		must(t, c.Track(track(i)))
	}
	flush(t, c)
	st := c.Stats()
	if st.Sent != 3 || st.Failed != 0 {
		t.Errorf("after Flush: %+v, want all 3 sent", st)
	}
	// Retries resend the very same messages.
	reqs := rec.requests()
	for i := 1; i < 3; i++ {
		if diff := cmp.Diff(reqs[0].ids(t), reqs[i].ids(t)); diff != "" {
			t.Errorf("retry %d ids mismatch (-want +got):\n%s", i, diff)
		}
	}
}

func TestRetries(t *testing.T) {
	type outcome struct {
		Requests   int
		Sent       int64
		Failed     int64
		OnError    []string
		Delays     []time.Duration
		LastStatus int
	}
	status := func(codes ...int) func(int, http.ResponseWriter, *http.Request) {
		return func(n int, w http.ResponseWriter, r *http.Request) {
			if n < len(codes) {
				w.WriteHeader(codes[n])
				if codes[n] >= 400 {
					fmt.Fprintf(w, `{"error":"status %d"}`, codes[n])
				}
			}
		}
	}
	tests := []struct {
		name    string
		respond func(int, http.ResponseWriter, *http.Request)
		timeout time.Duration
		want    outcome
	}{
		{"500 then ok", status(500), 0, outcome{Requests: 2, Sent: 1, LastStatus: 200}},
		{"503 then ok", status(503), 0, outcome{Requests: 2, Sent: 1, LastStatus: 200}},
		{"408 then ok", status(408), 0, outcome{Requests: 2, Sent: 1, LastStatus: 200}},
		{"429 honours Retry-After", func(n int, w http.ResponseWriter, r *http.Request) {
			if n == 0 {
				w.Header().Set("Retry-After", "2")
				w.WriteHeader(http.StatusTooManyRequests)
			}
		}, 0, outcome{Requests: 2, Sent: 1, Delays: []time.Duration{2 * time.Second}, LastStatus: 200}},
		{"429 Retry-After capped", func(n int, w http.ResponseWriter, r *http.Request) {
			if n == 0 {
				w.Header().Set("Retry-After", "3600")
				w.WriteHeader(http.StatusTooManyRequests)
			}
		}, 0, outcome{Requests: 2, Sent: 1, Delays: []time.Duration{time.Minute}, LastStatus: 200}},
		{"timeout then ok", func(n int, w http.ResponseWriter, r *http.Request) {
			if n == 0 {
				<-r.Context().Done() // never answer; the client gives up
			}
		}, 50 * time.Millisecond, outcome{Requests: 2, Sent: 1, LastStatus: 200}},
		{"dropped connection then ok", func(n int, w http.ResponseWriter, r *http.Request) {
			if n == 0 {
				conn, _, err := w.(http.Hijacker).Hijack()
				if err != nil {
					panic(err)
				}
				conn.Close()
			}
		}, 0, outcome{Requests: 2, Sent: 1, LastStatus: 200}},
		{"400 is final", status(400), 0, outcome{Requests: 1, Failed: 1, OnError: []string{"400 status 400"}, LastStatus: 400}},
		{"401 is final", status(401), 0, outcome{Requests: 1, Failed: 1, OnError: []string{"401 status 401"}, LastStatus: 401}},
		{"413 is final", status(413), 0, outcome{Requests: 1, Failed: 1, OnError: []string{"413 status 413"}, LastStatus: 413}},
		{"500 until attempts run out", status(500, 500, 500, 500), 0, outcome{Requests: 4, Failed: 1, OnError: []string{"500 status 500"}, LastStatus: 500}},
		{"400 details in message", func(n int, w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(400)
			fmt.Fprint(w, `{"error":"invalid message","details":[{"index":0,"field":"event"}]}`)
		}, 0, outcome{Requests: 1, Failed: 1, OnError: []string{`400 invalid message [{"index":0,"field":"event"}]`}, LastStatus: 400}},
		{"plain-text error body", func(n int, w http.ResponseWriter, r *http.Request) {
			http.Error(w, "bad gateway", http.StatusBadGateway)
		}, 0, outcome{Requests: 4, Failed: 1, OnError: []string{"502 bad gateway"}, LastStatus: 502}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := newRecorder(t, tt.respond)
			s := &noSleep{}
			cfg := testConfig(rec, s)
			cfg.Timeout = tt.timeout
			var mu sync.Mutex
			var got outcome
			cfg.OnError = func(status int, msg string) {
				mu.Lock()
				got.OnError = append(got.OnError, fmt.Sprintf("%d %s", status, msg))
				mu.Unlock()
			}
			cfg.OnBatch = func(r analytics.BatchResult) {
				mu.Lock()
				got.LastStatus = r.Status
				mu.Unlock()
			}
			c := newClient(t, cfg)
			must(t, c.Track(track(1)))
			flush(t, c)
			got.Requests = len(rec.requests())
			st := c.Stats()
			got.Sent, got.Failed = st.Sent, st.Failed
			if tt.want.Delays != nil {
				got.Delays = s.got()
			}
			mu.Lock()
			defer mu.Unlock()
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
			if st.Retries != int64(got.Requests-1) {
				t.Errorf("Retries = %d, want %d", st.Retries, got.Requests-1)
			}
		})
	}
}

func TestTransportErrorOnError(t *testing.T) {
	rec := newRecorder(t, nil)
	url := rec.srv.URL
	rec.srv.Close() // nothing listens any more
	cfg := testConfig(rec, nil)
	cfg.Endpoint = url
	type call struct {
		Status int
		HasMsg bool
	}
	var calls []call
	var mu sync.Mutex
	cfg.OnError = func(status int, msg string) {
		mu.Lock()
		calls = append(calls, call{status, msg != ""})
		mu.Unlock()
	}
	c := newClient(t, cfg)
	must(t, c.Track(track(1)))
	flush(t, c)
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff([]call{{-1, true}}, calls); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
	if st := c.Stats(); st.Failed != 1 || st.Retries != 3 {
		t.Errorf("stats %+v, want 1 failed after 3 retries", st)
	}
}

func TestBackoffGrowsWithJitter(t *testing.T) {
	rec := newRecorder(t, func(n int, w http.ResponseWriter, r *http.Request) { w.WriteHeader(500) })
	s := &noSleep{}
	cfg := testConfig(rec, s)
	cfg.Retry = analytics.RetryPolicy{MaxAttempts: 6, BaseDelay: 100 * time.Millisecond, MaxDelay: 400 * time.Millisecond, Jitter: 0.5}
	c := newClient(t, cfg)
	must(t, c.Track(track(1)))
	flush(t, c)
	caps := []time.Duration{100, 200, 400, 400, 400}
	got := s.got()
	if len(got) != len(caps) {
		t.Fatalf("delays %v, want %d of them", got, len(caps))
	}
	for i, d := range got {
		hi := caps[i] * time.Millisecond
		if d > hi || d < hi/2 {
			t.Errorf("delay %d = %v, want in [%v, %v]", i, d, hi/2, hi)
		}
	}
}

func TestStub(t *testing.T) {
	rec := newRecorder(t, func(int, http.ResponseWriter, *http.Request) { t.Error("a stub client reached the server") })
	cfg := testConfig(rec, nil)
	cfg.Stub = true
	var results []analytics.BatchResult
	cfg.OnBatch = func(r analytics.BatchResult) { results = append(results, r) }
	c := newClient(t, cfg)
	for i := range 3 {
		must(t, c.Track(track(i)))
	}
	flush(t, c)
	if st := c.Stats(); st.Sent != 3 || st.Failed != 0 {
		t.Errorf("stats %+v, want 3 sent", st)
	}
	var ids []string
	for _, r := range results {
		if !r.Accepted() || r.Status != 200 {
			t.Errorf("stub batch not accepted: %+v", r)
		}
		ids = append(ids, r.MessageIds...)
	}
	if diff := cmp.Diff(seqStrings(3), ids); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

func TestDecimalSerialization(t *testing.T) {
	rec := newRecorder(t, nil)
	c := newClient(t, testConfig(rec, nil))
	f, _, _ := big.ParseFloat("12345678901234567890.000000001", 10, 256, big.ToNearestEven)
	i, _ := new(big.Int).SetString("98765432109876543210", 10)
	must(t, c.Track(message.Track{UserId: "u", Event: "Paid", Properties: map[string]any{
		"amount": f, "count": i, "ratio": big.NewRat(3, 4), "list": []any{big.NewRat(1, 3)},
	}}))
	flush(t, c)
	got := string(rec.requests()[0].decode(t).Batch[0]["properties"])
	want := `{"amount":"12345678901234567890.000000001","count":"98765432109876543210","list":["1/3"],"ratio":"0.75"}`
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

func TestRawExactDigits(t *testing.T) {
	rec := newRecorder(t, nil)
	c := newClient(t, testConfig(rec, nil))
	line := []byte(`{"type":"track","userId":"u","event":"Paid","properties":{"amount":12345678901234567890.000000001,"tiny":1e-400},"x-unknown":{"a":[1.10,true]},"messageId":"m-1","timestamp":"2024-05-01T12:00:00.000Z"}`)
	raw, err := message.ParseRaw(line)
	must(t, err)
	must(t, c.Enqueue(raw))
	copy(line, strings.Repeat("#", len(line))) // the caller reuses its buffer
	flush(t, c)
	got := string(rec.requests()[0].decode(t).Batch[0]["properties"])
	if diff := cmp.Diff(`{"amount":12345678901234567890.000000001,"tiny":1e-400}`, got); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
	body := string(rec.requests()[0].Body)
	want := `{"batch":[{"type":"track","userId":"u","event":"Paid","properties":{"amount":12345678901234567890.000000001,"tiny":1e-400},"x-unknown":{"a":[1.10,true]},"messageId":"m-1","timestamp":"2024-05-01T12:00:00.000Z","context":{"library":{"name":"evfwd","version":"dev"}}}],"sentAt":"2024-05-01T12:00:00.123Z"}`
	if diff := cmp.Diff(want, body); diff != "" {
		t.Errorf("body mismatch (-want +got):\n%s", diff)
	}
}

func TestTwoClientsInParallel(t *testing.T) {
	recA, recB := newRecorder(t, nil), newRecorder(t, nil)
	cfgA, cfgB := testConfig(recA, nil), testConfig(recB, nil)
	cfgA.WriteKey, cfgB.WriteKey = "key-a", "key-b"
	cfgB.BatchSize = 3
	a, b := newClient(t, cfgA), newClient(t, cfgB)
	var wg sync.WaitGroup
	for _, c := range []*analytics.Client{a, b, a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				if err := c.Track(track(i)); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	flush(t, a)
	flush(t, b)
	for name, tc := range map[string]struct {
		rec *recorder
		key string
		max int
	}{"a": {recA, "key-a", 100}, "b": {recB, "key-b", 3}} {
		n := 0
		for _, r := range tc.rec.requests() {
			if got, want := r.Header.Get("Authorization"), "Basic "+base64.StdEncoding.EncodeToString([]byte(tc.key+":")); got != want {
				t.Errorf("client %s sent %q, want %q", name, got, want)
			}
			batch := r.decode(t).Batch
			if len(batch) > tc.max {
				t.Errorf("client %s batch of %d, over %d", name, len(batch), tc.max)
			}
			n += len(batch)
		}
		if n != 400 {
			t.Errorf("client %s: server got %d messages, want 400", name, n)
		}
	}
}

// The bar: lose nothing when the endpoint fails a third of its
// requests.
func TestNothingLostWhenAThirdFail(t *testing.T) {
	rec := newRecorder(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n%3 == 2 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	s := &noSleep{}
	cfg := testConfig(rec, s)
	cfg.Retry.MaxAttempts = 10
	c := newClient(t, cfg)
	const n = 5000
	for i := range n {
		must(t, c.Track(track(i)))
	}
	flush(t, c)
	accepted := map[string]bool{}
	for i, r := range rec.requests() {
		if i%3 == 2 {
			continue
		}
		for _, id := range r.ids(t) {
			accepted[id] = true
		}
	}
	if len(accepted) != n {
		t.Errorf("server accepted %d distinct messages, want %d", len(accepted), n)
	}
	if st := c.Stats(); st.Sent != n || st.Failed != 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestRefusals(t *testing.T) {
	c := newClient(t, testConfig(newRecorder(t, nil), nil))
	var ve *message.ValidationError
	if err := c.Track(message.Track{UserId: "u"}); !errors.As(err, &ve) || ve.Field != "event" {
		t.Errorf("missing event: got %v", err)
	}
	if err := c.Alias(message.Alias{UserId: "u"}); !errors.As(err, &ve) || ve.Field != "previousId" {
		t.Errorf("missing previous_id: got %v", err)
	}
	err := c.Track(message.Track{UserId: "u", Event: "e", Properties: map[string]any{"blob": strings.Repeat("x", 40_000)}})
	var se *message.SizeError
	if !errors.Is(err, message.ErrTooLarge) || !errors.As(err, &se) || se.Size <= message.MaxMessageBytes {
		t.Errorf("oversized: got %v", err)
	}
	raw, _ := message.ParseRaw([]byte(`{"type":"track","userId":"u","event":"e","properties":{"blob":"` + strings.Repeat("x", 40_000) + `"}}`))
	if err := c.Enqueue(raw); !errors.Is(err, message.ErrTooLarge) {
		t.Errorf("oversized raw: got %v", err)
	}
	if st := c.Stats(); st.Refused != 4 || st.Queued != 0 {
		t.Errorf("stats %+v, want 4 refused, none queued", st)
	}
}

func TestClose(t *testing.T) {
	rec := newRecorder(t, nil)
	c, err := analytics.New(testConfig(rec, nil))
	must(t, err)
	for i := range 10 {
		must(t, c.Track(track(i)))
	}
	must(t, c.Close(context.Background()))
	if n := c.Stats().Sent; n != 10 {
		t.Errorf("Close sent %d of 10", n)
	}
	if err := c.Track(track(11)); !errors.Is(err, analytics.ErrClosed) {
		t.Errorf("after Close: want ErrClosed, got %v", err)
	}
	must(t, c.Close(context.Background())) // twice is fine
}

func TestCloseDeadlineFailsTheRest(t *testing.T) {
	g := newGate()
	defer g.open()
	rec := newRecorder(t, holdFirst(g))
	cfg := testConfig(rec, nil)
	var mu sync.Mutex
	var results []analytics.BatchResult
	cfg.OnBatch = func(r analytics.BatchResult) {
		mu.Lock()
		results = append(results, r)
		mu.Unlock()
	}
	c, err := analytics.New(cfg)
	must(t, err)
	must(t, c.Track(track(0)))
	rec.waitArrival(0)
	must(t, c.Track(track(1)))
	must(t, c.Track(track(2)))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Close(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Close: want context.Canceled, got %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	var ids []string
	for _, r := range results {
		if r.Accepted() {
			t.Errorf("batch %v accepted after an abandoned Close", r.MessageIds)
		}
		ids = append(ids, r.MessageIds...)
	}
	if diff := cmp.Diff(seqStrings(3), ids); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
	if st := c.Stats(); st.Failed != 3 {
		t.Errorf("stats %+v, want 3 failed", st)
	}
}

func TestOnBatchReportsEachBatchInOrder(t *testing.T) {
	g := newGate()
	rec := newRecorder(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 0 {
			g.wait(r)
		}
		if n == 1 {
			w.WriteHeader(400)
		}
	})
	cfg := testConfig(rec, nil)
	var got []analytics.BatchResult
	cfg.OnBatch = func(r analytics.BatchResult) { got = append(got, r) }
	c := newClient(t, cfg)
	must(t, c.Track(track(0)))
	rec.waitArrival(0)
	for _, tag := range []uint64{7, 42} {
		raw, err := message.ParseRaw([]byte(`{"type":"track","userId":"u","event":"E"}`))
		must(t, err)
		must(t, c.EnqueueWaitTagged(context.Background(), raw, tag))
	}
	g.open()
	flush(t, c) // OnBatch has run for everything Flush waited on
	type res struct {
		Ids      []string
		Tags     []uint64
		Accepted bool
		Status   int
	}
	var simple []res
	for _, r := range got {
		simple = append(simple, res{r.MessageIds, r.Tags, r.Accepted(), r.Status})
	}
	// Untagged messages report tag 0.
	want := []res{{[]string{"id-1"}, []uint64{0}, true, 200}, {[]string{"id-2", "id-3"}, []uint64{7, 42}, false, 400}}
	if diff := cmp.Diff(want, simple); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
	var api *analytics.APIError
	if !errors.As(got[1].Err, &api) || api.Status != 400 {
		t.Errorf("Err = %v, want an *APIError with status 400", got[1].Err)
	}
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name  string
		cfg   analytics.Config
		field string
	}{
		{"no write key", analytics.Config{}, "WriteKey"},
		{"blank write key", analytics.Config{WriteKey: "  "}, "WriteKey"},
		{"bad endpoint", analytics.Config{WriteKey: "k", Endpoint: "ftp://x"}, "Endpoint"},
		{"endpoint without host", analytics.Config{WriteKey: "k", Endpoint: "http://"}, "Endpoint"},
		{"negative queue", analytics.Config{WriteKey: "k", MaxQueueSize: -1}, "MaxQueueSize"},
		{"negative batch", analytics.Config{WriteKey: "k", BatchSize: -1}, "BatchSize"},
		{"negative attempts", analytics.Config{WriteKey: "k", Retry: analytics.RetryPolicy{MaxAttempts: -1}}, "Retry.MaxAttempts"},
		{"jitter over 1", analytics.Config{WriteKey: "k", Retry: analytics.RetryPolicy{Jitter: 2}}, "Retry.Jitter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := analytics.New(tt.cfg)
			var ce *analytics.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("want a *ConfigError, got %v", err)
			}
			if diff := cmp.Diff(tt.field, ce.Field); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDefaultEndpoint(t *testing.T) {
	if analytics.DefaultEndpoint != "http://127.0.0.1:8787" {
		t.Errorf("DefaultEndpoint = %q", analytics.DefaultEndpoint)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Retryable says whether a final failure was a refusal or retries running
// out, by the rule the client retried with.
func TestErrorsRetryable(t *testing.T) {
	closed := newRecorder(t, nil)
	closed.srv.Close()
	tests := []struct {
		name      string
		endpoint  string
		status    int
		retryable bool
		attempts  int
	}{
		{"400 refused", "", 400, false, 1},
		{"413 refused", "", 413, false, 1},
		{"503 out of retries", "", 503, true, 4},
		{"429 out of retries", "", 429, true, 4},
		{"408 out of retries", "", 408, true, 4},
		{"no answer", closed.srv.URL, 0, true, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := newRecorder(t, func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(tt.status) })
			cfg := testConfig(rec, nil)
			if tt.endpoint != "" {
				cfg.Endpoint = tt.endpoint
			}
			var res analytics.BatchResult
			cfg.OnBatch = func(r analytics.BatchResult) { res = r }
			c := newClient(t, cfg)
			must(t, c.Track(track(1)))
			flush(t, c)
			var r interface{ Retryable() bool }
			if !errors.As(res.Err, &r) {
				t.Fatalf("Err %T %v has no Retryable", res.Err, res.Err)
			}
			if r.Retryable() != tt.retryable {
				t.Errorf("Retryable() = %v, want %v (%v)", r.Retryable(), tt.retryable, res.Err)
			}
			if res.Attempts != tt.attempts {
				t.Errorf("%d attempts, want %d", res.Attempts, tt.attempts)
			}
		})
	}
}

type countingTransport struct {
	n  atomic.Int64
	rt http.RoundTripper
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.rt.RoundTrip(r)
}

// A program that replaces http.DefaultTransport before building a client
// has its requests go through it. Not parallel: it changes a global.
func TestReplacedDefaultTransport(t *testing.T) {
	stock := http.DefaultTransport
	t.Cleanup(func() { http.DefaultTransport = stock })
	ct := &countingTransport{rt: stock}
	http.DefaultTransport = ct
	rec := newRecorder(t, nil)
	c := newClient(t, testConfig(rec, nil))
	must(t, c.Track(track(1)))
	flush(t, c)
	if n := ct.n.Load(); n != 1 {
		t.Errorf("%d requests through the replaced http.DefaultTransport, want 1", n)
	}
	// A client built after it is restored no longer uses it.
	http.DefaultTransport = stock
	c = newClient(t, testConfig(rec, nil))
	must(t, c.Track(track(2)))
	flush(t, c)
	if n := ct.n.Load(); n != 1 {
		t.Errorf("%d requests through the replaced transport after restoring, want 1", n)
	}
}
