package loadgen

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/evfwd/evfwd/pkg/rawjson"
	"github.com/evfwd/evfwd/pkg/webhook"
	"github.com/google/go-cmp/cmp"
)

// endpoint answers 503 to every fifth request, 200 to the others, and
// keeps the messageIds it got.
type endpoint struct {
	mu  sync.Mutex
	ids []string
	n   atomic.Int64
}

func (e *endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var m struct{ MessageID string }
	b, _ := io.ReadAll(r.Body)
	json.Unmarshal(b, &m)
	e.mu.Lock()
	e.ids = append(e.ids, m.MessageID)
	e.mu.Unlock()
	if e.n.Add(1)%5 == 0 {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
}

func options(t *testing.T, url, msg string) Options {
	t.Helper()
	s, err := webhook.NewSender(webhook.Options{UserAgent: "evfwd-webhooks/test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.CloseIdleConnections)
	m, err := rawjson.ParseObject([]byte(msg))
	if err != nil {
		t.Fatal(err)
	}
	return Options{Sender: s, Destination: &webhook.Destination{Endpoints: []webhook.Endpoint{{URL: url}}}, Message: m}
}

const track = `{"type":"track","userId":"u_42","event":"E","messageId":"m0","timestamp":"2024-05-01T12:00:00Z"}`

func TestRun(t *testing.T) {
	e := &endpoint{}
	ts := httptest.NewServer(e)
	defer ts.Close()
	o := options(t, ts.URL, track)
	o.Count, o.Concurrency = 50, 4
	var attempts atomic.Int64
	o.OnAttempt = func(a webhook.Attempt, msg *rawjson.Object) {
		if id, _ := msg.GetString("messageId"); id == "m0" {
			t.Errorf("attempt %v reported with the template's messageId", a)
		}
		attempts.Add(1)
	}
	g, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	r := g.Run(context.Background())
	got := []any{r.Count, r.Concurrency, r.Sent(), r.Delivered, r.Failed, r.Interrupted, r.Status, len(r.Errors), g.Done(), int(attempts.Load())}
	want := []any{50, 4, 50, 40, 10, false, map[int]int{200: 40, 503: 10}, 0, 50, 50}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("report mismatch (-want +got):\n%s", diff)
	}
	if r.Elapsed <= 0 || r.PerSecond() <= 0 || r.Latency.Percentile(1) > r.Elapsed {
		t.Errorf("elapsed %v, %v/s, max latency %v", r.Elapsed, r.PerSecond(), r.Latency.Percentile(1))
	}
	seen := map[string]bool{}
	for _, id := range e.ids {
		seen[id] = true
	}
	if len(seen) != 50 || seen["m0"] {
		t.Errorf("%d distinct messageIds (template's among them: %v), want 50 fresh ones", len(seen), seen["m0"])
	}
	if id, _ := o.Message.GetString("messageId"); id != "m0" {
		t.Errorf("the template's messageId became %q", id)
	}
}

func TestRunTransportErrors(t *testing.T) {
	ts := httptest.NewServer(http.NotFoundHandler())
	url := ts.URL
	ts.Close() // nothing listens there now
	o := options(t, url, `{"type":"delete","userId":"u_42","timestamp":"2024-05-01T12:00:00Z"}`)
	o.Count, o.Concurrency = 3, 8
	g, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	r := g.Run(context.Background())
	got := []any{r.Concurrency, r.Sent(), r.Failed, r.Status, r.Errors}
	want := []any{3, 3, 3, map[int]int{}, map[webhook.Class]int{webhook.ClassRefused: 3}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("report mismatch (-want +got):\n%s", diff)
	}
}

func TestRunInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var served atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // then net/http sees the sender hang up
		if served.Add(1) == 3 {
			cancel() // Ctrl-C during the third
			<-r.Context().Done()
		}
	}))
	defer ts.Close()
	o := options(t, ts.URL, track)
	o.Count, o.Concurrency = 100, 1
	g, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	r := g.Run(ctx)
	if got := []any{r.Sent(), r.Delivered, r.Failed, r.Interrupted}; !cmp.Equal(got, []any{2, 2, 0, true}) {
		t.Errorf("sent, delivered, failed, interrupted = %v; want 2, 2, 0, true", got)
	}
}

func TestNewRefuses(t *testing.T) {
	o := options(t, "http://127.0.0.1:1", track)
	tests := map[string]func(*Options){
		"no sender":     func(o *Options) { o.Sender = nil },
		"count 0":       func(o *Options) { o.Count = 0 },
		"concurrency 0": func(o *Options) { o.Concurrency = 0 },
		"bad message":   func(o *Options) { o.Message = &rawjson.Object{} },
	}
	for name, change := range tests {
		bad := o
		bad.Count, bad.Concurrency = 1, 1
		change(&bad)
		if _, err := New(bad); err == nil {
			t.Errorf("%s: New accepted it", name)
		}
	}
}
