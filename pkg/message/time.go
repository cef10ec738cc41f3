package message

import (
	"fmt"
	"strconv"
	"time"
)

// TimeLayout is the wire form of every timestamp: RFC 3339, UTC, milliseconds.
const TimeLayout = "2006-01-02T15:04:05.000Z07:00"

// FormatTime renders t in the wire form, e.g. 2024-05-01T12:00:00.123Z.
func FormatTime(t time.Time) string {
	return string(AppendTime(make([]byte, 0, len(TimeLayout)), t))
}

// AppendTime appends t in the wire form.
func AppendTime(dst []byte, t time.Time) []byte {
	return t.UTC().Truncate(time.Millisecond).AppendFormat(dst, TimeLayout)
}

// unixMillisFrom is where a bare integer stops meaning seconds and starts
// meaning milliseconds: 1e11 seconds is the year 5138, 1e11 ms is 1973.
const unixMillisFrom = 100_000_000_000

// ParseTime reads the timestamp forms users type: RFC 3339 with any offset,
// a date (2024-05-01, taken as midnight UTC), or Unix seconds or
// milliseconds.
func ParseTime(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.UTC(), nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil && n >= 0 {
		if n >= unixMillisFrom {
			return time.UnixMilli(n).UTC(), nil
		}
		return time.Unix(n, 0).UTC(), nil
	}
	return time.Time{}, fmt.Errorf("invalid timestamp %q: want RFC 3339 (2024-05-01T12:00:00Z), a date (2024-05-01) or Unix seconds/milliseconds", s)
}
