package webhook

import (
	"testing"
	"time"

	"github.com/evfwd/evfwd/internal/webhooktest"
	"github.com/google/go-cmp/cmp"
)

var t0 = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

func TestPolicyDelay(t *testing.T) {
	var got []time.Duration
	for n := 1; n <= 12; n++ {
		got = append(got, Policy{}.Delay(n))
	}
	s := time.Second
	want := []time.Duration{1 * s, 2 * s, 4 * s, 8 * s, 16 * s, 32 * s, 64 * s, 128 * s, 256 * s, 512 * s, 600 * s, 600 * s}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

// TestScheduleBoundedByWindow walks the default schedule of a message that
// always fails, the clock jumping to each planned time: about 1s first,
// doubling to 10 min, nothing after 4 h.
func TestScheduleBoundedByWindow(t *testing.T) {
	clock := webhooktest.NewClock(t0)
	p := Policy{Now: clock.Now, Jitter: -1}
	failed := Result{Outcome: Retryable}
	var starts []time.Duration
	for n := 1; ; n++ {
		starts = append(starts, clock.Now().Sub(t0))
		at, ok := p.NextAttempt(t0, n, failed)
		if !ok {
			break
		}
		if !at.After(clock.Now()) {
			t.Fatalf("delivery %d planned at %v, not after now %v", n+1, at, clock.Now())
		}
		clock.Set(at)
	}
	last := starts[len(starts)-1]
	if last > 4*time.Hour || last+10*time.Minute <= 4*time.Hour {
		t.Errorf("last delivery at %v, want within the last 10 minutes of 4h", last)
	}
	// 1+2+...+512 s = 1023 s, then every 600 s while within 14400 s.
	if want := 1 + 10 + (14400-1023)/600; len(starts) != want {
		t.Errorf("%d deliveries, want %d", len(starts), want)
	}
	if diff := cmp.Diff([]time.Duration{0, time.Second, 3 * time.Second, 7 * time.Second}, starts[:4]); diff != "" {
		t.Errorf("first starts mismatch (-want +got):\n%s", diff)
	}
}

func TestNextAttempt(t *testing.T) {
	now := t0.Add(time.Hour)
	tests := []struct {
		name    string
		policy  Policy
		attempt int
		last    Result
		want    time.Time
		wantOK  bool
	}{
		{"delivered", Policy{}, 1, Result{Outcome: Delivered}, time.Time{}, false},
		{"final", Policy{}, 1, Result{Outcome: Final}, time.Time{}, false},
		{"tls", Policy{}, 1, Result{Outcome: TLSError}, time.Time{}, false},
		{"retryable first", Policy{Jitter: -1}, 1, Result{Outcome: Retryable}, now.Add(time.Second), true},
		{"interrupted retried", Policy{Jitter: -1}, 3, Result{Outcome: Interrupted}, now.Add(4 * time.Second), true},
		{"retry-after longer than backoff wins", Policy{Jitter: -1}, 1, Result{Outcome: Retryable, RetryAfter: 90 * time.Second}, now.Add(90 * time.Second), true},
		{"retry-after shorter than backoff ignored", Policy{Jitter: -1}, 10, Result{Outcome: Retryable, RetryAfter: time.Second}, now.Add(512 * time.Second), true},
		{"retry-after past the window: dead", Policy{Jitter: -1}, 1, Result{Outcome: Retryable, RetryAfter: 3*time.Hour + time.Second}, time.Time{}, false},
		{"retry-after up to the window end", Policy{Jitter: -1}, 1, Result{Outcome: Retryable, RetryAfter: 3 * time.Hour}, t0.Add(4 * time.Hour), true},
		{"custom window", Policy{Jitter: -1, Window: 30 * time.Minute}, 1, Result{Outcome: Retryable}, time.Time{}, false},
		{"jitter low end", Policy{Rand: func() float64 { return 0 }}, 2, Result{Outcome: Retryable}, now.Add(1600 * time.Millisecond), true},
		{"jitter middle", Policy{Rand: func() float64 { return 0.5 }}, 2, Result{Outcome: Retryable}, now.Add(2 * time.Second), true},
		{"jitter 50% three quarters", Policy{Jitter: 0.5, Rand: func() float64 { return 0.75 }}, 2, Result{Outcome: Retryable}, now.Add(2500 * time.Millisecond), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.policy
			p.Now = func() time.Time { return now }
			got, ok := p.NextAttempt(t0, tt.attempt, tt.last)
			if diff := cmp.Diff(tt.want, got); diff != "" || ok != tt.wantOK {
				t.Errorf("ok = %v, want %v; time mismatch (-want +got):\n%s", ok, tt.wantOK, diff)
			}
		})
	}
}

func TestRetryFor(t *testing.T) {
	clock := webhooktest.NewClock(t0)
	failed := Result{Outcome: Retryable}
	// Even a retry due at once, on a clock that stands still, is not made.
	once := RetryFor(0)
	once.Initial, once.Jitter, once.Now = time.Nanosecond, -1, clock.Now
	if at, ok := once.NextAttempt(t0, 1, failed); ok {
		t.Errorf("RetryFor(0): a retry at %v, want none", at)
	}
	p := RetryFor(time.Minute)
	p.Jitter, p.Now = -1, clock.Now
	if at, ok := p.NextAttempt(t0, 1, failed); !ok || !at.Equal(t0.Add(time.Second)) {
		t.Errorf("RetryFor(1m) first retry: %v, %v; want %v", at, ok, t0.Add(time.Second))
	}
	clock.Set(t0.Add(time.Minute))
	if at, ok := p.NextAttempt(t0, 6, failed); ok {
		t.Errorf("RetryFor(1m) after the window: a retry at %v, want none", at)
	}
}

// TestPolicyStopRefused: with StopRefused a delivery that found nothing
// listening at any URL is not retried; one that any endpoint answered, or
// that timed out, still is.
func TestPolicyStopRefused(t *testing.T) {
	now := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	p := Policy{StopRefused: true, Jitter: -1, Now: func() time.Time { return now }}
	refused := Attempt{Class: ClassRefused, Outcome: Retryable}
	for _, tt := range []struct {
		name     string
		attempts []Attempt
		retry    bool
	}{
		{"refused", []Attempt{refused}, false},
		{"every URL refused", []Attempt{refused, refused}, false},
		{"refused, then a 503", []Attempt{refused, {Class: ClassServerError, Status: 503, Outcome: Retryable}}, true},
		{"a 503", []Attempt{{Class: ClassServerError, Status: 503, Outcome: Retryable}}, true},
		{"a timeout", []Attempt{{Class: ClassTimeout, Outcome: Retryable}}, true},
	} {
		_, retry := p.NextAttempt(now, 1, Result{Attempts: tt.attempts, Outcome: Retryable})
		if retry != tt.retry {
			t.Errorf("%s: retry %v, want %v", tt.name, retry, tt.retry)
		}
		if _, retry := (Policy{Now: p.Now}).NextAttempt(now, 1, Result{Attempts: tt.attempts, Outcome: Retryable}); !retry {
			t.Errorf("%s: not retried without StopRefused", tt.name)
		}
	}
}
