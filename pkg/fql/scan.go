package fql

import (
	"strconv"
	"unicode/utf8"

	"github.com/evfwd/evfwd/pkg/rawjson"
)

// A message is read once, from its raw bytes: the scanner walks the keys a
// Set's paths name and skips (validating) everything else. What it records
// at each path is what Segment's get (a reduce of `value && value[key]`
// over the path's keys) finds in the JSON.parse'd message:
//
//   - a falsy value (0, "", false, null) answers for every path below it,
//     as `value && ...` stops there;
//   - an array answers its elements at canonical indices and its length;
//   - a string answers its length and, at canonical indices, its UTF-16
//     code units (as one-unit strings);
//   - of duplicate keys the last one wins, as in JSON.parse.
//
// Strings are kept as WTF-8: UTF-8, with a lone surrogate escape (\ud800)
// as the three bytes its code point would have, which no valid text
// contains, so comparisons with a condition's text agree with JavaScript's
// comparisons of UTF-16 code units.

type kind uint8

const (
	vUndefined kind = iota
	vNull
	vFalse
	vTrue
	vNum
	vStr
	vObject // an object or an array
)

type value struct {
	kind kind
	n    float64
	s    []byte
}

func (v *value) falsy() bool {
	switch v.kind {
	case vNull, vFalse:
		return true
	case vNum:
		return v.n == 0
	case vStr:
		return len(v.s) == 0
	}
	return false
}

// state is one Decide's: the value at each slot and room for unescaped
// strings.
type state struct {
	vals    []value
	scratch []byte
}

// scan reads msg, one JSON object, into st.vals (all undefined before);
// false when msg is not one.
func (st *state) scan(root *tnode, msg []byte) bool {
	i := rawjson.SkipSpace(msg, 0)
	if i >= len(msg) || msg[i] != '{' {
		return false
	}
	end, err := st.assign(root, msg, i, 0)
	if err != nil {
		return false
	}
	return rawjson.SkipSpace(msg, end) == len(msg)
}

// assign records the value at msg[i] for t and every path below t, and
// returns the index past the value.
func (st *state) assign(t *tnode, b []byte, i, depth int) (int, error) {
	v := &st.vals[t.slot]
	if len(t.kids) == 0 {
		// Only the value itself matters: its kind, number or string.
		switch c := b[i]; {
		case c == '"':
			return st.readString(b, i, v)
		case c == '-' || c >= '0' && c <= '9':
			return readNumber(b, i, v)
		}
		end, _, err := rawjson.ScanValue(b, i, depth)
		if err == nil {
			v.kind = literalKind(b[i])
		}
		return end, err
	}
	clear(st.vals[t.slot : t.last+1])
	switch c := b[i]; {
	case c == '{':
		v.kind = vObject
		return st.object(t, b, i, depth+1)
	case c == '[':
		v.kind = vObject
		return st.array(t, b, i, depth+1)
	case c == '"':
		end, err := st.readString(b, i, v)
		if err == nil {
			st.below(t, v)
		}
		return end, err
	case c == '-' || c >= '0' && c <= '9':
		end, err := readNumber(b, i, v)
		if err == nil {
			st.below(t, v)
		}
		return end, err
	}
	end, _, err := rawjson.ScanValue(b, i, depth)
	if err == nil {
		v.kind = literalKind(b[i])
		st.below(t, v)
	}
	return end, err
}

func literalKind(c byte) kind {
	switch c {
	case 't':
		return vTrue
	case 'f':
		return vFalse
	case 'n':
		return vNull
	}
	return vObject
}

// below records, for the paths under t, what they find in t's scalar v.
func (st *state) below(t *tnode, v *value) {
	if v.falsy() {
		for s := t.slot + 1; s <= t.last; s++ {
			st.vals[s] = *v
		}
		return
	}
	if v.kind != vStr {
		return // a number or true has no keys but its prototype's
	}
	n := -1 // the string's length in code units, counted when asked
	for _, k := range t.kids {
		if k.key == "length" {
			if n < 0 {
				n = units(v.s)
			}
			st.vals[k.slot] = value{kind: vNum, n: float64(n)}
			st.below(k, &st.vals[k.slot])
			continue
		}
		if k.index < 0 {
			continue
		}
		start := len(st.scratch)
		var ok bool
		st.scratch, ok = appendUnit(st.scratch, v.s, k.index)
		if !ok {
			continue
		}
		kv := &st.vals[k.slot]
		*kv = value{kind: vStr, s: st.scratch[start:len(st.scratch):len(st.scratch)]}
		if len(k.kids) > 0 {
			st.below(k, kv)
		}
	}
}

func (st *state) object(t *tnode, b []byte, i, depth int) (int, error) {
	if depth >= 10000 {
		return i, errDeep
	}
	i = rawjson.SkipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return i, errBad
		}
		kend, err := rawjson.ScanString(b, i)
		if err != nil {
			return kend, err
		}
		key := b[i+1 : kend-1]
		if hasBackslash(key) {
			start := len(st.scratch)
			st.scratch = appendUnescaped(st.scratch, key)
			key = st.scratch[start:]
			st.scratch = st.scratch[:start] // the key is compared at once
		}
		k := t.find(key)
		i = rawjson.SkipSpace(b, kend)
		if i >= len(b) || b[i] != ':' {
			return i, errBad
		}
		i = rawjson.SkipSpace(b, i+1)
		if i >= len(b) {
			return i, errBad
		}
		if k != nil {
			i, err = st.assign(k, b, i, depth)
		} else {
			i, _, err = rawjson.ScanValue(b, i, depth)
		}
		if err != nil {
			return i, err
		}
		i = rawjson.SkipSpace(b, i)
		if i < len(b) && b[i] == ',' {
			i = rawjson.SkipSpace(b, i+1)
			continue
		}
		if i < len(b) && b[i] == '}' {
			return i + 1, nil
		}
		return i, errBad
	}
}

