package mapping

import (
	"errors"
	"fmt"
	"sync"
)

// rootKey is the key under which a mapping may name a directive that wraps
// the whole of the rest of it (actions-core's getMappingToProcess).
const rootKey = "__segment_internal_directive"

// ErrUndefined is Apply's error when the mapping, a directive itself,
// resolves to undefined: Segment's transform returns undefined, and there is
// no body to send.
var ErrUndefined = errors.New("mapping: the mapping resolved to undefined")

// ErrNotObject is Apply's error for a message that is JSON but not an
// object (Segment: "data must be an object").
var ErrNotObject = errors.New("mapping: the message is not a JSON object")

// unsupported names the directives actions-core has and evfwd refuses.
var unsupported = map[string]string{
	"@liquid": "Liquid templates are not supported by evfwd; use @template",
}

// Mapping is a parsed, validated mapping, ready to Apply to any number of
// messages from any number of goroutines.
type Mapping struct {
	root node
	pool sync.Pool
}

// Parse reads a mapping (a JSON object) and validates it as actions-core's
// validate does, refusing the directives evfwd does not implement by name.
// Errors name the path of the bad part: mapping.user.email.@path: ...
func Parse(raw []byte) (*Mapping, error) {
	d := &doc{}
	if err := d.index(raw); err != nil {
		return nil, fmt.Errorf("mapping: %w", err)
	}
	if d.nodes[0].k != kObj {
		return nil, errors.New("mapping: a mapping must be a JSON object")
	}
	m := expand(d, 0)
	if err := refuseUnsupported(m, nil); err != nil {
		return nil, err
	}
	top, err := processRoot(m)
	if err != nil {
		return nil, err
	}
	if err := validate(top, nil); err != nil {
		return nil, err
	}
	return &Mapping{root: compile(top)}, nil
}

// expand turns node i of d into a value whose objects and arrays hold their
// parts (an object's repeated keys once: the first position, the last
// value, as JSON.parse keeps them); scalars stay nodes of d.
func expand(d *doc, i int32) value {
	v := nodeValue(d, i)
	switch v.k {
	case kArr:
		out := value{k: kArr, arr: []value{}}
		for c := d.nodes[i].first; c >= 0; c = d.nodes[c].next {
			out.arr = append(out.arr, expand(d, c))
		}
		return out
	case kObj:
		out := value{k: kObj, obj: []member{}}
		for c := d.nodes[i].first; c >= 0; c = d.nodes[c].next {
			out.obj = setMember(out.obj, d.key(c), expand(d, c))
		}
		return out
	}
	return v
}

// refuseUnsupported refuses a mapping that names a directive evfwd does not
// implement, wherever it is (an array's element, an option) since resolve
// may reach it there.
func refuseUnsupported(v value, stack []string) error {
	switch v.k {
	case kArr:
		for j, e := range v.arr {
			if err := refuseUnsupported(e, push(stack, fmt.Sprint(j))); err != nil {
				return err
			}
		}
	case kObj:
		for _, m := range v.obj {
			if why, ok := unsupported[m.key]; ok {
				return &ValidationError{Path: append([]string(nil), stack...), Msg: fmt.Sprintf("%s is not supported (%s)", m.key, why)}
			}
			if err := refuseUnsupported(m.v, push(stack, m.key)); err != nil {
				return err
			}
		}
	}
	return nil
}

