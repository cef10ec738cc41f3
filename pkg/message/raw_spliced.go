package message

import (
	"bytes"
	"encoding/json"

	"github.com/evfwd/evfwd/pkg/rawjson"
)

// The spliced form of a Raw: the input bytes plus where the members the
// rules read sit in them (see Raw).

// spliced is a Raw kept as its input: data is the input, vals locate the
// values of the known members (end 0: absent), lib context.library's
// value, open and close the object's braces; id and ts replace (or add)
// messageId and timestamp, as JSON.
type spliced struct {
	data        []byte
	vals        [numKeys]span
	lib         span
	open, close int
	members     int
	id, ts      []byte
}

// span is where a value sits in the input.
type span struct{ start, end int }

// maxUnknownKeys bounds the other members a spliced line may have: they
// are compared pairwise to catch a repeated key.
const maxUnknownKeys = 16

// splice scans data as a compact JSON object with plain, distinct keys and
// records where the known members are. It reports false for anything else
// (including invalid JSON), which the Object form then handles.
func (r *Raw) splice(data []byte) bool {
	i := rawjson.SkipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return false
	}
	r.sp.data, r.sp.open = data, i
	var unknown [maxUnknownKeys][]byte
	nu := 0
	if i++; i < len(data) && data[i] == '}' {
		r.sp.close = i
		return rawjson.SkipSpace(data, i+1) == len(data)
	}
	for {
		if i >= len(data) || data[i] != '"' {
			return false
		}
		kend, err := rawjson.ScanString(data, i)
		if err != nil || kend >= len(data) || data[kend] != ':' {
			return false
		}
		name, v := data[i+1:kend-1], kend+1
		k, known := lookupKey(name)
		var vend int
		if known && k == kContext && v < len(data) && data[v] == '{' {
			var ok bool
			if vend, ok = r.spliceContext(data, v); !ok {
				return false
			}
		} else {
			var spaced bool
			if vend, spaced, err = rawjson.ScanValue(data, v, 1); err != nil || spaced {
				return false
			}
		}
		if known {
			if r.sp.vals[k].end != 0 {
				return false
			}
			r.sp.vals[k] = span{v, vend}
		} else {
			if !plainKey(name) {
				return false
			}
			for _, u := range unknown[:nu] {
				if string(u) == string(name) {
					return false
				}
			}
			if nu == len(unknown) {
				return false
			}
			unknown[nu] = name
			nu++
		}
		r.sp.members++
		if vend >= len(data) {
			return false
		}
		switch data[vend] {
		case ',':
			i = vend + 1
		case '}':
			r.sp.close = vend
			return rawjson.SkipSpace(data, vend+1) == len(data)
		default:
			return false
		}
	}
}

// spliceContext scans the context object at data[i] == '{' as splice does
// the message, records where its library member's value is, and returns
// the index past the object.
func (r *Raw) spliceContext(data []byte, i int) (int, bool) {
	if i++; i < len(data) && data[i] == '}' {
		return i + 1, true
	}
	for {
		if i >= len(data) || data[i] != '"' {
			return i, false
		}
		kend, err := rawjson.ScanString(data, i)
		if err != nil || kend >= len(data) || data[kend] != ':' {
			return i, false
		}
		name, v := data[i+1:kend-1], kend+1
		vend, spaced, err := rawjson.ScanValue(data, v, 2)
		if err != nil || spaced {
			return i, false
		}
		switch {
		case string(name) == "library":
			if r.sp.lib.end != 0 {
				return i, false // repeated: the Object form keeps one
			}
			r.sp.lib = span{v, vend}
		case bytes.IndexByte(name, '\\') >= 0:
			return i, false // might spell "library"
		}
		if vend >= len(data) {
			return vend, false
		}
		switch data[vend] {
		case ',':
			i = vend + 1
		case '}':
			return vend + 1, true
		default:
			return vend, false
		}
	}
}

// plainKey reports whether a key's bytes are what AppendString writes for
// it, so that copying them matches re-encoding them.
func plainKey(b []byte) bool {
	for _, c := range b {
		if !rawjson.PlainASCII(c) {
			return false
		}
	}
	return true
}

// edit replaces data[start:end] with pre+val+post.
type edit struct {
	start, end int
	pre        string
	val        []byte
	post       string
}

// appendSpliced copies the input around its edits: the filled-in or
// normalized messageId and timestamp in place, context.library in place
// or at the end of context, and the members the input lacked at the end,
// in the order the Object form adds them.
func (r *Raw) appendSpliced(dst []byte, lib json.RawMessage) []byte {
	var edits [3]edit
	n := 0
	if s := r.sp.vals[kMessageID]; r.sp.id != nil && s.end != 0 {
		edits[n] = edit{start: s.start, end: s.end, val: r.sp.id}
		n++
	}
	if s := r.sp.vals[kTimestamp]; r.sp.ts != nil && s.end != 0 {
		edits[n] = edit{start: s.start, end: s.end, val: r.sp.ts}
		n++
	}
	if s := r.sp.vals[kContext]; lib != nil && s.end != 0 {
		switch {
		case r.sp.data[s.start] == 'n': // null (check allows nothing else but an object)
			edits[n] = edit{start: s.start, end: s.end, pre: `{"library":`, val: lib, post: "}"}
		case r.sp.lib.end != 0:
			edits[n] = edit{start: r.sp.lib.start, end: r.sp.lib.end, val: lib}
		case s.end-s.start == 2: // {}
			edits[n] = edit{start: s.end - 1, end: s.end - 1, pre: `"library":`, val: lib}
		default:
			edits[n] = edit{start: s.end - 1, end: s.end - 1, pre: `,"library":`, val: lib}
		}
		n++
	}
	// Insertion sort: at most three.
	for i := 1; i < n; i++ {
		for j := i; j > 0 && edits[j].start < edits[j-1].start; j-- {
			edits[j], edits[j-1] = edits[j-1], edits[j]
		}
	}
	at := r.sp.open
	for _, e := range edits[:n] {
		dst = append(dst, r.sp.data[at:e.start]...)
		dst = append(dst, e.pre...)
		dst = append(dst, e.val...)
		dst = append(dst, e.post...)
		at = e.end
	}
	dst = append(dst, r.sp.data[at:r.sp.close]...)
	members := r.sp.members
	add := func(k string, pre string, v []byte, post string) {
		if members > 0 {
			dst = append(dst, ',')
		}
		members++
		dst = append(dst, k...)
		dst = append(dst, pre...)
		dst = append(dst, v...)
		dst = append(dst, post...)
	}
	if r.sp.id != nil && r.sp.vals[kMessageID].end == 0 {
		add(`"messageId":`, "", r.sp.id, "")
	}
	if r.sp.ts != nil && r.sp.vals[kTimestamp].end == 0 {
		add(`"timestamp":`, "", r.sp.ts, "")
	}
	if lib != nil && r.sp.vals[kContext].end == 0 {
		add(`"context":`, `{"library":`, lib, "}")
	}
	return append(dst, '}')
}

// get returns the raw value of a known member, edits included.
func (s *spliced) get(k key) (json.RawMessage, bool) {
	switch {
	case k == kMessageID && s.id != nil:
		return s.id, true
	case k == kTimestamp && s.ts != nil:
		return s.ts, true
	}
	v := s.vals[k]
	if v.end == 0 {
		return nil, false
	}
	return s.data[v.start:v.end], true
}

// set replaces messageId or timestamp with v (compact JSON).
func (s *spliced) set(k key, v []byte) {
	if k == kMessageID {
		s.id = v
		return
	}
	s.ts = v
}
