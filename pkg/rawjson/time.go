package rawjson

import "time"

// TimeLayout is how evfwd writes a time.Time: RFC 3339, UTC, milliseconds
// (Segment's wire form).
const TimeLayout = "2006-01-02T15:04:05.000Z07:00"

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
	b := dst[n:]
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
