package mapping

import (
	"math"
	"strconv"
	"unicode/utf8"
)

// appendJSNumber appends f as JavaScript's Number::toString writes it:
// the shortest digits that read back as f, in plain notation from 1e-7 up
// to 1e21, else in exponent notation ("1e+21", "1.5e-7").
func appendJSNumber(dst []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, "NaN"...)
	case math.IsInf(f, 1):
		return append(dst, "Infinity"...)
	case math.IsInf(f, -1):
		return append(dst, "-Infinity"...)
	case f == 0:
		return append(dst, '0')
	}
	if f < 0 {
		dst = append(dst, '-')
		f = -f
	}
	var buf [32]byte
	e := strconv.AppendFloat(buf[:0], f, 'e', -1, 64) // d.ddddde±xx
	mant, exp := e, 0
	for i := range e {
		if e[i] == 'e' {
			mant = e[:i]
			exp, _ = strconv.Atoi(string(e[i+1:]))
			break
		}
	}
	var digits [24]byte
	k := 0
	for _, c := range mant {
		if c != '.' {
			digits[k] = c
			k++
		}
	}
	ds := digits[:k]
	n := exp + 1 // f = 0.ds × 10^n
	switch {
	case k <= n && n <= 21:
		dst = append(dst, ds...)
		for i := 0; i < n-k; i++ {
			dst = append(dst, '0')
		}
	case 0 < n && n <= 21:
		dst = append(dst, ds[:n]...)
		dst = append(dst, '.')
		dst = append(dst, ds[n:]...)
	case -6 < n && n <= 0:
		dst = append(dst, '0', '.')
		for i := 0; i < -n; i++ {
			dst = append(dst, '0')
		}
		dst = append(dst, ds...)
	default:
		dst = append(dst, ds[0])
		if k > 1 {
			dst = append(dst, '.')
			dst = append(dst, ds[1:]...)
		}
		dst = append(dst, 'e')
		if n-1 >= 0 {
			dst = append(dst, '+')
		}
		dst = strconv.AppendInt(dst, int64(n-1), 10)
	}
	return dst
}

// appendJSString appends v as JavaScript's String(v) would write it, with
// undefined and null as nothing (mapping-kit's placeholders write
// `value ?? ”`).
func appendJSString(dst []byte, v value) []byte {
	switch v.k {
	case kUndef, kNull:
		return dst
	case kBool:
		if v.bool() {
			return append(dst, "true"...)
		}
		return append(dst, "false"...)
	case kNum:
		return appendJSNumber(dst, v.float())
	case kStr:
		if v.d != nil && v.d.nodes[v.i].esc {
			return appendUnquoted(dst, v.d.raw(v.i))
		}
		return append(dst, v.str(nil)...)
	case kObj:
		return append(dst, "[object Object]"...)
	case kArr: // Array.prototype.join: null and undefined elements are empty
		for j, e := range v.elems() {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSString(dst, e)
		}
	}
	return dst
}

// appendOut appends v as evfwd's output JSON: a value read from a JSON text
// as its own bytes, compacted; a computed one encoded. Undefined members are
// left out and undefined elements are null, as JSON.stringify writes them.
func appendOut(dst []byte, v value) []byte {
	if v.d != nil {
		nd := &v.d.nodes[v.i]
		raw := v.d.src[nd.start:nd.end]
		if nd.spaced {
			return appendCompact(dst, raw)
		}
		return append(dst, raw...)
	}
	switch v.k {
	case kUndef, kNull:
		return append(dst, "null"...)
	case kBool:
		if v.t {
			return append(dst, "true"...)
		}
		return append(dst, "false"...)
	case kNum:
		return append(dst, v.b...)
	case kStr:
		return appendQuoted(dst, v.b)
	case kArr:
		dst = append(dst, '[')
		for j, e := range v.arr {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = appendOut(dst, e)
		}
		return append(dst, ']')
	}
	dst = append(dst, '{')
	first := true
	for _, m := range v.obj {
		if m.v.k == kUndef {
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = appendQuoted(dst, []byte(m.key))
		dst = append(dst, ':')
		dst = appendOut(dst, m.v)
	}
	return append(dst, '}')
}

// appendCompact appends the valid JSON raw without its insignificant
// whitespace.
func appendCompact(dst, raw []byte) []byte {
	in := false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if in {
			dst = append(dst, c)
			switch c {
			case '\\':
				i++
				dst = append(dst, raw[i])
			case '"':
				in = false
			}
			continue
		}
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		case '"':
			in = true
		}
		dst = append(dst, c)
	}
	return dst
}

const hex = "0123456789abcdef"

// appendQuoted appends s as a JSON string: quotes, backslashes and control
// characters escaped (as JSON.stringify does), invalid UTF-8 as U+FFFD.
func appendQuoted(dst, s []byte) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRune(s[i:])
			if r == utf8.RuneError && size == 1 {
				dst = append(dst, s[start:i]...)
				dst = append(dst, "\uFFFD"...)
				i++
				start = i
				continue
			}
			i += size
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
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		i++
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendStringify appends JSON.stringify(v): a computed string, so numbers
// are written as JavaScript writes them (not their digits), keys in
// JavaScript's order and repeated keys once. It reports false when
// JSON.stringify returns undefined.
func appendStringify(dst []byte, v value) ([]byte, bool) {
	switch v.k {
	case kUndef:
		return dst, false
	case kNull:
		return append(dst, "null"...), true
	case kBool:
		if v.bool() {
			return append(dst, "true"...), true
		}
		return append(dst, "false"...), true
	case kNum:
		f := v.float()
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return append(dst, "null"...), true
		}
		return appendJSNumber(dst, f), true
	case kStr:
		return appendQuoted(dst, v.str(nil)), true
	case kArr:
		dst = append(dst, '[')
		for j, e := range v.elems() {
			if j > 0 {
				dst = append(dst, ',')
			}
			var ok bool
			if dst, ok = appendStringify(dst, e); !ok {
				dst = append(dst, "null"...)
			}
		}
		return append(dst, ']'), true
	}
	dst = append(dst, '{')
	first := true
	for _, m := range jsKeyOrder(v.members()) {
		if m.v.k == kUndef {
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = appendQuoted(dst, []byte(m.key))
		dst = append(dst, ':')
		dst, _ = appendStringify(dst, m.v)
	}
	return append(dst, '}'), true
}

// blank is mapping-kit's @if blank test negated: value == null or
// value == ” under JavaScript's loose equality.
func blank(v value) bool {
	switch v.k {
	case kUndef, kNull:
		return true
	case kBool:
		return !v.bool()
	case kNum:
		return v.float() == 0
	case kStr:
		return !v.truthy()
	case kArr:
		return len(appendJSString(nil, v)) == 0
	}
	return false
}
