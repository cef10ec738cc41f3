package analytics_test

import (
	"net"
	"net/http"
	"sync"
	"testing"

	"github.com/evfwd/evfwd/pkg/analytics"
	"github.com/google/go-cmp/cmp"
)

// closedPort is the URL of a loopback port that was listened on and
// closed: connecting to it is refused.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

// retryRun sends one message with cfg and returns the retry events and
// the batch's result.
func retryRun(t *testing.T, cfg analytics.Config) ([]analytics.RetryEvent, analytics.BatchResult) {
	t.Helper()
	var (
		mu     sync.Mutex
		events []analytics.RetryEvent
		res    analytics.BatchResult
	)
	cfg.OnRetry = func(e analytics.RetryEvent) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	}
	cfg.OnBatch = func(r analytics.BatchResult) {
		mu.Lock()
		res = r
		mu.Unlock()
	}
	c := newClient(t, cfg)
	must(t, c.Track(track(1)))
	flush(t, c)
	mu.Lock()
	defer mu.Unlock()
	return events, res
}

func TestOnRetryReportsEachWait(t *testing.T) {
	s := &noSleep{}
	cfg := testConfig(nil, s)
	cfg.Endpoint = closedPort(t)
	events, res := retryRun(t, cfg)
	if len(events) != 3 {
		t.Fatalf("%d retry events, want 3 (4 attempts)", len(events))
	}
	delays := s.got()
	for i, e := range events {
		if e.Attempt != i+1 || e.MaxAttempts != 4 || e.Status != -1 || e.Delay != delays[i] || e.Messages != 1 {
			t.Errorf("event %d = %+v, want attempt %d of 4, status -1, delay %v, 1 message", i, e, i+1, delays[i])
		}
		if !analytics.IsRefused(e.Err) {
			t.Errorf("event %d error %v is not a refusal", i, e.Err)
		}
	}
	if res.Attempts != 4 || !analytics.IsRefused(res.Err) {
		t.Errorf("result %+v, want 4 refused attempts", res)
	}
}

func TestOnRetryCarriesTheAnswer(t *testing.T) {
	rec := newRecorder(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 0 {
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	events, res := retryRun(t, testConfig(rec, nil))
	if len(events) != 1 || events[0].Status != 503 || events[0].Delay.Seconds() != 2 || analytics.IsRefused(events[0].Err) {
		t.Errorf("events %+v, want one 503 with a 2s wait", events)
	}
	if res.Err != nil || res.Attempts != 2 {
		t.Errorf("result %+v, want delivered on attempt 2", res)
	}
}

func TestStopOnRefused(t *testing.T) {
	cfg := testConfig(nil, nil)
	cfg.Endpoint = closedPort(t)
	cfg.Retry.StopOnRefused = true
	events, res := retryRun(t, cfg)
	if len(events) != 0 || res.Attempts != 1 || res.Status != -1 || !analytics.IsRefused(res.Err) {
		t.Errorf("events %+v, result %+v: want one refused attempt and no retry", events, res)
	}

	// Other failures are still retried.
	rec := newRecorder(t, func(n int, w http.ResponseWriter, r *http.Request) { w.WriteHeader(500) })
	cfg = testConfig(rec, nil)
	cfg.Retry.StopOnRefused = true
	events, res = retryRun(t, cfg)
	if diff := cmp.Diff([]int{1, 2, 3}, attemptsOf(events)); diff != "" || res.Attempts != 4 {
		t.Errorf("500s with StopOnRefused: attempts (-want +got):\n%s, result %+v", diff, res)
	}
}

func attemptsOf(events []analytics.RetryEvent) []int {
	var n []int
	for _, e := range events {
		n = append(n, e.Attempt)
	}
	return n
}
