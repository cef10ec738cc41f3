// Package lockout limits wrong admin tokens by client address: an address
// may fail Free times; from then on each failure locks it out for a delay
// that doubles from First to Max. A success, or ForgetAfter without a
// failure, forgets the address. At most MaxAddrs addresses are remembered.
// The serve inspector's login and the admin API use it.
package lockout

import (
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// The schedule and the memory bound.
const (
	// Free is how many failures an address has before the first lock-out.
	Free = 5
	// First is the lock-out after the Free-th failure; each failure after
	// it doubles the lock-out, up to Max.
	First = time.Second
	Max   = 5 * time.Minute
	// ForgetAfter is how long an address's failures are remembered after
	// its last one.
	ForgetAfter = 24 * time.Hour
	// MaxAddrs bounds the addresses remembered.
	MaxAddrs = 4096
)

// Limiter counts failures by address. Its methods are safe for concurrent
// use.
type Limiter struct {
	now   func() time.Time
	mu    sync.Mutex
	addrs map[string]*entry
}

// entry is the failures of one address.
type entry struct {
	failures int
	last     time.Time // the last failure
	until    time.Time // locked out until then
	told     bool      // Locked said first for the lock-out until then
}

// New returns a Limiter on the clock now (time.Now when nil).
func New(now func() time.Time) *Limiter {
	if now == nil {
		now = time.Now
	}
	return &Limiter{now: now, addrs: map[string]*entry{}}
}

// Locked says how much longer addr is locked out (0: it is not). first
// says this is the first call that found it locked out since the lock-out
// began, for logging it once.
func (l *Limiter) Locked(addr string) (wait time.Duration, first bool) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.addrs[addr]
	if !ok || !now.Before(e.until) {
		return 0, false
	}
	first = !e.told
	e.told = true
	return e.until.Sub(now), first
}

// Failed counts a failure of addr. It returns the failures addr has had
// (since its last success, within ForgetAfter of each other) and, once
// they are more than Free-1, the lock-out this one starts.
func (l *Limiter) Failed(addr string) (failures int, lockedFor time.Duration) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.addrs[addr]
	if ok && now.Sub(e.last) >= ForgetAfter {
		ok = false
	}
	if !ok {
		if _, kept := l.addrs[addr]; !kept && len(l.addrs) >= MaxAddrs {
			l.makeRoom(now)
		}
		e = &entry{}
		l.addrs[addr] = e
	}
	e.failures++
	e.last = now
	if lockedFor = Delay(e.failures); lockedFor > 0 {
		e.until, e.told = now.Add(lockedFor), false
	}
	return e.failures, lockedFor
}

// Delay is the lock-out that the failures-th failure starts: none before
// the Free-th, then First, doubling up to Max.
func Delay(failures int) time.Duration {
	n := failures - Free
	if n < 0 {
		return 0
	}
	if n < 20 && First<<n < Max {
		return First << n
	}
	return Max
}

// makeRoom drops the addresses not locked out now, or when every one is,
// the one that failed longest ago.
func (l *Limiter) makeRoom(now time.Time) {
	for k, e := range l.addrs {
		if !now.Before(e.until) {
			delete(l.addrs, k)
		}
	}
	if len(l.addrs) < MaxAddrs {
		return
	}
	var oldest string
	for k, e := range l.addrs {
		if oldest == "" || e.last.Before(l.addrs[oldest].last) {
			oldest = k
		}
	}
	delete(l.addrs, oldest)
}

// Forgive forgets addr's failures: it succeeded.
func (l *Limiter) Forgive(addr string) {
	l.mu.Lock()
	delete(l.addrs, addr)
	l.mu.Unlock()
}

// Len is how many addresses l remembers.
func (l *Limiter) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.addrs)
}

// ClientAddr is the address r counts against: the connection's IP (the
// servers that use a Limiter are reached directly, not through a proxy
// whose headers they would have to trust).
func ClientAddr(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}

// RetryAfter is wait in whole seconds, rounded up, at least 1: the value
// of a 429's Retry-After header.
func RetryAfter(wait time.Duration) int64 {
	return max(int64((wait+time.Second-1)/time.Second), 1)
}

// Message is the error a locked-out address is answered with.
func Message(wait time.Duration) string {
	return fmt.Sprintf("too many wrong admin tokens from this address: try again in %ds", RetryAfter(wait))
}
