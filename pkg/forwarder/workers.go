package forwarder

import (
	"sync"
	"sync/atomic"
	"time"
)

// workers runs functions on goroutines it keeps for the next one. A
// delivery's goroutine grows its stack to what an HTTP round trip needs;
// started afresh for every delivery, each would pay that growth again
// (docs/PERFORMANCE.md, "Figures behind the code"). A goroutine that finds
// no work for idleFor ends, so an idle forwarder keeps none, and so do all
// once stop is called.
type workers struct {
	idle    chan func() // unbuffered: a send succeeds only to a waiting worker
	quit    chan struct{}
	once    sync.Once
	idleFor time.Duration
	live    atomic.Int32 // workers running or waiting
}

func newWorkers(idleFor time.Duration) *workers {
	return &workers{idle: make(chan func()), quit: make(chan struct{}), idleFor: idleFor}
}

// stop ends the waiting workers, and every other one once its function
// returns; what run is given after stop still runs, each on its own
// goroutine.
func (w *workers) stop() { w.once.Do(func() { close(w.quit) }) }

// run runs fn on a waiting worker, or on a new one when none waits.
func (w *workers) run(fn func()) {
	select {
	case w.idle <- fn:
	default:
		go w.work(fn)
	}
}

func (w *workers) work(fn func()) {
	w.live.Add(1)
	defer w.live.Add(-1)
	t := time.NewTimer(w.idleFor)
	defer t.Stop()
	for {
		fn()
		t.Reset(w.idleFor)
		select {
		case fn = <-w.idle:
		case <-t.C:
			return
		case <-w.quit:
			return
		}
	}
}
