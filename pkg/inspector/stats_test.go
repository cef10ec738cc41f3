package inspector_test

import (
	"testing"
	"time"

	"github.com/evfwd/evfwd/internal/webhooktest"
	"github.com/evfwd/evfwd/pkg/inspector"
	"github.com/evfwd/evfwd/pkg/webhook"
)

var statsT0 = time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)

func statsAttempt(url string, outcome webhook.Outcome, then webhook.Then, latency time.Duration) webhook.Attempt {
	return webhook.Attempt{URL: url, Outcome: outcome, Then: then, Latency: latency}
}

func TestKindOf(t *testing.T) {
	for _, tt := range []struct {
		o    webhook.Outcome
		then webhook.Then
		want inspector.Kind
	}{
		{webhook.Delivered, webhook.ThenDone, inspector.CountDelivered},
		{webhook.Retryable, webhook.ThenNextURL, inspector.CountRetried},
		{webhook.Final, webhook.ThenNextURL, inspector.CountRetried}, // the next URL may take it
		{webhook.Retryable, webhook.ThenRetry, inspector.CountRetried},
		{webhook.Retryable, webhook.ThenGiveUp, inspector.CountFailed}, // dead
		{webhook.Final, webhook.ThenGiveUp, inspector.CountFailed},
		{webhook.TLSError, webhook.ThenUndecided, inspector.CountFailed},
		{webhook.Interrupted, webhook.ThenStop, inspector.NotCounted},
	} {
		if got := inspector.KindOf(statsAttempt("u", tt.o, tt.then, 0)); got != tt.want {
			t.Errorf("KindOf(%s, %s) = %d, want %d", tt.o, tt.then, got, tt.want)
		}
	}
}

// Attempts count in the minute of the clock, per endpoint, with their
// latency; the window slides by the clock and forgets what is an hour old.
func TestStatsPerMinute(t *testing.T) {
	c := webhooktest.NewClock(statsT0.Add(30 * time.Second))
	s := inspector.NewStats(c.Now)
	a, b := inspector.Endpoint{"web", "http://a"}, inspector.Endpoint{"web", "http://b"}
	s.Record("web", statsAttempt(a.URL, webhook.Delivered, webhook.ThenDone, 2*time.Millisecond))
	s.Record("web", statsAttempt(a.URL, webhook.Delivered, webhook.ThenDone, 4*time.Millisecond))
	s.Record("web", statsAttempt(a.URL, webhook.Retryable, webhook.ThenRetry, 12*time.Millisecond))
	s.Record("web", statsAttempt(a.URL, webhook.Interrupted, webhook.ThenStop, time.Second))
	s.Record("app", statsAttempt(a.URL, webhook.Final, webhook.ThenGiveUp, time.Millisecond)) // another source's URL
	c.Add(time.Minute)
	s.Record("web", statsAttempt(a.URL, webhook.Retryable, webhook.ThenGiveUp, 1500*time.Microsecond))
	s.Record("web", statsAttempt(b.URL, webhook.Delivered, webhook.ThenDone, time.Millisecond))

	m := s.Minutes(a)
	if len(m) != inspector.StatsMinutes {
		t.Fatalf("%d minutes, want %d", len(m), inspector.StatsMinutes)
	}
	last, prev := m[inspector.StatsMinutes-1], m[inspector.StatsMinutes-2]
	if last.T != "2026-11-23T10:01:00.000Z" || prev.T != "2026-11-23T10:00:00.000Z" || m[0].T != "2026-11-23T09:02:00.000Z" {
		t.Errorf("minutes %s .. %s, %s", m[0].T, prev.T, last.T)
	}
	if want := (inspector.Minute{T: prev.T, Delivered: 2, Retried: 1, Latency: inspector.Latency{Avg: 6, Max: 12}}); prev != want {
		t.Errorf("10:00 = %+v, want %+v", prev, want)
	}
	if want := (inspector.Minute{T: last.T, Failed: 1, Latency: inspector.Latency{Avg: 1.5, Max: 1.5}}); last != want {
		t.Errorf("10:01 = %+v, want %+v", last, want)
	}
	for _, x := range m[:inspector.StatsMinutes-2] {
		if x != (inspector.Minute{T: x.T}) {
			t.Errorf("minute %s not empty: %+v", x.T, x)
		}
	}
	if got := s.Minutes(inspector.Endpoint{"app", a.URL})[inspector.StatsMinutes-2].Failed; got != 1 {
		t.Errorf("app's minute: %d failed, want 1", got)
	}
	if got := s.Minutes(b)[inspector.StatsMinutes-1].Delivered; got != 1 {
		t.Errorf("b: %d delivered, want 1", got)
	}
	if got := s.Minutes(inspector.Endpoint{"web", "http://never"}); len(got) != inspector.StatsMinutes || got[inspector.StatsMinutes-1] != (inspector.Minute{T: last.T}) {
		t.Errorf("an endpoint never seen: %+v", got[inspector.StatsMinutes-1])
	}

	// 59 minutes later 10:00 is the oldest minute shown; a minute more and
	// it is gone, and its slot is reused without its old counts.
	c.Add(58 * time.Minute)
	if m := s.Minutes(a); m[0].T != "2026-11-23T10:00:00.000Z" || m[0].Delivered != 2 {
		t.Errorf("at 10:59 the oldest minute is %+v", m[0])
	}
	c.Add(time.Minute)
	s.Record("web", statsAttempt(a.URL, webhook.Delivered, webhook.ThenDone, time.Millisecond))
	m = s.Minutes(a)
	if m[0].T != "2026-11-23T10:01:00.000Z" || m[0].Failed != 1 {
		t.Errorf("at 11:00 the oldest minute is %+v", m[0])
	}
	if want := (inspector.Minute{T: "2026-11-23T11:00:00.000Z", Delivered: 1, Latency: inspector.Latency{Avg: 1, Max: 1}}); m[inspector.StatsMinutes-1] != want {
		t.Errorf("11:00 = %+v, want %+v (10:00's counts must not remain)", m[inspector.StatsMinutes-1], want)
	}
	// Hours later, nothing is left in the window.
	c.Add(3 * time.Hour)
	for _, x := range s.Minutes(a) {
		if x != (inspector.Minute{T: x.T}) {
			t.Fatalf("minute %s not empty after 3 h: %+v", x.T, x)
		}
	}
}

