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

// Unix seconds of 0000-01-01 and 10000-01-01: AppendTime's fast path covers
// the years between, where the layout's year is exactly four digits.
const (
	minWireUnix = -62167219200
	maxWireUnix = 253402300800
)

// AppendTime appends t in the wire form. It formats by hand rather than
// with AppendFormat, which is several times slower and sits on every
// message's path; the output is the same byte for byte.
func AppendTime(dst []byte, t time.Time) []byte {
	sec := t.Unix()
	if sec < minWireUnix || sec >= maxWireUnix {
		return t.UTC().Truncate(time.Millisecond).AppendFormat(dst, TimeLayout)
	}
	sec -= minWireUnix // now >= 0: seconds since 0000-01-01
	day, s := int(sec/86400), int(sec%86400)

	// Civil date from a day count (H. Hinnant's civil_from_days),
	// on years that start in March so the leap day falls last. Counting
	// from -0400-03-01 (0000-03-01 is day 60 of the leap year 0) keeps
	// every quantity non-negative.
	z := day - 60 + 146097
	era, doe := z/146097, z%146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365 // year of era, [0, 399]
	doy := doe - (365*yoe + yoe/4 - yoe/100)               // day of March-based year, [0, 365]
	mp := (5*doy + 2) / 153                                // month from March, [0, 11]
	d := doy - (153*mp+2)/5 + 1
	y, m := yoe+era*400-400, mp+3
	if m > 12 {
		y, m = y+1, m-12
	}

	n := len(dst)
	dst = append(dst, "0000-00-00T00:00:00.000Z"...)
	b := dst[n : n+wireTimeLen]
	put2(b[0:], y/100)
	put2(b[2:], y%100)
	put2(b[5:], m)
	put2(b[8:], d)
	put2(b[11:], s/3600)
	put2(b[14:], s/60%60)
	put2(b[17:], s%60)
	ms := t.Nanosecond() / 1e6 // truncates, as Truncate(time.Millisecond) does
	b[20] = byte('0' + ms/100)
	put2(b[21:], ms%100)
	return dst
}

// put2 writes v (0..99) as two digits.
func put2(b []byte, v int) {
	b[0], b[1] = byte('0'+v/10), byte('0'+v%10)
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
