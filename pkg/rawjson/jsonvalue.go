package rawjson

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// This file writes Go values as compact JSON by appending to a byte slice.
// The common shapes (maps, slices, strings, numbers, big numbers, times) are
// handled by a type switch so the hot path uses no reflection; anything
// else falls back to encoding/json. Map keys are sorted, as encoding/json
// does, so output is deterministic.

// maxDepth bounds nesting so a map that contains itself fails instead of
// overflowing the stack.
const maxDepth = 1000

// AppendValue appends v as compact JSON. *big.Int, *big.Float and *big.Rat
// anywhere inside maps and slices are written as strings (spec 4.5).
func AppendValue(dst []byte, v any) ([]byte, error) {
	return appendValue(dst, v, 0)
}

// appendValue is one flat switch, a case per kind; a kind that takes more
// than a line has its own function.
func appendValue(dst []byte, v any, depth int) ([]byte, error) {
	if depth > maxDepth {
		return dst, fmt.Errorf("value nested more than %d levels deep", maxDepth)
	}
	switch v := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case string:
		return AppendString(dst, v), nil
	case bool:
		return strconv.AppendBool(dst, v), nil
	case int:
		return strconv.AppendInt(dst, int64(v), 10), nil
	case int8:
		return strconv.AppendInt(dst, int64(v), 10), nil
	case int16:
		return strconv.AppendInt(dst, int64(v), 10), nil
	case int32:
		return strconv.AppendInt(dst, int64(v), 10), nil
	case int64:
		return strconv.AppendInt(dst, v, 10), nil
	case uint:
		return strconv.AppendUint(dst, uint64(v), 10), nil
	case uint8:
		return strconv.AppendUint(dst, uint64(v), 10), nil
	case uint16:
		return strconv.AppendUint(dst, uint64(v), 10), nil
	case uint32:
		return strconv.AppendUint(dst, uint64(v), 10), nil
	case uint64:
		return strconv.AppendUint(dst, v, 10), nil
	case float32:
		return appendFloat(dst, float64(v), 32)
	case float64:
		return appendFloat(dst, v, 64)
	case json.Number:
		if !validNumber(string(v)) {
			return dst, fmt.Errorf("invalid json.Number %q", string(v))
		}
		return append(dst, v...), nil
	case json.RawMessage:
		return appendRaw(dst, v)
	case *big.Int:
		return appendBigInt(dst, v), nil
	case *big.Float:
		return appendBigFloat(dst, v), nil
	case *big.Rat:
		if v == nil {
			return append(dst, "null"...), nil
		}
		return AppendString(dst, ratString(v)), nil
	case time.Time:
		dst = append(dst, '"')
		dst = AppendTime(dst, v)
		return append(dst, '"'), nil
	case map[string]any:
		return appendMap(dst, v, depth)
	case []any:
		return appendArray(dst, v, depth)
	case map[string]string:
		return appendStringMap(dst, v), nil
	case []string:
		return appendStrings(dst, v), nil
	default:
		// Rare shapes (structs, typed maps and slices): reflection is fine.
		b, err := json.Marshal(v)
		if err != nil {
			return dst, err
		}
		return append(dst, b...), nil
	}
}

func appendArray(dst []byte, a []any, depth int) ([]byte, error) {
	dst = append(dst, '[')
	for i, e := range a {
		if i > 0 {
			dst = append(dst, ',')
		}
		var err error
		if dst, err = appendValue(dst, e, depth+1); err != nil {
			return dst, err
		}
	}
	return append(dst, ']'), nil
}

func appendStringMap(dst []byte, m map[string]string) []byte {
	var buf [16]string
	keys := AppendSortedKeys(buf[:0], m)
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendString(dst, k)
		dst = append(dst, ':')
		dst = AppendString(dst, m[k])
	}
	return append(dst, '}')
}

func appendStrings(dst []byte, a []string) []byte {
	dst = append(dst, '[')
	for i, s := range a {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendString(dst, s)
	}
	return append(dst, ']')
}

// appendBigInt writes n as a string of digits (spec 4.5), nil as null.
func appendBigInt(dst []byte, n *big.Int) []byte {
	if n == nil {
		return append(dst, "null"...)
	}
	dst = append(dst, '"')
	dst = n.Append(dst, 10)
	return append(dst, '"')
}

