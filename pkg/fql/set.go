package fql

import (
	"bytes"
	"strconv"
	"strings"
	"sync"
)

// Set decides many conditions for one message in one pass over it.
type Set struct {
	exprs []*expr // nil: every message
	root  *tnode  // the keys the conditions read, from the message's top
	size  int     // trie nodes, each a slot of state.vals
	pool  sync.Pool
}

// tnode is one key of the paths a Set reads. Slots are numbered depth
// first, so a node's descendants are the slots (slot, last].
type tnode struct {
	key   string
	index int // key as an array or string index, or -1
	kids  []*tnode
	byKey map[string]*tnode // kids by key, when there are many
	slot  int
	last  int
}

// expr is a compiled condition tree: a group, or a comparison of the value
// at a slot.
type expr struct {
	group bool
	or    bool
	kids  []*expr
	slot  int
	op    opcode
	s     string
	b     []byte // s, for the bytes functions
	n     float64
}

type opcode uint8

const (
	opEq opcode = iota
	opNe
	opNumEq
	opNumNe
	opLt
	opLe
	opGt
	opGe
	opContains
	opNotContains
	opStartsWith
	opNotStartsWith
	opEndsWith
	opNotEndsWith
	opExists
	opNotExists
	opIsTrue
	opIsFalse
)

var opcodes = map[string]opcode{
	"=": opEq, "!=": opNe, "number_equals": opNumEq, "number_not_equals": opNumNe,
	"<": opLt, "<=": opLe, ">": opGt, ">=": opGe,
	"contains": opContains, "not_contains": opNotContains,
	"starts_with": opStartsWith, "not_starts_with": opNotStartsWith,
	"ends_with": opEndsWith, "not_ends_with": opNotEndsWith,
	"exists": opExists, "not_exists": opNotExists, "is_true": opIsTrue, "is_false": opIsFalse,
}

var fieldRoots = map[string]string{
	"event-type": "type", "event": "event", "name": "name", "userId": "userId",
	"event-property": "properties", "event-trait": "traits", "event-context": "context",
}

// NewSet prepares conds to be decided together; a nil entry (or a blank
// condition) matches every message.
func NewSet(conds []*Condition) *Set {
	s := &Set{root: &tnode{index: -1}, exprs: make([]*expr, len(conds))}
	type pending struct {
		e    *expr
		node *tnode
	}
	var leaves []pending
	var compile func(n *node) *expr
	compile = func(n *node) *expr {
		if n.group {
			e := &expr{group: true, or: n.op == "or"}
			for _, k := range n.kids {
				e.kids = append(e.kids, compile(k))
			}
			return e
		}
		e := &expr{op: opcodes[n.op], s: n.val.s, b: []byte(n.val.s), n: n.val.n}
		if n.val.kind == 's' && (e.op >= opLt && e.op <= opGe) {
			e.n, _ = strconv.ParseFloat(n.val.s, 64) // Number(String(x)) of a top-level field's bound
		}
		path := []string{fieldRoots[n.field]}
		if n.name != "" {
			path = append(path, strings.Split(n.name, ".")...)
		}
		t := s.root
		for _, k := range path {
			t = t.child(k)
		}
		leaves = append(leaves, pending{e, t})
		return e
	}
	for i, c := range conds {
		if c != nil && c.tree != nil {
			s.exprs[i] = compile(c.tree)
		}
	}
	s.size = s.root.number(0)
	for _, l := range leaves {
		l.e.slot = l.node.slot
	}
	s.pool.New = func() any { return &state{vals: make([]value, s.size)} }
	return s
}

func (t *tnode) child(key string) *tnode {
	for _, k := range t.kids {
		if k.key == key {
			return k
		}
	}
	k := &tnode{key: key, index: arrayIndex(key)}
	t.kids = append(t.kids, k)
	if len(t.kids) > 8 {
		t.byKey = make(map[string]*tnode, len(t.kids))
		for _, k := range t.kids {
			t.byKey[k.key] = k
		}
	}
	return k
}

// number gives t and its descendants their slots from next on, and
// returns the next free one.
func (t *tnode) number(next int) int {
	t.slot = next
	next++
	for _, k := range t.kids {
		next = k.number(next)
	}
	t.last = next - 1
	return next
}

func (t *tnode) find(key []byte) *tnode {
	if t.byKey != nil {
		return t.byKey[string(key)]
	}
	for _, k := range t.kids {
		if k.key == string(key) {
			return k
		}
	}
	return nil
}

// arrayIndex is key as a canonical array index ("0", "1", ... with no
// leading zero), or -1.
func arrayIndex(key string) int {
	if key == "" || len(key) > 9 || key[0] == '0' && len(key) > 1 {
		return -1
	}
	n := 0
	for i := 0; i < len(key); i++ {
		if key[i] < '0' || key[i] > '9' {
			return -1
		}
		n = n*10 + int(key[i]-'0')
	}
	return n
}

// Decide sets out[i] to whether conds[i] matches msg; len(out) must be
// len(conds). A message that is not one valid JSON object matches only
// the nil and blank conditions.
func (s *Set) Decide(msg []byte, out []bool) {
	if len(out) != len(s.exprs) {
		panic("fql: Set.Decide: len(out) != len(conds)")
	}
	st := s.pool.Get().(*state)
	ok := st.scan(s.root, msg)
	for i, e := range s.exprs {
		out[i] = e == nil || ok && e.eval(st.vals)
	}
	clear(st.vals) // no hold on msg from the pool
	st.scratch = st.scratch[:0]
	s.pool.Put(st)
}

func (e *expr) eval(vals []value) bool {
	if e.group {
		for _, k := range e.kids {
			if k.eval(vals) == e.or {
				return e.or
			}
		}
		return !e.or
	}
	v := &vals[e.slot]
	switch e.op {
	case opEq:
		return v.kind == vStr && string(v.s) == e.s
	case opNe:
		return !(v.kind == vStr && string(v.s) == e.s)
	case opNumEq:
		return v.kind == vNum && v.n == e.n
	case opNumNe:
		return v.kind == vNum && v.n != e.n
	case opLt:
		return v.kind == vNum && v.n < e.n
	case opLe:
		return v.kind == vNum && v.n <= e.n
	case opGt:
		return v.kind == vNum && v.n > e.n
	case opGe:
		return v.kind == vNum && v.n >= e.n
	case opContains:
		return v.kind == vStr && bytes.Contains(v.s, e.b)
	case opNotContains:
		return v.kind == vStr && !bytes.Contains(v.s, e.b)
	case opStartsWith:
		return v.kind == vStr && bytes.HasPrefix(v.s, e.b)
	case opNotStartsWith:
		return v.kind == vStr && !bytes.HasPrefix(v.s, e.b)
	case opEndsWith:
		return v.kind == vStr && bytes.HasSuffix(v.s, e.b)
	case opNotEndsWith:
		return v.kind == vStr && !bytes.HasSuffix(v.s, e.b)
	case opExists:
		return v.kind != vUndefined && v.kind != vNull
	case opNotExists:
		return v.kind == vUndefined || v.kind == vNull
	case opIsTrue:
		return v.kind == vTrue
	case opIsFalse:
		return v.kind == vFalse
	}
	return false
}
