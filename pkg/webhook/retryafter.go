package webhook

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxRetryAfter bounds what a server can ask for; the retry window bounds
// it further. It keeps absurd values from overflowing a Duration.
const maxRetryAfter = 24 * time.Hour

// ParseRetryAfter reads a Retry-After header (RFC 9110 10.2.3): delay
// seconds or an HTTP date, taken relative to now. A date in the past means
// 0. It reports false for an empty or malformed value.
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if v[0] >= '0' && v[0] <= '9' {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
				return maxRetryAfter, true
			}
			return 0, false
		}
		if n > uint64(maxRetryAfter/time.Second) {
			return maxRetryAfter, true
		}
		return time.Duration(n) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d := t.Sub(now)
	return min(max(d, 0), maxRetryAfter), true
}
