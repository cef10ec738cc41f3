package mapping

import (
	"encoding/json"
	"errors"

	"github.com/evfwd/evfwd/pkg/rawjson"
)

// A doc indexes one JSON text in a single pass: every value becomes an
// rnode spanning its exact bytes, linked to its first child and next
// sibling, so a path looks members up without scanning bytes again and a
// value copied to the output is the message's own bytes.
type doc struct {
	src   []byte
	nodes []rnode
}

type rnode struct {
	start, end int32 // the value's bytes
	key0, key1 int32 // an object member's key, quotes included
	first      int32 // first child, -1 if none
	next       int32 // next sibling, -1 if none
	n          int32 // children
	k          kind
	esc        bool // the string (or key) holds a backslash escape
	keyEsc     bool
	spaced     bool // the value holds insignificant whitespace
}

var errDepth = errors.New("mapping: JSON nested too deeply")

// maxDepth bounds nesting, as encoding/json does.
const maxDepth = 10000

// index makes d the index of src, which must be one JSON value; it
// validates src on the way.
func (d *doc) index(src []byte) error {
	d.src, d.nodes = src, d.nodes[:0]
	i := rawjson.SkipSpace(src, 0)
	end, err := d.value(i, 0)
	if err != nil {
		return err
	}
	if rawjson.SkipSpace(src, end) != len(src) {
		return errInvalid(src)
	}
	return nil
}

func errInvalid(src []byte) error {
	var v any
	if err := json.Unmarshal(src, &v); err != nil {
		return err
	}
	return errors.New("invalid JSON")
}

// value indexes the value at src[i] and returns the index past it.
func (d *doc) value(i, depth int) (int, error) {
	src := d.src
	if i >= len(src) {
		return i, errInvalid(src)
	}
	at := int32(len(d.nodes))
	d.nodes = append(d.nodes, rnode{start: int32(i), key0: -1, key1: -1, first: -1, next: -1})
	switch c := src[i]; {
	case c == '"':
		end, err := rawjson.ScanString(src, i)
		if err != nil {
			return i, errInvalid(src)
		}
		nd := &d.nodes[at]
		nd.k, nd.end, nd.esc = kStr, int32(end), hasEscape(src[i:end])
		return end, nil
	case c == '{' || c == '[':
		if depth >= maxDepth {
			return i, errDepth
		}
		obj := c == '{'
		closer := byte(']')
		if obj {
			closer = '}'
			d.nodes[at].k = kObj
		} else {
			d.nodes[at].k = kArr
		}
		j := rawjson.SkipSpace(src, i+1)
		spaced := j != i+1
		prev := int32(-1)
		var count int32
		if j < len(src) && src[j] == closer {
			nd := &d.nodes[at]
			nd.end, nd.spaced = int32(j+1), spaced
			return j + 1, nil
		}
		for {
			var k0, k1 int
			if obj {
				if j >= len(src) || src[j] != '"' {
					return j, errInvalid(src)
				}
				end, err := rawjson.ScanString(src, j)
				if err != nil {
					return j, errInvalid(src)
				}
				k0, k1 = j, end
				j2 := rawjson.SkipSpace(src, end)
				spaced = spaced || j2 != end
				if j2 >= len(src) || src[j2] != ':' {
					return j2, errInvalid(src)
				}
				j = rawjson.SkipSpace(src, j2+1)
				spaced = spaced || j != j2+1
			}
			child := int32(len(d.nodes))
			end, err := d.value(j, depth+1)
			if err != nil {
				return end, err
			}
			if obj {
				cn := &d.nodes[child]
				cn.key0, cn.key1, cn.keyEsc = int32(k0), int32(k1), hasEscape(src[k0:k1])
			}
			if d.nodes[child].spaced {
				spaced = true
			}
			if prev < 0 {
				d.nodes[at].first = child
			} else {
				d.nodes[prev].next = child
			}
			prev = child
			count++
			j = rawjson.SkipSpace(src, end)
			spaced = spaced || j != end
			if j >= len(src) {
				return j, errInvalid(src)
			}
			if src[j] == closer {
				nd := &d.nodes[at]
				nd.end, nd.n, nd.spaced = int32(j+1), count, spaced
				return j + 1, nil
			}
			if src[j] != ',' {
				return j, errInvalid(src)
			}
			k := rawjson.SkipSpace(src, j+1)
			spaced = spaced || k != j+1
			j = k
		}
	case c == '-' || c >= '0' && c <= '9':
		end, _, err := rawjson.ScanValue(src, i, depth)
		if err != nil {
			return i, errInvalid(src)
		}
		nd := &d.nodes[at]
		nd.k, nd.end = kNum, int32(end)
		return end, nil
	case c == 't' || c == 'f' || c == 'n':
		end, _, err := rawjson.ScanValue(src, i, depth)
		if err != nil {
			return i, errInvalid(src)
		}
		nd := &d.nodes[at]
		nd.end = int32(end)
		switch c {
		case 't', 'f':
			nd.k = kBool
		default:
			nd.k = kNull
		}
		return end, nil
	}
	return i, errInvalid(src)
}

func hasEscape(b []byte) bool {
	for _, c := range b {
		if c == '\\' {
			return true
		}
	}
	return false
}

// raw is node i's bytes.
func (d *doc) raw(i int32) []byte { return d.src[d.nodes[i].start:d.nodes[i].end] }

// keyIs reports whether member node i's key is name.
func (d *doc) keyIs(i int32, name string) bool {
	nd := &d.nodes[i]
	q := d.src[nd.key0:nd.key1]
	if !nd.keyEsc {
		return len(q)-2 == len(name) && string(q[1:len(q)-1]) == name
	}
	return unquoteString(q) == name
}

// key decodes member node i's key.
func (d *doc) key(i int32) string {
	nd := &d.nodes[i]
	q := d.src[nd.key0:nd.key1]
	if !nd.keyEsc {
		return string(q[1 : len(q)-1])
	}
	return unquoteString(q)
}

// lookup returns the member of object node o named name: the last one, as
// JSON.parse keeps the last of repeated keys.
func (d *doc) lookup(o int32, name string) (int32, bool) {
	found := int32(-1)
	for c := d.nodes[o].first; c >= 0; c = d.nodes[c].next {
		if d.keyIs(c, name) {
			found = c
		}
	}
	return found, found >= 0
}

// elem returns array node a's element n.
func (d *doc) elem(a int32, n int) (int32, bool) {
	c := d.nodes[a].first
	for ; c >= 0 && n > 0; n-- {
		c = d.nodes[c].next
	}
	return c, c >= 0
}

// unquoteString decodes a JSON string literal (valid, quotes included),
// a lone surrogate becoming U+FFFD as encoding/json makes it.
func unquoteString(q []byte) string {
	var s string
	if err := json.Unmarshal(q, &s); err != nil {
		return ""
	}
	return s
}

// appendUnquoted appends the decoded content of JSON string q.
func appendUnquoted(dst, q []byte) []byte {
	if !hasEscape(q) {
		return append(dst, q[1:len(q)-1]...)
	}
	return append(dst, unquoteString(q)...)
}
