package cmd

import (
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// serve's collector settings (bench/serve/run.sh measured them;
// docs/PERFORMANCE.md): collecting and forwarding make short-lived garbage at a
// high rate, and GOGC 400 cuts the collector's work on it under a soft
// memory limit that keeps the heap small. The limit follows the live heap (softLimit), so that it never
// makes the collector run more often than GOGC 100 would: with many large
// bodies waiting for the store, a fixed limit under twice the live heap
// would have it collect without pause.
const (
	serveGCPercent = 400
	serveMinLimit  = 96 << 20
	// limitSlack covers what the Go runtime holds besides the heap.
	limitSlack = 16 << 20
	// limitEvery is how often the limit follows the live heap.
	limitEvery = 250 * time.Millisecond
)

// softLimit is the memory limit for a live heap of live bytes: at least
// serveMinLimit, and room for GOGC 100's heap (twice the live one).
func softLimit(live uint64) int64 {
	return max(serveMinLimit, 2*int64(live)+limitSlack)
}

// tuneGC sets serve's collector settings, unless GOGC is set (then the
// user's settings stand), and returns what restores the ones before. With
// GOMEMLIMIT set, its limit stands and only GOGC changes.
func tuneGC(getenv func(string) string) (restore func()) {
	if getenv("GOGC") != "" {
		return func() {}
	}
	gc := debug.SetGCPercent(serveGCPercent)
	if getenv("GOMEMLIMIT") != "" {
		return func() { debug.SetGCPercent(gc) }
	}
	limit := debug.SetMemoryLimit(softLimit(liveHeap()))
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(limitEvery)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				debug.SetMemoryLimit(softLimit(liveHeap()))
			}
		}
	}()
	return func() {
		close(stop)
		<-done
		debug.SetMemoryLimit(limit)
		debug.SetGCPercent(gc)
	}
}

// liveHeap is the heap the last collection found live.
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}
