package rawjson

import (
	"encoding/binary"
	"errors"
	"math/bits"
)

// A single-pass JSON validator over bytes: ParseObject checks and splits a
// message in one walk instead of validating it first with json.Valid and
// scanning it again. It accepts exactly what encoding/json accepts (strings
// may hold invalid UTF-8, as there); errors only say "invalid", and the
// caller asks encoding/json for the wording on that rare path.

var errSyntax = errors.New("invalid JSON")

// maxScanDepth bounds nesting, as encoding/json does, so hostile input cannot
// recurse without end.
const maxScanDepth = 10000

// ScanValue validates the value starting at b[i] (no leading space) and
// returns the index just past it, and whether it holds insignificant
// whitespace.
func ScanValue(b []byte, i, depth int) (end int, spaced bool, err error) {
	if i >= len(b) {
		return i, false, errSyntax
	}
	switch c := b[i]; {
	case c == '"':
		end, err = ScanString(b, i)
		return end, false, err
	case c == '{':
		return scanContainer(b, i, depth, '}', true)
	case c == '[':
		return scanContainer(b, i, depth, ']', false)
	case c == '-' || c >= '0' && c <= '9':
		end, err = scanNumber(b, i)
		return end, false, err
	case c == 't':
		return scanLiteral(b, i, "true")
	case c == 'f':
		return scanLiteral(b, i, "false")
	case c == 'n':
		return scanLiteral(b, i, "null")
	}
	return i, false, errSyntax
}

// scanContainer validates an object (members) or an array.
func scanContainer(b []byte, i, depth int, closer byte, members bool) (int, bool, error) {
	if depth >= maxScanDepth {
		return i, false, errSyntax
	}
	spaced := false
	j := SkipSpace(b, i+1)
	spaced = spaced || j != i+1
	if j < len(b) && b[j] == closer {
		return j + 1, spaced, nil
	}
	for {
		if members {
			if j >= len(b) || b[j] != '"' {
				return j, false, errSyntax
			}
			end, err := ScanString(b, j)
			if err != nil {
				return end, false, err
			}
			k := SkipSpace(b, end)
			if k >= len(b) || b[k] != ':' {
				return k, false, errSyntax
			}
			j = SkipSpace(b, k+1)
			spaced = spaced || k != end || j != k+1
		}
		end, sp, err := ScanValue(b, j, depth+1)
		if err != nil {
			return end, false, err
		}
		k := SkipSpace(b, end)
		spaced = spaced || sp || k != end
		if k >= len(b) {
			return k, false, errSyntax
		}
		switch b[k] {
		case ',':
			j = SkipSpace(b, k+1)
			spaced = spaced || j != k+1
		case closer:
			return k + 1, spaced, nil
		default:
			return k, false, errSyntax
		}
	}
}

// ScanString validates the string at b[i] == '"': no raw control
// characters, only JSON's escapes.
func ScanString(b []byte, i int) (int, error) {
	words := i // where skipping a word at a time resumes after an escape
	for i++; i < len(b); i++ {
		// Strings are mostly long runs of plain bytes: skip them a word at a
		// time, stopping at the first byte the switch must look at.
		if i >= words {
			for len(b)-i >= 8 {
				if m := specialBytes(binary.LittleEndian.Uint64(b[i:])); m != 0 {
					i += bits.TrailingZeros64(m) / 8
					break
				}
				i += 8
			}
			if i >= len(b) {
				break
			}
		}
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
			// Escapes cluster (JSON inside a string, say), and stopping a
			// word skip costs more than a few bytes looked at one by one.
			words = i + 8
		}
	}
	return i, errSyntax
}

// Every byte of a word set to 0x01, and to 0x7f.
const (
	lsbs = 0x0101010101010101
	lows = 0x7f7f7f7f7f7f7f7f
)

// specialBytes sets the high bit of exactly those bytes of w (eight string
// bytes, little-endian) that are '"', '\\' or below 0x20. Adding to the low
// seven bits of each byte never carries into the next, so each byte's mark
// is its own: bit 7 of t^c + 0x7f is clear only where the byte is c, and of
// t + 0x60 only where it is below 0x20; bytes >= 0x80 (w's own bit 7) are
// never special.
func specialBytes(w uint64) uint64 {
	t := w & lows
	plain := ((t ^ '"'*lsbs) + lows) & ((t ^ '\\'*lsbs) + lows) & (t + 0x60*lsbs)
	return ^(plain | w) &^ lows
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// scanNumber validates -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func scanNumber(b []byte, i int) (int, error) {
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && isDigit(b[i]):
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	default:
		return i, errSyntax
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || !isDigit(b[i]) {
			return i, errSyntax
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return i, errSyntax
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	return i, nil
}

func scanLiteral(b []byte, i int, lit string) (int, bool, error) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return i, false, errSyntax
	}
	return i + len(lit), false, nil
}
