package forwarder

import (
	"context"
	"sync"
	"time"

	"github.com/evfwd/evfwd/pkg/destination"
	"github.com/evfwd/evfwd/pkg/store"
)

// pacer holds a destination to its rate: wait returns when its next
// request may go (or ctx ended). A turn is never refused: deliveries wait
// in their slots, none is dropped.
type pacer interface {
	wait(ctx context.Context) error
}

// newPace is d's pacer: on a store several nodes share (store.Pacer), one
// schedule in the store for all of them; else one in this process.
func (f *Forwarder) newPace(d *destination.Destination) pacer {
	every := time.Duration(float64(time.Second) / d.Rate.PerSecond)
	mem := &memPace{every: every, tau: time.Duration(d.Rate.Burst-1) * every}
	if f.pacer == nil {
		return mem
	}
	return &storePace{s: f.pacer, key: d.Source + "/" + d.Name, every: every, burst: d.Rate.Burst, fallback: mem, f: f}
}

// memPace is the generic cell rate algorithm: tat is when the schedule is
// next free; a request may go tau (the burst's share) before it.
type memPace struct {
	mu         sync.Mutex
	tat        time.Time
	every, tau time.Duration
}

func (p *memPace) wait(ctx context.Context) error {
	p.mu.Lock()
	now := time.Now()
	t := p.tat
	if t.Before(now) {
		t = now
	}
	p.tat = t.Add(p.every)
	p.mu.Unlock()
	return sleep(ctx, t.Add(-p.tau).Sub(now))
}

// storePace reserves each turn in the store's schedule (the store's
// clock judges it). When the store cannot answer, the turn is this
// process's alone: the pace holds for this node, and the error is logged.
type storePace struct {
	s        store.Pacer
	key      string
	every    time.Duration
	burst    int
	fallback *memPace
	f        *Forwarder
}

func (p *storePace) wait(ctx context.Context) error {
	c, cancel := context.WithTimeout(ctx, p.f.cfg.StoreTimeout)
	d, err := p.s.Reserve(c, p.key, p.every, p.burst, 1)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		p.f.cfg.Logger.Warn("reserve a turn of the destination's rate in the store; paced by this node alone", "destination", p.key, "err", err)
		return p.fallback.wait(ctx)
	}
	return sleep(ctx, d)
}

// sleep waits d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