func (st *state) array(t *tnode, b []byte, i, depth int) (int, error) {
	if depth >= 10000 {
		return i, errDeep
	}
	i = rawjson.SkipSpace(b, i+1)
	n := 0
	if i < len(b) && b[i] == ']' {
		i++
	} else {
		for {
			var k *tnode
			for _, c := range t.kids {
				if c.index == n {
					k = c
					break
				}
			}
			var err error
			if i >= len(b) {
				return i, errBad
			}
			if k != nil {
				i, err = st.assign(k, b, i, depth)
			} else {
				i, _, err = rawjson.ScanValue(b, i, depth)
			}
			if err != nil {
				return i, err
			}
			n++
			i = rawjson.SkipSpace(b, i)
			if i < len(b) && b[i] == ',' {
				i = rawjson.SkipSpace(b, i+1)
				continue
			}
			if i < len(b) && b[i] == ']' {
				i++
				break
			}
			return i, errBad
		}
	}
	for _, c := range t.kids {
		if c.key == "length" {
			st.vals[c.slot] = value{kind: vNum, n: float64(n)}
			st.below(c, &st.vals[c.slot]) // 0 answers for the paths below it
		}
	}
	return i, nil
}

type scanError string

func (e scanError) Error() string { return string(e) }

const (
	errBad  = scanError("invalid JSON")
	errDeep = scanError("JSON nested too deep")
)

func readNumber(b []byte, i int, v *value) (int, error) {
	end, _, err := rawjson.ScanValue(b, i, 0)
	if err != nil {
		return end, err
	}
	f, err := strconv.ParseFloat(string(b[i:end]), 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); !ok || ne.Err != strconv.ErrRange {
			return end, err
		}
	}
	*v = value{kind: vNum, n: f}
	return end, nil
}

func (st *state) readString(b []byte, i int, v *value) (int, error) {
	end, err := rawjson.ScanString(b, i)
	if err != nil {
		return end, err
	}
	s := b[i+1 : end-1]
	if hasBackslash(s) {
		start := len(st.scratch)
		st.scratch = appendUnescaped(st.scratch, s)
		s = st.scratch[start:len(st.scratch):len(st.scratch)]
	}
	*v = value{kind: vStr, s: s}
	return end, nil
}

func hasBackslash(s []byte) bool {
	for _, c := range s {
		if c == '\\' {
			return true
		}
	}
	return false
}

// appendUnescaped appends the JSON string body s (already validated)
// unescaped, a lone surrogate as WTF-8.
func appendUnescaped(dst, s []byte) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			dst = append(dst, c)
			continue
		}
		i++
		switch s[i] {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r := hex4(s[i+1 : i+5])
			i += 4
			if r >= 0xD800 && r < 0xDC00 && i+6 < len(s) && s[i+1] == '\\' && s[i+2] == 'u' {
				if lo := hex4(s[i+3 : i+7]); lo >= 0xDC00 && lo <= 0xDFFF {
					dst = utf8.AppendRune(dst, (r-0xD800)<<10+(lo-0xDC00)+0x10000)
					i += 6
					continue
				}
			}
			dst = appendRune(dst, r)
		default: // " \ /
			dst = append(dst, s[i])
		}
	}
	return dst
}

func hex4(h []byte) rune {
	var r rune
	for _, c := range h {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		default:
			r |= rune(c - 'A' + 10)
		}
	}
	return r
}

// next decodes one character of WTF-8: its size in bytes and in UTF-16
// code units.
func next(s []byte) (r rune, size, n16 int) {
	if s[0] < utf8.RuneSelf {
		return rune(s[0]), 1, 1
	}
	if len(s) >= 3 && s[0] == 0xED && s[1] >= 0xA0 && s[1] <= 0xBF && s[2]&0xC0 == 0x80 {
		return rune(s[1]&0x3F)<<6 | rune(s[2]&0x3F) | 0xD000, 3, 1
	}
	r, size = utf8.DecodeRune(s)
	if r >= 0x10000 {
		return r, size, 2
	}
	return r, size, 1
}

// units is the length of the WTF-8 string s in UTF-16 code units.
func units(s []byte) int {
	n := 0
	for len(s) > 0 {
		_, size, n16 := next(s)
		n += n16
		s = s[size:]
	}
	return n
}

// appendUnit appends the code unit at index k of s as a one-unit string;
// false when s is shorter.
func appendUnit(dst, s []byte, k int) ([]byte, bool) {
	for len(s) > 0 {
		r, size, n16 := next(s)
		if k < n16 {
			if n16 == 2 {
				r -= 0x10000
				if k == 0 {
					r = 0xD800 + r>>10
				} else {
					r = 0xDC00 + r&0x3FF
				}
			}
			return appendRune(dst, r), true
		}
		k -= n16
		s = s[size:]
	}
	return dst, false
}
