package rawjson

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/evfwd/evfwd/internal/testsize"
)

// appendTimeRef is what AppendTime must match byte for byte.
func appendTimeRef(dst []byte, t time.Time) []byte {
	return t.UTC().Truncate(time.Millisecond).AppendFormat(dst, TimeLayout)
}

func checkAppendTime(t *testing.T, tm time.Time) {
	t.Helper()
	want := string(appendTimeRef([]byte("x"), tm))
	if got := string(AppendTime([]byte("x"), tm)); got != want {
		t.Fatalf("AppendTime(%v) (unix %d, ns %d) = %s, want %s", tm, tm.Unix(), tm.Nanosecond(), got, want)
	}
}

func TestAppendTimeMatchesAppendFormat(t *testing.T) {
	zones := []*time.Location{time.UTC, time.Local, time.FixedZone("east", 14*3600), time.FixedZone("west", -12*3600-1800)}
	if ny, err := time.LoadLocation("America/New_York"); err == nil {
		zones = append(zones, ny)
	}
	var times []time.Time
	for _, y := range []int{0, 1, 4, 100, 400, 1582, 1899, 1900, 1969, 1970, 2000, 2024, 2100, 2400, 9999} {
		for _, md := range [][2]int{{1, 1}, {2, 28}, {2, 29}, {3, 1}, {12, 31}} {
			for _, ns := range []int{0, 999_999, 1_000_000, 123_456_789, 999_999_999} {
				times = append(times, time.Date(y, time.Month(md[0]), md[1], 23, 59, 59, ns, time.UTC))
				times = append(times, time.Date(y, time.Month(md[0]), md[1], 0, 0, 0, ns, time.UTC))
			}
		}
	}
	// The fast path's edges, the years either side of it, and the extremes.
	for _, sec := range []int64{minWireUnix, maxWireUnix, 0, -1, math.MinInt64, math.MaxInt64, math.MinInt64 / 2, math.MaxInt64 / 2} {
		for _, d := range []int64{-86400, -1, 0, 1, 86400} {
			if s := sec + d; (d < 0) == (s < sec) {
				times = append(times, time.Unix(s, 0), time.Unix(s, 999_999_999))
			}
		}
	}
	times = append(times, time.Time{}, time.Now(), time.Date(-1, 12, 31, 23, 59, 59, 0, time.UTC), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC))
	// Random instants, a tenth of them under -race: the edges are above.
	r := rand.New(rand.NewPCG(1, 2))
	for range testsize.Pick(20_000, 2_000) {
		times = append(times,
			time.Unix(minWireUnix+r.Int64N(maxWireUnix-minWireUnix), r.Int64N(1e9)),
			time.Unix(r.Int64N(4e9)-2e9, r.Int64N(1e9)), // near 1970, negative too
			time.Unix(int64(r.Uint64()), int64(r.Uint64())))
	}
	for _, tm := range times {
		for _, z := range zones {
			checkAppendTime(t, tm.In(z))
		}
	}
}

func FuzzAppendTime(f *testing.F) {
	f.Add(int64(1714564800), int64(123_456_789))
	f.Add(int64(minWireUnix), int64(-1))
	f.Add(int64(maxWireUnix-1), int64(999_999_999))
	f.Add(int64(math.MinInt64), int64(0))
	f.Fuzz(func(t *testing.T, sec, nsec int64) {
		tm := time.Unix(sec, nsec)
		checkAppendTime(t, tm)
		checkAppendTime(t, tm.In(time.FixedZone("", int(sec%(18*3600)))))
	})
}

func BenchmarkAppendTime(b *testing.B) {
	t := time.Date(2024, 5, 1, 12, 0, 0, 123_456_789, time.UTC)
	buf := make([]byte, 0, 64)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendTime(buf[:0], t)
	}
}
