package rawjson

import (
	"encoding/binary"
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/evfwd/evfwd/internal/testsize"
)

// scanStringRef is ScanString as it was, a byte at a time: the word-at-a-time
// version must agree with it on every input.
func scanStringRef(b []byte, i int) (int, error) {
	for i++; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i + 1, nil
		case c < 0x20:
			return i, errSyntax
		case c == '\\':
			i++
			if i >= len(b) {
				return i, errSyntax
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(b) || !isHex(b[i+1]) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) {
					return i, errSyntax
				}
				i += 4
			default:
				return i, errSyntax
			}
		}
	}
	return i, errSyntax
}

func isSpecial(c byte) bool { return c == '"' || c == '\\' || c < 0x20 }

// specialBytesRef is specialBytes a byte at a time.
func specialBytesRef(w uint64) uint64 {
	var m uint64
	for k := range 8 {
		if isSpecial(byte(w >> (8 * k))) {
			m |= 0x80 << (8 * k)
		}
	}
	return m
}

// interesting are the byte values at and next to the edges specialBytes tests.
var interesting = []byte{0x00, 0x01, 0x1f, 0x20, 0x21, '"' - 1, '"', '"' + 1, '\\' - 1, '\\', '\\' + 1, 'a', 0x7f, 0x80, 0x81, 0xa2, 0xdc, 0xfe, 0xff}

func TestSpecialBytes(t *testing.T) {
	check := func(w uint64) {
		t.Helper()
		if got, want := specialBytes(w), specialBytesRef(w); got != want {
			t.Fatalf("specialBytes(%#016x) = %#016x, want %#016x", w, got, want)
		}
	}
	// Every byte value at every position, among plain and special fillers,
	// and every pair of adjacent bytes, where a carry would show.
	for _, fill := range []byte{'a', ' ', 0x80, 0xff, 0x00, '"'} {
		for p := range 8 {
			for c := range 256 {
				var b [8]byte
				for k := range b {
					b[k] = fill
				}
				b[p] = byte(c)
				check(binary.LittleEndian.Uint64(b[:]))
				if p < 7 {
					for d := range 256 {
						b[p+1] = byte(d)
						check(binary.LittleEndian.Uint64(b[:]))
					}
				}
			}
		}
	}
	// Then random words of interesting bytes; the pass above is the
	// exhaustive one, so under -race (tenfold slower) a sixteenth of them.
	r := rand.New(rand.NewPCG(3, 4))
	for range testsize.Pick(1<<20, 1<<16) {
		var b [8]byte
		for k := range b {
			b[k] = interesting[r.IntN(len(interesting))]
		}
		check(binary.LittleEndian.Uint64(b[:]))
		check(r.Uint64())
	}
}

func checkScanString(t *testing.T, b []byte) {
	t.Helper()
	end, err := ScanString(b, 0)
	wantEnd, wantErr := scanStringRef(b, 0)
	if (err == nil) != (wantErr == nil) || err == nil && end != wantEnd {
		t.Fatalf("ScanString(%q) = %d, %v; want %d, %v", b, end, err, wantEnd, wantErr)
	}
}

func TestScanStringMatchesByteAtATime(t *testing.T) {
	for _, c := range scanStringCases {
		checkScanString(t, []byte(c.s))
		checkScanString(t, []byte(c.s[:len(c.s)-1]))
		checkScanString(t, []byte(c.s+`,"next":1}`))
	}
	// Strings of every length up to a few words, made mostly of plain bytes
	// with the odd special byte or escape anywhere, cut off anywhere.
	pieces := []string{"a", "b", "é", "\xff", "\x80", " ", "~", `\"`, `\\`, `\/`, `\n`, `\u00e9`, `\uD83D`, `\u12`, `\x`, `\`, `"`, "\x00", "\x1f", "\t", "\x7f"}
	// Under -race (tenfold slower), a tenth of them; the cases above are
	// the edges, and the run without -race makes all of them.
	r := rand.New(rand.NewPCG(5, 6))
	for range testsize.Pick(200_000, 20_000) {
		b := []byte{'"'}
		for n := r.IntN(40); len(b) < n; {
			if r.IntN(6) == 0 {
				b = append(b, pieces[r.IntN(len(pieces))]...)
			} else {
				b = append(b, "plain text"[r.IntN(10)])
			}
		}
		if r.IntN(4) != 0 {
			b = append(b, '"')
		}
		for range r.IntN(10) {
			b = append(b, interesting[r.IntN(len(interesting))])
		}
		checkScanString(t, b)
	}
}

func FuzzScanString(f *testing.F) {
	for _, c := range scanStringCases {
		f.Add([]byte(c.s))
	}
	f.Add([]byte(`"abcdefgh\u00e9ijklmnop\"qrstuvwx\\"`))
	f.Add([]byte("\"abcdefghijklmnop\x01\""))
	f.Fuzz(func(t *testing.T, b []byte) {
		b = append([]byte{'"'}, b...)
		checkScanString(t, b)
	})
}

// FuzzScanValueAgreesWithJSONValid: any JSON value, not only the objects
// FuzzParseObjectAgreesWithEncodingJSON covers.
func FuzzScanValueAgreesWithJSONValid(f *testing.F) {
	for _, s := range []string{`"a"`, ` [1, "x\u00e9", {"k": null}] `, `-0.5e+3`, `01`, `"\x"`, "\"\x01\"", "\"caf\xc3\xa9 \xff\"", `[1,]`, `tru`, `{"a":1} x`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		end, _, err := ScanValue(data, SkipSpace(data, 0), 0)
		ok := err == nil && SkipSpace(data, end) == len(data)
		if want := json.Valid(data); ok != want {
			t.Fatalf("ScanValue(%q) ok = %v (err %v), json.Valid = %v", data, ok, err, want)
		}
	})
}
