package forwarder

import (
	"context"
	"sync"
	"time"

	"github.com/evfwd/evfwd/internal/retry"
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
	mem := &memPace{every: every, burst: d.Rate.Burst}
	if f.pacer == nil {
		return mem
	}
	return &storePace{s: f.pacer, key: d.Source + "/" + d.Name, every: every, burst: d.Rate.Burst, fallback: mem, f: f}
}

// memPace is a token bucket whose turns are taken one at a time: a caller
// holds the bucket while it waits for its turn, so turns are released in
// order and each at least `every` after the one before on this process's
// clock, as it woke, not as it was scheduled: a busy machine that wakes a
// waiter late never lets the next ones catch up in a bunch. burst turns
// may go at once after a quiet spell.
type memPace struct {
	mu     sync.Mutex
	tokens float64
	last   time.Time
	every  time.Duration
	burst  int
}

func (p *memPace) wait(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if !p.last.IsZero() {
		p.tokens = min(float64(p.burst), p.tokens+float64(now.Sub(p.last))/float64(p.every))
	} else {
		p.tokens = float64(p.burst)
	}
	p.last = now
	if p.tokens < 1 {
		short := time.Duration((1 - p.tokens) * float64(p.every))
		if err := retry.Sleep(ctx, short); err != nil {
			return err
		}
		woke := time.Now()
		p.tokens = min(float64(p.burst), p.tokens+float64(woke.Sub(p.last))/float64(p.every))
		p.last = woke
	}
	p.tokens--
	return nil
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
	return retry.Sleep(ctx, d)
}
