package inspector

import (
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/evfwd/evfwd/pkg/message"
	"github.com/evfwd/evfwd/pkg/store"
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

// Destination names one destination of one source.
type Destination struct {
	Source string
	Name   string
}

// Stats counts the forwarder's attempts per endpoint, and its deliveries'
// outcomes per destination, per minute over the last StatsMinutes
// minutes, in a fixed ring per endpoint and per destination: memory is
// bounded by the endpoints and destinations, not by the traffic. Safe for
// concurrent use.
type Stats struct {
	now func() time.Time

	mu    sync.Mutex
	rings map[Endpoint]*ring
	dests map[Destination]*ring
}

// ring is one endpoint's minutes; slot i holds the minute m with
// m % StatsMinutes == i, or an older one, which counts as empty.
type ring [StatsMinutes]bucket

type bucket struct {
	minute                     int64 // minutes since the Unix epoch
	n                          int   // what was counted; 0: the slot is empty
	delivered, retried, failed int
	latencySum, latencyMax     time.Duration
}

// NewStats returns empty stats on the clock now (nil: time.Now).
func NewStats(now func() time.Time) *Stats {
	if now == nil {
		now = time.Now
	}
	return &Stats{now: now, rings: map[Endpoint]*ring{}, dests: map[Destination]*ring{}}
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
	s.add(Endpoint{source, a.URL}, KindOf(a), a.Latency, s.now())
}

// kindOfRecorded says how an attempt the store recorded counts: it keeps
// the outcome but not what followed, so an attempt that did not deliver
// counts as failed when it is the last of a delivery now failed or dead,
// else as retried.
func kindOfRecorded(a store.Attempt, last bool, status store.Status) Kind {
	switch {
	case a.Outcome == webhook.Delivered.String():
		return CountDelivered
	case last && (status == store.Failed || status == store.Dead):
		return CountFailed
	}
	return CountRetried
}

// add counts an attempt of kind to e in the minute of at.
func (s *Stats) add(e Endpoint, kind Kind, latency time.Duration, at time.Time) {
	if kind == NotCounted {
		return
	}
	minute := minuteOf(at)
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := slot(s.rings, e, minute); b != nil {
		b.count(kind)
		b.latencySum += latency
		b.latencyMax = max(b.latencyMax, latency)
	}
}

// KindOfSettled says how a delivery's outcome, as the forwarder settles
// it (forwarder.DestinationObserver), counts: delivered, retried (pending
// with another attempt scheduled) or failed (failed or dead); anything
// else (a shutdown's cut, a cancellation) is not counted.
func KindOfSettled(status store.Status, retry bool) Kind {
	switch {
	case status == store.Delivered:
		return CountDelivered
	case status == store.Pending && retry:
		return CountRetried
	case status == store.Failed || status == store.Dead:
		return CountFailed
	}
	return NotCounted
}

// Settle counts a delivery of source's destination that settled with
// status (retry: another attempt is scheduled) in the minute of the
// clock's now.
func (s *Stats) Settle(source, destination string, status store.Status, retry bool) {
	s.settle(Destination{source, destination}, KindOfSettled(status, retry), s.now())
}

// settle counts a delivery of d that settled as kind in the minute of at.
func (s *Stats) settle(d Destination, kind Kind, at time.Time) {
	if kind == NotCounted {
		return
	}
	minute := minuteOf(at)
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := slot(s.dests, d, minute); b != nil {
		b.count(kind)
	}
}

// kindOfRound says how a recorded round of a delivery's attempts counted
// when it settled: a round before the last was retried, and so was the
// last when the delivery is pending, or was cancelled after it;
// otherwise the delivery's status.
func kindOfRound(lastRound bool, status store.Status) Kind {
	if !lastRound || status == store.Pending || status == store.Cancelled {
		return CountRetried
	}
	return KindOfSettled(status, false)
}

// slot is the bucket of key's ring for minute, emptied when it held an
// older minute; nil when the minute is off the chart (the clock went
// back an hour or more) or when the ring would be one too many. s.mu is
// held.
func slot[K comparable](rings map[K]*ring, key K, minute int64) *bucket {
	r := rings[key]
	if r == nil {
		if len(rings) >= maxStatsEndpoints {
			return nil
		}
		r = new(ring)
		rings[key] = r
	}
	b := &r[((minute%StatsMinutes)+StatsMinutes)%StatsMinutes]
	switch {
	case b.n > 0 && b.minute > minute:
		return nil
	case b.n == 0 || b.minute < minute:
		*b = bucket{minute: minute}
	}
	return b
}

func (b *bucket) count(kind Kind) {
	b.n++
	switch kind {
	case CountDelivered:
		b.delivered++
	case CountRetried:
		b.retried++
	case CountFailed:
		b.failed++
	}
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
	out := make([]Minute, StatsMinutes)
	each(s, s.rings, e, func(i int, t string, b *bucket) {
		out[i].T = t
		if b == nil {
			return
		}
		out[i].Delivered, out[i].Retried, out[i].Failed = b.delivered, b.retried, b.failed
		out[i].Latency = Latency{Avg: ms(b.latencySum / time.Duration(b.n)), Max: ms(b.latencyMax)}
	})
	return out
}

// Counts is one minute of one destination, as GET /api/stats shows it:
// its deliveries by how they settled in that minute.
type Counts struct {
	T         string `json:"t"`
	Delivered int    `json:"delivered"`
	Retried   int    `json:"retried"`
	Failed    int    `json:"failed"`
}

// DestinationMinutes returns the last StatsMinutes minutes of d, as
// Minutes does an endpoint's.
func (s *Stats) DestinationMinutes(d Destination) []Counts {
	out := make([]Counts, StatsMinutes)
	each(s, s.dests, d, func(i int, t string, b *bucket) {
		out[i].T = t
		if b != nil {
			out[i].Delivered, out[i].Retried, out[i].Failed = b.delivered, b.retried, b.failed
		}
	})
	return out
}

// each calls fn with each of the last StatsMinutes minutes of key's ring,
// oldest first: its index, its time, and its bucket (nil when empty).
func each[K comparable](s *Stats, rings map[K]*ring, key K, fn func(i int, t string, b *bucket)) {
	now := minuteOf(s.now())
	s.mu.Lock()
	r := rings[key]
	var copied ring
	if r != nil {
		copied = *r
	}
	s.mu.Unlock()
	for i := range StatsMinutes {
		m := now - StatsMinutes + 1 + int64(i)
		b := &copied[((m%StatsMinutes)+StatsMinutes)%StatsMinutes]
		if r == nil || b.minute != m || b.n == 0 {
			b = nil
		}
		fn(i, message.FormatTime(time.Unix(m*60, 0)), b)
	}
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

// SeenDestinations lists the destinations counted so far, in no order.
func (s *Stats) SeenDestinations() []Destination {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Collect(maps.Keys(s.dests))
}

// ms is d in milliseconds, to the microsecond.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