// processRoot is getMappingToProcess: with the root key, its value holds
// one directive whose options get the rest of the mapping as "mapping".
func processRoot(m value) (value, error) {
	r := m.get(rootKey)
	if r.k == kUndef {
		return m, nil
	}
	fail := func(msg string) error {
		return &ValidationError{Path: []string{rootKey}, Msg: msg}
	}
	var rest []member
	for _, mb := range m.obj {
		if mb.key != rootKey {
			rest = append(rest, mb)
		}
	}
	customer := value{k: kObj, obj: append([]member{}, rest...)}
	var n int
	switch r.k {
	case kObj:
		n = len(r.obj)
	case kArr:
		n = len(r.arr)
	case kStr:
		n = utf16Len(r.str(nil))
	case kNull:
		return value{}, fail("the root mapping must be an object with one directive")
	}
	if n > 1 {
		return value{}, fail("the root mapping must only have a single directive object")
	}
	if n == 0 || r.k == kStr {
		return value{}, fail("the root directive must be an object")
	}
	if r.k == kArr {
		rd := r.arr[0]
		if rd.k != kObj && rd.k != kArr {
			return value{}, fail("the root directive must be an object")
		}
		if rd.k == kObj {
			rd = value{k: kObj, obj: setMember(append([]member{}, rd.obj...), "mapping", customer)}
		}
		return value{k: kArr, arr: []value{rd}}, nil
	}
	rd := r.obj[0].v
	if rd.k != kObj && rd.k != kArr {
		return value{}, fail("the root directive must be an object")
	}
	if rd.k == kObj {
		rd = value{k: kObj, obj: setMember(append([]member{}, rd.obj...), "mapping", customer)}
	}
	return value{k: kObj, obj: []member{{r.obj[0].key, rd}}}, nil
}

// ctx is one Apply's scratch: the message's index and the bytes of the
// strings directives compute. Values built in it die with the Apply.
type ctx struct {
	msg doc
	buf []byte
}

// Apply maps one message (a JSON object) and returns the JSON to send.
// Output members follow the mapping's order; values copied from the
// message keep their bytes. An error means Segment's transform would throw
// for this message (or the message is not a JSON object).
func (m *Mapping) Apply(msg []byte) ([]byte, error) {
	return m.AppendApply(nil, msg)
}

// AppendApply is Apply appending to dst.
func (m *Mapping) AppendApply(dst, msg []byte) ([]byte, error) {
	c, _ := m.pool.Get().(*ctx)
	if c == nil {
		c = &ctx{}
	}
	defer func() {
		c.msg.src, c.buf = nil, c.buf[:0]
		if cap(c.buf) > 1<<20 || cap(c.msg.nodes) > 1<<16 {
			c.buf, c.msg.nodes = nil, nil
		}
		m.pool.Put(c)
	}()
	if err := c.msg.index(msg); err != nil {
		return dst, fmt.Errorf("mapping: message: %w", err)
	}
	if c.msg.nodes[0].k != kObj {
		return dst, ErrNotObject
	}
	payload := nodeValue(&c.msg, 0)
	n := len(dst)
	out, ok, err := appendNode(dst, c, m.root, payload)
	if err != nil {
		return dst[:n], err
	}
	if !ok {
		return dst[:n], ErrUndefined
	}
	return out, nil
}

// appendNode appends what n resolves to, streaming plain objects and
// arrays of the mapping; ok is false for undefined.
func appendNode(dst []byte, c *ctx, n node, p value) ([]byte, bool, error) {
	switch n := n.(type) {
	case *objNode:
		dst = append(dst, '{')
		first := true
		for j, kid := range n.kids {
			mark := len(dst)
			if !first {
				dst = append(dst, ',')
			}
			dst = append(dst, n.quoted[j]...)
			var ok bool
			var err error
			if dst, ok, err = appendNode(dst, c, kid, p); err != nil {
				return dst, false, err
			}
			if !ok {
				dst = dst[:mark]
				continue
			}
			first = false
		}
		return append(dst, '}'), true, nil
	case *arrNode:
		dst = append(dst, '[')
		for j, kid := range n.kids {
			if j > 0 {
				dst = append(dst, ',')
			}
			var ok bool
			var err error
			if dst, ok, err = appendNode(dst, c, kid, p); err != nil {
				return dst, false, err
			}
			if !ok {
				dst = append(dst, "null"...)
			}
		}
		return append(dst, ']'), true, nil
	}
	v, err := n.eval(c, p)
	if err != nil || v.k == kUndef {
		return dst, false, err
	}
	return appendOut(dst, v), true, nil
}

// jsError is an error Segment's transform throws while resolving.
func jsError(format string, args ...any) error {
	return fmt.Errorf("mapping: "+format, args...)
}
