package message

import (
	"fmt"
	"strconv"
	"time"

	"github.com/evfwd/evfwd/pkg/rawjson"
)

// TimeLayout is the wire form of every timestamp: RFC 3339, UTC, milliseconds.
const TimeLayout = rawjson.TimeLayout

// FormatTime renders t in the wire form, e.g. 2024-05-01T12:00:00.123Z.
func FormatTime(t time.Time) string {
	return string(AppendTime(make([]byte, 0, len(TimeLayout)), t))
}

// AppendTime appends t in the wire form; the JSON toolkit writes times the
// same way, so it owns the formatter.
func AppendTime(dst []byte, t time.Time) []byte { return rawjson.AppendTime(dst, t) }

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
	if t, ok := parseUnix(s); ok {
		return t, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.UTC(), nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("invalid timestamp %q: want RFC 3339 (2024-05-01T12:00:00Z), a date (2024-05-01) or Unix seconds/milliseconds", s)
}

// parseUnix reads Unix seconds or milliseconds (digits only). It keeps
// nothing of s, so a caller holding bytes can pass string(b) without an
// allocation: replayed exports carry their timestamps this way.
func parseUnix(s string) (time.Time, bool) {
	if s == "" {
		return time.Time{}, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return time.Time{}, false
		}
		n = n*10 + int64(c-'0')
	}
	if len(s) > 18 { // might have overflowed: let strconv decide
		var err error
		if n, err = strconv.ParseInt(s, 10, 64); err != nil {
			return time.Time{}, false
		}
	}
	if n >= unixMillisFrom {
		return time.UnixMilli(n).UTC(), true
	}
	return time.Unix(n, 0).UTC(), true
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