// A clock that goes back an hour or more leaves the newer counts alone
// (the attempt is off the chart), and one before 1970 is counted like any
// other.
func TestStatsClockJumps(t *testing.T) {
	c := webhooktest.NewClock(statsT0.Add(30 * time.Second))
	s := inspector.NewStats(c.Now)
	a := inspector.Endpoint{"web", "http://a"}
	s.Record("web", statsAttempt(a.URL, webhook.Delivered, webhook.ThenDone, time.Millisecond))
	c.Add(-time.Hour)
	s.Record("web", statsAttempt(a.URL, webhook.Delivered, webhook.ThenDone, time.Millisecond))
	c.Add(time.Hour)
	if got := s.Minutes(a)[inspector.StatsMinutes-1].Delivered; got != 1 {
		t.Errorf("after an attempt an hour back: %d delivered this minute, want 1", got)
	}

	c = webhooktest.NewClock(time.Date(1969, 12, 31, 23, 59, 30, 0, time.UTC))
	s = inspector.NewStats(c.Now)
	s.Record("web", statsAttempt(a.URL, webhook.Delivered, webhook.ThenDone, time.Millisecond))
	if got := s.Minutes(a)[inspector.StatsMinutes-1]; got.Delivered != 1 || got.T != "1969-12-31T23:59:00.000Z" {
		t.Errorf("before 1970: %+v", got)
	}
}

// The endpoints counted are bounded.
func TestStatsBounded(t *testing.T) {
	s := inspector.NewStats(webhooktest.NewClock(statsT0).Now)
	for i := range inspector.MaxStatsEndpoints + 10 {
		s.Record("web", statsAttempt("http://h/"+string(rune('a'+i%26))+time.Duration(i).String(), webhook.Delivered, webhook.ThenDone, 0))
	}
	if n := len(s.Seen()); n != inspector.MaxStatsEndpoints {
		t.Errorf("%d endpoints kept, want %d", n, inspector.MaxStatsEndpoints)
	}
}
