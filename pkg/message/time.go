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
	if t, ok := parseWire(s); ok {
		return t, nil
	}
	if isDigits(s) {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			if n >= unixMillisFrom {
				return time.UnixMilli(n).UTC(), nil
			}
			return time.Unix(n, 0).UTC(), nil
		}
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.UTC(), nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("invalid timestamp %q: want RFC 3339 (2024-05-01T12:00:00Z), a date (2024-05-01) or Unix seconds/milliseconds", s)
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// wireTimeLen is the length of a timestamp in the wire form.
const wireTimeLen = len("2006-01-02T15:04:05.000Z")

// parseWire reads the wire form (2024-05-01T12:00:00.123Z) without
// time.Parse: nearly every timestamp a sender replays is already in it.
// It reports false for anything else, leaving it to the general path.
func parseWire(s string) (time.Time, bool) {
	if len(s) != wireTimeLen || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' || s[19] != '.' || s[23] != 'Z' {
		return time.Time{}, false
	}
	num := func(i, n int) int {
		v := 0
		for _, c := range []byte(s[i : i+n]) {
			if c < '0' || c > '9' {
				return -1
			}
			v = v*10 + int(c-'0')
		}
		return v
	}
	y, mo, d, h, mi, sec, ms := num(0, 4), num(5, 2), num(8, 2), num(11, 2), num(14, 2), num(17, 2), num(20, 3)
	if y < 0 || mo < 1 || mo > 12 || d < 1 || h < 0 || h > 23 || mi < 0 || mi > 59 || sec < 0 || sec > 59 || ms < 0 {
		return time.Time{}, false
	}
	t := time.Date(y, time.Month(mo), d, h, mi, sec, ms*int(time.Millisecond), time.UTC)
	if t.Day() != d { // 2024-02-30 would roll over; time.Parse refuses it
		return time.Time{}, false
	}
	return t, true
}

// IsWireTime reports whether s is already a timestamp in the wire form.
func IsWireTime(s string) bool {
	_, ok := parseWire(s)
	return ok
}
