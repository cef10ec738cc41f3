package webhook

import (
	"time"

	"github.com/evfwd/evfwd/internal/retry"
)

// ParseRetryAfter reads a Retry-After header (RFC 9110 10.2.3): delay
// seconds or an HTTP date, taken relative to now. A date in the past means
// 0; values are capped at a day. It reports false for an empty or
// malformed value.
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) { return retry.After(v, now) }