// appendBigFloat writes f as a string (spec 4.5), nil as null: plain
// digits, as a decimal is written, unless the exponent is huge (about
// 1e±100), where the exponent form stays short.
func appendBigFloat(dst []byte, f *big.Float) []byte {
	if f == nil {
		return append(dst, "null"...)
	}
	format := byte('f')
	if e := f.MantExp(nil); e < -332 || e > 332 {
		format = 'g'
	}
	dst = append(dst, '"')
	dst = f.Append(dst, format, -1)
	return append(dst, '"')
}

func appendMap(dst []byte, m map[string]any, depth int) ([]byte, error) {
	var buf [16]string // keys of small maps stay on the stack
	keys := AppendSortedKeys(buf[:0], m)
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendString(dst, k)
		dst = append(dst, ':')
		var err error
		if dst, err = appendValue(dst, m[k], depth+1); err != nil {
			return dst, fmt.Errorf("%s: %w", k, err)
		}
	}
	return append(dst, '}'), nil
}

// AppendSortedKeys appends the keys of m to keys and sorts them.
func AppendSortedKeys[V any](keys []string, m map[string]V) []string {
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// ratString writes a rational exactly: a plain decimal when it has a
// finite one (the denominator divides a power of ten), "num/den" otherwise.
func ratString(r *big.Rat) string {
	if r.IsInt() {
		return r.Num().String()
	}
	// Count the factors of 2 and 5 in the denominator; anything else left
	// over means the decimal never ends.
	d := new(big.Int).Set(r.Denom())
	two, five := big.NewInt(2), big.NewInt(5)
	var twos, fives int
	mod := new(big.Int)
	for {
		q, m := new(big.Int).QuoRem(d, two, mod)
		if m.Sign() != 0 {
			break
		}
		d, twos = q, twos+1
	}
	for {
		q, m := new(big.Int).QuoRem(d, five, mod)
		if m.Sign() != 0 {
			break
		}
		d, fives = q, fives+1
	}
	if d.Cmp(big.NewInt(1)) != 0 {
		return r.RatString()
	}
	return r.FloatString(max(twos, fives))
}

func appendFloat(dst []byte, f float64, bits int) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return dst, fmt.Errorf("unsupported number %v", f)
	}
	// Same shape as encoding/json: plain digits in the usual range,
	// exponent form for very small and very large magnitudes.
	format := byte('f')
	if abs := math.Abs(f); abs != 0 {
		if bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
			format = 'e'
		}
	}
	start := len(dst)
	dst = strconv.AppendFloat(dst, f, format, -1, bits)
	if format == 'e' {
		// Trim "e-09" to "e-9".
		n := len(dst) - start
		if n >= 4 && dst[len(dst)-4] == 'e' && dst[len(dst)-3] == '-' && dst[len(dst)-2] == '0' {
			dst[len(dst)-2] = dst[len(dst)-1]
			dst = dst[:len(dst)-1]
		}
	}
	return dst, nil
}

func appendRaw(dst []byte, v json.RawMessage) ([]byte, error) {
	if len(v) == 0 {
		return append(dst, "null"...), nil
	}
	if !json.Valid(v) {
		return dst, fmt.Errorf("invalid json.RawMessage")
	}
	return appendCompact(dst, v), nil
}

// appendCompact appends valid JSON v without whitespace outside strings.
func appendCompact(dst, v []byte) []byte {
	inString, esc := false, false
	for _, c := range v {
		switch {
		case esc:
			esc = false
		case inString && c == '\\':
			esc = true
		case c == '"':
			inString = !inString
		case !inString && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			continue
		}
		dst = append(dst, c)
	}
	return dst
}

// validNumber reports whether s is a JSON number.
func validNumber(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		j := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == j {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		j := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == j {
			return false
		}
	}
	return i == len(s)
}

const hexDigits = "0123456789abcdef"

// PlainASCII reports whether AppendString writes byte c as itself.
func PlainASCII(c byte) bool {
	return c >= 0x20 && c < utf8.RuneSelf && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
}

// AppendString appends s as a JSON string byte for byte as encoding/json
// does (control characters, quotes, backslashes and <, >, & escaped, invalid
// UTF-8 replaced by U+FFFD, U+2028/U+2029 escaped), without allocating.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if PlainASCII(c) {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
