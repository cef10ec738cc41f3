package fql

import (
	"unicode/utf16"
	"unicode/utf8"
)

// Condition is one parsed condition. Its methods are safe for concurrent
// use.
type Condition struct {
	src  string
	tree *node // nil: every message
	set  *Set  // the condition alone, for Match
}

// Parse compiles one condition. A condition Segment's parser refuses is a
// *SyntaxError with Quirk false; one it accepts but decides against its
// plain meaning is a *SyntaxError with Quirk true. A blank condition (only
// spaces, tabs and line breaks) matches every message.
func Parse(src string) (*Condition, error) {
	c := &Condition{src: src}
	if !blank(src) {
		tree, err := parseTree(src)
		if err != nil {
			return nil, err
		}
		c.tree = tree
	}
	c.set = NewSet([]*Condition{c})
	return c, nil
}

func blank(s string) bool {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ', '\t', '\n', '\r':
		default:
			return false
		}
	}
	return true
}

func parseTree(src string) (*node, error) {
	if !utf8.ValidString(src) {
		return nil, invalidUTF8(src)
	}
	toks, lerr := lexSegment(toUnits(src))
	if lerr != nil {
		le := lerr.(*lexError)
		return nil, newError(src, le.pos, le.msg, false)
	}
	seg, serr := segmentParse(toks)
	plain, cerr := check(normalize(toks))
	switch {
	case serr != nil && cerr != nil:
		return nil, newError(src, cerr.pos, cerr.msg, false)
	case serr != nil:
		return nil, newError(src, 0, "Segment's parser refuses this condition ("+serr.Error()+")", false)
	case cerr != nil:
		return nil, newError(src, cerr.pos, cerr.msg, true)
	case !sameTree(seg, plain):
		return nil, newError(src, 0, "Segment's engine reads this condition otherwise than it is written", true)
	}
	return seg, nil
}

func toUnits(s string) []uint16 { return utf16.Encode([]rune(s)) }

// String returns the condition's source text.
func (c *Condition) String() string {
	if c == nil {
		return ""
	}
	return c.src
}

// Match reports whether msg, one JSON object, meets the condition. A nil
// or blank condition matches every message; a message that is not a JSON
// object matches no other.
func (c *Condition) Match(msg []byte) bool {
	if c == nil || c.tree == nil {
		return true
	}
	var out [1]bool
	c.set.Decide(msg, out[:])
	return out[0]
}

func sameTree(a, b *node) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.group != b.group || a.op != b.op || len(a.kids) != len(b.kids) ||
		a.field != b.field || a.name != b.name || a.noVal != b.noVal ||
		a.val.kind != b.val.kind || a.val.s != b.val.s || a.val.b != b.val.b ||
		(a.val.n != b.val.n && (a.val.n == a.val.n || b.val.n == b.val.n)) {
		return false
	}
	for i := range a.kids {
		if !sameTree(a.kids[i], b.kids[i]) {
			return false
		}
	}
	return true
}
