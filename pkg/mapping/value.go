package mapping

import (
	"math"
	"sort"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// kind is a JavaScript value's type as mapping-kit sees it.
type kind uint8

const (
	kUndef kind = iota // undefined: an object member that has it is dropped
	kNull
	kBool
	kNum
	kStr
	kArr
	kObj
)

// value is one JavaScript value during Apply. A value from a JSON text
// (the message, a mapping literal, a decoded @json string) is a node of its
// doc, carried as its bytes until something must look inside; a computed
// one holds its parts. Numbers are always their JSON digits (b), so the
// digits a message sent are the digits sent on.
type value struct {
	d   *doc
	i   int32
	k   kind
	t   bool   // kBool
	b   []byte // kStr: the decoded UTF-8 text; kNum: the digits
	arr []value
	obj []member
}

type member struct {
	key string
	v   value
}

var undef = value{}

func nodeValue(d *doc, i int32) value { return value{d: d, i: i, k: d.nodes[i].k} }

func strValue(s string) value   { return value{k: kStr, b: []byte(s)} }
func bytesValue(b []byte) value { return value{k: kStr, b: b} }
func numValue(n int) value {
	return value{k: kNum, b: strconv.AppendInt(nil, int64(n), 10)}
}

// bool reports the value of a kBool.
func (v value) bool() bool {
	if v.d != nil {
		return v.d.src[v.d.nodes[v.i].start] == 't'
	}
	return v.t
}

// digits is a kNum's JSON text.
func (v value) digits() []byte {
	if v.d != nil {
		return v.d.raw(v.i)
	}
	return v.b
}

// float is a kNum's value as JavaScript reads it (out of range: ±Inf).
func (v value) float() float64 {
	f, _ := strconv.ParseFloat(string(v.digits()), 64)
	return f
}

// str appends a kStr's text to scratch (or returns it without copying when
// it can).
func (v value) str(scratch []byte) []byte {
	if v.d == nil {
		return v.b
	}
	q := v.d.raw(v.i)
	if !v.d.nodes[v.i].esc {
		return q[1 : len(q)-1]
	}
	return appendUnquoted(scratch, q)
}

// truthy is JavaScript's ToBoolean.
func (v value) truthy() bool {
	switch v.k {
	case kBool:
		return v.bool()
	case kNum:
		f := v.float()
		return f != 0 && !math.IsNaN(f)
	case kStr:
		if v.d != nil {
			return v.d.nodes[v.i].end-v.d.nodes[v.i].start > 2
		}
		return len(v.b) > 0
	case kArr, kObj:
		return true
	}
	return false
}

// isObject is mapping-kit's isObject (realTypeOf 'object').
func (v value) isObject() bool { return v.k == kObj }

// length is an array's or object's member count (an object's repeated
// keys counted once).
func (v value) members() []member {
	if v.k != kObj {
		return nil
	}
	if v.d == nil {
		return v.obj
	}
	var out []member
	for c := v.d.nodes[v.i].first; c >= 0; c = v.d.nodes[c].next {
		k := v.d.key(c)
		nv := nodeValue(v.d, c)
		found := false
		for j := range out {
			if out[j].key == k {
				out[j].v, found = nv, true
				break
			}
		}
		if !found {
			out = append(out, member{k, nv})
		}
	}
	return out
}

// elems is an array's elements.
func (v value) elems() []value {
	if v.k != kArr {
		return nil
	}
	if v.d == nil {
		return v.arr
	}
	out := make([]value, 0, v.d.nodes[v.i].n)
	for c := v.d.nodes[v.i].first; c >= 0; c = v.d.nodes[c].next {
		out = append(out, nodeValue(v.d, c))
	}
	return out
}

func (v value) arrayLen() int {
	if v.d != nil {
		return int(v.d.nodes[v.i].n)
	}
	return len(v.arr)
}

// get is a member of v as JavaScript's v[key] reads it, except that no
// inherited member (constructor, toString, ...) is ever found: only an
// object's own members, an array's or string's elements and length.
func (v value) get(key string) value {
	switch v.k {
	case kObj:
		if v.d != nil {
			if c, ok := v.d.lookup(v.i, key); ok {
				return nodeValue(v.d, c)
			}
			return undef
		}
		for j := len(v.obj) - 1; j >= 0; j-- {
			if v.obj[j].key == key {
				return v.obj[j].v
			}
		}
	case kArr:
		if key == "length" {
			return numValue(v.arrayLen())
		}
		n, ok := arrayIndex(key)
		if !ok {
			return undef
		}
		if v.d != nil {
			if c, ok := v.d.elem(v.i, int(n)); ok {
				return nodeValue(v.d, c)
			}
			return undef
		}
		if int(n) < len(v.arr) {
			return v.arr[n]
		}
	case kStr:
		s := v.str(nil)
		if key == "length" {
			return numValue(utf16Len(s))
		}
		n, ok := arrayIndex(key)
		if !ok {
			return undef
		}
		return codeUnitAt(s, int(n))
	}
	return undef
}

// arrayIndex parses a canonical array index ("0", "17"; not "01", "-1").
func arrayIndex(s string) (uint32, bool) {
	if s == "" || len(s) > 10 || s[0] == '0' && len(s) > 1 {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	if n > math.MaxUint32-1 {
		return 0, false
	}
	return uint32(n), true
}

func utf16Len(s []byte) int {
	n := 0
	for len(s) > 0 {
		r, size := utf8.DecodeRune(s)
		s = s[size:]
		if r >= 0x10000 {
			n += 2
		} else {
			n++
		}
	}
	return n
}

// codeUnitAt is s[n] in JavaScript: one UTF-16 code unit as a string; half
// of a surrogate pair becomes U+FFFD, as JSON.stringify's lone-surrogate
// escape reads back in Go.
func codeUnitAt(s []byte, n int) value {
	for len(s) > 0 {
		r, size := utf8.DecodeRune(s)
		w := 1
		if r >= 0x10000 {
			w = 2
		}
		if n < w {
			if w == 2 {
				return strValue("\uFFFD")
			}
			return bytesValue(s[:size])
		}
		n -= w
		s = s[size:]
	}
	return undef
}

// jsKeyOrder sorts members as JavaScript enumerates an object's keys:
// array indexes first, ascending, then the rest in insertion order.
func jsKeyOrder(ms []member) []member {
	hasIndex := false
	for _, m := range ms {
		if _, ok := arrayIndex(m.key); ok {
			hasIndex = true
			break
		}
	}
	if !hasIndex {
		return ms
	}
	out := append([]member(nil), ms...)
	sort.SliceStable(out, func(a, b int) bool {
		na, oka := arrayIndex(out[a].key)
		nb, okb := arrayIndex(out[b].key)
		switch {
		case oka && okb:
			return na < nb
		case oka:
			return true
		}
		return false
	})
	return out
}

// setMember is JavaScript's obj[key] = v on a computed object's members:
// in place when key exists, else appended.
func setMember(ms []member, key string, v value) []member {
	for j := range ms {
		if ms[j].key == key {
			ms[j].v = v
			return ms
		}
	}
	return append(ms, member{key, v})
}

// toUTF16 is for the @replace matcher.
func toUTF16(s []byte) []uint16 {
	return utf16.Encode([]rune(string(s)))
}
