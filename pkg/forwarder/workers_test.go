package forwarder

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestWorkersReuseAndEnd: work handed out while a worker waits runs on
// that worker, every function runs once, and idle workers end after
// idleFor.
func TestWorkersReuseAndEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorkers(time.Second)
		var mu sync.Mutex
		ran := map[int]int{}
		var wg sync.WaitGroup
		for i := range 100 {
			wg.Add(1)
			w.run(func() {
				defer wg.Done()
				mu.Lock()
				ran[i]++
				mu.Unlock()
			})
			// The worker is back waiting before the next one is handed out.
			synctest.Wait()
		}
		wg.Wait()
		for i := range 100 {
			if ran[i] != 1 {
				t.Fatalf("function %d ran %d times", i, ran[i])
			}
		}
		if n := int(w.live.Load()); n != 1 {
			t.Errorf("%d workers for 100 functions run one after another, want 1", n)
		}
		// Several at once: as many workers as functions running.
		release := make(chan struct{})
		for range 3 {
			wg.Add(1)
			w.run(func() { defer wg.Done(); <-release })
		}
		synctest.Wait()
		if n := int(w.live.Load()); n != 3 {
			t.Errorf("%d workers for 3 functions at once, want 3", n)
		}
		close(release)
		wg.Wait()
		time.Sleep(999 * time.Millisecond)
		synctest.Wait()
		if n := int(w.live.Load()); n != 3 {
			t.Errorf("%d workers before idleFor passed, want 3", n)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if n := int(w.live.Load()); n != 0 {
			t.Errorf("%d workers after idleFor, want 0", n)
		}
	})
}

// TestWorkersStop: stop ends the waiting workers at once and the busy
// ones when they finish; work given after stop still runs.
func TestWorkersStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorkers(time.Hour)
		first, release := make(chan struct{}), make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(2)
		w.run(func() { defer wg.Done(); <-first })
		w.run(func() { defer wg.Done(); <-release }) // the first is busy: a second worker
		close(first)
		synctest.Wait() // the first worker waits for work, the second is busy
		if n := w.live.Load(); n != 2 {
			t.Fatalf("%d workers, want 2", n)
		}
		w.stop()
		synctest.Wait()
		if n := w.live.Load(); n != 1 {
			t.Errorf("%d workers after stop with one busy, want 1", n)
		}
		close(release)
		wg.Wait()
		synctest.Wait()
		if n := w.live.Load(); n != 0 {
			t.Errorf("%d workers after the busy one finished, want 0", n)
		}
		ran := make(chan struct{})
		w.run(func() { close(ran) })
		<-ran
		synctest.Wait()
		if n := w.live.Load(); n != 0 {
			t.Errorf("%d workers after work given after stop, want 0", n)
		}
	})
}
