package inspector

import (
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/evfwd/evfwd/pkg/message"
	"github.com/evfwd/evfwd/pkg/webhook"
)

// StatsMinutes is how many minutes Stats keeps per endpoint: the last hour.
const StatsMinutes = 60

// maxStatsEndpoints bounds the endpoints Stats counts; attempts to others
// are not counted. A serve has at most five URLs per source, so this is
// only a guard.
const maxStatsEndpoints = 4096

// Endpoint names one webhook URL of one source.
type Endpoint struct {
	Source string
	URL    string
}

// Stats counts the forwarder's attempts per endpoint and per minute over
// the last StatsMinutes minutes, in a fixed ring per endpoint: memory is
// bounded by the endpoints, not by the traffic. Safe for concurrent use.
type Stats struct {
	now func() time.Time

	mu    sync.Mutex
	rings map[Endpoint]*ring
}

// ring is one endpoint's minutes; slot i holds the minute m with
// m % StatsMinutes == i, or an older one, which counts as empty.
type ring [StatsMinutes]bucket

type bucket struct {
	minute                     int64 // minutes since the Unix epoch
	delivered, retried, failed int
	latencyN                   int
	latencySum, latencyMax     time.Duration
}

// NewStats returns empty stats on the clock now (nil: time.Now).
func NewStats(now func() time.Time) *Stats {
	if now == nil {
		now = time.Now
	}
	return &Stats{now: now, rings: map[Endpoint]*ring{}}
}

// Kind is how Stats counts an attempt: by what follows it.
type Kind int

const (
	// NotCounted: interrupted by a shutdown, nothing is known.
	NotCounted Kind = iota
	// CountDelivered: the endpoint accepted the message (2xx).
	CountDelivered
	// CountRetried: the attempt failed and the message goes on, to the
	// next URL now or to every URL later.
	CountRetried
	// CountFailed: the attempt failed and so did the delivery, for good
	// (failed, or dead at the end of its retry window).
	CountFailed
)

// KindOf says how an attempt the forwarder reported counts.
func KindOf(a webhook.Attempt) Kind {
	switch {
	case a.Outcome == webhook.Delivered:
		return CountDelivered
	case a.Then == webhook.ThenNextURL || a.Then == webhook.ThenRetry:
		return CountRetried
	case a.Then == webhook.ThenGiveUp:
		return CountFailed
	case a.Outcome == webhook.Final || a.Outcome == webhook.TLSError:
		// Then undecided: no policy was consulted; these are not retried.
		return CountFailed
	case a.Outcome == webhook.Retryable:
		return CountRetried
	}
	return NotCounted
}

// Record counts a in the minute of the clock's now, with its latency.
func (s *Stats) Record(source string, a webhook.Attempt) {
	kind := KindOf(a)
	if kind == NotCounted {
		return
	}
	minute := minuteOf(s.now())
	s.mu.Lock()
	defer s.mu.Unlock()
	key := Endpoint{source, a.URL}
	r := s.rings[key]
	if r == nil {
		if len(s.rings) >= maxStatsEndpoints {
			return
		}
		r = new(ring)
		s.rings[key] = r
	}
	b := &r[((minute%StatsMinutes)+StatsMinutes)%StatsMinutes]
	switch {
	case b.latencyN > 0 && b.minute > minute:
		// The clock went back an hour or more: this attempt's minute is
		// older than what the slot holds, and off the chart.
		return
	case b.latencyN == 0 || b.minute < minute: // every attempt counted has a latency
		*b = bucket{minute: minute}
	}
	switch kind {
	case CountDelivered:
		b.delivered++
	case CountRetried:
		b.retried++
	case CountFailed:
		b.failed++
	}
	b.latencyN++
	b.latencySum += a.Latency
	b.latencyMax = max(b.latencyMax, a.Latency)
}

// Minute is one minute of one endpoint, as GET /api/stats shows it.
type Minute struct {
	T         string  `json:"t"`
	Delivered int     `json:"delivered"`
	Retried   int     `json:"retried"`
	Failed    int     `json:"failed"`
	Latency   Latency `json:"latencyMs"`
}

// minuteSeries are the JSON names of Minute's counts, in the order the page
// stacks them, from the bottom.
func minuteSeries() []string { return []string{"delivered", "retried", "failed"} }

// Latency is the attempts' latency in a minute, in milliseconds; zero
// when there were none.
type Latency struct {
	Avg float64 `json:"avg"`
	Max float64 `json:"max"`
}

// Minutes returns the last StatsMinutes minutes of e, oldest first, the
// current (partial) minute last. An endpoint never seen has every minute
// at zero.
func (s *Stats) Minutes(e Endpoint) []Minute {
	now := minuteOf(s.now())
	out := make([]Minute, StatsMinutes)
	s.mu.Lock()
	r := s.rings[e]
	var copied ring
	if r != nil {
		copied = *r
	}
	s.mu.Unlock()
	for i := range out {
		m := now - StatsMinutes + 1 + int64(i)
		out[i].T = message.FormatTime(time.Unix(m*60, 0))
		b := &copied[((m%StatsMinutes)+StatsMinutes)%StatsMinutes]
		if r == nil || b.minute != m || b.latencyN == 0 {
			continue
		}
		out[i].Delivered, out[i].Retried, out[i].Failed = b.delivered, b.retried, b.failed
		if b.latencyN > 0 {
			out[i].Latency = Latency{Avg: ms(b.latencySum / time.Duration(b.latencyN)), Max: ms(b.latencyMax)}
		}
	}
	return out
}

// minuteOf numbers t's minute since 1970, rounding down (before 1970 too).
func minuteOf(t time.Time) int64 {
	u := t.Unix()
	m := u / 60
	if u%60 < 0 {
		m--
	}
	return m
}

// Seen lists the endpoints counted so far, in no order.
func (s *Stats) Seen() []Endpoint {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Collect(maps.Keys(s.rings))
}

// ms is d in milliseconds, to the microsecond.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
