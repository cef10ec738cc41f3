// Package retry holds the rules both of evfwd's senders share: the batching
// client towards the collection API and the webhook destination towards
// customer endpoints. Which answers are worth another try, how long a
// server may ask us to wait, and exponential backoff.
package retry

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// MaxAfter bounds what a server can ask for with Retry-After; callers bound
// it further. It keeps absurd values from overflowing a Duration.
const MaxAfter = 24 * time.Hour

// Status reports whether an HTTP answer is worth another attempt: 5xx,
// 408 Request Timeout and 429 Too Many Requests.
func Status(code int) bool {
	return code >= 500 && code <= 599 || code == http.StatusRequestTimeout || code == http.StatusTooManyRequests
}

// After reads a Retry-After header (RFC 9110 10.2.3): delay seconds or an
// HTTP date relative to now. A date in the past means 0; values are capped
// at MaxAfter. It reports false for an empty or malformed value.
func After(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if v[0] >= '0' && v[0] <= '9' {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
				return MaxAfter, true
			}
			return 0, false
		}
		if n > uint64(MaxAfter/time.Second) {
			return MaxAfter, true
		}
		return time.Duration(n) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return min(max(t.Sub(now), 0), MaxAfter), true
}

// Exponential is the backoff before attempt n+1 after n failures (n ≥ 1):
// initial, doubling each time, capped at limit. No jitter: callers add
// their own kind.
func Exponential(initial, limit time.Duration, n int) time.Duration {
	d := initial
	for i := 1; i < n && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

// Sleep waits d or until ctx ends, whichever comes first, and returns ctx's
// error in the second case.
func Sleep(ctx context.Context, d time.Duration) error {
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

// Refused says that err is a dial's "connection refused": nothing listens
// at the address, on any platform (Windows has a code of its own for it).
func Refused(err error) bool { return errors.Is(err, errConnRefused) }
