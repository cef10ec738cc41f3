package importer

import (
	"context"
	"sync"
	"time"

	"github.com/evfwd/evfwd/internal/retry"
)

// pacer spaces events evenly to at most rate per second, shared by the
// workers. It sleeps only when ahead by more than minSleep, so high rates
// do not pay for a timer per event; idle time earns no burst.
type pacer struct {
	mu    sync.Mutex
	next  time.Time
	every time.Duration
	now   func() time.Time
	sleep func(context.Context, time.Duration) error
}

const minSleep = 2 * time.Millisecond

func newPacer(rate float64, now func() time.Time, sleep func(context.Context, time.Duration) error) *pacer {
	if sleep == nil {
		sleep = retry.Sleep
	}
	return &pacer{every: time.Duration(float64(time.Second) / rate), now: now, sleep: sleep}
}

func (p *pacer) wait(ctx context.Context) error {
	p.mu.Lock()
	now := p.now()
	if p.next.Before(now) {
		p.next = now
	}
	at := p.next
	p.next = p.next.Add(p.every)
	p.mu.Unlock()
	if d := at.Sub(now); d > minSleep {
		return p.sleep(ctx, d)
	}
	return nil
}
