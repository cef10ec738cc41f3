package postgres

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/evfwd/evfwd/pkg/store/postgres/pgtest"
)

// reserveAtSQL is reserveSQL judged by a clock the test gives ($5, µs).
var reserveAtSQL = reserveSQL(`$5::bigint`)

// reserveAt reserves as Reserve does, judged at now (µs) instead of the
// database's clock.
func (s *Store) reserveAt(ctx context.Context, key string, every time.Duration, burst, n int, now int64) (time.Duration, error) {
	return s.reserve(ctx, reserveAtSQL, key, every, burst, n, now)
}

// pacingNodes opens two Stores on one new database, as two nodes.
func pacingNodes(t *testing.T) (a, b *Store) {
	t.Helper()
	url := pgtest.URL(t)
	for _, p := range []**Store{&a, &b} {
		s, err := Open(context.Background(), url, Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		*p = s
	}
	return a, b
}

// sent is a reservation's requests going out: n of them at µs.
type sent struct{ at, n int64 }

// checkPace fails t when, in some span of sends [a, b], more than burst +
// (b-a+slack)/every go: the bound of a schedule of one every `every` with
// up to burst at once, where each send may lag its place in the schedule
// by up to slack (µs).
func checkPace(t *testing.T, sends []sent, every time.Duration, burst int, slack int64) {
	t.Helper()
	slices.SortFunc(sends, func(x, y sent) int { return int(x.at - y.at) })
	step := every.Microseconds()
	for i := range sends {
		var n int64
		for j := i; j < len(sends); j++ {
			n += sends[j].n
			if limit := int64(burst) + (sends[j].at-sends[i].at+slack)/step; n > limit {
				t.Fatalf("%d requests went in %d µs (sends %d to %d of %d), more than burst %d and one every %s allow (%d)",
					n, sends[j].at-sends[i].at, i, j, len(sends), burst, every, limit)
			}
		}
	}
}

// TestReserveSchedule: on an idle schedule a burst goes at once; then
// each reservation waits one `every` longer than the one before, a
// reservation of several the time of all of them; idle again, none waits.
func TestReserveSchedule(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := pacingNodes(t)
	const every, burst = 100 * time.Millisecond, 3
	now := int64(1_000_000_000)
	ms := func(d int64) int64 { return d * 1000 }
	for i, tt := range []struct {
		s    *Store
		at   int64 // µs after now
		n    int
		want time.Duration
	}{
		{a, 0, 1, 0}, {b, 0, 1, 0}, {a, 0, 1, 0}, // the burst
		{b, 0, 1, 100 * time.Millisecond}, // then one every 100 ms, across nodes
		{a, 0, 1, 200 * time.Millisecond},
		{b, ms(50), 2, 350 * time.Millisecond}, // two: the second's place, 50 ms later
		{a, ms(10_000), 1, 0},                  // idle again
		{b, ms(10_000), 3, 100 * time.Millisecond},
	} {
		got, err := tt.s.reserveAt(ctx, "web/hooks", every, burst, tt.n, now+tt.at)
		if err != nil {
			t.Fatal(err)
		}
		if got != tt.want {
			t.Errorf("reservation %d (%d at +%d µs): wait %s, want %s", i, tt.n, tt.at, got, tt.want)
		}
	}
	// Another key has its own schedule; none paces without a step.
	if got, err := a.reserveAt(ctx, "web/crm", every, burst, 1, now); err != nil || got != 0 {
		t.Errorf("another key: wait %s, %v; want 0", got, err)
	}
	if got, err := a.Reserve(ctx, "web/hooks", 0, burst, 100); err != nil || got != 0 {
		t.Errorf("every 0: wait %s, %v; want 0", got, err)
	}
}

// TestReserveConcurrent: goroutines on two nodes reserve at once, on a
// clock the test moves: however the database orders them, the requests
// never go faster than burst and one every `every`, and the schedule is
// used to the full (the last wait is what the total asks for).
func TestReserveConcurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := pacingNodes(t)
	const every, burst, goroutines, each = 10 * time.Millisecond, 4, 8, 10
	var clock atomic.Int64 // µs; each reservation moves it 0-2 ms on
	clock.Store(5_000_000)
	var (
		mu    sync.Mutex
		sends []sent
		total int64
		wg    sync.WaitGroup
	)
	errs := make(chan error, 2*goroutines)
	for g := range 2 * goroutines {
		s := a
		if g%2 == 1 {
			s = b
		}
		wg.Go(func() {
			for range each {
				now := clock.Add(rand.Int64N(2000))
				n := 1 + rand.IntN(burst)
				wait, err := s.reserveAt(ctx, "web/hooks", every, burst, n, now)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				sends = append(sends, sent{now + wait.Microseconds(), int64(n)})
				total += int64(n)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	checkPace(t, sends, every, burst, 0)
	last := slices.MaxFunc(sends, func(x, y sent) int { return int(x.at - y.at) }).at
	// The schedule's clock ran at most 2 ms a reservation; the requests
	// ask for far more, so they leave no gap: the last goes once all but
	// a burst had their turn after the first to reach the database (among
	// the first reservations, one a goroutine: their clock moved 2 ms at
	// most each).
	if want := 5_000_000 + (total-burst)*every.Microseconds(); last < want || last > want+2000*2*goroutines {
		t.Errorf("the last of %d requests goes at %d µs, want about %d", total, last, want)
	}
}

// TestReserveServerClock: reservations judged by the database's clock,
// from two nodes at once: an idle key waits nothing, waits grow as
// reservations pile up, and the requests, sent when the callers' own
// clock says their wait is over, stay within the pace (each lagging its
// place by at most its call's time: the clock was read during the call).
func TestReserveServerClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := pacingNodes(t)
	const every, burst, goroutines, each = 20 * time.Millisecond, 3, 4, 3
	key := fmt.Sprint("web/hooks/", rand.Int64())
	if wait, err := a.Reserve(ctx, key, every, burst, 1); err != nil || wait != 0 {
		t.Fatalf("idle key: wait %s, %v; want 0", wait, err)
	}
	var (
		mu       sync.Mutex
		sends    = []sent{{time.Now().UnixMicro(), 1}}
		waits    []time.Duration
		maxCall  time.Duration
		wg       sync.WaitGroup
		start    = time.Now()
		failures = make(chan error, 2*goroutines)
	)
	for g := range 2 * goroutines {
		s := a
		if g%2 == 1 {
			s = b
		}
		wg.Go(func() {
			for range each {
				t0 := time.Now()
				wait, err := s.Reserve(ctx, key, every, burst, 1)
				t1 := time.Now()
				if err != nil {
					failures <- err
					return
				}
				mu.Lock()
				sends = append(sends, sent{t1.Add(wait).UnixMicro(), 1})
				waits = append(waits, wait)
				maxCall = max(maxCall, t1.Sub(t0))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(failures)
	for err := range failures {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	checkPace(t, sends, every, burst, maxCall.Microseconds())
	// 1 + 24 requests at a pace of 20 ms after a burst of 3: the longest
	// wait is about 22 of them, less the time the calls took.
	longest := slices.Max(waits)
	if want := time.Duration(len(sends)-burst) * every; longest > want || longest < want-elapsed-every {
		t.Errorf("longest wait %s, want about %s (the calls took %s)", longest, want, elapsed)
	}
}
