package lockout

import (
	"fmt"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/evfwd/evfwd/internal/webhooktest"
)

func newClock() *webhooktest.Clock {
	return webhooktest.NewClock(time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC))
}

func TestDelaySchedule(t *testing.T) {
	for _, tt := range []struct {
		failures int
		want     time.Duration
	}{
		{0, 0}, {1, 0}, {4, 0},
		{5, time.Second}, {6, 2 * time.Second}, {7, 4 * time.Second}, {8, 8 * time.Second},
		{12, 128 * time.Second}, {13, 256 * time.Second}, {14, 5 * time.Minute}, {15, 5 * time.Minute},
		{24, 5 * time.Minute}, {25, 5 * time.Minute}, {100, 5 * time.Minute}, {1 << 30, 5 * time.Minute},
	} {
		if got := Delay(tt.failures); got != tt.want {
			t.Errorf("Delay(%d) = %v, want %v", tt.failures, got, tt.want)
		}
	}
}

// Each failure from the Free-th on locks the address out for the
// schedule's delay; Locked counts it down and says first once per lock-out.
func TestLimiterSchedule(t *testing.T) {
	c := newClock()
	l := New(c.Now)
	const a = "192.0.2.1"
	for i := 1; i <= 20; i++ {
		if wait, _ := l.Locked(a); wait != 0 {
			t.Fatalf("before failure %d: locked for %v", i, wait)
		}
		n, lock := l.Failed(a)
		if n != i || lock != Delay(i) {
			t.Errorf("failure %d: Failed = %d, %v; want %d, %v", i, n, lock, i, Delay(i))
		}
		if lock == 0 {
			continue
		}
		wait, first := l.Locked(a)
		if wait != lock || !first {
			t.Errorf("at once after failure %d: Locked = %v, %v; want %v, true", i, wait, first, lock)
		}
		c.Add(lock / 2)
		wait, first = l.Locked(a)
		if wait != lock-lock/2 || first {
			t.Errorf("halfway after failure %d: Locked = %v, %v; want %v, false", i, wait, first, lock-lock/2)
		}
		c.Add(lock - lock/2)
		if wait, first := l.Locked(a); wait != 0 || first {
			t.Errorf("at the end of lock-out %d: Locked = %v, %v", i, wait, first)
		}
	}
	if wait, _ := l.Locked("192.0.2.2"); wait != 0 {
		t.Errorf("another address: locked for %v", wait)
	}
}

func TestLimiterForgive(t *testing.T) {
	c := newClock()
	l := New(c.Now)
	for range Free {
		l.Failed("a")
		l.Failed("b")
	}
	l.Forgive("a")
	if wait, _ := l.Locked("a"); wait != 0 {
		t.Errorf("forgiven: locked for %v", wait)
	}
	if wait, _ := l.Locked("b"); wait != First {
		t.Errorf("the other address: locked for %v, want %v", wait, First)
	}
	if n, lock := l.Failed("a"); n != 1 || lock != 0 {
		t.Errorf("after Forgive: Failed = %d, %v; want 1, 0", n, lock)
	}
	if l.Len() != 2 {
		t.Errorf("Len = %d, want 2", l.Len())
	}
}

// Failures are forgotten ForgetAfter after the last one, not before.
func TestLimiterForgetsAfterADay(t *testing.T) {
	c := newClock()
	l := New(c.Now)
	for range Free + 3 {
		l.Failed("a")
	}
	c.Add(ForgetAfter - time.Second)
	if n, lock := l.Failed("a"); n != Free+4 || lock != Delay(Free+4) {
		t.Errorf("a second short of a day: Failed = %d, %v; want %d, %v", n, lock, Free+4, Delay(Free+4))
	}
	c.Add(ForgetAfter)
	if wait, _ := l.Locked("a"); wait != 0 {
		t.Errorf("a day later: locked for %v", wait)
	}
	if n, lock := l.Failed("a"); n != 1 || lock != 0 {
		t.Errorf("a day later: Failed = %d, %v; want 1, 0", n, lock)
	}
}

// At most MaxAddrs addresses are remembered: the ones not locked out go
// first, then the one that failed longest ago; a locked-out address that
// failed recently stays locked out.
func TestLimiterBounded(t *testing.T) {
	c := newClock()
	l := New(c.Now)
	for range Free {
		l.Failed("locked")
	}
	for i := range MaxAddrs + 100 {
		l.Failed(fmt.Sprintf("10.%d.%d.1", i/256, i%256))
		if n := l.Len(); n > MaxAddrs {
			t.Fatalf("%d addresses kept, want at most %d", n, MaxAddrs)
		}
	}
	if wait, _ := l.Locked("locked"); wait != First {
		t.Errorf("the locked-out address was dropped for ones that were not: locked for %v", wait)
	}

	// Every address locked out: the oldest goes.
	l = New(c.Now)
	for i := range MaxAddrs {
		for range Free {
			l.Failed(fmt.Sprint("addr-", i))
		}
		c.Add(time.Microsecond)
	}
	l.Failed("new")
	if n := l.Len(); n != MaxAddrs {
		t.Errorf("%d addresses kept, want %d", n, MaxAddrs)
	}
	if wait, _ := l.Locked("addr-0"); wait != 0 {
		t.Errorf("the oldest address was kept (locked for %v)", wait)
	}
	if wait, _ := l.Locked("addr-1"); wait == 0 {
		t.Error("the second oldest address was dropped")
	}
}

// Concurrent failures from one address are each counted once; run under
// -race.
func TestLimiterConcurrent(t *testing.T) {
	c := newClock()
	l := New(c.Now)
	const workers, each = 16, 50
	var wg sync.WaitGroup
	seen := make([]bool, workers*each+1)
	var mu sync.Mutex
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				n, _ := l.Failed("shared")
				mu.Lock()
				if seen[n] {
					t.Errorf("failure count %d returned twice", n)
				}
				seen[n] = true
				mu.Unlock()
				own := fmt.Sprint("own-", w)
				l.Failed(own)
				l.Locked(own)
				if i%7 == 0 {
					l.Forgive(own)
				}
				l.Len()
				c.Add(time.Millisecond)
			}
		})
	}
	wg.Wait()
	if n, _ := l.Failed("shared"); n != workers*each+1 {
		t.Errorf("after %d concurrent failures, the next is number %d", workers*each, n)
	}
}

func TestClientAddr(t *testing.T) {
	for _, tt := range []struct{ remote, want string }{
		{"192.0.2.1:4000", "192.0.2.1"},
		{"[2001:db8::1]:4000", "2001:db8::1"},
		{"pipe", "pipe"},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = tt.remote
		if got := ClientAddr(r); got != tt.want {
			t.Errorf("ClientAddr(%q) = %q, want %q", tt.remote, got, tt.want)
		}
	}
}

func TestRetryAfterAndMessage(t *testing.T) {
	for _, tt := range []struct {
		wait time.Duration
		want int64
	}{{0, 1}, {time.Millisecond, 1}, {time.Second, 1}, {time.Second + 1, 2}, {3500 * time.Millisecond, 4}, {Max, 300}} {
		if got := RetryAfter(tt.wait); got != tt.want {
			t.Errorf("RetryAfter(%v) = %d, want %d", tt.wait, got, tt.want)
		}
	}
	if got, want := Message(1500*time.Millisecond), "too many wrong admin tokens from this address: try again in 2s"; got != want {
		t.Errorf("Message = %q, want %q", got, want)
	}
}
